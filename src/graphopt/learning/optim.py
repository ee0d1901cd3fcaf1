"""The optimizer every trainer of graphopt uses: Adam with global gradient-norm clipping.

Its settings are one config section (`AdamConfig`), so REINFORCE, PPO or GFlowNet trainers read
and validate them the same way and a checkpoint's Adam state can be checked against them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch

from graphopt.configs import FieldError


@dataclass(frozen=True)
class AdamConfig:
    """Adam's hyper-parameters and the gradient clipping applied before each step.

    Attributes:
        learning_rate: Adam's step size (paper 001 A.5: 1e-4).
        betas: Adam's (beta1, beta2) (A.5: 0.9, 0.999).
        eps: Adam's epsilon (A.5: 1e-8).
        grad_clip: global L2 norm the gradient is clipped to (A.5: 10).
    """

    learning_rate: float = 1e-4
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    grad_clip: float = 10.0

    def __post_init__(self) -> None:
        for name in ("learning_rate", "eps", "grad_clip"):
            if not getattr(self, name) > 0:
                raise FieldError(name, f"must be > 0, got {getattr(self, name)}")
        if not all(0 <= beta < 1 for beta in self.betas):
            raise FieldError("betas", f"must be in [0, 1), got {list(self.betas)}")

    def optimizer(self, parameters: Iterable[torch.nn.Parameter]) -> torch.optim.Adam:
        """Adam over `parameters` with these settings (clipping is the training step's)."""
        return torch.optim.Adam(parameters, self.learning_rate, self.betas, eps=self.eps)
