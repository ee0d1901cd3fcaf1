"""What a solution does step by step: each device's memory at every event and every event's timing.

The scorer reports only the peaks and the makespan; pictures and diagnoses need the whole walk.
It is the plain reference walk of `_reference.py` (the oracle the numba scorer is tested
against), so the profile's per-device maxima are the scorer's peaks and its last finish is the
makespan, exactly. Slow by design (Python per event); never call it on a hot path.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from graphopt.costmodels._reference import (
    persistent_per_device,
    reference_check,
    reference_event_times,
    reference_memory_steps,
)
from graphopt.costmodels.machine import Machine
from graphopt.costmodels.score import check_problem_size, check_shapes, raise_violation
from graphopt.costmodels.validity import Violation
from graphopt.ir.graph import Graph
from graphopt.ir.solution import Solution


@dataclass(frozen=True, eq=False)
class MemoryProfile:
    """Per-step memory and per-event timing of one valid solution (COST_MODEL.md 4 and 5).

    Shapes (n events in schedule order, d devices):
        order: [n] int64 event codes (an op when < n_ops, else a transfer).
        memory: [n, d] int64 bytes of each device at each step (resident copies + temp memory).
        persistent: [d] int64 bytes of the persistent tensors homed on each device: the floor
            every step of that device stands on.
        start, finish: [n] float64 seconds.
        device: [n] int32 the op's device, or the transfer's destination.
        source: [n] int32 the op's device, or the device the transfer's tensor comes from.
        occupies: [n] bool whether the event holds its device's time: ops, and transfers in
            sync mode (a blocking receive); an async transfer occupies no device.
    """

    n_ops: int
    order: np.ndarray
    memory: np.ndarray
    persistent: np.ndarray
    start: np.ndarray
    finish: np.ndarray
    device: np.ndarray
    source: np.ndarray
    occupies: np.ndarray
    capacity: int | None = None

    @property
    def n_devices(self) -> int:
        """d, the devices the solution places ops on."""
        return int(self.persistent.shape[0])

    @property
    def n_events(self) -> int:
        """n, the ops and transfers of the schedule."""
        return int(self.order.shape[0])

    @property
    def is_op(self) -> np.ndarray:
        """[n] bool: which events are ops (the rest are transfers)."""
        return self.order < self.n_ops

    @property
    def peak_memory_per_device(self) -> tuple[int, ...]:
        """peak(d): each device's largest step, as the scorer reports it."""
        if not self.n_events:
            return (0,) * self.n_devices
        return tuple(int(p) for p in self.memory.max(axis=0))

    @property
    def peak_step(self) -> np.ndarray:
        """[d] the first step (0-based event position) at which each device reaches its peak."""
        if not self.n_events:
            return np.zeros(self.n_devices, dtype=np.int64)
        return self.memory.argmax(axis=0)

    @property
    def peak_memory(self) -> int:
        """Max over devices of peak(d)."""
        return max(self.peak_memory_per_device, default=0)

    @property
    def makespan(self) -> float:
        """The latest finish (0 for an empty schedule), as the scorer reports it."""
        return float(max(0.0, self.finish.max(initial=0.0)))


def memory_profile(
    graph: Graph, solution: Solution, machine: Machine | None = None
) -> MemoryProfile:
    """Walks a valid solution and records every step's memory and every event's timing.

    The machine (default: the solution's device count, free sync transfers) sets the transfer
    durations and mode; memory does not depend on it.

    Raises:
        MachineError: the problem is beyond the scorer's limits (`check_problem_size`).
        SolutionError: the solution does not fit the machine or breaks a rule of section 3.
    """
    machine = Machine(n_devices=solution.n_devices) if machine is None else machine
    check_problem_size(graph, machine)
    check_shapes(graph, solution, machine)
    violation, where, detail = reference_check(graph, solution)
    if violation is not Violation.NONE:
        raise_violation(graph, solution, violation, where, detail)
    d = solution.n_devices
    order = np.array(solution.order, dtype=np.int64)
    placement = solution.placement.astype(np.int64)
    is_op = order < graph.n_ops
    tensor, destination = np.divmod(order[~is_op] - graph.n_ops, d)
    home = placement[graph.tensor_producer]  # each tensor's producer's device
    device = np.empty(order.shape[0], dtype=np.int32)
    device[is_op] = placement[order[is_op]]
    device[~is_op] = destination
    source = device.copy()
    source[~is_op] = home[tensor]
    persistent = persistent_per_device(graph, placement, d)
    times = np.array(reference_event_times(graph, solution, machine), dtype=np.float64)
    times = times.reshape(-1, 2)
    return MemoryProfile(
        n_ops=graph.n_ops,
        order=order,
        memory=np.array(reference_memory_steps(graph, solution), dtype=np.int64).reshape(-1, d),
        persistent=persistent,
        start=times[:, 0].copy(),
        finish=times[:, 1].copy(),
        device=device,
        source=source,
        occupies=is_op | (machine.mode == "sync"),
        capacity=machine.capacity,
    )
