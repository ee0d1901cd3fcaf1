"""REGAL's checkpoint format and its fields, checked without torch.

A checkpoint (`checkpoints.py`) is a torch-saved record tagged `REGAL_FORMAT`; this module checks
what it says besides its tensors, the same way whichever loader unpickled it: torch's
`weights_only` loader (`checkpoints.load_policy`, for any file) or the numpy reader of shipped
policies (`numpy_policy`, which must not import torch). The envelope and the field checks any
system's loader uses are in `formats.py`; every check raises `CheckpointError` naming the field.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from graphopt._messages import describe
from graphopt.learning.features import FEATURE_SET, node_feature_names
from graphopt.learning.formats import (
    RUN_FIELDS,
    CheckpointError,
    CheckpointFormat,
    choice,
    exact_fields,
    integer,
    is_scalar,
    number,
)
from graphopt.learning.systems.regal.actions import MAX_LEVELS, ActionConfig
from graphopt.learning.systems.regal.config import (
    AGGREGATIONS,
    ENCODERS,
    MAX_HIDDEN,
    MAX_ROUNDS,
    PolicyConfig,
)
from graphopt.learning.systems.regal.env import SEARCHES, InnerSearch, Search
from graphopt.limits import MAX_DEVICES
from graphopt.solvers.base import Objective, SolverError

MAX_FEATURE_EVALUATIONS = 10**9
"""Most evaluations of the feature run a policy may ask for."""
MAX_LOGIT = 1e6
"""Largest initial mode logit or anchor strength (float32 tensors hold them)."""

_POLICY_KEYS = (
    "format",
    "policy_config",
    "feature_set",
    "node_features",
    "objective",
    "search",
    "feature_evaluations",
    "model_state",
)
_OPTIONAL_KEYS = ("inner_search", "metadata")  # older checkpoints lack them
REGAL_FORMAT = CheckpointFormat(
    "graphopt.regal-policy/1", "REGAL policy", _POLICY_KEYS, (*_OPTIONAL_KEYS, *RUN_FIELDS)
)
"""REGAL's (and GAS's and IDRS's) checkpoints: a policy, and a training run's state with it."""


@dataclass(frozen=True, eq=False)
class PolicyFields:
    """What a checkpoint says its weights are for, checked (`policy_fields`).

    Attributes:
        config: the network's shape.
        objective: 'peak-memory' or 'makespan'.
        search: 'brkga' or 'random', the inner search it was trained with.
        feature_evaluations: evaluations of the feature run it expects.
        inner: the BRKGA settings it was trained with.
        metadata: training facts, for model cards.
    """

    config: PolicyConfig
    objective: str
    search: Search
    feature_evaluations: int
    inner: InnerSearch
    metadata: dict[str, Any]


def policy_fields(
    record: dict[str, Any],
    path: str | Path,
    objective: str | None = None,
    n_devices: int | None = None,
) -> PolicyFields:
    """Every field of a checkpoint's record but its weights, checked for this use.

    Raises:
        CheckpointError: naming what differs (objective, device count, feature set) or the
            field that is malformed.
    """
    if not isinstance(record["feature_set"], str) or record["feature_set"] != FEATURE_SET:
        raise CheckpointError(
            f"{path} was trained on feature set {describe(record['feature_set'])}; this "
            f"graphopt computes {FEATURE_SET!r}"
        )
    config = _policy_config(record["policy_config"], f"{path}: policy_config")
    if n_devices is not None and config.n_devices != n_devices:
        raise CheckpointError(
            f"{path} was trained for {config.n_devices} devices; the machine has {n_devices}"
        )
    trained_for = choice(record["objective"], [o.value for o in Objective], f"{path}: objective")
    if objective is not None and trained_for != objective:
        raise CheckpointError(f"{path} was trained to minimize {trained_for}, not {objective}")
    features = record["node_features"]
    if not isinstance(features, list) or not all(isinstance(f, str) for f in features):
        raise CheckpointError(f"{path}: node_features: must be a list of names")
    if features != list(node_feature_names(config.n_devices)):
        raise CheckpointError(f"{path} was trained on other node features")
    search = choice(record["search"], SEARCHES, f"{path}: search")
    feature_evaluations = integer(
        record["feature_evaluations"], f"{path}: feature_evaluations", 1, MAX_FEATURE_EVALUATIONS
    )
    inner = _inner_search(record.get("inner_search", {}), f"{path}: inner_search")
    metadata = record.get("metadata", {})
    if not isinstance(metadata, dict) or not all(
        isinstance(k, str) and is_scalar(v) for k, v in metadata.items()
    ):
        raise CheckpointError(f"{path}: metadata: must map names to plain values")
    return PolicyFields(config, trained_for, search, feature_evaluations, inner, metadata)


def _policy_config(value: Any, where: str) -> PolicyConfig:
    """The network's shape, each field of the right type and within the limits above."""
    data = exact_fields(
        value, where, [f.name for f in fields(PolicyConfig) if f.name != "anchor"], ["anchor"]
    )
    actions = exact_fields(
        data["actions"], f"{where}.actions", [f.name for f in fields(ActionConfig)]
    )
    integer(data["n_devices"], f"{where}.n_devices", 2, MAX_DEVICES)
    integer(data["hidden"], f"{where}.hidden", 1, MAX_HIDDEN)
    integer(data["rounds"], f"{where}.rounds", 0, MAX_ROUNDS)
    integer(actions["levels"], f"{where}.actions.levels", 2, MAX_LEVELS)
    for key in ("placement", "scheduling", "elite_bias"):
        if not isinstance(actions[key], bool):
            raise CheckpointError(
                f"{where}.actions.{key}: must be true or false, got {describe(actions[key])}"
            )
    choice(data["encoder"], ENCODERS, f"{where}.encoder")
    choice(data["aggregation"], AGGREGATIONS, f"{where}.aggregation")
    anchor = data.get("anchor")
    for key, value in (("initial_mode_logit", data["initial_mode_logit"]), ("anchor", anchor)):
        if value is None and key == "anchor":  # no anchor: the heads start from the mode logit
            continue
        if abs(number(value, f"{where}.{key}")) > MAX_LOGIT:
            raise CheckpointError(
                f"{where}.{key}: must be in [-{MAX_LOGIT:g}, {MAX_LOGIT:g}], got {describe(value)}"
            )
    try:
        return PolicyConfig(**{**data, "actions": ActionConfig(**actions), "anchor": anchor})
    except ValueError as error:
        raise CheckpointError(f"{where}: {error}") from None


def _inner_search(value: Any, where: str) -> InnerSearch:
    data = exact_fields(value, where, [], [f.name for f in fields(InnerSearch)])
    preset, kept = data.get("brkga"), data.get("kept")
    if preset is not None and (
        not isinstance(preset, str) or re.fullmatch(r"[a-z0-9][a-z0-9_-]*", preset) is None
    ):
        raise CheckpointError(f"{where}.brkga: must be a BRKGA preset name, got {describe(preset)}")
    if kept is not None:
        integer(kept, f"{where}.kept", 1, 2**31 - 1)
    try:
        return InnerSearch(preset, kept)
    except SolverError as error:
        raise CheckpointError(f"{where}: {error}") from None
