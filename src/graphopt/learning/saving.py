"""Saving and loading any learned system's checkpoint files, safely (torch).

Writes go to a temporary file that replaces the old one only when complete, so a kill during a
save never loses the last good checkpoint. A checkpoint file is user input (`--policy`,
`--resume`): it is unpickled with torch's `weights_only` loader, which builds only tensors and
plain containers and never runs code the file names; its envelope is checked against the
system's `CheckpointFormat` (`formats.py`), and weights and optimizer state are compared with
the network and optimizer they are loaded into before they are trusted. Each system's own
checkpoint module (REGAL's: `checkpoints.py`) checks the rest of its fields.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from graphopt._messages import describe, reason
from graphopt.learning.formats import (
    CheckpointError,
    CheckpointFormat,
    check_envelope,
    exact_fields,
)

_ADAM_STATE = ("step", "exp_avg", "exp_avg_sq")
_ROUNDING = 1e-5  # float32 rounding allowed on Adam's moment bounds


def save_checkpoint(path: Path, record: dict[str, Any]) -> None:
    """Writes `record` atomically: a kill mid-write leaves the previous file intact."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    torch.save(record, partial)
    os.replace(partial, path)


def read_checkpoint(path: str | Path, form: CheckpointFormat) -> dict[str, Any]:
    """The raw record of a checkpoint file of `form`: a policy's fields, and a run's with them.

    Only the envelope is checked here (format, field names); `load_policy` and
    `records.read_run` check the fields they use; every system's loader reads through it
    with its own format.

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


def check_tensor(value: Any, like: torch.Tensor, where: str) -> torch.Tensor:
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


def load_weights(network: torch.nn.Module, state: Any, where: str) -> None:
    """Loads weights whose names, shapes and dtypes are exactly the network's, all finite.

    The network is built from its checked config, so the expected shapes are known before the
    file's tensors are trusted. (Building a second copy on the meta device instead ran torch's
    Python reference initializers, which import torch._dynamo: 1-2 s of every cold solve.)
    """
    expected = network.state_dict()
    if not isinstance(state, Mapping) or set(state) != set(expected):
        missing = sorted(set(expected) - set(state)) if isinstance(state, Mapping) else []
        detail = f" (missing {describe(missing[0])})" if missing else ""
        raise CheckpointError(
            f"{where}: must hold exactly the network's {len(expected)} tensors{detail}"
        )
    for key, like in expected.items():
        check_tensor(state[key], like, f"{where}[{describe(key)}]")
    network.load_state_dict(state)


def _same(saved: Any, current: Any) -> bool:
    """Equal values of the same types (a tensor never compares equal to a number here)."""
    if type(saved) is not type(current):
        return False
    if isinstance(current, list | tuple):
        return len(saved) == len(current) and all(map(_same, saved, current))
    return bool(saved == current)


def load_adam(optimizer: torch.optim.Adam, state: Any, step: int, clip: float, path: Path) -> None:
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
        counter = check_tensor(
            entry["step"], torch.zeros((), dtype=torch.float32), f"{entry_where}.step"
        )
        count = float(counter)
        if count != int(count) or not 0 <= count <= step:
            raise CheckpointError(f"{entry_where}.step: must be a whole number in [0, {step}]")
        bound = clip * (1 + _ROUNDING)
        first = check_tensor(entry["exp_avg"], like, f"{entry_where}.exp_avg")
        if bool((first.abs() > bound).any()):
            raise CheckpointError(f"{entry_where}.exp_avg: must be within +-grad_clip ({clip:g})")
        second = check_tensor(entry["exp_avg_sq"], like, f"{entry_where}.exp_avg_sq")
        if bool(((second < 0) | (second > bound * bound)).any()):
            raise CheckpointError(
                f"{entry_where}.exp_avg_sq: must be within [0, grad_clip**2] ({clip * clip:g})"
            )
    optimizer.load_state_dict(data)
