"""Rendering values read from user files inside one-line error messages.

A message names the offending item and quotes what it found; the value comes from the file, so
it may be a 10,000-character string with line breaks and terminal escapes, a 5,000-digit integer
(whose `repr` raises), NaN, or a tensor whose `repr` spans lines. `describe` renders any of them
as a short, single-line, printable text, so the message stays one line on any input.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from graphopt.errors import GraphoptError, one_line

_LIMIT = 40


def describe(value: Any) -> str:
    """A short one-line rendering of a value for an error message (JSON spelling of scalars).

    Strings are quoted with Python's escapes (a newline as backslash n, line separators and
    terminal escapes too), so they never break the line or reach the terminal; long ones are
    cut. Containers are printed as JSON when that is short, else named by their kind and size,
    as other objects are.
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        if abs(value) >= 10**30:
            return f"an integer of about {int(value.bit_length() * math.log10(2)) + 1} digits"
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return repr(value)
    if isinstance(value, str):
        text = repr(value)
        return text if len(text) <= _LIMIT else text[: _LIMIT - 4] + "...'"
    if isinstance(value, list | tuple | Mapping):
        text = _short_json(value)
        if text is not None:
            return text
        if isinstance(value, Mapping):
            return f"an object of {len(value)} fields"
        return f"a list of {len(value)} items"
    return f"a {type(value).__name__}"


def _short_json(value: Any) -> str | None:
    """A container as JSON when that is short, else None (nor for what JSON cannot hold)."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return None
    return one_line(text) if len(text) <= _LIMIT else None


def reason(error: BaseException) -> str:
    """A library exception's message as a short single line, for "cannot read X (reason)".

    Libraries quote the bytes they choke on and some span several lines (torch's unpickler
    explains its allow-list over a paragraph); this keeps the first line, printable and cut.
    """
    lines = str(error).strip().splitlines()
    first = lines[0] if lines else type(error).__name__
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in first)
    return text if len(text) <= 160 else text[:157] + "..."


def raised(error: BaseException) -> str:
    """`Type: reason` of an exception from code graphopt does not control.

    For a user's factory or an exporter, the exception's type says as much as its message.
    """
    text = str(error).strip()
    return f"{type(error).__name__}: {reason(error)}" if text else type(error).__name__


def record_fields(
    value: Any,
    where: str,
    required: Sequence[str],
    optional: Sequence[str] = (),
    error: type[GraphoptError] = GraphoptError,
    kind: str = "a JSON object",
) -> dict[str, Any]:
    """`value` as a record with every `required` field and no field outside `optional`.

    For the records graphopt reads back from its own files (dataset manifests and archives,
    checkpoints, configs), where an unknown field is a misspelling or damage, never metadata.

    Raises:
        error: naming the first unknown or missing field, and the valid ones.
    """
    if not isinstance(value, dict):
        raise error(f"{where}: must be {kind}, got {describe(value)}")
    known = tuple(dict.fromkeys((*required, *optional)))
    for key in value:
        if key not in known:
            raise error(f"{where}: unknown field {describe(key)}; valid fields: {', '.join(known)}")
    for key in required:
        if key not in value:
            raise error(f"{where}: missing required field '{key}'")
    return value


def count(number: int, noun: str) -> str:
    """`1 device`, `2 devices`: a count with its noun in the right number."""
    return f"{number:,} {noun}{'' if number == 1 else 's'}"
