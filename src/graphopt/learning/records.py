"""The one checkpoint convention of every learned system: a policy record, and a run record.

A policy record (best.pt, a shipped policy) is the system's format tag, its own fields (all its
loader needs to refuse a mismatched use: the network's config, the machine, the features), the
weights, and what the run says of it (`System.policy_facts`). A run record (last.pt) holds the
same policy fields and weights with the run's own (`formats.RUN_FIELDS`: the training config,
Adam's state, the step, the best validation and its step, the seconds and the log), so one
reader (`read_run`) checks every system's last.pt. `System.save` and `System.restore` write and
read both through this module; a system supplies only its fields. REGAL's records were the model:
every file any system wrote before keeps its layout, so each still loads and resumes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from graphopt._messages import describe
from graphopt.learning.formats import (
    RUN_FIELDS,
    CheckpointError,
    CheckpointFormat,
    integer,
    json_field,
    number,
)
from graphopt.learning.runs import RunState
from graphopt.learning.saving import read_checkpoint


def policy_record(
    form: CheckpointFormat, fields: dict[str, Any], network: torch.nn.Module
) -> dict[str, Any]:
    """A policy's record: the format, what the weights are for (`fields`), and the weights."""
    return {"format": form.tag, **fields, "model_state": network.state_dict()}


def run_fields(config: Any, optimizer: torch.optim.Optimizer, state: RunState) -> dict[str, Any]:
    """What a run record (last.pt) adds to its policy: the config, Adam and the run state."""
    return {
        "train_config": json.dumps(asdict(config)),
        "optimizer_state": optimizer.state_dict(),
        "step": state.step,
        "best_validation": state.best_validation,
        "best_step": state.best_step,
        "seconds": state.seconds,
        "history": json.dumps(state.history),
    }


@dataclass(frozen=True, eq=False)
class RunCheckpoint:
    """A training run's last.pt with its run fields checked (`read_run`).

    Attributes:
        path: the file.
        train_config: the run's training config, as a JSON object.
        state: the run so far.
        record: the raw record (weights and Adam's state, checked when they are loaded).
    """

    path: Path
    train_config: dict[str, Any]
    state: RunState
    record: dict[str, Any]


def read_run(path: str | Path, form: CheckpointFormat, columns: Sequence[str]) -> RunCheckpoint:
    """A training run's last.pt of `form`, every run field checked.

    Args:
        path: the checkpoint.
        form: the system's checkpoint format.
        columns: the names a log row may use.

    Raises:
        CheckpointError: naming the field that is missing or malformed.
    """
    path = Path(path)
    record = read_checkpoint(path, form)
    for key in RUN_FIELDS:
        if key not in record:
            raise CheckpointError(f"{path}: not a training run's checkpoint (no '{key}')")
    train_config = json_field(record["train_config"], f"{path}: train_config")
    if not isinstance(train_config, dict):
        raise CheckpointError(f"{path}: train_config: must be a JSON object")
    step = integer(record["step"], f"{path}: step", 0, 2**62)
    best_step = integer(record["best_step"], f"{path}: best_step", 0, step)
    best_validation = number(record["best_validation"], f"{path}: best_validation")
    seconds = number(record["seconds"], f"{path}: seconds")
    if seconds < 0:
        raise CheckpointError(f"{path}: seconds: must be >= 0, got {describe(seconds)}")
    history = json_field(record["history"], f"{path}: history")
    if not isinstance(history, list) or len(history) != step + 1:
        raise CheckpointError(f"{path}: history: must list {step + 1} rows, one per step from 0")
    for i, row in enumerate(history):
        where = f"{path}: history[{i}]"
        if not isinstance(row, dict) or not set(row) <= set(columns) or row.get("step") != i:
            raise CheckpointError(f"{where}: must be a log row of step {i}")
        for key, value in row.items():
            number(value, f"{where}.{key}")
    state = RunState(step, best_validation, best_step, seconds, history)
    return RunCheckpoint(path, train_config, state, record)
