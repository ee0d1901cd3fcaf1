"""Checkpoints of learned solvers that ship no policy yet, for tests that run every solver."""

from __future__ import annotations

from pathlib import Path

import torch

from graphopt.learning.runs import RunState
from graphopt.learning.systems.gflownet.config import GFlowNetConfig, TrainConfig
from graphopt.learning.systems.gflownet.network import GFlowNetPolicy
from graphopt.learning.systems.gflownet.train import SYSTEM


def save_untrained_gflownet(path: Path, n_devices: int) -> None:
    """A small untrained GFlowNet policy for `n_devices` devices, saved as best.pt is."""
    config = TrainConfig(
        policy=GFlowNetConfig(n_devices=n_devices, hidden=16, layers=1, heads=4, condition=8)
    )
    torch.manual_seed(0)
    SYSTEM.save(path, GFlowNetPolicy(config.policy), None, config, RunState())
