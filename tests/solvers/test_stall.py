"""The default budget's stall rule: a search that stops improving ends early, and says so."""

from __future__ import annotations

import importlib
from collections.abc import Sequence

import numpy as np
import pytest

from graphopt.costmodels.machine import Machine
from graphopt.ir.generators import generate
from graphopt.ir.solution import Solution
from graphopt.optimize import DEFAULT_SECONDS, DEFAULT_STALL, optimize
from graphopt.solvers import base
from graphopt.solvers.base import Budget, Problem, Solver, SolverError, Stall, Tracker
from graphopt.solvers.list_scheduling import HeftScheduler
from graphopt.solvers.portfolio import Portfolio
from strategies import with_fusion

optimize_module = importlib.import_module("graphopt.optimize")  # the package exports the function


class Clock:
    """A stand-in for the `time` module whose perf_counter the test advances (and each read
    advances by `tick`, so a search that reads it often sees time pass)."""

    def __init__(self) -> None:
        self.now = 100.0
        self.tick = 0.0

    def perf_counter(self) -> float:
        self.now += self.tick
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(base, "time", fake)
    return fake


@pytest.fixture(scope="module")
def problem() -> Problem:
    return Problem(generate("layered", 12, seed=0), Machine(n_devices=2), "makespan")


def _start(problem: Problem) -> tuple[np.ndarray, np.ndarray]:
    result = HeftScheduler().solve(problem, Budget(evaluations=10))
    return result.solution.placement, result.solution.order


class Scripted(Solver):
    """Offers one candidate every 0.1 s of the fake clock, improving until `improve_until`."""

    name = "scripted"

    def __init__(self, clock: Clock, improve_until: float, phases: Sequence[float] = ()) -> None:
        self.clock = clock
        self.improve_until = improve_until
        self.phases = phases
        self.offered_in: list[tuple[int, float]] = []

    def _offer_forever(self, problem: Problem, tracker: Tracker, part: int) -> None:
        placement, order = _start(problem)
        while True:
            self.clock.now += 0.1
            value = 1.0
            if tracker.seconds <= self.improve_until:
                value = 1.0 - 1e-3 * tracker.seconds
            self.offered_in.append((part, tracker.seconds))
            tracker.offer_best(placement, order, 0, value, 1)

    def run(
        self,
        problem: Problem,
        tracker: Tracker,
        rng: np.random.Generator,
        initial: Sequence[Solution],
    ) -> None:
        for part, share in enumerate(self.phases):
            with tracker.phase(share):
                self._offer_forever(problem, tracker, part)
        self._offer_forever(problem, tracker, len(self.phases))


def test_window_grows_with_elapsed_time() -> None:
    stall = Stall(min_seconds=2.0, fraction=0.25)
    assert stall.window(0.0) == 2.0
    assert stall.window(4.0) == 2.0
    assert stall.window(20.0) == 5.0


@pytest.mark.parametrize(
    ("min_seconds", "fraction"), [(0.0, 0.25), (-1.0, 0.25), (1.0, 1.0), (1.0, -0.1)]
)
def test_bad_stall_is_refused(min_seconds: float, fraction: float) -> None:
    with pytest.raises(SolverError):
        Stall(min_seconds=min_seconds, fraction=fraction)


def test_a_stalled_search_ends_early_and_says_why(clock: Clock, problem: Problem) -> None:
    solver = Scripted(clock, improve_until=3.0)
    result = solver.solve(problem, Budget(seconds=10.0, stall=Stall(1.0, 0.25)))
    # The last improvement is at 3.0 s: the window is then max(1, 0.25 t), so the search ends
    # at the first offer more than 1 s later (t = 4.1 s), far before its 10 s.
    assert result.seconds == pytest.approx(4.1)
    assert result.solution.solver["stopped"] == "stalled"
    assert any(
        "no improvement in the last 1.1 s" in note for note in result.solution.solver["notes"]
    )


def test_the_window_grows_after_a_long_search(clock: Clock, problem: Problem) -> None:
    solver = Scripted(clock, improve_until=8.0)
    result = solver.solve(problem, Budget(seconds=30.0, stall=Stall(1.0, 0.25)))
    # Quiet from 8.0 s: ends at the first t with t - 8 > t / 4, i.e. t > 10.67.
    assert result.seconds == pytest.approx(10.7)
    assert result.solution.solver["stopped"] == "stalled"


def test_without_a_stall_rule_the_whole_budget_is_spent(clock: Clock, problem: Problem) -> None:
    result = Scripted(clock, improve_until=3.0).solve(problem, Budget(seconds=10.0))
    assert 10.0 <= result.seconds < 10.0 + 0.1 + 1e-6  # the first offer at or after 10 s
    assert result.solution.solver["stopped"] == "budget"
    assert "notes" not in result.solution.solver


def test_a_stalled_phase_hands_over_to_the_next(clock: Clock, problem: Problem) -> None:
    solver = Scripted(clock, improve_until=0.5, phases=(0.3, 0.5))
    result = solver.solve(problem, Budget(seconds=100.0, stall=Stall(1.0, 0.25)))
    parts = [part for part, _ in solver.offered_in]
    assert sorted(set(parts)) == [0, 1, 2]
    ends = [max(t for part, t in solver.offered_in if part == p) for p in (0, 1, 2)]
    # Phase 0 stalls 1 s after its last improvement (0.5 s); each later phase, which never
    # improves, gets a whole window of its own from its start.
    assert ends[0] == pytest.approx(1.6)
    assert ends[1] - ends[0] == pytest.approx(1.1)
    assert ends[2] - ends[1] == pytest.approx(1.1)
    assert result.seconds == pytest.approx(ends[2])
    assert result.solution.solver["stopped"] == "stalled"


def test_an_exempt_block_is_not_ended_by_the_stall_rule(clock: Clock, problem: Problem) -> None:
    tracker = Tracker(problem, Budget(seconds=100.0, stall=Stall(1.0, 0.25)))
    placement, order = _start(problem)
    tracker.offer_best(placement, order, 0, 1.0, 1)
    with tracker.exempt_from_stall():
        for _ in range(50):
            clock.now += 0.1
            tracker.offer_best(placement, order, 0, 1.0, 1)
    assert not tracker.exhausted  # the window counts from the end of the exempt block (5 s)
    clock.now += 1.6
    assert not tracker.exhausted
    clock.now += 0.1  # 1.7 s > max(1, 0.25 x 6.7) s
    assert tracker.exhausted


def test_auto_runs_every_baseline_however_slow(
    clock: Clock, problem: Problem, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran: list[str] = []

    def slow(name: str):  # a baseline that takes 5 s of the fake clock and finds nothing new
        def run(self, problem, tracker, rng, initial) -> None:
            ran.append(name)
            clock.now += 5.0
            tracker.check()

        return run

    from graphopt.solvers import portfolio

    for cls in (portfolio.CriticalPathScheduler, portfolio.MetisSolver):
        monkeypatch.setattr(cls, "run", slow(cls.__name__))
    clock.tick = 0.05
    result = Portfolio().solve(problem, Budget(seconds=100.0, stall=Stall(1.0, 0.25)))
    assert ran == ["CriticalPathScheduler", "MetisSolver"]
    assert result.solution.solver["stopped"] == "stalled"


def test_default_optimize_stops_a_stalled_search_and_exact_time_does_not(
    problem: Problem, monkeypatch: pytest.MonkeyPatch
) -> None:
    budgets: list[Budget] = []
    solve = Solver.solve

    def spy(self, problem, budget, *args, **kwargs):
        budgets.append(budget)
        return solve(self, problem, budget, *args, **kwargs)

    monkeypatch.setattr(Solver, "solve", spy)
    optimize(problem.graph, problem.machine, "makespan", solver="heft")
    optimize(problem.graph, problem.machine, "makespan", solver="heft", seconds=3.0)
    optimize(problem.graph, problem.machine, "makespan", solver="heft", evaluations=5)
    # The time spent before the search (making the solver) comes off the seconds.
    assert budgets[0].stall == DEFAULT_STALL and budgets[0].evaluations is None
    assert DEFAULT_SECONDS - 1 < budgets[0].seconds <= DEFAULT_SECONDS
    assert budgets[1].stall is None and 2 < budgets[1].seconds <= 3.0
    assert budgets[2] == Budget(evaluations=5)


def test_cp_sat_is_never_stopped_by_the_stall_rule(problem: Problem) -> None:
    from graphopt.solvers.cpsat import CPSATSolver

    assert not CPSATSolver.stops_when_stalled
    assert Portfolio.stops_when_stalled


def test_seconds_count_the_fusing_after_the_search(monkeypatch: pytest.MonkeyPatch) -> None:
    graph = with_fusion(generate("layered", 30, seed=1), np.random.default_rng(0))
    fuse = optimize_module.apply_fusion

    def slow_fusion(*args, **kwargs):
        import time

        time.sleep(0.3)
        return fuse(*args, **kwargs)

    monkeypatch.setattr(optimize_module, "apply_fusion", slow_fusion)
    result = optimize(
        graph, Machine(n_devices=2), "makespan", solver="heft", evaluations=5, fusion="greedy"
    )
    assert result.seconds >= 0.3
    assert result.solution.solver["seconds"] == pytest.approx(result.seconds, abs=1e-5)


def test_the_cli_says_a_default_search_stopped_early(tmp_path) -> None:
    import json

    from typer.testing import CliRunner

    from graphopt.cli import app
    from graphopt.ir.io import write_graph

    write_graph(generate("layered", 30, seed=0), tmp_path / "g.json")
    args = ["optimize", str(tmp_path / "g.json"), "--objective", "makespan", "-o"]
    result = CliRunner().invoke(app, [*args, str(tmp_path / "s.json"), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["stopped"] == "stalled" and summary["seconds"] < DEFAULT_SECONDS - 1
    assert any(note.startswith("stopped after") for note in summary["notes"])
    result = CliRunner().invoke(app, [*args, str(tmp_path / "t.json"), "--time", "0.5", "--json"])
    assert json.loads(result.stdout)["stopped"] == "budget"
