"""Typed configs read from JSON: the one loader every config file of graphopt goes through.

A config is a frozen dataclass whose field annotations say what each value is. `read_config`
turns a JSON object into one: an unknown field is refused (it is a misspelling, never metadata),
each value must be of its field's type (JSON gives lists for tuples and integers for floats;
numbers must be finite; a nested config is read the same way, and its fields named by path),
and the dataclass's own range checks run last. Every refusal is one line that names the field.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from typing import Any, Literal, TypeVar

from graphopt._messages import describe
from graphopt.errors import GraphoptError

Config = TypeVar("Config")


def read_config(
    cls: type[Config], data: Any, what: str, error: type[GraphoptError] = GraphoptError
) -> Config:
    """An instance of the config dataclass `cls` from a parsed JSON object.

    Args:
        cls: a dataclass whose field annotations are bool, int, float, str, a `Literal` of
            strings, a tuple of those (fixed length or `...`), another config dataclass, or
            any of them `| None`.
        data: the parsed JSON value.
        what: the config's name in messages ("training config").
        error: the exception type raised.

    Raises:
        error: a non-object, an unknown field (naming it and the valid ones), a value of the
            wrong type (naming the field by its path), or a value the dataclass refuses.
    """
    return _read(cls, data, what, error, "")


def _read(cls: Any, data: Any, what: str, error: type[GraphoptError], prefix: str) -> Any:
    if not isinstance(data, dict):
        where = f"{what}: {prefix[:-1]}" if prefix else what
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
        name: _value(hints[name], value, what, error, prefix + name) for name, value in data.items()
    }
    try:
        return cls(**values)
    except (TypeError, ValueError) as failure:
        raise error(f"bad {what}: {failure}") from None


def _value(hint: Any, value: Any, what: str, error: type[GraphoptError], path: str) -> Any:
    """`value` as the field's type (nested configs built, lists made tuples), or `error`."""
    options = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    if value is None and type(None) in options:
        return None
    kind = next(option for option in options if option is not type(None))
    if dataclasses.is_dataclass(kind):
        return _read(kind, value, what, error, path + ".")
    wanted = _mismatch(kind, value)
    if wanted is None:
        return tuple(value) if typing.get_origin(kind) is tuple else value
    if type(None) in options:
        wanted += " or null"
    raise error(f"{what}: {path} must be {wanted}, got {describe(value)}")


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
