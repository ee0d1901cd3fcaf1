"""The default solver: strong baselines, then BRKGA seeded with them, then local search.

Compilers keep the best of a portfolio of heuristics (Inductor's memory.py); BRKGA accepts known
solutions in its initial population (paper 001 section 3.2). Here the baselines come first:
for peak memory the compiler schedulers, the pipeline split and the memory-aware METIS and
hypergraph partitions (each with every compiler order per device); for makespan HEFT (plain,
with insertion and with lookahead), critical-path list scheduling, the runtime-balanced
partitions, and those partitions and HEFT's placements scheduled for makespan
(`placement_hints`). Each baseline's result joins
the starting points. Block search (`block_search`: whole modules and runs of ops moved between
devices) for peak memory, or critical-path search (`makespan_search`: moves on the critical
path re-list-scheduled with HEFT's insertion policy) for makespan, then spends `block_share` of
the rest climbing from the best. BRKGA
spends `brkga_share` of what is left from all of them, and local search (incremental
evaluation, single-op moves) climbs from the best found and then from each baseline in turn.
The best of all is kept, so the result is never worse than any baseline that ran, and a peak
memory search stops as soon as a solution reaches the problem's lower bound.

On real models at 2 devices with 30,000 evaluations, the block search took a GPT-2 training
step 10.5% and a ResNet-18 training step 6.6% below the best baseline where BRKGA and local
search alone reached 5.7% and 0.2% (`graphopt bench zoo-real` has the whole comparison).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

import numpy as np

from graphopt.ir.solution import Solution
from graphopt.solvers.base import Initial, Objective, Problem, Rng, Solver, Tracker
from graphopt.solvers.block_search import BlockSearch
from graphopt.solvers.brkga import BRKGA, BRKGAConfig
from graphopt.solvers.list_scheduling import CriticalPathScheduler, HeftScheduler
from graphopt.solvers.local_search import LocalSearch
from graphopt.solvers.makespan_search import CriticalPathSearch
from graphopt.solvers.memory_schedulers import CompilerScheduler
from graphopt.solvers.partition import HypergraphSolver, MetisSolver
from graphopt.solvers.pipeline import PipelineSolver
from graphopt.solvers.placement_hints import PlacementHints


class Portfolio(Solver):
    """Baselines for the objective, then BRKGA and local search from their solutions.

    Args:
        config: BRKGA hyper-parameters (default: the tuned preset).
        block_share: share of the budget left after the baselines that block search (peak
            memory) or critical-path search (makespan) gets.
        brkga_share: share of the budget left after that which BRKGA gets.
    """

    name = "auto"

    def __init__(
        self,
        config: BRKGAConfig | None = None,
        block_share: float = 0.3,
        brkga_share: float = 0.5,
    ) -> None:
        self.config = config or BRKGAConfig.preset("tuned")
        self.block_share = block_share
        self.brkga_share = brkga_share

    def options(self) -> dict[str, Any]:
        """The BRKGA configuration and the budget shares it runs with."""
        return {
            **asdict(self.config),
            "block_share": self.block_share,
            "brkga_share": self.brkga_share,
        }

    def run(self, problem: Problem, tracker: Tracker, rng: Rng, initial: Initial) -> None:
        """Runs the baselines, BRKGA and local search in turn on the shared tracker."""
        if problem.objective is Objective.PEAK_MEMORY:
            baselines: list[Solver] = [
                CompilerScheduler("compiler-best"),
                PipelineSolver(),
                MetisSolver(),
                HypergraphSolver(),
            ]
        else:
            heft = HeftScheduler()
            baselines = [
                heft,
                CriticalPathScheduler(),
                MetisSolver(),
                PlacementHints(heft.schedules),
            ]
        starts = list(initial)
        with tracker.exempt_from_stall():
            for baseline in baselines:
                tracker.check()  # a baseline can take seconds on a large graph: none past time
                baseline.run(problem, tracker, rng, ())
                starts = _distinct([*starts, *_best(problem, tracker)])
        with tracker.phase(self.block_share):
            if problem.objective is Objective.PEAK_MEMORY:
                BlockSearch().run(problem, tracker, rng, starts[::-1])
            else:
                CriticalPathSearch().run(problem, tracker, rng, ())
        with tracker.phase(self.brkga_share):
            BRKGA(self.config).run(
                problem, tracker, rng, _distinct([*_best(problem, tracker), *starts])
            )
        LocalSearch().run(
            problem, tracker, rng, _distinct([*_best(problem, tracker), *starts[::-1]])
        )


def _distinct(solutions: Sequence[Solution]) -> list[Solution]:
    """`solutions` without repeats (same placement and order), first occurrence kept."""
    seen: set[bytes] = set()
    kept = []
    for solution in solutions:
        key = np.asarray(solution.placement).tobytes() + np.asarray(solution.order).tobytes()
        if key not in seen:
            seen.add(key)
            kept.append(solution)
    return kept


def _best(problem: Problem, tracker: Tracker) -> list[Solution]:
    """The tracker's best solution so far, as a list of zero or one."""
    if tracker.best_placement is None or tracker.best_order is None:
        return []
    return [Solution(tracker.best_placement, tracker.best_order, problem.machine.n_devices)]
