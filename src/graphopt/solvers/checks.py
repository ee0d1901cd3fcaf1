"""The checks of solver options: each raises SolverError naming the field, its rule and value.

A config dataclass lists its fields by rule in `__post_init__` (`check_fields`), so that every
solver words a bad option alike.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from graphopt.solvers.base import SolverError


def check_integer(name: str, value: Any, low: int = 1) -> None:
    """Raises SolverError unless `value` is an integer >= `low` (1: a count; bools refused)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise SolverError(f"{name} must be an integer >= {low}, got {value!r}")


def check_probability(name: str, value: Any) -> None:
    """Raises SolverError unless `value` is a number in [0, 1]."""
    if not (isinstance(value, int | float) and 0.0 <= value <= 1.0):
        raise SolverError(f"{name} must be in [0, 1], got {value!r}")


def check_open_probability(name: str, value: Any) -> None:
    """Raises SolverError unless `value` is a number in (0, 1): a chance never 0 nor certain."""
    if not (isinstance(value, int | float) and 0.0 < value < 1.0):
        raise SolverError(f"{name} must be in (0, 1), got {value!r}")


def check_non_negative(name: str, value: Any) -> None:
    """Raises SolverError unless `value` is a finite number >= 0."""
    if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
        raise SolverError(f"{name} must be >= 0, got {value!r}")


def check_fields(
    config: object,
    *,
    integer: Sequence[str] = (),
    probability: Sequence[str] = (),
    open_probability: Sequence[str] = (),
    non_negative: Sequence[str] = (),
) -> None:
    """Checks the named fields of `config`, each by its rule's check above, rules in this order."""
    rules = (
        (check_integer, integer),
        (check_probability, probability),
        (check_open_probability, open_probability),
        (check_non_negative, non_negative),
    )
    for check, names in rules:
        for name in names:
            check(name, getattr(config, name))
