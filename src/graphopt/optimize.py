"""`optimize`: one call from a graph and a machine to a scored solution (API and CLI share it)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from graphopt.costmodels.machine import Machine
from graphopt.ir.graph import Graph
from graphopt.ir.solution import Solution
from graphopt.solvers.base import Budget, Objective, Problem, Progress, Result, SolverError
from graphopt.solvers.registry import make_solver

DEFAULT_SECONDS = 10.0
"""The default budget: seconds of search, ended sooner when a solution reaches the lower bound.

Real models need more than REGAL's 5,000 evaluations (paper 001 section 4.2): on real graphs of
a few hundred ops, 10 s reach bounds that 5,000 evaluations do not (`graphopt bench zoo-real`).
Pass evaluations for runs that repeat exactly with a seed."""


def pins_from_names(graph: Graph, pins: Mapping[str, int]) -> np.ndarray | None:
    """[n_ops] pins (-1 = free) from {op name: device}; None when empty.

    Raises:
        SolverError: naming an op the graph does not have, or a device that is not a
            non-negative integer (-1 marks a free op in the array, never a pin).
    """
    if not pins:
        return None
    ids = graph.op_ids
    pinned = np.full(graph.n_ops, -1, dtype=np.int64)
    for name, device in pins.items():
        if name not in ids:
            raise SolverError(f"cannot pin op {name!r}: the graph has no op of that name")
        if isinstance(device, bool) or not isinstance(device, int | np.integer) or device < 0:
            raise SolverError(
                f"cannot pin op {name!r} to device {device!r}: a device is an integer >= 0"
            )
        pinned[ids[name]] = device
    return pinned


def optimize(
    graph: Graph,
    machine: Machine | None = None,
    objective: Objective | str = Objective.PEAK_MEMORY,
    solver: str = "auto",
    evaluations: int | None = None,
    seconds: float | None = None,
    seed: int = 0,
    pins: Mapping[str, int] | None = None,
    initial: Sequence[Solution] = (),
    progress: Progress | None = None,
    policy: str | None = None,
) -> Result:
    """Optimizes placement and schedule of `graph` on `machine` for `objective`.

    Args:
        graph: the computation graph.
        machine: devices, capacity and transfers (default: one device, no capacity).
        objective: 'peak-memory' or 'makespan'.
        solver: a name from `graphopt.solvers.registry.SOLVERS`.
        evaluations: evaluation budget.
        seconds: wall-clock budget; `DEFAULT_SECONDS` when neither is given.
        seed: the same seed gives the same result under an evaluation budget.
        pins: {op name: device} for ops whose device is fixed.
        initial: known solutions to start from.
        progress: called on every improvement.
        policy: a policy checkpoint for the learned solvers (regal, gas, idrs) instead of the
            shipped one.

    Raises:
        SolverError: unknown solver or objective, bad budget, bad pins, a policy for a
            solver that takes none or one trained for another problem.
    """
    machine = machine or Machine()
    if evaluations is None and seconds is None:
        seconds = DEFAULT_SECONDS
    budget = Budget(evaluations=evaluations, seconds=seconds)
    problem = Problem(graph, machine, objective, pins_from_names(graph, pins or {}))
    return make_solver(solver, policy).solve(problem, budget, seed, initial, progress)
