"""The shared config loader: every config file is read with the same rules."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Literal

import pytest

from graphopt.configs import FieldError, read_config
from graphopt.errors import GraphoptError
from graphopt.solvers import brkga
from graphopt.solvers.base import SolverError
from graphopt.solvers.brkga import BRKGAConfig


@dataclass(frozen=True)
class Inner:
    width: int = 4
    mode: Literal["fast", "exact"] = "fast"

    def __post_init__(self) -> None:
        if self.width < 1:
            raise ValueError(f"width must be >= 1, got {self.width}")


@dataclass(frozen=True)
class Outer:
    name: str = "x"
    rate: float = 0.1
    betas: tuple[float, float] = (0.9, 0.999)
    sizes: tuple[int, ...] = ()
    limit: int | None = None
    flag: bool = False
    inner: Inner = field(default_factory=Inner)


def test_a_config_is_built_with_tuples_and_nested_configs() -> None:
    config = read_config(
        Outer,
        {"rate": 1, "betas": [0.5, 0.6], "sizes": [1, 2, 3], "inner": {"mode": "exact"}},
        "test config",
    )
    assert config == Outer(rate=1, betas=(0.5, 0.6), sizes=(1, 2, 3), inner=Inner(mode="exact"))
    assert read_config(Outer, {}, "test config") == Outer()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([1], r"test config must be a JSON object, got \[1\]"),
        ({"colour": 1}, r"unknown test config field\(s\): colour; valid: betas, flag, inner"),
        (
            {"inner": {"depth": 1}},
            r"unknown test config field\(s\): inner.depth; valid: inner.mode",
        ),
        ({"inner": 3}, "test config: inner must be a JSON object, got 3"),
        ({"rate": float("nan")}, "test config: rate must be a finite number, got NaN"),
        ({"rate": True}, "test config: rate must be a finite number, got true"),
        ({"limit": 2.5}, "test config: limit must be an integer or null, got 2.5"),
        ({"flag": 1}, "test config: flag must be true or false, got 1"),
        ({"name": ["x"]}, r"test config: name must be a string, got \[\"x\"\]"),
        ({"betas": [1]}, r"test config: betas must be a list of two finite numbers, got \[1\]"),
        ({"sizes": [1, "2"]}, r"test config: sizes must be a list of integers"),
        ({"inner": {"mode": "slow"}}, "test config: inner.mode must be one of 'fast', 'exact'"),
        ({"inner": {"width": 0}}, "bad test config: width must be >= 1, got 0"),
    ],
)
def test_bad_configs_are_refused_in_one_line_naming_the_field(data, message) -> None:
    with pytest.raises(GraphoptError, match=message):
        read_config(Outer, data, "test config")


def test_brkga_presets_go_through_the_loader(tmp_path, monkeypatch) -> None:
    assert BRKGAConfig.preset("tuned").population == 100
    (tmp_path / "brkga-odd.json").write_text(json.dumps({"config": {"colour": 1}}))
    monkeypatch.setattr(brkga.resources, "files", lambda package: tmp_path)
    brkga._preset.cache_clear()
    try:
        with pytest.raises(SolverError, match=r"unknown BRKGA preset brkga-odd.json field"):
            BRKGAConfig.preset("odd")
    finally:
        brkga._preset.cache_clear()


@dataclass(frozen=True)
class Checked:
    depth: int = 1
    width: int = 1

    def __post_init__(self) -> None:
        if self.depth < 1:
            raise FieldError("depth", f"must be >= 1, got {self.depth}")
        if self.width > self.depth:
            raise ValueError("width must not exceed depth")


@dataclass(frozen=True)
class Holder:
    checked: Checked = field(default_factory=Checked)


@pytest.mark.parametrize(
    ("data", "names", "message"),
    [
        ({"checked": {"depth": 0}}, None, r"^test config: checked.depth must be >= 1, got 0$"),
        ({"checked": {"depth": 0}}, {"checked.depth": "old_depth"}, r"^test config: old_depth "),
        ({"checked": {"depth": 1.5}}, {"checked.depth": "old_depth"}, r": old_depth must be an"),
        ({"checked": {"width": 2}}, None, r"^bad test config: width must not exceed depth$"),
        ({"checked": {"width": 2}}, {"checked": "check"}, r"^bad check: width must not exceed"),
    ],
)
def test_fields_are_named_by_path_or_by_the_names_given(data, names, message) -> None:
    """A field a config's own check refuses (`FieldError`) is named like a mistyped one."""
    with pytest.raises(GraphoptError, match=message):
        read_config(Holder, data, "test config", names=names)
