"""HDP's settings: its two networks' sizes and REINFORCE's (read by `--solver hdp`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from graphopt.solvers.base import SolverError


def _is_number(value: object) -> bool:
    """A finite int or float, not a bool."""
    return not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)


@dataclass(frozen=True)
class HDPConfig:
    """HDP's policy and REINFORCE settings.

    Attributes:
        groups: G, the groups the grouper chooses from (capped at the graph's op count).
        hidden: width of the grouper's hidden layer and of each direction of the placer's LSTM.
        samples: placements sampled per REINFORCE step (each one evaluation).
        learning_rate: Adam's step size for both networks.
        grad_clip: global L2 norm the gradient of both networks is clipped to (as every
            trainer's, `optim.AdamConfig.grad_clip`).
        baseline_decay: weight of the old value in the moving-average reward baseline.
        entropy_weight: weight of the grouper's and placer's mean entropies in the loss, which
            keeps the search from settling before it has seen much.
    """

    groups: int = 16
    hidden: int = 64
    samples: int = 16
    learning_rate: float = 0.01
    grad_clip: float = 10.0
    baseline_decay: float = 0.9
    entropy_weight: float = 0.01

    def __post_init__(self) -> None:
        for name in ("groups", "hidden", "samples"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
                raise SolverError(f"hdp {name} must be an integer >= 1, got {value!r}")
        reals = {
            "learning_rate": ("a number > 0", lambda v: v > 0),
            "grad_clip": ("a number > 0", lambda v: v > 0),
            "baseline_decay": ("a number in [0, 1)", lambda v: 0 <= v < 1),
            "entropy_weight": ("a number >= 0", lambda v: v >= 0),
        }
        for name, (expected, valid) in reals.items():
            value = getattr(self, name)
            if not (_is_number(value) and valid(value)):
                raise SolverError(f"hdp {name} must be {expected}, got {value!r}")
