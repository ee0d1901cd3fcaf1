"""The default solver: fast heuristics, then BRKGA seeded with their best, then local search.

Compilers keep the best of a portfolio of heuristics (Inductor's memory.py); BRKGA accepts known
solutions in its initial population (paper 001 section 3.2). Here the compiler schedulers (peak
memory) or HEFT and critical-path list scheduling (makespan) cost a handful of evaluations,
BRKGA spends half of the rest starting from their best, and local search with incremental
evaluation (random restarts) spends the remainder; the best of all is kept, so the result is
never worse than any of those heuristics. BRKGA is the robust half, local search the half that
wins big on deep layered graphs; neither dominates the other (README, performance section).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

import numpy as np

from graphopt.ir.solution import Solution
from graphopt.solvers.base import Objective, Problem, Solver, Tracker
from graphopt.solvers.brkga import BRKGA, BRKGAConfig
from graphopt.solvers.list_scheduling import CriticalPathScheduler, HeftScheduler
from graphopt.solvers.local_search import LocalSearch
from graphopt.solvers.memory_schedulers import CompilerBestScheduler


class Portfolio(Solver):
    """Heuristics for the objective, then BRKGA from their best solution.

    Args:
        config: BRKGA hyper-parameters (default: the tuned preset).
        brkga_share: share of the budget left after the heuristics that BRKGA gets.
    """

    name = "auto"

    def __init__(self, config: BRKGAConfig | None = None, brkga_share: float = 0.7) -> None:
        self.config = config or BRKGAConfig.preset("tuned")
        self.brkga_share = brkga_share

    def options(self) -> dict[str, Any]:
        """The BRKGA configuration and budget share it runs with."""
        return {**asdict(self.config), "brkga_share": self.brkga_share}

    def run(
        self,
        problem: Problem,
        tracker: Tracker,
        rng: np.random.Generator,
        initial: Sequence[Solution],
    ) -> None:
        """Runs the heuristics, BRKGA and local search in turn on the shared tracker."""
        if problem.objective is Objective.PEAK_MEMORY:
            heuristics: list[Solver] = [CompilerBestScheduler()]
        else:
            heuristics = [HeftScheduler(), CriticalPathScheduler()]
        for heuristic in heuristics:
            heuristic.run(problem, tracker, rng, ())
        with tracker.phase(self.brkga_share):
            BRKGA(self.config).run(problem, tracker, rng, [*initial, *_best(problem, tracker)])
        LocalSearch().run(problem, tracker, rng, ())


def _best(problem: Problem, tracker: Tracker) -> list[Solution]:
    """The tracker's best solution so far, as a list of zero or one."""
    if tracker.best_placement is None or tracker.best_order is None:
        return []
    return [Solution(tracker.best_placement, tracker.best_order, problem.machine.n_devices)]
