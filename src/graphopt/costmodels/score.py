"""Scoring solutions: the public entry points over the numba kernels.

`score` checks and scores one solution with a clear error for an invalid one; `Scorer` holds a
graph's arrays once and scores single solutions or whole populations (parallel over members),
which is what searches call millions of times.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

import numpy as np

from graphopt.costmodels import _fusion, _kernels, _remat
from graphopt.costmodels.machine import Machine
from graphopt.costmodels.validity import Violation, violation_message
from graphopt.errors import MachineError, SolutionError
from graphopt.ir.graph import Graph
from graphopt.ir.solution import MAX_GROUP_OPS, Solution
from graphopt.limits import MAX_COPIES

REMAT_WITH_FUSION = (
    "a solution that recomputes (remat) cannot have fusion groups yet (docs/format.md section "
    "15): drop the groups or the recomputation"
)


def speedup(total_runtime: float, makespan: float) -> float:
    """Sum of op runtimes / makespan (paper 004); 1.0 for an empty or all-zero schedule."""
    return total_runtime / makespan if makespan > 0 else 1.0


@dataclass(frozen=True)
class Score:
    """What the cost model says of one valid solution.

    Attributes:
        peak_memory_per_device: peak(d) of each device in bytes (section 5).
        makespan: latest finish of any event in seconds (section 6).
        speedup: sum of op runtimes / makespan.
        capacity: the machine's per-device capacity the solution was checked against, if any.
    """

    peak_memory_per_device: tuple[int, ...]
    makespan: float
    speedup: float
    capacity: int | None = None

    @property
    def peak_memory(self) -> int:
        """Max over devices of peak(d)."""
        return max(self.peak_memory_per_device, default=0)

    @property
    def feasible(self) -> bool:
        """Whether every device's peak fits the capacity (always true without one)."""
        return self.capacity is None or self.peak_memory <= self.capacity

    def disagreements(self, claimed: Mapping[str, Any]) -> list[str]:
        """Claimed objective values that differ from these by more than a relative 1e-9.

        Only keys this score knows are compared (section 2: a checker must agree to 1e-9).
        """
        computed = self.to_json()
        found = []
        for key, value in claimed.items():
            if key not in computed:
                continue
            truth = computed[key]
            if isinstance(truth, list | bool) or not isinstance(value, int | float):
                agree = value == truth
            else:
                agree = math.isclose(value, truth, rel_tol=1e-9, abs_tol=0.0)
            if not agree:
                found.append(f"{key}: claimed {value}, computed {truth}")
        return found

    def to_json(self) -> dict[str, Any]:
        """The objective's keys as in the solution format, plus per-device peaks and feasibility."""
        return {
            "peak_memory": self.peak_memory,
            "makespan": self.makespan,
            "speedup": self.speedup,
            "peak_memory_per_device": list(self.peak_memory_per_device),
            "feasible": self.feasible,
        }


def raise_violation(
    graph: Graph, solution: Solution, violation: int, where: int, detail: int
) -> NoReturn:
    """Raises the SolutionError that names the event breaking a rule."""
    raise SolutionError(violation_message(graph, solution, violation, where, detail))


class Scorer:
    """Scores solutions of one graph on one machine with the numba kernels.

    Args:
        graph: the graph; the kernels read its `arrays`.
        machine: devices, capacity and transfer model.
    """

    def __init__(self, graph: Graph, machine: Machine) -> None:
        check_problem_size(graph, machine)
        self.graph = graph
        self.machine = machine

    def evaluate(
        self,
        placement: np.ndarray,
        order: np.ndarray,
        fusion: np.ndarray | None = None,
        remat: bool = False,
    ) -> tuple[np.ndarray, float, tuple[int, int, int]]:
        """Scores one array-encoded solution without building a Solution object.

        Args:
            placement: [n_ops] int32 devices.
            order: [n_events] int64 event codes.
            fusion: None or [n_ops] int32 fusion group of each op (-1: alone), dense ids.
            remat: score by section 15 (ops may be recomputed); not with fusion groups.

        Returns:
            (peaks [n_devices] int64, makespan, (violation, where, detail)); violation 0 when valid.
        """
        peak = np.zeros(self.machine.n_devices, dtype=np.int64)
        placement = np.ascontiguousarray(placement, dtype=np.int32)
        order = np.ascontiguousarray(order, dtype=np.int64)
        grouped = fusion is not None and fusion.size > 0 and fusion.max() >= 0
        if remat and grouped:
            raise SolutionError(REMAT_WITH_FUSION)
        if remat:
            violation, where, detail, makespan = _remat.score_remat(
                self.graph.arrays,
                self.machine.arrays,
                placement,
                order,
                self.graph.op_recomputable,
                peak,
                np.empty((0, 2), dtype=np.int64),
            )
        elif not grouped:
            violation, where, detail, makespan = _kernels.score_solution(
                self.graph.arrays, self.machine.arrays, placement, order, peak
            )
        else:
            check_kernel(self.graph)
            violation, where, detail, makespan = _fusion.score_fused(
                self.graph.arrays,
                self.graph.fusion_arrays,
                self.machine.arrays,
                placement,
                order,
                np.ascontiguousarray(fusion, dtype=np.int32),
                MAX_GROUP_OPS,
                peak,
            )
        return peak, makespan, (violation, where, detail)

    def evaluate_population(
        self,
        placements: np.ndarray,
        orders: np.ndarray,
        lengths: np.ndarray | None = None,
        groups: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Scores B solutions in parallel.

        Args:
            placements: [B, n_ops] int32 devices.
            orders: [B, L] int64 event codes; row b holds lengths[b] events (padding ignored).
            lengths: [B] events per row; defaults to L for every row.
            groups: None or [B, n_ops] int32 fusion groups of each row (-1: alone), dense ids.

        Returns:
            peaks [B, n_devices] int64, makespans [B] float64, status [B, 3] int64
            (violation, where, detail per row; violation 0 when valid).
        """
        placements = np.ascontiguousarray(placements, dtype=np.int32)
        orders = np.ascontiguousarray(orders, dtype=np.int64)
        n = placements.shape[0]
        if lengths is None:
            lengths = np.full(n, orders.shape[1], dtype=np.int64)
        peaks = np.zeros((n, self.machine.n_devices), dtype=np.int64)
        status = np.zeros((n, 3), dtype=np.int64)
        makespans = np.zeros(n, dtype=np.float64)
        if groups is not None:
            check_kernel(self.graph)
            _fusion.score_fused_population(
                self.graph.arrays,
                self.graph.fusion_arrays,
                self.machine.arrays,
                placements,
                orders,
                np.ascontiguousarray(lengths, dtype=np.int64),
                np.ascontiguousarray(groups, dtype=np.int32),
                MAX_GROUP_OPS,
                peaks,
                status,
                makespans,
            )
            return peaks, makespans, status
        _kernels.score_population(
            self.graph.arrays,
            self.machine.arrays,
            placements,
            orders,
            np.ascontiguousarray(lengths, dtype=np.int64),
            peaks,
            status,
            makespans,
        )
        return peaks, makespans, status

    def score(self, solution: Solution) -> Score:
        """Checks and scores one solution.

        Raises:
            SolutionError: naming the first event (or op) that breaks a rule of section 3.
        """
        check_shapes(self.graph, solution, self.machine)
        peak, makespan, (violation, where, detail) = self.evaluate(
            solution.placement, solution.order, solution.fusion, solution.remat
        )
        if violation != Violation.NONE:
            raise_violation(self.graph, solution, violation, where, detail)
        return Score(
            peak_memory_per_device=tuple(int(p) for p in peak),
            makespan=float(makespan),
            speedup=speedup(self.graph.total_runtime, float(makespan)),
            capacity=self.machine.capacity,
        )


def check_problem_size(graph: Graph, machine: Machine) -> None:
    """Refuses a graph and machine whose scoring would exceed the limits (docs/format.md).

    The scorer keeps a state per possible copy (tensors x devices), and every makespan is at
    most the sum of all op runtimes and all transfer durations, which must stay finite.

    Raises:
        MachineError: naming the limit.
    """
    copies = graph.n_tensors * machine.n_devices
    if copies > MAX_COPIES:
        raise MachineError(
            f"{graph.n_tensors:,} tensors on {machine.n_devices} devices make {copies:,} possible "
            f"copies, more than the limit of 2**26 = {MAX_COPIES:,} (docs/format.md, limits); "
            "use fewer devices"
        )
    if machine.n_devices > 1 and graph.n_tensors:
        largest = machine.transfer_duration(int(graph.tensor_size.max()))
        bound = graph.total_runtime + largest * graph.n_tensors * (machine.n_devices - 1)
        if not math.isfinite(bound):
            raise MachineError(
                f"a transfer of the largest tensor takes {largest:.3g} s at latency "
                f"{machine.latency:g} s and bandwidth {machine.bandwidth:g} bytes/s: makespans "
                "could overflow a float64; use a larger time unit or bandwidth"
            )


def check_shapes(graph: Graph, solution: Solution, machine: Machine) -> None:
    """Raises SolutionError when a solution does not fit the graph or the machine."""
    if solution.n_devices != machine.n_devices:
        raise SolutionError(
            f"solution places ops on {solution.n_devices} devices "
            f"but the machine has {machine.n_devices}"
        )
    if solution.placement.shape[0] != graph.n_ops:
        raise SolutionError(
            f"placement has {solution.placement.shape[0]} entries for {graph.n_ops} ops"
        )
    if solution.remat and solution.n_groups:
        raise SolutionError(REMAT_WITH_FUSION)
    if solution.fusion is not None and solution.fusion.shape[0] != graph.n_ops:
        raise SolutionError(
            f"fusion has {solution.fusion.shape[0]} group ids for {graph.n_ops} ops"
        )


def check_kernel(graph: Graph) -> None:
    """Refuses to score fusion groups on a graph without the `kernel` their times need."""
    if graph.kernel is None:
        raise SolutionError(
            f"graph '{graph.name}' has no 'kernel' field (memory_bandwidth, launch_overhead), "
            "which scoring fusion groups needs (docs/format.md section 13); graphs that graphopt "
            "imports carry it: add it, or score the solution without its groups"
        )


def score(graph: Graph, solution: Solution, machine: Machine | None = None) -> Score:
    """Checks and scores one solution (fast path); the machine defaults to the solution's."""
    machine = Machine(n_devices=solution.n_devices) if machine is None else machine
    return Scorer(graph, machine).score(solution)
