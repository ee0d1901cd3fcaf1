"""The tracker: budgets, phases, best-so-far and trace."""

from __future__ import annotations

import numpy as np
import pytest

from builders import tiny
from degenerate_graphs import SMALL
from graphopt.costmodels.machine import Machine
from graphopt.ir.solution import topological_schedule
from graphopt.solvers.base import Budget, BudgetExhausted, Problem, SolverError, Tracker
from graphopt.solvers.registry import make_solver


def test_phases_split_the_budget_and_the_trace_keeps_improvements() -> None:
    graph = tiny()
    problem = Problem(graph, Machine(2))  # on one device, tiny has one solution (see below)
    solution = topological_schedule(graph, np.zeros(graph.n_ops, dtype=np.int32), 2)
    tracker = Tracker(problem, Budget(evaluations=100))
    above = int(problem.lower_bound)  # claimed peaks above the bound, which would end the search
    peaks = np.array([600 + above, 0])
    with tracker.phase(0.5):
        while True:
            tracker.offer(solution.placement, solution.order, peaks - tracker.evaluations, 1.0)
    assert tracker.evaluations == 50
    with pytest.raises(BudgetExhausted):
        while True:
            tracker.offer(solution.placement, solution.order, peaks, 1.0)
    assert tracker.evaluations == 100
    assert tracker.trace.evaluations == list(range(1, 51))
    best = tracker.trace.best_at(np.array([0, 1, 50, 100])).tolist()[1:]
    assert best == [600.0 + above, 551.0 + above, 551.0 + above]


def test_budget_needs_a_limit_and_pins_need_real_ops() -> None:
    with pytest.raises(SolverError, match="needs evaluations or seconds"):
        Budget()
    with pytest.raises(SolverError, match="budget seconds must be a finite number > 0"):
        Budget(seconds=0)
    with pytest.raises(SolverError, match="pinned has 2 entries for 3 ops"):
        Problem(tiny(), Machine(2), pinned=np.array([0, 1]))


@pytest.mark.parametrize(
    ("name", "devices", "pins", "one"),
    [
        ("empty", 1, None, True),
        ("empty", 3, None, True),
        ("one-op", 1, None, True),
        ("one-op", 2, None, False),
        ("one-op", 2, [1], True),
        ("chain-of-two", 1, None, True),
        ("chain-of-two", 2, [1, 1], True),
        ("chain-of-two", 2, [0, 1], False),
        ("chain-of-two", 2, [0, -1], False),
        ("no-edges", 1, None, False),
        ("only-zero-size", 1, None, False),
    ],
)
def test_problems_with_one_solution(name, devices, pins, one) -> None:
    graph = SMALL[name]()
    pinned = None if pins is None else np.array(pins)
    assert Problem(graph, Machine(devices), pinned=pinned).has_one_solution is one
    assert Problem(tiny(), Machine(1)).has_one_solution  # a -> b -> c, and a -> c


@pytest.mark.parametrize("objective", ["peak-memory", "makespan"])
def test_a_search_stops_at_the_only_solution(objective) -> None:
    # Under a minute of time budget, the first evaluation ends every search: nothing is left.
    problem = Problem(SMALL["chain-of-two"](), Machine(1), objective)
    for name in ("brkga", "local-search", "annealing", "random-search"):
        result = make_solver(name).solve(problem, Budget(seconds=60.0))
        assert result.seconds < 10 and result.status == "optimal", name
        assert result.lower_bound == result.value == result.trace.value[-1], name
    many = Problem(SMALL["chain-of-two"](), Machine(2), objective)
    assert make_solver("brkga").solve(many, Budget(300, stop_at_bound=False)).evaluations == 300
