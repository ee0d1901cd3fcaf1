"""Top-K candidates: the K best distinct schedules of a solver that samples many (paper 004).

A sampling solver (the GFlowNet) draws many schedules; the proxy (the problem's scorer) ranks
them and the K best distinct ones are the candidates that a user re-scores on target machines
(`graphopt.evaluation.candidates`) or runs. `CandidateSampler` is what `graphopt.optimize` asks
of a solver before it returns candidates.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from graphopt.ir.solution import Solution
from graphopt.solvers.base import Problem, SolverError


@runtime_checkable
class CandidateSampler(Protocol):
    """A solver that keeps the schedules it sampled in its last run."""

    def max_candidates(self) -> int:
        """The most schedules a run samples (a K above it is refused before the run)."""
        ...

    def top_candidates(self, problem: Problem, k: int) -> list[Solution]:
        """The `k` best distinct schedules of the last run (fewer when fewer were sampled)."""
        ...

    def samples_drawn(self) -> int:
        """The schedules the last run sampled, repeats included."""
        ...


def shortfall(k: int, kept: int, drawn: int) -> str | None:
    """Why `kept` distinct candidates of `drawn` samples are fewer than K = `k` (None if not).

    The budget may have ended before K samples, and samples may repeat one another (a low
    temperature, or a small graph with few schedules).
    """
    if kept >= k:
        return None
    reasons = []
    if drawn < k:
        reasons.append(f"only {drawn:,} sampled within the budget")
    if kept < drawn:
        reasons.append(f"{drawn - kept:,} of the {drawn:,} sampled repeat another")
    return f"top-K: {kept:,} of the K = {k:,} candidates asked: " + " and ".join(reasons)


def top_candidates(
    problem: Problem, schedules: Sequence[tuple[np.ndarray, np.ndarray]], k: int
) -> list[Solution]:
    """The `k` best distinct schedules by the problem's proxy (ties: first sampled first).

    Raises:
        SolverError: when k < 1 or fewer schedules than k were sampled.
    """
    if k < 1:
        raise SolverError(f"top-K needs K >= 1, got {k}")
    if len(schedules) < k:
        raise SolverError(f"top-K needs at least K = {k} samples, got {len(schedules)}")
    seen: set[bytes] = set()
    scored = []
    for index, (placement, events) in enumerate(schedules):
        key = placement.tobytes() + events.tobytes()
        if key in seen:
            continue
        seen.add(key)
        _, makespan, _ = problem.scorer.evaluate(placement, events)
        scored.append((makespan, index, placement, events))
    scored.sort(key=lambda item: (item[0], item[1]))
    d = problem.machine.n_devices
    return [Solution(placement, events, d) for _, _, placement, events in scored[:k]]
