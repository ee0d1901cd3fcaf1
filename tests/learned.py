"""Checkpoints of learned solvers that ship no policy yet, for tests that run every solver, and
the interrupted run every system's resume test makes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from graphopt.learning.runs import RunState
from graphopt.learning.systems.gflownet.config import GFlowNetConfig, TrainConfig
from graphopt.learning.systems.gflownet.network import GFlowNetPolicy
from graphopt.learning.systems.gflownet.train import SYSTEM
from graphopt.learning.training import train


def save_untrained_gflownet(path: Path, n_devices: int) -> None:
    """A small untrained GFlowNet policy for `n_devices` devices, saved as best.pt is."""
    config = TrainConfig(
        policy=GFlowNetConfig(n_devices=n_devices, hidden=16, layers=1, heads=4, condition=8)
    )
    torch.manual_seed(0)
    SYSTEM.save(path, GFlowNetPolicy(config.policy), None, config, RunState())


def without_seconds(history: list[dict]) -> list[dict]:
    """A run's log rows without their wall times (the one field a resumed run may change)."""
    return [{k: v for k, v in row.items() if k != "seconds"} for row in history]


def killed_and_resumed(system: str, config: Any, folder: Path, step: int) -> list[dict]:
    """The log rows of a run of `config` killed after step `step` and resumed from last.pt."""

    class Killed(Exception):
        pass

    def kill(row: dict) -> None:
        if row["step"] == step:
            raise Killed

    with pytest.raises(Killed):
        train(system, config, folder, progress=kill)
    return without_seconds(train(system, config, folder, resume=True).history)
