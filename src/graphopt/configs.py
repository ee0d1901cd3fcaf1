"""Typed configs read from JSON: the one loader every config file of graphopt goes through.

A config is a frozen dataclass whose field annotations say what each value is. `read_config`
turns a JSON object into one: an unknown field is refused (it is a misspelling, never metadata),
each value must be of its field's type (JSON gives lists for tuples and integers for floats;
numbers must be finite; a nested config is read the same way, and its fields named by path),
and the dataclass's own range checks run last. Every refusal is one line that names the field:
a check that refuses one field raises `FieldError`, so the loader can name it by its path.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, TypeVar

from graphopt._messages import describe
from graphopt.errors import GraphoptError

Config = TypeVar("Config")


class FieldError(GraphoptError):
    """A config's own check refusing one of its fields (`read_config` names it by its path).

    Args:
        field: the field's name in its config.
        problem: what is wrong, as it reads after the name ("must be >= 1, got 0").
    """

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field} {problem}")
        self.field = field
        self.problem = problem


def read_config(
    cls: type[Config],
    data: Any,
    what: str,
    error: type[GraphoptError] = GraphoptError,
    names: Mapping[str, str] | None = None,
) -> Config:
    """An instance of the config dataclass `cls` from a parsed JSON object.

    Args:
        cls: a dataclass whose field annotations are bool, int, float, str, a `Literal` of
            strings, a tuple of those (fixed length or `...`), another config dataclass, or
            any of them `| None`.
        data: the parsed JSON value.
        what: the config's name in messages ("training config").
        error: the exception type raised.
        names: what messages call a field or a nested config, by dotted path, where that is
            not the path itself (a layout's older keys, a config's name in words); a nested
            config's own checks are then reported as "bad NAME: ...".

    Raises:
        error: a non-object, an unknown field (naming it and the valid ones), a value of the
            wrong type (naming the field by its path), or a value the dataclass refuses.
    """
    return _read(cls, data, _Context(what, error, names or {}), "")


@dataclasses.dataclass(frozen=True)
class _Context:
    """What every message of one `read_config` call needs."""

    what: str
    error: type[GraphoptError]
    names: Mapping[str, str]

    def name(self, path: str) -> str:
        return self.names.get(path, path)


def _read(cls: Any, data: Any, context: _Context, prefix: str) -> Any:
    what, error = context.what, context.error
    if not isinstance(data, dict):
        where = f"{what}: {context.name(prefix[:-1])}" if prefix else what
        raise error(f"{where} must be a JSON object, got {describe(data)}")
    known = {f.name for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(str(key) for key in set(data) - known)
    if unknown:
        raise error(
            f"unknown {what} field(s): {', '.join(prefix + key for key in unknown)}; "
            f"valid: {', '.join(sorted(prefix + key for key in known))}"
        )
    hints = typing.get_type_hints(cls)
    values = {
        name: _value(hints[name], value, context, prefix + name) for name, value in data.items()
    }
    try:
        return cls(**values)
    except FieldError as failure:
        raise error(f"{what}: {context.name(prefix + failure.field)} {failure.problem}") from None
    except (TypeError, ValueError) as failure:
        raise error(f"bad {context.names.get(prefix[:-1], what)}: {failure}") from None


def _value(hint: Any, value: Any, context: _Context, path: str) -> Any:
    """`value` as the field's type (nested configs built, lists made tuples), or `error`."""
    options = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    if value is None and type(None) in options:
        return None
    kind = next(option for option in options if option is not type(None))
    if dataclasses.is_dataclass(kind):
        return _read(kind, value, context, path + ".")
    wanted = _mismatch(kind, value)
    if wanted is None:
        return tuple(value) if typing.get_origin(kind) is tuple else value
    if type(None) in options:
        wanted += " or null"
    raise context.error(
        f"{context.what}: {context.name(path)} must be {wanted}, got {describe(value)}"
    )


def _mismatch(kind: Any, value: Any) -> str | None:
    """None when `value` is of type `kind`, else the type it must be, in words."""
    finite = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if kind is bool:
        return None if isinstance(value, bool) else "true or false"
    if kind is int:
        return None if finite and isinstance(value, int) else "an integer"
    if kind is float:
        return None if finite else "a finite number"
    if kind is str:
        return None if isinstance(value, str) else "a string"
    if typing.get_origin(kind) is Literal:
        choices = typing.get_args(kind)
        return None if value in choices else "one of " + ", ".join(map(repr, choices))
    if typing.get_origin(kind) is tuple:
        items = typing.get_args(kind)
        variadic = len(items) == 2 and items[1] is Ellipsis
        count = "" if variadic else f"{_NUMBERS.get(len(items), len(items))} "
        noun = {float: "finite numbers", int: "integers", str: "strings", bool: "booleans"}
        wanted = f"a list of {count}{noun.get(items[0], 'values')}"
        if not isinstance(value, list | tuple) or (not variadic and len(value) != len(items)):
            return wanted
        item_kinds = [items[0]] * len(value) if variadic else list(items)
        bad = any(_mismatch(k, v) is not None for k, v in zip(item_kinds, value, strict=True))
        return wanted if bad else None
    raise TypeError(f"config fields of type {kind!r} are not supported")


_NUMBERS = {1: "one", 2: "two", 3: "three", 4: "four"}
