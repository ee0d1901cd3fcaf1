"""Exact recomputation on one device: a CP-SAT model in Moccasin's interval form (section 15).

Bartan et al., "Moccasin" (ICML 2023): each op has up to C executions, each an optional
one-step interval on a line of event positions (no two at the same position: one total order);
each execution's every output is an optional retention interval from the execution's step to
after its last reader's, and memory is one cumulative constraint over the retention intervals
(plus each op's scratch memory at its step). Every input of every execution picks one execution
of its producer whose retention spans the reader's step; a graph output's last instance is kept
to the end. So the model has O(n C) integer variables, not Checkmate's O(n^2).

The model may keep an older instance where the contract reads the newest (section 15: a read is
of the most recent instance). That never costs the decoded schedule anything: at every step the
contract's one live instance of a tensor is matched by a live retention interval in the model
(its reads are the model's reads of some instance made no later), so the decoded order's peak is
at most the model's and its recomputed seconds are the model's. The optimum of the model is
therefore the optimum over schedules that run no op more than C times, and `exact_recompute`
reports the decoded order's exact score, which the tests hold against exhaustive enumeration.

Runtimes enter as integers (`TIME_UNITS` per step's seconds), so an overhead limit holds to that
resolution; the decoded solution's seconds are exact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from ortools.sat.python import cp_model

from graphopt.ir.graph import Graph
from graphopt.ir.solution import Solution
from graphopt.solvers.bounds import peak_memory_lower_bound

TIME_UNITS = 1_000_000
"""Integer units the step's total runtime is divided into, for the overhead constraint."""


@dataclass(frozen=True)
class ExactRemat:
    """What `exact_recompute` found.

    Attributes:
        solution: the decoded one-device solution (None when none was found in time).
        peak: the model's peak memory of it, persistent bytes included (an upper bound on the
            solution's exact peak).
        bound: a proven lower bound, over schedules with at most `copies` runs per op within
            the overhead, on the peak (no capacity) or on the recomputed `TIME_UNITS` (with
            one); infinite when none fits.
        optimal: whether the search proved it optimal (or proved that nothing fits).
    """

    solution: Solution | None
    peak: int | None
    bound: float
    optimal: bool


def exact_recompute(
    graph: Graph,
    max_overhead: float = math.inf,
    capacity: int | None = None,
    copies: int = 2,
    seconds: float = 10.0,
    seed: int = 0,
    workers: int = 1,
) -> ExactRemat:
    """The best one-device schedule running each op at most `copies` times.

    Without `capacity`: the lowest peak within `max_overhead`; with it, the fewest recomputed
    seconds whose peak fits it.

    Args:
        graph: the graph.
        max_overhead: most recomputed seconds, as a fraction of the sum of op runtimes.
        capacity: with it, minimize the recomputed seconds under this peak instead.
        copies: most runs of one recomputable op (C); others run once.
        seconds: CP-SAT's time limit.
        seed: CP-SAT's random seed.
        workers: CP-SAT's search workers.
    """
    model = cp_model.CpModel()
    n = graph.n_ops
    runs = [copies if graph.op_recomputable[v] else 1 for v in range(n)]
    horizon = max(1, sum(runs))
    persistent = int(graph.tensor_size[graph.tensor_persistent].sum())
    start = {}
    present = {}
    steps = []
    for v in range(n):
        for k in range(runs[v]):
            start[v, k] = model.new_int_var(0, horizon - 1, f"s{v}_{k}")
            present[v, k] = model.new_constant(1) if k == 0 else model.new_bool_var(f"p{v}_{k}")
            steps.append(
                model.new_optional_fixed_size_interval_var(start[v, k], 1, present[v, k], "")
            )
            if k > 0:  # the k-th run follows the (k-1)-th, and only if that ran
                model.add_implication(present[v, k], present[v, k - 1])
                model.add(start[v, k] > start[v, k - 1]).only_enforce_if(present[v, k])
    model.add_no_overlap(steps)

    end = {}  # (v, k, t): the retention of output t of v's k-th run ends before this position
    retained, demands = [], []
    for v in range(n):
        for k in range(runs[v]):
            for t in graph.outputs(v).tolist():
                end[v, k, t] = model.new_int_var(1, horizon, f"e{v}_{k}_{t}")
                span = model.new_int_var(1, horizon, "")
                model.add(start[v, k] + span == end[v, k, t])
                size = 0 if graph.tensor_persistent[t] else int(graph.tensor_size[t])
                if size:
                    retained.append(
                        model.new_optional_interval_var(
                            start[v, k], span, end[v, k, t], present[v, k], ""
                        )
                    )
                    demands.append(size)
                if graph.tensor_output[t]:  # the last run's instance is held to the end
                    last = present[v, k] if k + 1 == runs[v] else None
                    if last is None:
                        last = model.new_bool_var("")
                        model.add_bool_and(
                            [present[v, k], present[v, k + 1].Not()]
                        ).only_enforce_if(last)
                        model.add_bool_or([present[v, k].Not(), present[v, k + 1]]).only_enforce_if(
                            last.Not()
                        )
                    model.add(end[v, k, t] == horizon).only_enforce_if(last)
            if graph.op_temp_memory[v]:
                retained.append(steps[sum(runs[:v]) + k])
                demands.append(int(graph.op_temp_memory[v]))

    for u in range(n):
        for j in range(runs[u]):
            for t in graph.inputs(u).tolist():
                v = int(graph.tensor_producer[t])
                chosen = []
                for k in range(runs[v]):
                    pick = model.new_bool_var("")
                    model.add_implication(pick, present[v, k])
                    model.add(start[v, k] < start[u, j]).only_enforce_if(pick)
                    model.add(end[v, k, t] >= start[u, j] + 1).only_enforce_if(pick)
                    chosen.append(pick)
                model.add(sum(chosen) >= 1).only_enforce_if(present[u, j])

    total = float(graph.total_runtime)
    units = [
        round(TIME_UNITS * float(graph.op_runtime[v]) / total) if total > 0 else 0 for v in range(n)
    ]
    extra = sum(units[v] * present[v, k] for v in range(n) for k in range(1, runs[v]))
    if math.isfinite(max_overhead):
        model.add(extra <= math.floor(max_overhead * TIME_UNITS))
    most = int(graph.tensor_size.sum() + graph.op_temp_memory.sum())
    least = peak_memory_lower_bound(graph, 1, recompute=True) - persistent  # an op's own step
    top = most if capacity is None else capacity - persistent
    if top < least:
        return ExactRemat(None, None, math.inf, True)
    peak = model.new_int_var(least, top, "")
    model.add_cumulative(retained, demands, peak)
    if capacity is None:  # the lowest peak, then the fewest recomputed seconds for it
        model.minimize(peak * (sum(units) * copies + 1) + extra)
    else:
        model.minimize(extra)

    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = seconds
    solver.parameters.num_workers = workers
    solver.parameters.random_seed = seed
    status = solver.solve(model)
    optimal = status in (cp_model.OPTIMAL, cp_model.INFEASIBLE)
    # The objective is integral, but CP-SAT reports it as a float a hair off (x.99999997).
    bound = math.ceil(solver.best_objective_bound - 1e-6)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return ExactRemat(None, None, math.inf if status == cp_model.INFEASIBLE else bound, optimal)
    executions = sorted(
        (solver.value(start[v, k]), v) for v in range(n) for k in range(runs[v])
        if solver.value(present[v, k])
    )  # fmt: skip
    order = np.array([v for _, v in executions], dtype=np.int64)
    solution = Solution(
        placement=np.zeros(n, dtype=np.int32), order=order, n_devices=1, remat=order.shape[0] > n
    )
    if capacity is None:  # the objective's peak part
        bound = persistent + bound // (sum(units) * copies + 1)
    return ExactRemat(solution, persistent + solver.value(peak), bound, optimal)
