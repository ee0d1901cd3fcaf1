"""REGAL's policy checkpoints: weights plus everything needed to refuse a mismatched use.

A checkpoint records the policy's shape, the feature set, the objective, the device count and
the inner search it was trained for; loading one for another device count, objective or feature
set is an error that says which. Files are written and read by `saving.py` (atomic writes,
torch's `weights_only` loader, the envelope of `REGAL_FORMAT`), and every field is checked
before use. The network's shape is compared with the stored tensors on torch's meta device
before any memory is allocated, so a file cannot make the loader allocate more than it holds,
and the weights must be finite and give finite outputs: a loaded policy can always be run, a
damaged one is refused with a line that says why.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from graphopt._messages import describe
from graphopt.learning.batching import make_batch
from graphopt.learning.features import FEATURE_SET, GraphFeatures, node_feature_names
from graphopt.learning.formats import CheckpointError, integer, json_field, number
from graphopt.learning.saving import load_adam, load_weights, read_checkpoint
from graphopt.learning.systems.regal.config import PolicyConfig
from graphopt.learning.systems.regal.env import EnvSpec, InnerSearch
from graphopt.learning.systems.regal.network import RegalPolicy
from graphopt.learning.systems.regal.records import (
    _RUN_KEYS,
    REGAL_FORMAT,
    _policy_config,
    policy_fields,
)


@dataclass(frozen=True, eq=False)
class TrainedPolicy:
    """A policy network with what it was trained for.

    Attributes:
        network: the network, in eval mode.
        objective: 'peak-memory' or 'makespan'.
        search: 'brkga' (REGAL, GAS) or 'random' (IDRS) inner search it was trained with.
        feature_evaluations: evaluations of the feature run it expects.
        inner: the BRKGA settings it was trained with (checkpoints older than the setting
            were trained with the defaults).
        metadata: training facts (steps, validation reward, dataset, ...), for model cards.
    """

    network: RegalPolicy
    objective: str
    search: str
    feature_evaluations: int
    inner: InnerSearch
    metadata: dict[str, Any]

    @property
    def config(self) -> PolicyConfig:
        """The network's shape."""
        return self.network.config

    def env_spec(self, dataset: str) -> EnvSpec:
        """The environment this policy was trained in, on a built dataset."""
        return EnvSpec(
            dataset,
            self.config.n_devices,
            self.objective,
            self.search,
            self.feature_evaluations,
            self.config.actions,
            self.inner,
        )


def policy_record(
    network: RegalPolicy,
    objective: str,
    search: str,
    feature_evaluations: int,
    inner: InnerSearch | None = None,
) -> dict[str, Any]:
    """The part of a checkpoint that says what the weights are for."""
    return {
        "format": REGAL_FORMAT.tag,
        "policy_config": asdict(network.config),
        "feature_set": FEATURE_SET,
        "node_features": list(node_feature_names(network.config.n_devices)),
        "objective": objective,
        "search": search,
        "feature_evaluations": feature_evaluations,
        "inner_search": asdict(inner or InnerSearch()),
        "model_state": network.state_dict(),
    }


def load_policy(
    path: str | Path, objective: str | None = None, n_devices: int | None = None
) -> TrainedPolicy:
    """Loads a policy, refusing one trained for another objective, device count or features.

    Raises:
        CheckpointError: naming what differs, or the field that is malformed.
    """
    record = read_checkpoint(path, REGAL_FORMAT)
    checked = policy_fields(record, path, objective, n_devices)
    network = RegalPolicy(checked.config)
    load_weights(
        network, lambda: RegalPolicy(checked.config), record["model_state"], f"{path}: model_state"
    )
    _check_outputs(network, f"{path}: model_state")
    network.eval()
    return TrainedPolicy(
        network,
        checked.objective,
        checked.search,
        checked.feature_evaluations,
        checked.inner,
        checked.metadata,
    )


@dataclass(frozen=True, eq=False)
class RunCheckpoint:
    """What `last.pt` holds besides the policy: a training run's state, checked.

    Attributes:
        path: the file.
        train_config: the run's training config, as a JSON object.
        step: gradient steps done.
        best_validation: best validation reward so far.
        best_step: the step that reached it.
        seconds: training time so far.
        history: one log row per step, from step 0.
        record: the raw record (weights and optimizer state, checked by `restore`).
    """

    path: Path
    train_config: dict[str, Any]
    step: int
    best_validation: float
    best_step: int
    seconds: float
    history: list[dict[str, float]]
    record: dict[str, Any]

    def restore(self, network: RegalPolicy, optimizer: torch.optim.Adam, clip: float) -> None:
        """Loads the weights and Adam's state into a network and optimizer of the run's config.

        `clip` is the run's gradient clip (`train_config`'s, which the caller compared with
        the config it resumes with), the bound of Adam's stored moments.

        Raises:
            CheckpointError: when the stored policy, weights or optimizer state do not fit
                them, or hold non-finite values.
        """
        config = _policy_config(self.record["policy_config"], f"{self.path}: policy_config")
        if config != network.config:
            raise CheckpointError(f"{self.path}: policy_config is not the train_config's network")
        state = self.record["model_state"]
        load_weights(network, lambda: RegalPolicy(config), state, f"{self.path}: model_state")
        _check_outputs(network, f"{self.path}: model_state")
        load_adam(optimizer, self.record["optimizer_state"], self.step, clip, self.path)


def read_run_checkpoint(path: str | Path, columns: Sequence[str]) -> RunCheckpoint:
    """A training run's `last.pt`, every field of the run checked.

    Args:
        path: the checkpoint.
        columns: the names a log row may use.

    Raises:
        CheckpointError: naming the field that is missing or malformed.
    """
    path = Path(path)
    record = read_checkpoint(path, REGAL_FORMAT)
    for key in _RUN_KEYS:
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
    return RunCheckpoint(
        path, train_config, step, best_validation, best_step, seconds, history, record
    )


def _check_outputs(network: RegalPolicy, where: str) -> None:
    """Refuses weights that turn a small graph's features into non-finite outputs.

    Greedy actions are defined whatever the logits, but sampling and training need finite ones;
    a probe on three ops catches weights that overflow (finite, but huge).
    """
    n_features = len(node_feature_names(network.config.n_devices))
    rng = np.random.default_rng(0)
    probe = GraphFeatures(
        rng.random((3, n_features), dtype=np.float32),
        np.array([[0, 0, 1], [1, 2, 2]], dtype=np.int64),
        rng.random((3, 2), dtype=np.float32),
        np.arange(3, dtype=np.int64),
    )
    batch = make_batch([probe])
    with torch.inference_mode():
        finite = bool(torch.isfinite(network(batch)).all()) and bool(
            torch.isfinite(network.baseline(batch)).all()
        )
    if not finite:
        raise CheckpointError(f"{where}: the weights give non-finite outputs")
