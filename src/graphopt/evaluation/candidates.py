"""The candidate pipeline of paper 004 (section 5): rank by proxy, keep the top K, test on targets.

A candidate sampler (the GFlowNet, BRKGA's final population, list scheduling's variants) gives
many schedules of one graph; the proxy (the problem's machine) ranks them, the K best distinct
ones are kept, and each is re-scored on every target model (`costmodels.targets`): the report
holds the best and the mean speedup of the K on the proxy and on each target, and their
diversity (`evaluation.diversity`), the figures of paper 004's tables 1 and 2.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from graphopt.costmodels.score import Scorer
from graphopt.costmodels.targets import TargetModel
from graphopt.evaluation.diversity import Diversity, pairwise_diversity
from graphopt.ir.solution import Solution
from graphopt.solvers.base import Problem
from graphopt.solvers.candidates import top_candidates


@dataclass(frozen=True)
class CandidateReport:
    """What the top K candidates achieve.

    Attributes:
        k: candidates kept.
        proxy: (best, mean) speedup on the proxy.
        targets: target name -> (best, mean) speedup of the same K on that target.
        diversity: mean pairwise GED, d_inv and d_sen of the K.
    """

    k: int
    proxy: tuple[float, float]
    targets: dict[str, tuple[float, float]]
    diversity: Diversity


def candidate_report(
    problem: Problem,
    schedules: Sequence[tuple[np.ndarray, np.ndarray]],
    k: int,
    targets: Sequence[TargetModel],
    seed: int = 0,
) -> CandidateReport:
    """The top `k` of `schedules` by proxy, scored on the proxy and on each target.

    Raises:
        SolverError: when k < 1 or fewer than k schedules are given.
    """
    return score_candidates(problem, top_candidates(problem, schedules, k), targets, seed)


def score_candidates(
    problem: Problem, kept: Sequence[Solution], targets: Sequence[TargetModel], seed: int = 0
) -> CandidateReport:
    """The report of candidates already chosen (e.g. `optimize(candidates=K)`'s), as they are."""
    proxy = [problem.scorer.score(solution).speedup for solution in kept]
    by_target = {}
    for target in targets:
        graph, machine = target.apply(problem.graph, problem.machine, seed)
        scorer = Scorer(graph, machine)
        speedups = [scorer.score(solution).speedup for solution in kept]
        by_target[str(target)] = (max(speedups), float(np.mean(speedups)))
    diversity = pairwise_diversity(
        problem.graph, problem.machine, [(s.placement, s.order) for s in kept]
    )
    return CandidateReport(len(kept), (max(proxy), float(np.mean(proxy))), by_target, diversity)
