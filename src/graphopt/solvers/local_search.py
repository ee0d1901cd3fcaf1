"""Best-improvement local search with random restarts over placements and event orders.

The Local Search baseline of paper 001 section 4.2: "Start with a random solution and greedily
improve it by applying the best one-step look-ahead local move at each step. The initial
schedule is a topological sort order of the ops, and the initial placement selects devices
uniformly randomly. A local move either changes the device assignment of the op, or changes the
op order in the current schedule", with random restarts. The moves and their incremental
evaluation are in `incremental.py`.

A problem that searches fusion (`Problem.fusion`) is climbed in the random-key chromosome that
BRKGA evolves instead, since the groups are decoded from its fusion priorities: a move redraws an
op's device genes, its order priority or its fusion priority, and each neighbour is decoded and
scored exactly (`_climb_keys`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from graphopt.ir.solution import Solution
from graphopt.solvers.base import Initial, Objective, Problem, Rng, Solver, Tracker
from graphopt.solvers.checks import check_fields
from graphopt.solvers.incremental import current_starts, offer_batch
from graphopt.solvers.random_keys import RandomKeyDecoder, offer_decoded


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
        check_fields(
            self,
            integer=("neighbourhood_size", "patience"),
            probability=("device_move_probability",),
        )


class LocalSearch(Solver):
    """Best-improvement hill climbing with random restarts (paper 001 section 4.2)."""

    name = "local-search"

    def __init__(self, config: LocalSearchConfig | None = None) -> None:
        self.config = config or LocalSearchConfig()

    def run(self, problem: Problem, tracker: Tracker, rng: Rng, initial: Initial) -> None:
        """Climbs from each start until `patience` steps fail to improve, then restarts.

        With `Problem.fusion`: half the budget climbs placements and orders without groups (the
        incremental moves are much cheaper), the other half climbs chromosomes from its best
        (`_climb_keys`), fusion priorities included.
        """
        if not problem.fusion:
            self._climb(problem, tracker, rng, initial)
            return
        with tracker.phase(0.5):
            self._climb(problem, tracker, rng, initial)
        best = []
        if tracker.best_placement is not None and tracker.best_order is not None:
            n_devices = problem.machine.n_devices
            best = [Solution(tracker.best_placement, tracker.best_order, n_devices)]
        self._climb_keys(problem, tracker, rng, [*best, *initial])

    def _climb(self, problem: Problem, tracker: Tracker, rng: Rng, initial: Initial) -> None:
        """The climb of paper 001 over placements and orders, scored incrementally."""
        config = self.config
        with_makespan = problem.objective is Objective.MAKESPAN
        for evaluator, peaks, excess, value in current_starts(problem, tracker, rng, initial):
            key = _key(excess, value, peaks[None])[0]
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

    def _climb_keys(self, problem: Problem, tracker: Tracker, rng: Rng, initial: Initial) -> None:
        """The same climb over random-key chromosomes, fusion priorities included.

        Starts: the best of the chromosomes `RandomKeyDecoder.seeds` gives for the known
        solutions (one with every fusion priority at 1 among them), then uniform ones. A move
        picks an op and redraws its device genes (with `device_move_probability`), else its
        order priority or its fusion priority, one or the other with even odds (the order
        priority when no op has a fusion class); a step decodes and scores `neighbourhood_size`
        moves in one parallel batch.
        """
        config = self.config
        decoder = RandomKeyDecoder(problem)
        decoder.check_population(config.neighbourhood_size)
        layout = decoder.layout
        n_ops, d = problem.graph.n_ops, problem.machine.n_devices
        seeds = [keys for solution in initial for keys in decoder.seeds(solution)]
        while True:
            starts = np.stack(seeds) if seeds else rng.random((1, decoder.n_genes))
            seeds = []
            decoded = decoder.evaluate(starts[: config.neighbourhood_size])
            offer_decoded(tracker, decoded)
            keys = _key(decoded.excess, decoded.value, decoded.peaks)
            first = min(range(len(keys)), key=keys.__getitem__)
            current, key = starts[first], keys[first]
            stale = 0
            while stale < config.patience:
                size = min(config.neighbourhood_size, tracker.remaining)
                ops = rng.integers(0, n_ops, size)
                kind = rng.random(size)
                device_move = kind < config.device_move_probability
                fusion_move = ~device_move & (rng.random(size) < 0.5) & layout.fusion
                neighbours = np.repeat(current[None], size, axis=0)
                for row, op in enumerate(ops):
                    if device_move[row]:
                        neighbours[row, op * d : (op + 1) * d] = rng.random(d)
                    elif fusion_move[row]:
                        neighbours[row, layout.fusion_priority + op] = rng.random()
                    else:
                        neighbours[row, layout.op_priority + op] = rng.random()
                decoded = decoder.evaluate(neighbours)
                keys = _key(decoded.excess, decoded.value, decoded.peaks)
                best = min(range(len(keys)), key=keys.__getitem__)
                improved = keys[best] < key
                if improved or (config.sideways and keys[best] == key):
                    current, key = neighbours[best], keys[best]
                offer_decoded(tracker, decoded)
                stale = 0 if improved else stale + 1


def _key(excess: np.ndarray, value: np.ndarray, peaks: np.ndarray) -> list[tuple[int, float, int]]:
    """Ranking keys (excess, objective, sum of device peaks): the tracker's, with a tie-break.

    Shapes:
        excess, value: [B]; peaks: [B, n_devices].
    """
    total = peaks.sum(axis=-1)
    return [(int(e), float(v), int(t)) for e, v, t in zip(excess, value, total, strict=True)]
