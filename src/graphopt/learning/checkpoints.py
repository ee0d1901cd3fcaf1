"""Policy checkpoints: weights plus everything needed to refuse a mismatched use.

A checkpoint records the policy's shape, the feature set, the objective, the device count and
the inner search it was trained for; loading one for another device count, objective or feature
set is an error that says which. Writes go to a temporary file that replaces the old one only
when complete, so a kill during a save never loses the last good checkpoint.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from graphopt.errors import GraphoptError
from graphopt.learning.actions import ActionConfig
from graphopt.learning.features import FEATURE_SET, node_feature_names
from graphopt.learning.policy import PolicyConfig, RegalPolicy
from graphopt.solvers.regal import InnerSearch

FORMAT = "graphopt.regal-policy/1"


class CheckpointError(GraphoptError):
    """A checkpoint that is missing, unreadable, or made for another problem."""


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


def policy_record(
    network: RegalPolicy,
    objective: str,
    search: str,
    feature_evaluations: int,
    inner: InnerSearch | None = None,
) -> dict[str, Any]:
    """The part of a checkpoint that says what the weights are for."""
    return {
        "format": FORMAT,
        "policy_config": asdict(network.config),
        "feature_set": FEATURE_SET,
        "node_features": list(node_feature_names(network.config.n_devices)),
        "objective": objective,
        "search": search,
        "feature_evaluations": feature_evaluations,
        "inner_search": asdict(inner or InnerSearch()),
        "model_state": network.state_dict(),
    }


def save_checkpoint(path: Path, record: dict[str, Any]) -> None:
    """Writes `record` atomically: a kill mid-write leaves the previous file intact."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    torch.save(record, partial)
    os.replace(partial, path)


def read_checkpoint(path: str | Path) -> dict[str, Any]:
    """The raw record of a checkpoint file; CheckpointError when absent or not a checkpoint."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"no policy checkpoint at {path}")
    try:
        record = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # torch raises many types for a corrupt or foreign file
        raise CheckpointError(f"{path} is not a readable policy checkpoint: {error}") from None
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not a graphopt REGAL policy checkpoint")
    return record


def load_policy(
    path: str | Path, objective: str | None = None, n_devices: int | None = None
) -> TrainedPolicy:
    """Loads a policy, refusing one trained for another objective, device count or features.

    Raises:
        CheckpointError: naming what differs.
    """
    record = read_checkpoint(path)
    if record["feature_set"] != FEATURE_SET:
        raise CheckpointError(
            f"{path} was trained on feature set {record['feature_set']!r}; this graphopt "
            f"computes {FEATURE_SET!r}"
        )
    config_data = dict(record["policy_config"])
    config = PolicyConfig(**{**config_data, "actions": ActionConfig(**config_data["actions"])})
    if n_devices is not None and config.n_devices != n_devices:
        raise CheckpointError(
            f"{path} was trained for {config.n_devices} devices; the machine has {n_devices}"
        )
    if objective is not None and record["objective"] != objective:
        raise CheckpointError(
            f"{path} was trained to minimize {record['objective']}, not {objective}"
        )
    if list(record["node_features"]) != list(node_feature_names(config.n_devices)):
        raise CheckpointError(f"{path} was trained on other node features")
    network = RegalPolicy(config)
    network.load_state_dict(record["model_state"])
    network.eval()
    return TrainedPolicy(
        network,
        record["objective"],
        record["search"],
        int(record["feature_evaluations"]),
        InnerSearch(**record.get("inner_search", {})),
        dict(record.get("metadata", {})),
    )
