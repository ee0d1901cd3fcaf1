"""The shape of a GFlowNet scheduling policy, without torch (checkpoints read it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from graphopt.configs import FieldError
from graphopt.learning.formats import CheckpointFormat
from graphopt.limits import MAX_DEVICES

SIGMA_MIN = 0.01
"""Smallest training temperature (paper 004 E.1: log-uniform on [0.01, 1])."""
SIGMA_MAX = 1.0
"""Largest training temperature."""
SIGMA_INFERENCE = 0.005
"""Temperature the shipped sampler uses (paper 004 E.1)."""


@dataclass(frozen=True)
class GFlowNetConfig:
    """The temperature-conditioned Topoformer policy's shape (paper 004 section 3.3, appendix D).

    Attributes:
        n_devices: devices the forward head places ops on (the action is (op, device)).
        hidden: width of the encoder and heads (a multiple of `heads`). 32 by default: the
            masked attention's B x heads x n^2 scores set the sampling time whatever the width,
            and 64 sampled 1,000 schedules of a 100-op graph 1.4x slower (24.9-26.6 s vs
            16.3-18.4 s on 2 cores).
        layers: Topoformer layers L.
        heads: attention heads per layer, spread over the topological relations.
        condition: width of the temperature embedding e_sigma (eq. 29).
        prior: 'none' (paper 004) or 'list': the forward logits also add list scheduling's
            preferences (`PartialSchedules.list_prior`) with two positive weights that depend
            on the temperature, so the untrained policy already samples like a randomized
            critical-path list scheduler and training learns what to change.
    """

    n_devices: int = 4
    hidden: int = 32
    layers: int = 2
    heads: int = 4
    condition: int = 32
    prior: Literal["none", "list"] = "none"

    def __post_init__(self) -> None:
        for name, low, high in (
            ("n_devices", 1, MAX_DEVICES),
            ("hidden", 1, 4096),
            ("layers", 1, 64),
            ("heads", 1, 64),
            ("condition", 1, 4096),
        ):
            if not low <= getattr(self, name) <= high:
                raise FieldError(name, f"must be in [{low}, {high}], got {getattr(self, name)}")
        if self.hidden % self.heads:
            raise FieldError(
                "hidden", f"must be a multiple of heads ({self.heads}), got {self.hidden}"
            )


GFLOWNET_FORMAT = CheckpointFormat(
    "graphopt.gflownet-policy/1",
    "GFlowNet policy",
    (
        "format",
        "policy_config",
        "proxy",
        "model_state",
        "train_config",
        "step",
        "best_validation",
        "best_step",
    ),
    ("optimizer_state", "seconds", "history"),
)
"""GFlowNet checkpoints: the policy with its proxy machine and training config, and a training
run's state with them (last.pt)."""
