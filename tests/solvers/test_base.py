"""The tracker: budgets, phases, best-so-far and trace."""

from __future__ import annotations

import numpy as np
import pytest

from builders import tiny
from graphopt.costmodels.machine import Machine
from graphopt.ir.solution import topological_schedule
from graphopt.solvers.base import Budget, BudgetExhausted, Problem, SolverError, Tracker


def test_phases_split_the_budget_and_the_trace_keeps_improvements() -> None:
    graph = tiny()
    problem = Problem(graph, Machine(1))
    solution = topological_schedule(graph, np.zeros(graph.n_ops, dtype=np.int32), 1)
    tracker = Tracker(problem, Budget(evaluations=100))
    peaks = np.array([600])
    with tracker.phase(0.5):
        while True:
            tracker.offer(solution.placement, solution.order, peaks - tracker.evaluations, 1.0)
    assert tracker.evaluations == 50
    with pytest.raises(BudgetExhausted):
        while True:
            tracker.offer(solution.placement, solution.order, peaks, 1.0)
    assert tracker.evaluations == 100
    assert tracker.trace.evaluations == list(range(1, 51))
    assert tracker.trace.best_at(np.array([0, 1, 50, 100])).tolist()[1:] == [600.0, 551.0, 551.0]


def test_budget_needs_a_limit_and_pins_need_real_ops() -> None:
    with pytest.raises(SolverError, match="needs evaluations or seconds"):
        Budget()
    with pytest.raises(SolverError, match="budget seconds must be a finite number > 0"):
        Budget(seconds=0)
    with pytest.raises(SolverError, match="pinned has 2 entries for 3 ops"):
        Problem(tiny(), Machine(2), pinned=np.array([0, 1]))
