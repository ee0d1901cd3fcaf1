"""GO's per-device ready-queue scheduler: a placement and op priorities to one valid event order.

Paper 002 section 4 (and GDP, paper 003 section 4.1, for its runtime): given where every op
runs, each device, whenever it is free, runs its highest-priority op whose inputs are there,
idling only while none is. `ready_queue_kernel` simulates that in event time with the scorer's
timing rules (section 6): an op is ready on its device once every input is there; the device
that can start something earliest goes next (ties: lower device), taking its ready event of
highest priority (ties: lower code). A copy to another device is sent when its producer finishes:
in sync mode it is an event of its destination (it occupies the device there), with the priority
of its highest-priority reader there (sending every copy first instead made the makespan 45 %
longer on a 120-op layered graph with slow links, 8 random placements on 2 devices); in async mode
it takes no device and follows its producer in the order. Each device's
events come in the order of their simulated starts, so the scorer times the order exactly as
simulated, and every reward a placement policy sees is a contract makespan.

Default priorities are the critical path's (`list_scheduling.bottom_levels`), as GO's default.
The plain twin is `_reference.reference_ready_queue_order`.
"""

from __future__ import annotations

import numba
import numpy as np

from graphopt.costmodels.machine import Machine, MachineArrays
from graphopt.ir.arrays import GraphArrays, _u
from graphopt.ir.graph import Graph
from graphopt.solvers._heap import pop, push
from graphopt.solvers.base import Problem, Tracker
from graphopt.solvers.list_scheduling import bottom_levels


@numba.njit(cache=True, nogil=True)
def _before(time: np.ndarray, rank: np.ndarray, a: int, b: int) -> bool:
    """Heap order: earlier `time`, then higher `rank`, then lower op."""
    if time[a] != time[b]:
        return time[a] < time[b]
    if rank[a] != rank[b]:
        return rank[a] > rank[b]
    return a < b


@numba.njit(cache=True, nogil=True)
def ready_queue_kernel(
    g: GraphArrays,
    m: MachineArrays,
    placement: np.ndarray,
    priority: np.ndarray,
    order: np.ndarray,
) -> int:
    """Writes the simulated event order into `order`; returns the number of events.

    Events are numbered by their codes (section 2): op j is j, the copy of tensor t to device b
    is n_ops + t * d + b. In sync mode a copy is an event of its destination device, ready when
    its producer finishes, with its first reader's priority there; in async mode it takes no
    device and follows its producer at once.

    Args:
        g: the graph's arrays.
        m: the machine's (devices, latency, bandwidth, transfer mode).
        placement: [n_ops] device of each op, each in [0, d).
        priority: [n_ops] float64, larger runs first.
        order: [n_ops + n_tensors * (d - 1)] int64 output buffer.
    """
    n_ops = placement.shape[0]
    n_tensors = g.tensor_size.shape[0]
    d = m.n_devices
    n_codes = n_ops + n_tensors * d
    waiting = np.empty(n_ops, dtype=np.int64)
    for op in range(n_ops):
        waiting[op] = g.op_input_ptr[op + 1] - g.op_input_ptr[op]
    ready_at = np.zeros(n_codes, dtype=np.float64)
    rank = np.empty(n_codes, dtype=np.float64)  # a copy's is set when it is sent
    rank[:n_ops] = priority
    no_time = np.zeros(n_codes, dtype=np.float64)  # the ready heaps order by rank only
    # Per device: released events by the time they are ready, and events ready now by rank.
    pending = np.empty((d, n_ops + n_tensors), dtype=np.int64)
    ready = np.empty((d, n_ops + n_tensors), dtype=np.int64)
    n_pending = np.zeros(d, dtype=np.int64)
    n_ready = np.zeros(d, dtype=np.int64)
    device_free = np.zeros(d, dtype=np.float64)
    sent = np.zeros(n_tensors * d, dtype=np.bool_)
    for op in range(n_ops):
        if waiting[op] == 0:
            device = placement[op]
            n_pending[device] = push(
                pending[device], None, _before, ready_at, rank, n_pending[device], op
            )
    n_events = 0
    n_left = n_ops
    while n_left > 0:
        device = -1
        start = np.inf
        for b in range(d):
            if n_ready[b] > 0:
                at = device_free[b]
            elif n_pending[b] > 0:
                at = max(device_free[b], ready_at[pending[b, 0]])
            else:
                continue
            if at < start:
                device, start = b, at
        if device < 0:
            break  # a cycle, which a Graph cannot hold
        while n_pending[device] > 0 and ready_at[pending[device, 0]] <= start:
            code, n_pending[device] = pop(
                pending[device], None, _before, ready_at, rank, n_pending[device]
            )
            n_ready[device] = push(
                ready[device], None, _before, no_time, rank, n_ready[device], code
            )
        code, n_ready[device] = pop(ready[device], None, _before, no_time, rank, n_ready[device])
        order[n_events] = code
        n_events += 1
        if code >= n_ops:  # a sync copy: its readers on this device may now be released
            t = (code - n_ops) // d
            finish = start + (m.latency + g.tensor_size[t] / m.bandwidth)  # the scorer's sum
            device_free[device] = finish
            for e in range(g.consumer_ptr[t], g.consumer_ptr[t + 1]):
                consumer = g.consumer_op[e]
                if placement[consumer] == device:
                    _arrive(pending, n_pending, waiting, ready_at, rank, consumer, device, finish)
            continue
        n_left -= 1
        finish = start + g.op_runtime[code]
        device_free[device] = finish
        for k in range(g.op_output_ptr[code], g.op_output_ptr[code + 1]):
            t = g.op_output_tensor[k]
            arrival = finish + (m.latency + g.tensor_size[t] / m.bandwidth)
            for e in range(g.consumer_ptr[t], g.consumer_ptr[t + 1]):
                consumer = g.consumer_op[e]
                there = placement[consumer]
                if there == device:
                    _arrive(pending, n_pending, waiting, ready_at, rank, consumer, there, finish)
                    continue
                copy = n_ops + t * d + there
                if not sent[_u(t * d + there)]:
                    sent[_u(t * d + there)] = True
                    if m.sync:
                        ready_at[copy] = finish
                        rank[copy] = _first_reader(g, placement, priority, t, there)
                        n_pending[there] = push(
                            pending[there], None, _before, ready_at, rank, n_pending[there], copy
                        )
                    else:
                        order[n_events] = copy
                        n_events += 1
                if not m.sync:
                    _arrive(pending, n_pending, waiting, ready_at, rank, consumer, there, arrival)
    return n_events


@numba.njit(cache=True, nogil=True)
def _first_reader(
    g: GraphArrays, placement: np.ndarray, priority: np.ndarray, t: int, device: int
) -> float:
    """Highest priority among the readers of tensor `t` on `device`: its copy's priority."""
    best = -np.inf
    for e in range(g.consumer_ptr[t], g.consumer_ptr[t + 1]):
        if placement[g.consumer_op[e]] == device:
            best = max(best, priority[g.consumer_op[e]])
    return best


@numba.njit(cache=True, nogil=True)
def _arrive(
    pending: np.ndarray,
    n_pending: np.ndarray,
    waiting: np.ndarray,
    ready_at: np.ndarray,
    rank: np.ndarray,
    op: int,
    device: int,
    at: float,
) -> None:
    """One input of `op` is on its device at time `at`; the last one releases the op."""
    ready_at[op] = max(ready_at[op], at)
    waiting[op] -= 1
    if waiting[op] == 0:
        n_pending[device] = push(
            pending[device], None, _before, ready_at, rank, n_pending[device], op
        )


@numba.njit(cache=True, parallel=True)
def ready_queue_population(
    g: GraphArrays,
    m: MachineArrays,
    placements: np.ndarray,
    priorities: np.ndarray,
    orders: np.ndarray,
    lengths: np.ndarray,
) -> None:
    """`ready_queue_kernel` over a batch [B, n_ops] of placements and priorities, in parallel."""
    for b in numba.prange(placements.shape[0]):
        lengths[b] = ready_queue_kernel(g, m, placements[b], priorities[b], orders[b])


def max_events(graph: Graph, n_devices: int) -> int:
    """Most events any placement of `graph` on `n_devices` devices has."""
    return graph.n_ops + graph.n_tensors * max(n_devices - 1, 0)


def ready_queue_orders(
    graph: Graph,
    machine: Machine,
    placements: np.ndarray,
    priorities: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """GO's ready-queue schedule of each placement of a batch.

    Args:
        graph: the graph.
        machine: devices and transfer model (latency, bandwidth).
        placements: [B, n_ops] device of each op, each in [0, machine.n_devices).
        priorities: [B, n_ops] or [n_ops] op priorities (larger first); None: critical path.

    Returns:
        orders [B, max_events] int64 (row b holds lengths[b] events), lengths [B] int64.
    """
    placements = np.ascontiguousarray(np.atleast_2d(placements), dtype=np.int32)
    n = placements.shape[0]
    if priorities is None:
        priorities = bottom_levels(graph)
    priorities = np.ascontiguousarray(
        np.broadcast_to(np.asarray(priorities, dtype=np.float64), (n, graph.n_ops))
    )
    orders = np.empty((n, max_events(graph, machine.n_devices)), dtype=np.int64)
    lengths = np.empty(n, dtype=np.int64)
    ready_queue_population(graph.arrays, machine.arrays, placements, priorities, orders, lengths)
    return orders, lengths


def offer_only_placement(problem: Problem, tracker: Tracker) -> bool:
    """Offers every op on device 0 when it is the only placement (one device or no ops).

    Returns whether it was: a placement policy then has nothing to decide.
    """
    if problem.machine.n_devices > 1 and problem.graph.n_ops:
        return False
    offer_placement(problem, tracker, np.zeros(problem.graph.n_ops, dtype=np.int32))
    return True


def offer_placement(
    problem: Problem, tracker: Tracker, placement: np.ndarray, priorities: np.ndarray | None = None
) -> None:
    """Schedules one placement by the ready queues (pins override it), scores it and offers it."""
    offer_placements(problem, tracker, np.asarray(placement)[None], priorities)


def offer_placements(
    problem: Problem,
    tracker: Tracker,
    placements: np.ndarray,
    priorities: np.ndarray | None = None,
) -> None:
    """`offer_placement` for a batch [B, n_ops], as many rows as the budget has left."""
    placements = np.asarray(placements, dtype=np.int32)[: tracker.remaining]
    if problem.pinned is not None:
        pins = np.asarray(problem.pinned, dtype=np.int32)
        placements = np.where(pins >= 0, pins, placements).astype(np.int32)
    placements = np.ascontiguousarray(placements)
    orders, lengths = ready_queue_orders(problem.graph, problem.machine, placements, priorities)
    peaks, makespans, _ = problem.scorer.evaluate_population(placements, orders, lengths)
    excess, value = problem.fitness(peaks, makespans)
    tracker.offer_population(placements, orders, lengths, excess, value)
