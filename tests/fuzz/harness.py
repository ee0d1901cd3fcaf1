"""What a fuzzed reader may do with a mutant, and the checks that say so (issue 15, item 1).

A reader handed a mutant must either accept it, as a valid input (the caller checks that: e.g.
the fast and reference scorers agree on it), or refuse it with the project's own error: a
`GraphoptError` whose message is one non-empty line naming the item and the rule. Anything else
is a defect: another exception (a traceback for a user), a hang, a crash of the process, a
warning printed on stderr, or a message that spreads over several lines or carries control
characters into a terminal.

`outcome` runs one in-process call and classifies it; `run_cli` runs the `graphopt` command in
a subprocess and checks its exit status and stderr (`run_in_process` runs it in this process, for
`check_cli` to check); `assert_scored_identically` is the oracle for an accepted graph.
`fuzz_settings` gives every fuzz test the same deterministic hypothesis set-up.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import threading
import unicodedata
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import HealthCheck, event, settings
from hypothesis.control import currently_in_test_context

from graphopt.cli import run
from graphopt.costmodels._reference import reference_score
from graphopt.costmodels.machine import Machine
from graphopt.costmodels.score import Scorer
from graphopt.errors import GraphoptError
from graphopt.ir.graph import Graph
from graphopt.ir.solution import random_schedule, topological_schedule

FAST_EXAMPLES = 100
"""Mutants per fast-tier test (in `make test`)."""

SLOW_EXAMPLES = int(os.environ.get("GRAPHOPT_FUZZ_SLOW_EXAMPLES", "10000"))
"""Mutants per slow-tier test (`pytest -m slow`); the variable shortens a trial run."""

TIME_LIMIT = 60.0
"""Seconds one in-process call may take before it counts as a hang."""

# Characters that break a message's single line or reach the terminal as controls: C0 / C1
# controls (newline, carriage return, escape, NUL, ...), lone surrogates (not encodable as
# UTF-8), and Unicode's line and paragraph separators (str.splitlines breaks on them).
_FORBIDDEN_CATEGORIES = frozenset({"Cc", "Cs", "Zl", "Zp"})


# Warnings Python does not print by default; any other warning is an extra line on stderr.
_HIDDEN_WARNINGS = (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning)


class Defect(AssertionError):
    """A mutant ended in a traceback, a hang, a crash or a malformed message: a bug to fix."""


class _Hang(BaseException):
    """Raised by the alarm inside a call that runs too long; a BaseException, so that code
    under test catching `Exception` cannot turn a hang into a refusal."""


def fuzz_settings(examples: int) -> settings:
    """Deterministic hypothesis settings for a fuzz test of `examples` mutants.

    Derandomized and without the example database, so every run draws the same mutants; no
    deadline (a mutant may legitimately take a while to refuse), and the health checks that
    large seed inputs trip are off.
    """
    return settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.large_base_example,
            HealthCheck.filter_too_much,
            HealthCheck.function_scoped_fixture,
        ],
    )


def record(result: Outcome) -> None:
    """Counts an outcome in hypothesis's statistics (`--hypothesis-show-statistics`)."""
    if currently_in_test_context():
        label = "accepted" if result.accepted else f"refused ({type(result.error).__name__})"
        event(label)


def check_message(message: str, where: str = "error") -> None:
    """Raises Defect unless `message` is one non-empty line without control characters."""
    if not message.strip():
        raise Defect(f"{where}: empty message")
    bad = sorted({c for c in message if unicodedata.category(c) in _FORBIDDEN_CATEGORIES})
    if bad:
        raise Defect(f"{where}: message holds line breaks or controls {bad!r}: {message!r}")


@dataclass(frozen=True)
class Outcome:
    """What a reader did with a mutant.

    Attributes:
        value: what the call returned (None when refused).
        error: the project's error it raised (None when accepted).
    """

    value: Any = None
    error: GraphoptError | None = None

    @property
    def accepted(self) -> bool:
        """True when the call returned."""
        return self.error is None


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raises `_Hang` inside the block after `seconds` (main thread only; elsewhere no limit)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def alarm(signum: int, frame: Any) -> None:
        raise _Hang

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def outcome(
    call: Callable[..., Any], *args: Any, limit: float = TIME_LIMIT, **kwargs: Any
) -> Outcome:
    """Runs `call(*args, **kwargs)` and classifies it.

    Returns:
        Outcome(value) when it returns, Outcome(error=...) when it raises a GraphoptError with a
        one-line message.

    Raises:
        Defect: any other exception, a malformed message, a warning Python would print (a
            second line on stderr), or more than `limit` seconds.
    """
    name = getattr(call, "__qualname__", repr(call))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with time_limit(limit):
                value = call(*args, **kwargs)
        except GraphoptError as error:
            check_message(str(error), f"{name} raised {type(error).__name__}")
            value, refusal = None, error
        except _Hang:
            raise Defect(f"{name} ran for more than {limit} s") from None
        except Exception as error:
            raise Defect(f"{name} raised {type(error).__name__}: {error!r}"[:2000]) from error
        else:
            refusal = None
    _check_warnings(caught, name)
    return Outcome(value=value, error=refusal)


def _check_warnings(caught: list[warnings.WarningMessage], name: str) -> None:
    """Raises Defect for the first warning Python would print (a line on stderr)."""
    shown = [w for w in caught if not issubclass(w.category, _HIDDEN_WARNINGS)]
    if shown:
        warning = shown[0]
        raise Defect(f"{name} warned ({warning.category.__name__}: {warning.message})"[:2000])


def graphopt_command() -> list[str]:
    """The command line that runs this environment's `graphopt`."""
    return [sys.executable, "-m", "graphopt"]


def run_cli(
    *args: Any,
    expected: Sequence[int] = (0, 2),
    timeout: float = 300.0,
    cwd: str | Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """Runs `graphopt ARGS` in a subprocess and checks how it ended.

    Checks: it ends within `timeout` seconds, with an exit status in `expected` (a signal, e.g.
    a segmentation fault, is never expected), no traceback on either stream, and on status 2
    exactly one line on stderr, `error: ` and a well-formed message.

    Raises:
        Defect: naming the command and what went wrong, with its stderr.
    """
    command = [*graphopt_command(), *(str(a) for a in args)]
    shown = " ".join(command[2:])
    try:
        result = subprocess.run(
            command,
            capture_output=True,
            encoding="utf-8",
            errors="backslashreplace",
            timeout=timeout,
            cwd=cwd,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise Defect(f"`{shown}` ran for more than {timeout} s") from None
    check_cli(result, expected, shown)
    return result


def run_in_process(
    args: Sequence[str], limit: float = TIME_LIMIT
) -> subprocess.CompletedProcess[str]:
    """Runs `graphopt ARGS` in this process through the entry point's own error handling
    (`graphopt.cli.run`), capturing its status, stdout and stderr, for `check_cli`.

    Raises:
        Defect: more than `limit` seconds, an exception or exit escaping `run` (whose last
            resort must turn every one into a status), or a warning Python would print.
    """
    shown = " ".join(args)
    out, err = io.StringIO(), io.StringIO()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with redirect_stdout(out), redirect_stderr(err), time_limit(limit):
                code = run(list(args))
        except _Hang:
            raise Defect(f"`{shown}` ran for more than {limit} s") from None
        except (Exception, SystemExit) as error:
            raise Defect(
                f"`{shown}` let {type(error).__name__} escape: {error!r}"[:2000]
            ) from error
    _check_warnings(caught, f"`{shown}`")
    return subprocess.CompletedProcess(["graphopt", *args], code, out.getvalue(), err.getvalue())


def check_cli(
    result: subprocess.CompletedProcess[str], expected: Sequence[int], shown: str
) -> None:
    """The checks of `run_cli` on a finished command."""
    stderr = result.stderr
    if "Traceback" in stderr or "Traceback" in result.stdout:
        raise Defect(f"`{shown}` printed a traceback:\n{stderr[-3000:]}")
    if result.returncode not in expected:
        raise Defect(
            f"`{shown}` exited with {result.returncode} (expected {sorted(expected)}):\n"
            f"{stderr[-3000:]}"
        )
    if result.returncode == 2:
        if not stderr.startswith("error: ") or stderr.count("\n") != 1 or not stderr.endswith("\n"):
            raise Defect(f"`{shown}` exit 2 without exactly one 'error: ' line: {stderr!r}")
        check_message(stderr[len("error: ") : -1], f"`{shown}`")


def assert_scored_identically(graph: Graph, seed: int = 0) -> None:
    """Scores valid solutions of an accepted graph with the fast and the reference scorer.

    Two machines (free transfers in sync mode; latency, bandwidth and a capacity in async
    mode) and two solutions (a random placement in topological order, and a random valid
    order): every number must be identical, as the contract requires of a valid graph (a NaN
    speedup is a defect too).

    Raises:
        Defect: when a scorer fails on the graph or the two disagree.
    """
    rng = np.random.default_rng(seed)
    machines = (
        Machine(n_devices=2),
        Machine(n_devices=3, capacity=2**40, latency=1e-5, bandwidth=2.5e10, mode="async"),
    )
    for machine in machines:
        placement = rng.integers(0, machine.n_devices, graph.n_ops).astype(np.int32)
        solutions = (
            topological_schedule(graph, placement, machine.n_devices),
            random_schedule(graph, placement, machine.n_devices, rng),
        )
        for solution in solutions:
            try:
                fast = Scorer(graph, machine).score(solution)
                reference = reference_score(graph, solution, machine)
            except Exception as error:
                raise Defect(f"scoring accepted graph {graph!r} raised {error!r}") from error
            if (
                fast.peak_memory_per_device != reference.peak_memory_per_device
                or fast.makespan != reference.makespan
                or fast.speedup != reference.speedup
                or fast.feasible != reference.feasible
            ):
                raise Defect(f"fast {fast} != reference {reference} on accepted graph {graph!r}")
