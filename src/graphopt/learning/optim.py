"""The optimizer every trainer of graphopt uses: Adam with global gradient-norm clipping.

Its settings are one config section (`AdamConfig`), so REINFORCE, PPO or GFlowNet trainers read
and validate them the same way and a checkpoint's Adam state can be checked against them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import torch

from graphopt.configs import FieldError
from graphopt.learning.runs import check_finite


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


def clipped_step(
    network: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    loss: torch.Tensor,
    step: int,
    clip: float,
) -> float:
    """One Adam step on `loss` with the gradient's norm clipped to `clip`; the norm before.

    Raises:
        TrainingError: a non-finite loss or gradient (nothing is changed then).
    """
    check_finite(step, loss=float(loss.detach()))
    optimizer.zero_grad()
    loss.backward()
    norm = float(torch.nn.utils.clip_grad_norm_(network.parameters(), clip))
    check_finite(step, gradient_norm=norm)
    optimizer.step()
    return norm


@contextmanager
def learning_rate(optimizer: torch.optim.Optimizer, rate: float) -> Iterator[None]:
    """Steps with `rate` inside, and puts the configured rate back after.

    The decayed rate is a function of the step, never state: a checkpoint's Adam state keeps
    the config's rate, which `saving.load_adam` checks on resume.
    """
    configured = [group["lr"] for group in optimizer.param_groups]
    for group in optimizer.param_groups:
        group["lr"] = rate
    try:
        yield
    finally:
        for group, lr in zip(optimizer.param_groups, configured, strict=True):
            group["lr"] = lr


def minibatches(
    rng: np.random.Generator, batch: int, epochs: int, parts: int
) -> Iterator[torch.Tensor]:
    """Sample indices of each update: `epochs` shuffled passes cut in `parts` near-equal parts."""
    for _ in range(epochs):
        for part in np.array_split(rng.permutation(batch), parts):
            yield torch.from_numpy(part)
