"""The CP-SAT solver: builds the model, hints it with the best start, solves and offers.

Time: the limit covers building the model and the search. When building outlasts it, or the
search ends without any solution (graphs of many thousands of ops), the result is the start the
model would have been hinted with (the best initial solution, or device 0 in topological order),
with a note in the solution's record saying so.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
from ortools.sat.python import cp_model

from graphopt.errors import GraphoptError
from graphopt.ir.solution import Solution, topological_schedule
from graphopt.solvers.base import Initial, Objective, Problem, Rng, Solver, SolverError, Tracker
from graphopt.solvers.cpsat.config import CPSATConfig
from graphopt.solvers.cpsat.core import OutOfTime
from graphopt.solvers.cpsat.model import Model

_STATUS_OK = (cp_model.OPTIMAL, cp_model.FEASIBLE)


class CPSATSolver(Solver):
    """Exact solver: proves optimality on small graphs, else returns its best and a bound.

    Args:
        config: options; defaults to `CPSATConfig()`.
    """

    name = "cp-sat"
    objectives = frozenset(Objective)
    stops_when_stalled = False

    def __init__(self, config: CPSATConfig | None = None) -> None:
        self.config = CPSATConfig() if config is None else config

    def run(self, problem: Problem, tracker: Tracker, rng: Rng, initial: Initial) -> None:
        """Builds the model for the problem's objective, solves it and offers the best solution.

        When the time limit passes before the model is built or any solution is found, the
        start it would have been hinted with is offered instead (module docstring).

        Raises:
            SolverError: an initial solution is invalid or the capacity cannot be met.
        """
        hint = _best_initial(problem, initial)
        seconds = self.config.default_seconds
        if tracker.budget.seconds is not None:
            seconds = max(tracker.budget.seconds - tracker.seconds, 0.01)
        deadline = time.perf_counter() + seconds
        try:
            model = Model(problem, self.config.liveness_cuts, self.config.time_links, deadline)
            if hint is None:
                hint = _default_hint(problem, model.split)
            model.add_hint(*hint)
        except OutOfTime:
            _offer_start(problem, tracker, hint, f"building the model took over {seconds:.3g} s")
            return
        solver = cp_model.CpSolver()
        limit = max(deadline - time.perf_counter(), 0.01)
        solver.parameters.max_time_in_seconds = limit
        solver.parameters.num_workers = self.config.workers
        solver.parameters.random_seed = int(rng.integers(2**31 - 1))
        solver.parameters.log_search_progress = self.config.log
        if not model.memory_objective:
            solver.parameters.relative_gap_limit = self.config.makespan_gap
        status = solver.solve(model.model)
        if status == cp_model.MODEL_INVALID:
            raise SolverError(f"cp-sat: invalid model: {model.model.validate()}")
        if status == cp_model.INFEASIBLE:
            capacity = problem.machine.capacity
            if capacity is None:
                raise SolverError("cp-sat: the model is infeasible without a capacity; a bug")
            raise SolverError(
                f"cp-sat: no placement and schedule of graph '{problem.graph.name}' keeps every "
                f"device within the capacity of {capacity} bytes (proven infeasible)"
            )
        # CP-SAT catches Ctrl-C itself and returns what it has: a search that ended before its
        # time limit without proving anything was interrupted, and is reported so.
        interrupted = status != cp_model.OPTIMAL and solver.wall_time + 0.1 < limit
        if status not in _STATUS_OK:
            reason = (
                f"the search was interrupted after {solver.wall_time:.3g} s, before any solution"
                if interrupted
                else f"the search found no solution in its time limit of {seconds:.3g} s"
            )
            _offer_start(problem, tracker, hint, reason)
            if interrupted:
                raise KeyboardInterrupt
            return
        scored = []
        for placement, order in model.decodings(solver):
            peaks, makespan, (violation, _, _) = problem.scorer.evaluate(placement, order)
            if violation:
                raise SolverError(
                    f"cp-sat: decoded an invalid schedule (rule {violation}); this is a bug"
                )
            excess, value = problem.fitness(peaks[None], np.asarray([makespan]))
            scored.append(((int(excess[0]), float(value[0])), placement, order, peaks, makespan))
        (_, value), placement, order, peaks, makespan = min(scored, key=lambda item: item[0])
        optimal = status == cp_model.OPTIMAL and model.attains(solver, value)
        tracker.set_bound(min(model.lower_bound(solver), value), optimal)
        tracker.offer(placement, order, peaks, makespan)
        if interrupted:
            raise KeyboardInterrupt


def _offer_start(
    problem: Problem,
    tracker: Tracker,
    hint: tuple[np.ndarray, np.ndarray, np.ndarray] | None,
    reason: str,
) -> None:
    """Offers the start the model is hinted with, when CP-SAT itself has nothing to offer."""
    placement, order, _ = hint if hint is not None else _default_hint(problem, None)
    peaks, makespan, _ = problem.scorer.evaluate(placement, order)
    tracker.note(f"cp-sat: {reason}; the result is its start, not a CP-SAT solution")
    tracker.offer(placement, order, peaks, makespan)


def _best_initial(
    problem: Problem, initial: Sequence[Solution]
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The best initial solution by the problem's ranking, as (placement, order, peaks)."""
    best: tuple[tuple[int, float], np.ndarray, np.ndarray, np.ndarray] | None = None
    for k, solution in enumerate(initial):
        try:
            score = problem.scorer.score(solution)
        except GraphoptError as error:
            raise SolverError(f"cp-sat: initial solution {k} is invalid: {error}") from error
        peaks = np.asarray(score.peak_memory_per_device, dtype=np.int64)
        excess, value = problem.fitness(peaks[None], np.asarray([score.makespan]))
        key = (int(excess[0]), float(value[0]))
        if best is None or key < best[0]:
            best = (key, solution.placement, solution.order, peaks)
    return None if best is None else best[1:]


def _default_hint(
    problem: Problem, split: list[int] | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A valid start: the best split of runtimes (makespan) or device 0, in topological order."""
    if split is not None:
        placement = np.array(split, dtype=np.int64)
    else:
        placement = np.zeros(problem.graph.n_ops, dtype=np.int64)
        if problem.pinned is not None:
            placement = np.where(problem.pinned >= 0, problem.pinned, 0)
    solution = topological_schedule(problem.graph, placement, problem.machine.n_devices)
    peaks, _, _ = problem.scorer.evaluate(solution.placement, solution.order)
    return solution.placement, solution.order, peaks
