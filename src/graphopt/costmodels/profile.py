"""What a solution does step by step: each device's memory at every step and every step's timing.

The scorer reports only the peaks and the makespan; pictures and diagnoses need the whole walk.
It is the plain reference walk of `_reference.py` (the oracle the numba scorer is tested
against), so the profile's per-device maxima are the scorer's peaks and its last finish is the
makespan, exactly. A step is what the rules measure once: one event, or the consecutive op
events of one fusion group, which run as one kernel (docs/format.md section 13). Slow by
design (Python per event); never call it on a hot path.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from graphopt.costmodels._reference import (
    persistent_per_device,
    reference_event_times,
    reference_memory_steps,
    reference_steps,
    reference_validate,
)
from graphopt.costmodels.machine import Machine
from graphopt.costmodels.score import (
    check_problem_size,
)
from graphopt.ir.graph import Graph
from graphopt.ir.solution import Solution


@dataclass(frozen=True, eq=False)
class MemoryProfile:
    """Per-step memory and timing of one valid solution (docs/format.md sections 5, 6 and 13).

    Shapes (E events in schedule order, n steps, d devices; n = E without fusion groups):
        events: [E] int64 the schedule's event codes (an op when < n_ops, else a transfer).
        step_ptr: [n + 1] int64 offsets: step i is events[step_ptr[i]:step_ptr[i + 1]], one
            event or one fusion group's op events.
        memory: [n, d] int64 bytes of each device at each step (resident copies + temp memory).
        persistent: [d] int64 bytes of the persistent tensors homed on each device: the floor
            every step of that device stands on.
        start, finish: [n] float64 seconds.
        device: [n] int32 the step's device (its ops'), or the transfer's destination.
        source: [n] int32 the step's device, or the device the transfer's tensor comes from.
        occupies: [n] bool whether the step holds its device's time: ops, and transfers in
            sync mode (a blocking receive); an async transfer occupies no device.
    """

    n_ops: int
    events: np.ndarray
    step_ptr: np.ndarray
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
        """E, the ops and transfers of the schedule."""
        return int(self.events.shape[0])

    @property
    def n_steps(self) -> int:
        """n, the steps: events, with each fusion group's ops counted once."""
        return int(self.step_ptr.shape[0]) - 1

    @property
    def order(self) -> np.ndarray:
        """[n] int64 each step's first event code: the event, or its group's first op."""
        return self.events[self.step_ptr[:-1]]

    @property
    def is_op(self) -> np.ndarray:
        """[n] bool: which steps run ops (the rest are transfers)."""
        return self.order < self.n_ops

    @property
    def ops(self) -> np.ndarray:
        """[n] int64 ops each step runs: 1 alone, a group's size, 0 for a transfer."""
        return np.where(self.is_op, np.diff(self.step_ptr), 0)

    @property
    def peak_memory_per_device(self) -> tuple[int, ...]:
        """peak(d): each device's largest step, as the scorer reports it."""
        if not self.n_steps:
            return (0,) * self.n_devices
        return tuple(int(p) for p in self.memory.max(axis=0))

    @property
    def peak_step(self) -> np.ndarray:
        """[d] the first step (0-based) at which each device reaches its peak."""
        if not self.n_steps:
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
    """Walks a valid solution and records every step's memory and timing.

    The machine (default: the solution's device count, free sync transfers) sets the transfer
    durations and mode; memory does not depend on it.

    Raises:
        MachineError: the problem is beyond the scorer's limits (`check_problem_size`).
        SolutionError: the solution does not fit the machine or breaks a rule of section 4 or 13
            (groups on a graph without a kernel included).
    """
    machine = Machine(n_devices=solution.n_devices) if machine is None else machine
    check_problem_size(graph, machine)
    reference_validate(graph, solution, machine)
    d = solution.n_devices
    events = np.array(solution.order, dtype=np.int64)
    sizes = [len(step) for step in reference_steps(graph, solution)]
    step_ptr = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]).astype(np.int64)
    first = events[step_ptr[:-1]]
    placement = solution.placement.astype(np.int64)
    is_op = first < graph.n_ops
    tensor, destination = np.divmod(first[~is_op] - graph.n_ops, d)
    home = placement[graph.tensor_producer]  # each tensor's producer's device
    device = np.empty(first.shape[0], dtype=np.int32)
    device[is_op] = placement[first[is_op]]
    device[~is_op] = destination
    source = device.copy()
    source[~is_op] = home[tensor]
    times = np.array(reference_event_times(graph, solution, machine), dtype=np.float64)
    times = times.reshape(-1, 2)
    return MemoryProfile(
        n_ops=graph.n_ops,
        events=events,
        step_ptr=step_ptr,
        memory=np.array(reference_memory_steps(graph, solution), dtype=np.int64).reshape(-1, d),
        persistent=persistent_per_device(graph, placement, d),
        start=times[:, 0].copy(),
        finish=times[:, 1].copy(),
        device=device,
        source=source,
        occupies=is_op | (machine.mode == "sync"),
        capacity=machine.capacity,
    )
