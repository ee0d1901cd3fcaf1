"""Policy checkpoints: weights plus everything needed to refuse a mismatched use.

A checkpoint records the policy's shape, the feature set, the objective, the device count and
the inner search it was trained for; loading one for another device count, objective or feature
set is an error that says which. Writes go to a temporary file that replaces the old one only
when complete, so a kill during a save never loses the last good checkpoint.

A checkpoint file is user input (`--policy`, `--resume`): it is unpickled with torch's
`weights_only` loader, which builds only tensors and plain containers and never runs code the
file names, and every field is checked before use. The network's shape is compared with the
stored tensors on torch's meta device before any memory is allocated, so a file cannot make
the loader allocate more than it holds, and the weights must be finite and give finite outputs:
a loaded policy can always be run, a damaged one is refused with a line that says why.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from graphopt._messages import describe, reason
from graphopt.learning.batching import make_batch
from graphopt.learning.envs.regal import EnvSpec, InnerSearch
from graphopt.learning.features import FEATURE_SET, GraphFeatures, node_feature_names
from graphopt.learning.formats import (
    CheckpointError,
    CheckpointFormat,
    check_envelope,
    exact_fields,
    integer,
    json_field,
    number,
)
from graphopt.learning.networks.regal import PolicyConfig, RegalPolicy
from graphopt.learning.records import (
    _RUN_KEYS,
    REGAL_FORMAT,
    _policy_config,
    policy_fields,
)

_ADAM_STATE = ("step", "exp_avg", "exp_avg_sq")
_ROUNDING = 1e-5  # float32 rounding allowed on Adam's moment bounds


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


def save_checkpoint(path: Path, record: dict[str, Any]) -> None:
    """Writes `record` atomically: a kill mid-write leaves the previous file intact."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    torch.save(record, partial)
    os.replace(partial, path)


def read_checkpoint(path: str | Path, form: CheckpointFormat = REGAL_FORMAT) -> dict[str, Any]:
    """The raw record of a checkpoint file of `form`: a policy's fields, and a run's with them.

    Only the envelope is checked here (format, field names); `load_policy` and
    `read_run_checkpoint` check the fields they use. Any system's loader reads through it with
    its own format.

    Raises:
        CheckpointError: when absent, unreadable, not a checkpoint, or with a missing or
            unknown field.
    """
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"no policy checkpoint at {path}")
    try:
        with warnings.catch_warnings():  # torch warns about odd files on stderr: the error says it
            warnings.simplefilter("ignore")
            record = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # torch raises many types for a corrupt or foreign file
        raise CheckpointError(
            f"{path} is not a readable policy checkpoint ({reason(error)})"
        ) from None
    return check_envelope(record, path, form)


def load_policy(
    path: str | Path, objective: str | None = None, n_devices: int | None = None
) -> TrainedPolicy:
    """Loads a policy, refusing one trained for another objective, device count or features.

    Raises:
        CheckpointError: naming what differs, or the field that is malformed.
    """
    record = read_checkpoint(path)
    checked = policy_fields(record, path, objective, n_devices)
    network = RegalPolicy(checked.config)
    _load_weights(network, record["model_state"], f"{path}: model_state")
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

    def restore(self, network: RegalPolicy, optimizer: torch.optim.Adam) -> None:
        """Loads the weights and Adam's state into a network and optimizer of the run's config.

        Raises:
            CheckpointError: when the stored policy, weights or optimizer state do not fit
                them, or hold non-finite values.
        """
        config = _policy_config(self.record["policy_config"], f"{self.path}: policy_config")
        if config != network.config:
            raise CheckpointError(f"{self.path}: policy_config is not the train_config's network")
        clip = self.train_config.get("grad_clip")
        if not isinstance(clip, int | float) or isinstance(clip, bool) or not 0 < clip < math.inf:
            raise CheckpointError(f"{self.path}: train_config.grad_clip: must be a number > 0")
        _load_weights(network, self.record["model_state"], f"{self.path}: model_state")
        _check_outputs(network, f"{self.path}: model_state")
        _load_adam(optimizer, self.record["optimizer_state"], self.step, clip, self.path)


def read_run_checkpoint(path: str | Path, columns: Sequence[str]) -> RunCheckpoint:
    """A training run's `last.pt`, every field of the run checked.

    Args:
        path: the checkpoint.
        columns: the names a log row may use.

    Raises:
        CheckpointError: naming the field that is missing or malformed.
    """
    path = Path(path)
    record = read_checkpoint(path)
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


# ------------------------------------------------------------------------------ field checks
def _check_tensor(value: Any, like: torch.Tensor, where: str) -> torch.Tensor:
    """A stored tensor of exactly the shape and dtype of `like`, dense and finite."""
    if (
        type(value) not in (torch.Tensor, torch.nn.Parameter)
        or value.layout != torch.strided
        or value.device.type != "cpu"
    ):
        raise CheckpointError(f"{where}: must be a dense CPU tensor, got {describe(value)}")
    if value.dtype != like.dtype or value.shape != like.shape:
        raise CheckpointError(
            f"{where}: must be a {like.dtype} tensor of shape {list(like.shape)}, got "
            f"{value.dtype} of shape {list(value.shape)}"
        )
    if value.is_floating_point() and not bool(torch.isfinite(value).all()):
        raise CheckpointError(f"{where}: holds NaN or infinite values")
    return value


def _load_weights(network: RegalPolicy, state: Any, where: str) -> None:
    """Loads weights whose names, shapes and dtypes are exactly the network's, all finite.

    The expected shapes come from the same config built on the meta device (no memory), so
    they are known before the file's tensors are trusted.
    """
    with torch.device("meta"):
        expected = RegalPolicy(network.config).state_dict()
    if not isinstance(state, Mapping) or set(state) != set(expected):
        missing = sorted(set(expected) - set(state)) if isinstance(state, Mapping) else []
        detail = f" (missing {describe(missing[0])})" if missing else ""
        raise CheckpointError(
            f"{where}: must hold exactly the network's {len(expected)} tensors{detail}"
        )
    for key, like in expected.items():
        _check_tensor(state[key], like, f"{where}[{describe(key)}]")
    network.load_state_dict(state)


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


def _same(saved: Any, current: Any) -> bool:
    """Equal values of the same types (a tensor never compares equal to a number here)."""
    if type(saved) is not type(current):
        return False
    if isinstance(current, list | tuple):
        return len(saved) == len(current) and all(map(_same, saved, current))
    return bool(saved == current)


def _load_adam(optimizer: torch.optim.Adam, state: Any, step: int, clip: float, path: Path) -> None:
    """Loads an Adam state of exactly this optimizer's groups and parameter shapes.

    Hyper-parameters must equal the run's (a stored learning rate would silently override the
    config's), the step count must be at most the run's, and the moments must be what clipped
    gradients give: training clips the gradient's norm to `clip`, so the first moment (a moving
    average of gradients) is within +-clip and the second within [0, clip**2]. Larger moments
    would make the next update huge or infinite.
    """
    where = f"{path}: optimizer_state"
    current = optimizer.state_dict()
    data = exact_fields(state, where, ["state", "param_groups"])
    groups, expected = data["param_groups"], current["param_groups"]
    if not (
        isinstance(groups, list)
        and len(groups) == len(expected)
        and all(
            isinstance(g, dict) and g.keys() == c.keys() and all(_same(g[k], c[k]) for k in c)
            for g, c in zip(groups, expected, strict=True)
        )
    ):
        raise CheckpointError(f"{where}: param_groups differ from the run's Adam settings")
    parameters = [p for group in optimizer.param_groups for p in group["params"]]
    moments = data["state"]
    if not isinstance(moments, dict):
        raise CheckpointError(f"{where}.state: must be a dict, got {describe(moments)}")
    for index, entry in moments.items():
        if (
            not isinstance(index, int)
            or isinstance(index, bool)
            or not 0 <= index < len(parameters)
        ):
            raise CheckpointError(f"{where}.state: unknown parameter {describe(index)}")
        entry_where = f"{where}.state[{index}]"
        entry = exact_fields(entry, entry_where, _ADAM_STATE)
        like = parameters[index].detach()
        counter = _check_tensor(
            entry["step"], torch.zeros((), dtype=torch.float32), f"{entry_where}.step"
        )
        count = float(counter)
        if count != int(count) or not 0 <= count <= step:
            raise CheckpointError(f"{entry_where}.step: must be a whole number in [0, {step}]")
        bound = clip * (1 + _ROUNDING)
        first = _check_tensor(entry["exp_avg"], like, f"{entry_where}.exp_avg")
        if bool((first.abs() > bound).any()):
            raise CheckpointError(f"{entry_where}.exp_avg: must be within +-grad_clip ({clip:g})")
        second = _check_tensor(entry["exp_avg_sq"], like, f"{entry_where}.exp_avg_sq")
        if bool(((second < 0) | (second > bound * bound)).any()):
            raise CheckpointError(
                f"{entry_where}.exp_avg_sq: must be within [0, grad_clip**2] ({clip * clip:g})"
            )
    optimizer.load_state_dict(data)
