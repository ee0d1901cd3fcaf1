"""Checkpoint formats of the learned systems, and the torch-free field checks their loaders share.

Every learned system saves its checkpoints as one record tagged with its own format
(`CheckpointFormat`: REGAL's is `regal/records.REGAL_FORMAT`; a new system declares its own beside
its network, with `run_format`), in the one convention of `records.py` (`RUN_FIELDS`).
`check_envelope` refuses a file of another system or another version by naming both tags, before
any field is read, so a GFlowNet checkpoint handed to REGAL's loader says so rather than failing
on a missing field. The checks below are what every loader applies to a field read
from a file (user input): each raises `CheckpointError` with a line that names the field.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from graphopt._messages import describe, reason, record_fields
from graphopt.errors import GraphoptError

PREFIX = "graphopt."
"""What every graphopt checkpoint's format tag starts with."""


class CheckpointError(GraphoptError):
    """A checkpoint that is missing, unreadable, or made for another problem."""


@dataclass(frozen=True)
class CheckpointFormat:
    """One system's checkpoint format.

    Attributes:
        tag: the `format` field its files carry, 'graphopt.<system>-<kind>/<version>'.
        what: how messages name such a file ('REGAL policy').
        required: the record's fields.
        optional: fields a record may hold besides (older files lack some; a training run's
            `last.pt` adds its state).
    """

    tag: str
    what: str
    required: tuple[str, ...]
    optional: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.tag.startswith(PREFIX) or "format" not in self.required:
            raise ValueError(f"a checkpoint format tag starts with {PREFIX!r} and is required")


RUN_FIELDS = (
    "train_config",
    "optimizer_state",
    "step",
    "best_validation",
    "best_step",
    "seconds",
    "history",
)
"""What a run record (last.pt) holds besides its policy's fields, for every system."""
POLICY_FACTS = ("train_config", "step", "best_validation", "best_step")
"""The run fields that a policy record (best.pt) keeps at its top level (`System.policy_facts`;
REGAL keeps its own in `metadata`)."""


def run_format(tag: str, what: str, fields: tuple[str, ...]) -> CheckpointFormat:
    """The format of a system whose best.pt keeps `POLICY_FACTS` (GDP, GO, GFlowNet).

    Its own `fields` (its network's config, its machine) and the weights, beside the facts of
    its run; a run's last.pt adds the rest of `RUN_FIELDS` (`records.py`).
    """
    rest = tuple(name for name in RUN_FIELDS if name not in POLICY_FACTS)
    return CheckpointFormat(tag, what, ("format", *fields, "model_state", *POLICY_FACTS), rest)


def check_envelope(record: Any, path: str | Path, form: CheckpointFormat) -> dict[str, Any]:
    """The record of a checkpoint file, if it is one of `form` with exactly its field names.

    Raises:
        CheckpointError: not a graphopt checkpoint, one of another system or version (naming
            both tags), or with a missing or unknown field.
    """
    tag = record.get("format") if isinstance(record, dict) else None
    if not isinstance(tag, str) or not tag.startswith(PREFIX):
        raise CheckpointError(f"{path} is not a graphopt {form.what} checkpoint")
    if tag != form.tag:
        raise CheckpointError(
            f"{path} is not a graphopt {form.what} checkpoint: its format is {describe(tag)}, "
            f"this graphopt reads {form.tag!r}"
        )
    return exact_fields(record, f"{path}: checkpoint", form.required, form.optional)


def is_scalar(value: Any) -> bool:
    """Whether `value` is a plain JSON scalar (metadata values are)."""
    return value is None or isinstance(value, str | bool | int | float)


def choice(value: Any, choices: Sequence[str], where: str) -> str:
    """`value` if it is one of `choices`."""
    if not isinstance(value, str) or value not in choices:
        raise CheckpointError(
            f"{where}: must be one of {', '.join(choices)}, got {describe(value)}"
        )
    return value


def integer(value: Any, where: str, low: int, high: int) -> int:
    """`value` if it is an integer (not a bool) in [low, high]."""
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise CheckpointError(
            f"{where}: must be an integer in [{low}, {high}], got {describe(value)}"
        )
    return value


def number(value: Any, where: str) -> float:
    """`value` as a finite float, if it is a number (not a bool)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise CheckpointError(f"{where}: must be a number, got {describe(value)}")
    try:
        result = float(value)
    except OverflowError:
        result = math.inf
    if not math.isfinite(result):
        raise CheckpointError(f"{where}: must be finite, got {describe(value)}")
    return result


def json_field(value: Any, where: str) -> Any:
    """The value of a field stored as JSON text."""
    if not isinstance(value, str):
        raise CheckpointError(f"{where}: must be JSON text, got {describe(value)}")
    try:
        return json.loads(value)
    except (ValueError, RecursionError) as error:
        raise CheckpointError(f"{where}: not valid JSON ({reason(error)})") from None


def exact_fields(
    value: Any, where: str, required: Sequence[str], optional: Sequence[str] = ()
) -> dict[str, Any]:
    """`value` if it is a dict with every required field and no field outside both lists."""
    return record_fields(value, where, required, optional, CheckpointError, "a dict")


@cache
def shipped_policy_path(method: str, objective: str, n_devices: int | None = None) -> str | None:
    """The packaged checkpoint of any learned system for an objective and device count, or None.

    The one lookup of every learned solver: `graphopt/policies/<method>-<objective>-d<devices>.pt`,
    else `<method>-<objective>.pt`, the policy of a system whose one network serves every device
    count (GDP, GO), which checks the count itself (`n_devices` None: that one alone).
    """
    root = resources.files("graphopt.policies")
    names = [f"{method}-{objective}.pt"]
    if n_devices is not None:
        names.insert(0, f"{method}-{objective}-d{n_devices}.pt")
    for name in names:
        path = root.joinpath(name)
        if path.is_file():
            return str(path)
    return None


def checkpoint_file(path: str) -> str:
    """`path` as given, or the packaged policy of that file name when no such file exists.

    So a shipped config can start from a shipped policy (`init: "gflownet-makespan.pt"`) from
    any working directory, and a user's own file of the same name still wins.
    """
    if Path(path).exists():
        return path
    packaged = resources.files("graphopt.policies").joinpath(path)
    return str(packaged) if Path(path).name == path and packaged.is_file() else path
