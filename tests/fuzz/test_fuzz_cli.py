"""Fuzzing command-line option values (issue 15, item 1).

Seeds: valid command lines of every command that reads options (generate, info, score, optimize,
bench, zoo list, solvers). A mutant replaces option values with edge values (numbers out of range,
NaN, 1e400, empty or non-ASCII text, line breaks, other options' words), misspells an option,
drops, repeats or inserts tokens. The command runs in this process through `graphopt.cli.run`,
the entry point's own error handling, and must end with a status the command documents, with
exactly one `error: ` line on stderr when it refuses (status 2), and never with status 70 (a bug).

Options that set how much work a command does (`generate -n`, `optimize --time`, `bench
--budget`, ...) are re-set to small values after the mutation, so that a legal but huge request
does not turn the fuzz run into a benchmark; their limits have unit tests of their own.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fuzz.harness import FAST_EXAMPLES, SLOW_EXAMPLES, Defect, check_message, fuzz_settings
from fuzz.mutators import EDGE_STRINGS, NUMBER_TEXTS, near_miss
from fuzz.test_fuzz_graphs import HAND_MADE
from graphopt.cli import run
from graphopt.ir.io import graph_from_json, write_graph, write_solution
from graphopt.optimize import optimize

EXPECTED = frozenset({0, 1, 2, 3, 4})
"""Exit statuses the commands document (docs/format.md): success, claims disagree, invalid
input, over capacity, no solution. 70 (internal error) or anything else is a defect."""

OPTION_WORDS = (
    "--devices",
    "--capacity",
    "--latency",
    "--bandwidth",
    "--mode",
    "--objective",
    "--solver",
    "--budget",
    "--time",
    "--seed",
    "--pin",
    "--json",
    "--reference",
    "--param",
    "--solvers",
    "--seeds",
    "--exact-time",
    "--exact-max-ops",
    "--budgets",
    "--histogram",
    "-o",
    "-n",
    "-p",
    "peak-memory",
    "makespan",
    "sync",
    "async",
    "16GiB",
    "1e9",
    "brkga",
    "cp-sat",
    "w=0",
    "mm=1",
)


@pytest.fixture(scope="module")
def folder() -> Iterator[Path]:
    """The seeds' files, and the working directory, so that a mutated relative output path
    (`-o ''`, `-o 1`) writes into this temporary folder, not the repository."""
    with tempfile.TemporaryDirectory() as name, contextlib.chdir(name):
        path = Path(name)
        graph = graph_from_json(HAND_MADE)
        write_graph(graph, path / "g.json")
        (path / "suite").mkdir()
        write_graph(graph, path / "suite" / "g.json")
        result = optimize(graph, evaluations=50)
        write_solution(graph, result.solution, path / "s.json")
        yield path


def seeds(folder: Path) -> list[tuple[list[str], list[str]]]:
    """(valid command line, options appended after the mutation to bound its work)."""
    g, s, out = str(folder / "g.json"), str(folder / "s.json"), str(folder / "out.json")
    return [
        (["generate", "layered", "-n", "12", "--seed", "3", "-p", "n_layers=3", "-o", out], []),
        (["info", g, "--json"], []),
        (
            [
                "score", g, s, "--devices", "2", "--capacity", "16GiB", "--latency", "0.1",
                "--bandwidth", "1e9", "--mode", "async", "--json",
            ],
            [],
        ),
        (
            [
                "optimize", g, "-o", out, "--objective", "makespan", "--devices", "2",
                "--capacity", "1MiB", "--latency", "0", "--bandwidth", "1e9", "--mode", "sync",
                "--solver", "brkga", "--budget", "40", "--seed", "1", "--pin", "w=0", "--json",
            ],
            ["--time", "2"],
        ),
        (
            [
                "bench", str(folder / "suite"), "--solvers", "brkga,heft", "--objective",
                "makespan", "--devices", "2", "--capacity", "1GiB", "--exact-max-ops", "3",
                "--budgets", "10,20", "-o", str(folder / "bench"), "--json",
            ],
            ["--budget", "20", "--seeds", "1", "--exact-time", "1"],
        ),
        (["zoo", "list", "--json"], []),
        (["solvers"], []),
    ]  # fmt: skip


@st.composite
def mutated_command(draw: st.DrawFn, argv: list[str]) -> list[str]:
    """`argv` after 1 to 3 token-level mutations."""
    tokens = list(argv)
    values = st.one_of(
        st.sampled_from([*NUMBER_TEXTS, *EDGE_STRINGS, *OPTION_WORDS]), st.text(max_size=12)
    )
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["value", "misspell", "drop", "repeat", "insert"]))
        at = draw(st.integers(1, max(len(tokens) - 1, 1)))
        if kind == "value" or at >= len(tokens):
            tokens[min(at, len(tokens) - 1)] = draw(values)
        elif kind == "misspell":
            tokens[at] = draw(near_miss(tokens[at]))
        elif kind == "drop":
            del tokens[at]
        elif kind == "repeat":
            tokens[at:at] = tokens[at : at + 2]
        else:
            tokens[at:at] = [draw(st.sampled_from(OPTION_WORDS)), draw(values)]
    return tokens


def check_command(folder: Path, capsys: pytest.CaptureFixture[str], data: st.DataObject) -> None:
    argv, bounds = data.draw(st.sampled_from(seeds(folder)))
    command = [*data.draw(mutated_command(argv)), *bounds]
    capsys.readouterr()
    code = run(command)
    err = capsys.readouterr().err
    if code not in EXPECTED or "Traceback" in err:
        raise Defect(f"graphopt {command} exited {code}: {err[-2000:]}")
    if code == 2:
        if not err.startswith("error: ") or err.count("\n") != 1:
            raise Defect(f"graphopt {command}: not one 'error: ' line: {err!r}")
        check_message(err[len("error: ") : -1], f"graphopt {command}")


@fuzz_settings(FAST_EXAMPLES)
@given(data=st.data())
def test_command_line_mutants(folder: Path, capsys: pytest.CaptureFixture[str], data) -> None:
    check_command(folder, capsys, data)


@pytest.mark.slow
@fuzz_settings(SLOW_EXAMPLES)
@given(data=st.data())
def test_command_line_mutants_long(folder: Path, capsys: pytest.CaptureFixture[str], data) -> None:
    check_command(folder, capsys, data)
