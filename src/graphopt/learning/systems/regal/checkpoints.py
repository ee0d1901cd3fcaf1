"""REGAL's policy checkpoints: weights plus everything needed to refuse a mismatched use.

A checkpoint records the policy's shape, the feature set, the objective, the device count and
the inner search it was trained for; loading one for another device count, objective or feature
set is an error that says which. Records follow the platform's convention (`learning/records.py`,
REGAL supplying its fields: `policy_fields_of`); files are written and read by `saving.py`
(atomic writes, torch's `weights_only` loader, the envelope of `REGAL_FORMAT`), and every field
is checked before use. The network's shape is compared with the stored tensors on torch's meta
device before any memory is allocated, so a file cannot make the loader allocate more than it
holds, and the weights must be finite and give finite outputs: a loaded policy can always be run, a
damaged one is refused with a line that says why.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from graphopt.learning import records
from graphopt.learning.batching import make_batch
from graphopt.learning.features import FEATURE_SET, GraphFeatures, node_feature_names
from graphopt.learning.formats import CheckpointError
from graphopt.learning.records import RunCheckpoint
from graphopt.learning.saving import load_weights, read_checkpoint
from graphopt.learning.systems.regal.config import PolicyConfig
from graphopt.learning.systems.regal.env import EnvSpec, InnerSearch
from graphopt.learning.systems.regal.network import RegalPolicy
from graphopt.learning.systems.regal.records import REGAL_FORMAT, _policy_config, policy_fields


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


def policy_fields_of(
    config: PolicyConfig,
    objective: str,
    search: str,
    feature_evaluations: int,
    inner: InnerSearch | None = None,
) -> dict[str, Any]:
    """What a REGAL checkpoint says its weights are for (`policy_fields` reads it back)."""
    return {
        "policy_config": asdict(config),
        "feature_set": FEATURE_SET,
        "node_features": list(node_feature_names(config.n_devices)),
        "objective": objective,
        "search": search,
        "feature_evaluations": feature_evaluations,
        "inner_search": asdict(inner or InnerSearch()),
    }


def policy_record(
    network: RegalPolicy,
    objective: str,
    search: str,
    feature_evaluations: int,
    inner: InnerSearch | None = None,
) -> dict[str, Any]:
    """A REGAL policy's record: its fields (`policy_fields_of`) and weights (`records.py`)."""
    fields = policy_fields_of(network.config, objective, search, feature_evaluations, inner)
    return records.policy_record(REGAL_FORMAT, fields, network)


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
    load_weights(network, record["model_state"], f"{path}: model_state")
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


def restore_weights(run: RunCheckpoint, network: RegalPolicy) -> None:
    """Loads a run's last.pt weights into a network of the run's config, checked.

    Raises:
        CheckpointError: when the stored policy or weights do not fit the network, or give
            non-finite outputs.
    """
    config = _policy_config(run.record["policy_config"], f"{run.path}: policy_config")
    if config != network.config:
        raise CheckpointError(f"{run.path}: policy_config is not the train_config's network")
    state = run.record["model_state"]
    load_weights(network, state, f"{run.path}: model_state")
    _check_outputs(network, f"{run.path}: model_state")


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
