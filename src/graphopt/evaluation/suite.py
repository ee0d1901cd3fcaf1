"""The one protocol of `graphopt bench`: a suite declares its options and runs from them.

A suite is an entry of the command's table (`graphopt.cli.bench.SUITES`): its help, the options it
takes (fields of `BenchSettings`) and where its run function lives, `module:function`, imported
only when the suite runs, so that naming a suite loads neither torch nor the paper's code. Every
run function has one signature, `run(settings, progress) -> Report`: it reads the options it
declared from the settings, runs into `settings.output_dir`, and says what it wrote.

A cell that fails (one method on one graph raising) is recorded with its one-line error and the
suite goes on (`Failures`): one solver refusing one graph must not lose hours of other runs. The
report lists every failed cell, and the command names them and exits 1 after the others finished.

This module imports nothing heavy: the command line builds its options from `BenchSettings`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from graphopt._messages import raised
from graphopt.errors import GraphoptError

T = TypeVar("T")

Progress = Callable[[int, int, str], None]
"""Told (runs done, runs in all or 0 while not known, what runs now)."""


@dataclass(frozen=True)
class BenchSettings:
    """Every `graphopt bench` option's value, its default where not given (`--help` says each).

    A suite reads the fields it declares (`Suite.options`); the command refuses any other option
    given to it, so a field a suite does not declare is always at its default here.
    """

    suite: str = ""
    """The suite's name as given: a named suite, `dataset:DIR:SPLIT[:N]` or a folder."""
    output_dir: Path = Path("out/bench")
    command: str = ""
    """The command line, recorded in the reports so that results say how they were made."""
    solvers: str = "brkga,compiler-best,gp-metis"
    objective: str | None = None
    devices: int | None = None
    capacity: str | None = None
    capacity_fraction: float | None = None
    budget: int = 5000
    time_limit: float | None = None
    budgets: str | None = None
    histogram: str | None = None
    seeds: int | None = None
    exact_time: float = 10.0
    exact_max_ops: int | None = None
    policy: str | None = None
    ppo_policy: str | None = None
    steps: int | None = None
    ppo_steps: int = 0
    samples: int = 1000
    graphs_per_family: int = 4
    models: str | None = None
    policies: str | None = None
    sa_time: bool = False

    def given(self, *options: str, **renamed: str) -> dict[str, Any]:
        """The options given among `options` (and `renamed`'s keys), as a suite's fields.

        A paper suite's settings take these over their defaults: a comma-separated list
        (`models`, `policies`) becomes a tuple of names, `devices` a one-count tuple; a keyword
        of `renamed` gives the field an option sets (`models="families"`).
        """
        fields = {}
        for option, name in [*((option, option) for option in options), *renamed.items()]:
            value = getattr(self, option)
            if value is None:
                continue
            if option in ("models", "policies"):
                value = tuple(part.strip() for part in value.split(",") if part.strip())
            elif option == "devices":
                value = (value,)
            fields[name] = value
        return fields


@dataclass(frozen=True)
class Report:
    """What a suite ran and wrote, for the command to print.

    Attributes:
        text: what the command prints (the title and the tables or summary lines).
        summary: what `--json` prints as the summary: the table's rows or the summary lines.
        files: every file written.
        folder: the suite's report folder, whose summary.md lists each failed run.
        failed: one line per failed run (cell), in run order.
        runs: runs (cells) made, failed ones included.
    """

    text: str
    summary: Any
    files: list[Path]
    folder: Path
    failed: list[str] = field(default_factory=list)
    runs: int = 0


SuiteRun = Callable[[BenchSettings, Progress], Report]
"""A suite's run function: the settings and a progress callback to its report."""


@dataclass(frozen=True)
class Suite:
    """One `graphopt bench` suite (or family of graph suites) in the command's table.

    Attributes:
        help: what it measures, in a line.
        options: the `BenchSettings` fields it reads; the command refuses the others.
        runner: `module:function` of its `SuiteRun`, imported when it runs.
        refusals: option -> the line that refuses it, where a generic one would mislead.
    """

    help: str
    options: frozenset[str]
    runner: str
    refusals: dict[str, str] = field(default_factory=dict)

    def run(self, settings: BenchSettings, progress: Progress) -> Report:
        """Imports the suite's run function and runs it."""
        module, _, name = self.runner.partition(":")
        run: SuiteRun = getattr(importlib.import_module(module), name)
        return run(settings, progress)


def failure_text(error: Exception) -> str:
    """A failed run's error on one line: a user error's message, else the exception's type too."""
    return str(error) if isinstance(error, GraphoptError) else f"internal error: {raised(error)}"


class Failures:
    """The cells of a suite that failed, each recorded as one line, and the cells run.

    `run` runs one cell and, when it raises, records it so that the suite goes on. With
    `record=False` a failing cell raises instead: what a caller of a suite's functions gets
    without a `Failures` of its own.
    """

    def __init__(self, record: bool = True) -> None:
        self.record = record
        self.lines: list[str] = []
        self.runs = 0

    def run(self, what: str, cell: Callable[[], T]) -> T | None:
        """`cell()`, or None after recording `what: error` when it raises.

        `what` names the cell as `method on graph (details)`.
        """
        self.runs += 1
        if not self.record:
            return cell()
        try:
            return cell()
        except Exception as error:  # recorded, and the suite goes on
            self.lines.append(f"{what}: {failure_text(error)}")
            return None

    @classmethod
    def or_raising(cls, failures: Failures | None) -> Failures:
        """`failures`, or one that raises at the first failing cell where the caller gave none."""
        return cls(record=False) if failures is None else failures


def check_counts(
    suite: str, devices: Sequence[int], allowed: tuple[int, int | None], **counts: int
) -> None:
    """Refuses a paper suite's settings out of range, in one line naming the suite.

    Device counts must lie in `allowed` (lowest, highest or None), `counts` (seeds, steps, ...)
    be at least 1.

    Raises:
        GraphoptError: the first rule broken.
    """
    low, high = allowed
    if not devices or min(devices) < low or (high is not None and max(devices) > high):
        span = f">= {low}" if high is None else f"in {low}..{high}"
        raise GraphoptError(f"{suite}: device counts must be {span}, got {devices}")
    if any(value < 1 for value in counts.values()):
        names = [name.replace("_", " ") for name in counts]
        listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
        raise GraphoptError(f"{suite}: {listed} must be >= 1")
