"""Best-improvement local search with random restarts over placements and event orders.

The Local Search baseline of paper 001 section 4.2: "Start with a random solution and greedily
improve it by applying the best one-step look-ahead local move at each step. The initial
schedule is a topological sort order of the ops, and the initial placement selects devices
uniformly randomly. A local move either changes the device assignment of the op, or changes the
op order in the current schedule", with random restarts. The moves and their incremental
evaluation are in `incremental.py`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from graphopt.ir.solution import Solution
from graphopt.solvers.base import Objective, Problem, Solver, Tracker
from graphopt.solvers.incremental import (
    IncrementalEvaluator,
    check_positive,
    check_probability,
    offer_batch,
    offer_start,
    starts,
)


@dataclass(frozen=True)
class LocalSearchConfig:
    """Options of best-improvement local search."""

    neighbourhood_size: int = 64
    """Moves sampled and evaluated (in one parallel batch) at each step."""
    device_move_probability: float = 0.5
    """Chance that a sampled move changes an op's device rather than its position."""
    patience: int = 16
    """Consecutive steps without a strict improvement before a random restart."""
    sideways: bool = True
    """Take a best neighbour that only ties the current solution (walks plateaus of the peak)."""

    def __post_init__(self) -> None:
        check_positive("neighbourhood_size", self.neighbourhood_size)
        check_positive("patience", self.patience)
        check_probability("device_move_probability", self.device_move_probability)


class LocalSearch(Solver):
    """Best-improvement hill climbing with random restarts (paper 001 section 4.2)."""

    name = "local-search"

    def __init__(self, config: LocalSearchConfig | None = None) -> None:
        self.config = config or LocalSearchConfig()

    def run(
        self,
        problem: Problem,
        tracker: Tracker,
        rng: np.random.Generator,
        initial: Sequence[Solution],
    ) -> None:
        """Climbs from each start until `patience` steps fail to improve, then restarts."""
        config = self.config
        evaluator = IncrementalEvaluator(problem)
        with_makespan = problem.objective is Objective.MAKESPAN
        for placement, order in starts(problem, rng, initial):
            scored = offer_start(problem, tracker, placement, order)
            if scored is None:
                continue
            peaks, makespan = scored
            evaluator.reset(placement, order)
            key = _key(*problem.fitness(peaks[None], np.array([makespan])), peaks[None])[0]
            stale = 0
            while stale < config.patience:
                size = min(config.neighbourhood_size, tracker.remaining)
                moves = evaluator.sample_moves(rng, size, config.device_move_probability)
                if moves.shape[0] == 0:
                    break
                peaks, makespans = evaluator.evaluate(moves, with_makespan)
                excess, value = problem.fitness(peaks, makespans)
                keys = _key(excess, value, peaks)
                best = min(range(len(keys)), key=keys.__getitem__)
                improved = keys[best] < key
                taken = None
                if improved or (config.sideways and keys[best] == key):
                    taken = evaluator.neighbour(moves[best])
                offer_batch(tracker, evaluator, moves, excess, value)
                if taken is not None:
                    evaluator.reset(*taken)
                    key = keys[best]
                stale = 0 if improved else stale + 1


def _key(excess: np.ndarray, value: np.ndarray, peaks: np.ndarray) -> list[tuple[int, float, int]]:
    """Ranking keys (excess, objective, sum of device peaks): the tracker's, with a tie-break.

    Shapes:
        excess, value: [B]; peaks: [B, n_devices].
    """
    total = peaks.sum(axis=-1)
    return [(int(e), float(v), int(t)) for e, v, t in zip(excess, value, total, strict=True)]
