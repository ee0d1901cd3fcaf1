"""Simulated annealing over placements and event orders.

Simulated annealing (Kirkpatrick et al. 1983) walks the device and order moves of local search
(`incremental.py`, which scores them incrementally) with a geometric cooling schedule.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from graphopt.solvers.base import Initial, Objective, Problem, Rng, Solver, SolverError, Tracker
from graphopt.solvers.checks import check_fields
from graphopt.solvers.incremental import current_starts, offer_batch


@dataclass(frozen=True)
class AnnealingConfig:
    """Options of simulated annealing."""

    initial_acceptance: float = 0.2
    """Chance of accepting an average worsening move at the start (sets the first temperature).

    0.2 did best among 0.1-0.5 on layered and Erdos-Renyi graphs of 300 ops at 5,000 and 20,000
    evaluations (2 devices, both objectives).
    """
    final_acceptance: float = 0.001
    """Chance of accepting an average worsening move at the end (sets the last temperature)."""
    calibration_moves: int = 64
    """Moves from the start whose worsenings calibrate the temperatures."""
    device_move_probability: float = 0.5
    """Chance that a sampled move changes an op's device rather than its position."""
    max_batch: int = 32
    """Most moves evaluated together; the batch follows 1 / acceptance rate up to this."""
    capacity_penalty: float = 10.0
    """Energy weight of bytes over capacity, relative to the objective (both normalized)."""

    def __post_init__(self) -> None:
        check_fields(
            self,
            integer=("calibration_moves", "max_batch"),
            probability=("device_move_probability",),
            open_probability=("initial_acceptance", "final_acceptance"),
            non_negative=("capacity_penalty",),
        )
        if self.final_acceptance >= self.initial_acceptance:
            raise SolverError("final_acceptance must be below initial_acceptance")


class SimulatedAnnealing(Solver):
    """Simulated annealing with a geometric schedule calibrated from the first moves' deltas.

    Energy = objective / objective of the start + capacity_penalty * excess bytes / peak of the
    start. The temperature falls geometrically from T0 to T1 over the budget (evaluations or
    seconds, whichever runs out first), where an average worsening is accepted with chance
    `initial_acceptance` at T0 and `final_acceptance` at T1. Moves are evaluated in batches
    about as long as the expected wait for an acceptance; the first accepted move of a batch is
    taken and every evaluated move counts against the budget.
    """

    name = "annealing"

    def __init__(self, config: AnnealingConfig | None = None) -> None:
        self.config = config or AnnealingConfig()

    def run(self, problem: Problem, tracker: Tracker, rng: Rng, initial: Initial) -> None:
        """Anneals from the first valid start."""
        config = self.config
        with_makespan = problem.objective is Objective.MAKESPAN
        evaluator, peaks, excess, value = next(current_starts(problem, tracker, rng, initial))
        value_scale = float(value[0]) if value[0] > 0 else 1.0
        memory_scale = float(max(peaks.max(initial=0), 1))

        def energy(excess: np.ndarray, value: np.ndarray) -> np.ndarray:
            return value / value_scale + config.capacity_penalty * excess / memory_scale

        current = float(energy(excess, value)[0])
        moves = evaluator.sample_moves(
            rng, min(config.calibration_moves, tracker.remaining), config.device_move_probability
        )
        if moves.shape[0] == 0:
            return
        peaks, makespans = evaluator.evaluate(moves, with_makespan)
        excess, value = problem.fitness(peaks, makespans)
        deltas = energy(excess, value) - current
        worse = deltas[deltas > 0]
        typical = float(worse.mean()) if worse.size else 1e-3
        hot = -typical / math.log(config.initial_acceptance)
        cold = -typical / math.log(config.final_acceptance)
        offer_batch(tracker, evaluator, moves, excess, value)
        acceptance = config.initial_acceptance
        start_evaluations = tracker.evaluations
        while True:
            progress = self._progress(tracker, start_evaluations)
            temperature = hot * (cold / hot) ** progress
            size = int(min(max(round(1.0 / max(acceptance, 1e-9)), 1), config.max_batch))
            moves = evaluator.sample_moves(
                rng, min(size, tracker.remaining), config.device_move_probability
            )
            if moves.shape[0] == 0:
                return
            peaks, makespans = evaluator.evaluate(moves, with_makespan)
            excess, value = problem.fitness(peaks, makespans)
            deltas = energy(excess, value) - current
            draws = rng.random(moves.shape[0])
            accepted = np.flatnonzero(
                (deltas <= 0) | (draws < np.exp(-np.maximum(deltas, 0) / temperature))
            )
            taken = evaluator.neighbour(moves[accepted[0]]) if accepted.size else None
            offer_batch(tracker, evaluator, moves, excess, value)
            rate = 1.0 / (int(accepted[0]) + 1) if accepted.size else 1.0 / (2 * moves.shape[0])
            acceptance = 0.9 * acceptance + 0.1 * rate
            if taken is not None:
                evaluator.reset(*taken)
                current = float(current + deltas[accepted[0]])

    @staticmethod
    def _progress(tracker: Tracker, start_evaluations: int) -> float:
        """Fraction of the budget spent since the schedule started, in [0, 1]."""
        budget = tracker.budget
        fractions = [0.0]
        if budget.evaluations is not None:
            span = max(budget.evaluations - start_evaluations, 1)
            fractions.append((tracker.evaluations - start_evaluations) / span)
        if budget.seconds is not None:
            fractions.append(tracker.seconds / budget.seconds)
        return min(max(fractions), 1.0)
