"""Makespan baselines: critical-path list scheduling and HEFT.

- Critical-path list scheduling (De Micheli 1994), the baseline of the GFlowNet scheduling paper
  (paper 004, section 5): ops are listed in a topological order by decreasing bottom level (the
  longest runtime path from the op to a sink), and each op in turn goes to the device that
  becomes free first. Like the paper's, it ignores transfer times when deciding.
- HEFT (Topcuoglu, Hariri and Wu 2002, "Performance-effective and low-complexity task scheduling
  for heterogeneous computing"), on d homogeneous devices: ops are listed by decreasing upward
  rank (bottom level with transfer durations on the edges), and each op goes to the device where
  it finishes earliest, counting the machine's transfers (COST_MODEL.md section 5): in `sync`
  mode a transfer occupies its destination device right before the first op there that reads
  it (the "lazy" insertion of `events_from_op_order`), in `async` mode it only delays its reader.
  This is HEFT without its insertion policy: each op is appended to its device's queue, so the
  listed order is one valid event order.

Both honour pinned ops (or a whole fixed placement) and produce (placement, op order); the
solvers turn it into events with lazy and eager transfers and offer both to the tracker.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

import numpy as np

from graphopt.costmodels.machine import Machine
from graphopt.ir.graph import Graph
from graphopt.ir.solution import Solution
from graphopt.solvers.base import Problem, Solver, Tracker
from graphopt.solvers.events import offer_op_orders


def _upward_ranks(graph: Graph, edge_delay: np.ndarray) -> np.ndarray:
    """[n_ops] runtime[j] + max over tensor edges j -t-> s of (edge_delay[t] + rank[s]), or 0."""
    output_ptr, outputs = graph.op_output_ptr.tolist(), graph.op_output_tensor.tolist()
    consumer_ptr, consumers = graph.consumer_ptr.tolist(), graph.consumer_op.tolist()
    runtime, delay = graph.op_runtime.tolist(), edge_delay.tolist()
    rank = [0.0] * graph.n_ops
    for op in reversed(graph.topological_order.tolist()):
        tail = 0.0
        for t in outputs[output_ptr[op] : output_ptr[op + 1]]:
            for consumer in consumers[consumer_ptr[t] : consumer_ptr[t + 1]]:
                tail = max(tail, delay[t] + rank[consumer])
        rank[op] = runtime[op] + tail
    return np.array(rank, dtype=np.float64)


def bottom_levels(graph: Graph) -> np.ndarray:
    """Longest runtime-weighted path from each op to a sink, the op's own runtime included.

    Args:
        graph: the graph.

    Returns:
        [n_ops] float64 bottom levels; their maximum is the critical path length.
    """
    return _upward_ranks(graph, np.zeros(graph.n_tensors))


def upward_ranks(graph: Graph, machine: Machine) -> np.ndarray:
    """HEFT's upward ranks: bottom levels with each tensor's transfer duration on its edges.

    On one device no transfer can happen and the ranks are the bottom levels.

    Args:
        graph: the graph.
        machine: devices and transfer model.

    Returns:
        [n_ops] float64 upward ranks.
    """
    if machine.n_devices == 1:
        return bottom_levels(graph)
    durations = np.array([machine.transfer_duration(int(s)) for s in graph.tensor_size])
    return _upward_ranks(graph, durations)


def priority_order(graph: Graph, priority: np.ndarray) -> np.ndarray:
    """Topological order that runs the ready op with the highest priority (ties: lower index).

    Args:
        graph: the graph.
        priority: [n_ops] op priorities.

    Returns:
        [n_ops] int64 op order.
    """
    src, dst = graph.edge_index
    by_source = np.argsort(src, kind="stable")
    succ_ptr = np.zeros(graph.n_ops + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=graph.n_ops), out=succ_ptr[1:])
    succ_ptr_list, successors = succ_ptr.tolist(), dst[by_source].tolist()
    waiting = np.bincount(dst, minlength=graph.n_ops).tolist()
    negated = (-np.asarray(priority, dtype=np.float64)).tolist()
    ready = [(negated[op], op) for op in range(graph.n_ops) if waiting[op] == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        _, op = heapq.heappop(ready)
        order.append(op)
        for successor in successors[succ_ptr_list[op] : succ_ptr_list[op + 1]]:
            waiting[successor] -= 1
            if waiting[successor] == 0:
                heapq.heappush(ready, (negated[successor], successor))
    return np.array(order, dtype=np.int64)


def _pins(graph: Graph, pinned: np.ndarray | None) -> list[int]:
    if pinned is None:
        return [-1] * graph.n_ops
    return np.asarray(pinned, dtype=np.int64).tolist()


def critical_path_schedule(
    graph: Graph, n_devices: int = 1, pinned: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Critical-path list scheduling (paper 004's baseline).

    Ops are listed by `priority_order` on bottom levels; each listed op goes to its pinned
    device, or else to the device that becomes free first (ties: lower index). A device is free
    when its last op finishes; an op starts when its device is free and its predecessors have
    finished (transfers are not timed, as in the paper).

    Args:
        graph: the graph.
        n_devices: number of devices d.
        pinned: [n_ops] device of each pinned op, -1 where free; None when nothing is pinned. A
            placement with no -1 fixes every op's device and only the order is decided.

    Returns:
        placement [n_ops] int32, op_order [n_ops] int64.
    """
    order = priority_order(graph, bottom_levels(graph))
    pins = _pins(graph, pinned)
    input_ptr, inputs = graph.op_input_ptr.tolist(), graph.op_input_tensor.tolist()
    producer, runtime = graph.tensor_producer.tolist(), graph.op_runtime.tolist()
    free_at = [0.0] * n_devices
    finish = [0.0] * graph.n_ops
    placement = [0] * graph.n_ops
    for op in order.tolist():
        device = pins[op] if pins[op] >= 0 else min(range(n_devices), key=free_at.__getitem__)
        start = free_at[device]
        for t in inputs[input_ptr[op] : input_ptr[op + 1]]:
            start = max(start, finish[producer[t]])
        finish[op] = free_at[device] = start + runtime[op]
        placement[op] = device
    return np.array(placement, dtype=np.int32), order


def heft_schedule(
    graph: Graph, machine: Machine, pinned: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """HEFT on homogeneous devices: each op, by decreasing upward rank, to its earliest finish.

    For each candidate device (only its pinned one when pinned) the op's finish is simulated as
    the cost model times it with lazy transfers: an input from another device not yet there is
    received in `sync` mode right before the op (occupying the device for its duration, in
    input order), in `async` mode it arrives its duration after its producer finishes. The op
    goes where it finishes first (ties: lower device index) and is appended to that device.

    Args:
        graph: the graph.
        machine: devices and transfer model.
        pinned: [n_ops] device of each pinned op, -1 where free; None when nothing is pinned.

    Returns:
        placement [n_ops] int32, op_order [n_ops] int64.
    """
    order = priority_order(graph, upward_ranks(graph, machine))
    pins = _pins(graph, pinned)
    devices = list(range(machine.n_devices))
    sync = machine.mode == "sync"
    input_ptr, inputs = graph.op_input_ptr.tolist(), graph.op_input_tensor.tolist()
    producer, runtime = graph.tensor_producer.tolist(), graph.op_runtime.tolist()
    duration = [machine.transfer_duration(int(s)) for s in graph.tensor_size]
    free_at = [0.0] * machine.n_devices
    finish = [0.0] * graph.n_ops
    placement = [0] * graph.n_ops
    arrival: dict[tuple[int, int], float] = {}  # (tensor, device) -> when its copy is there

    def simulate(op: int, device: int) -> tuple[float, list[tuple[int, float]]]:
        """Finish time of `op` on `device` and the copies it would receive there."""
        busy_until, ready = free_at[device], 0.0
        received: list[tuple[int, float]] = []
        for t in inputs[input_ptr[op] : input_ptr[op + 1]]:
            source = producer[t]
            if placement[source] == device:
                ready = max(ready, finish[source])
            elif (t, device) in arrival:
                ready = max(ready, arrival[(t, device)])
            else:
                if sync:
                    busy_until = max(busy_until, finish[source]) + duration[t]
                    there = busy_until
                else:
                    there = finish[source] + duration[t]
                received.append((t, there))
                ready = max(ready, there)
        return max(busy_until, ready) + runtime[op], received

    for op in order.tolist():
        candidates = [pins[op]] if pins[op] >= 0 else devices
        options = [(*simulate(op, device), device) for device in candidates]
        op_finish, received, device = min(options, key=lambda option: (option[0], option[2]))
        placement[op] = device
        finish[op] = free_at[device] = op_finish
        for t, there in received:
            arrival[(t, device)] = there
    return np.array(placement, dtype=np.int32), order


class CriticalPathScheduler(Solver):
    """Critical-path list scheduling (`critical_path_schedule`), honouring pins."""

    name = "critical-path"

    def run(
        self,
        problem: Problem,
        tracker: Tracker,
        rng: np.random.Generator,
        initial: Sequence[Solution],
    ) -> None:
        """Offers the schedule with lazy and eager transfers."""
        placement, order = critical_path_schedule(
            problem.graph, problem.machine.n_devices, problem.pinned
        )
        offer_op_orders(problem, tracker, placement, [order])


class HeftScheduler(Solver):
    """HEFT earliest-finish-time placement and order (`heft_schedule`), honouring pins."""

    name = "heft"

    def run(
        self,
        problem: Problem,
        tracker: Tracker,
        rng: np.random.Generator,
        initial: Sequence[Solution],
    ) -> None:
        """Offers the schedule with lazy and eager transfers."""
        placement, order = heft_schedule(problem.graph, problem.machine, problem.pinned)
        offer_op_orders(problem, tracker, placement, [order])
