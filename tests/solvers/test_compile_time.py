"""A search's time budget is for searching: numba compiles during it are left out and noted."""

from __future__ import annotations

from collections.abc import Sequence

import numba
import numpy as np

from graphopt.costmodels.machine import Machine
from graphopt.ir.generators import generate
from graphopt.ir.solution import Solution
from graphopt.solvers.base import Budget, Problem, Solver, Tracker
from graphopt.solvers.list_scheduling import HeftScheduler


class CompilesThenOffers(Solver):
    """Compiles a fresh kernel (no cache, so it compiles in every process), then offers once."""

    name = "compiles"

    def run(
        self,
        problem: Problem,
        tracker: Tracker,
        rng: np.random.Generator,
        initial: Sequence[Solution],
    ) -> None:
        @numba.njit(cache=False)
        def total(values: np.ndarray) -> float:
            result = 0.0
            for value in values:
                result += value
            return result

        self.before = tracker.seconds
        total(np.arange(3.0))
        self.after = tracker.seconds
        start = HeftScheduler().solve(problem, Budget(evaluations=1)).solution
        tracker.offer_best(start.placement, start.order, 0, 1.0, 1)


def test_compile_seconds_are_left_out_of_the_budget_and_noted() -> None:
    problem = Problem(generate("layered", 10, seed=0), Machine(n_devices=2), "makespan")
    solver = CompilesThenOffers()
    result = solver.solve(problem, Budget(seconds=30.0))
    notes = result.solution.solver["notes"]
    compiled = [note for note in notes if note.startswith("numba compiled 1 kernel in")]
    assert compiled, notes
    seconds = float(compiled[0].split(" in ")[1].split(" s ")[0])
    assert seconds > 0.0
    # The search's clock did not move by the compile's seconds (it moved by the call only).
    assert solver.after - solver.before < seconds
