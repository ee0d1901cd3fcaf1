"""Values from user files rendered inside one-line error messages (`graphopt._messages`)."""

from __future__ import annotations

import math

import pytest
import torch

from graphopt._messages import describe, reason


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, "null"),
        (True, "true"),
        (7, "7"),
        (10**5000, "an integer of about 5001 digits"),
        (math.nan, "NaN"),
        (-math.inf, "-Infinity"),
        (0.25, "0.25"),
        ("a\nb\u2028\x1b", r"'a\nb\u2028\x1b'"),
        ("x" * 100, "'" + "x" * 35 + "...'"),
        ([1, 2], "[1, 2]"),
        ({"a": 1}, '{"a": 1}'),
        (list(range(100)), "a list of 100 items"),
        ({str(k): k for k in range(20)}, "an object of 20 fields"),
        ([[[]]] * 3, "[[[]], [[]], [[]]]"),
        (torch.zeros(3, 3), "a Tensor"),
    ],
    ids=lambda value: type(value).__name__,  # repr of the huge integer would raise
)
def test_describe_is_short_and_one_line(value, expected) -> None:
    assert describe(value) == expected


def test_reason_keeps_a_printable_first_line() -> None:
    assert reason(ValueError("first\x00 line\nsecond line")) == r"first\x00 line"
    assert reason(ValueError("")) == "ValueError"
    assert len(reason(ValueError("y" * 1000))) == 160
