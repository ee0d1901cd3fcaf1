"""The two-layer perceptrons every REGAL network is built of (paper 001 A.5: width 32)."""

from __future__ import annotations

from torch import nn


def mlp(inputs: int, hidden: int, outputs: int | None = None) -> nn.Sequential:
    """Linear -> ReLU -> Linear, `outputs` wide (default `hidden`)."""
    return nn.Sequential(nn.Linear(inputs, hidden), nn.ReLU(), nn.Linear(hidden, outputs or hidden))
