"""Makespan baselines: critical-path list scheduling and HEFT, plain and on timelines.

- Critical-path list scheduling (De Micheli 1994), the baseline of the GFlowNet scheduling paper
  (paper 004, section 5): ops are listed in a topological order by decreasing bottom level (the
  longest runtime path from the op to a sink), and each op in turn goes to the device that
  becomes free first. Like the paper's, it ignores transfer times when deciding.
- HEFT (Topcuoglu, Hariri and Wu 2002, "Performance-effective and low-complexity task scheduling
  for heterogeneous computing"), on d homogeneous devices: ops are listed by decreasing upward
  rank (bottom level with transfer durations on the edges), and each op goes to the device where
  it finishes earliest, counting the machine's transfers (docs/format.md section 6): in `sync`
  mode a transfer occupies its destination device right before the first op there that reads
  it (the "lazy" insertion of `events_from_op_order`), in `async` mode it only delays its reader.
  Plain HEFT (`heft_schedule`) appends each op to its device's queue, so the listed order is one
  valid event order.
- HEFT on timelines (`heft_timeline`): with HEFT's insertion policy an op (or a received copy)
  may fill an idle gap of a device, and with the lookahead of Bittencourt, Sakellariou and
  Madeira (2010) a device is chosen by where the op's most critical child could then finish.
  The `heft` solver offers plain HEFT and these variants; the tracker keeps the best.

All honour pinned ops (or a whole fixed placement). The plain schedulers produce (placement, op
order), turned into events with lazy and eager transfers. The timeline engine
(`timeline_schedule`, also the decoder of `makespan_search`) produces the events itself: each
device keeps its events (ops and, in `sync` mode, received copies) as sorted, non-overlapping
slots; an event goes into its earliest gap that ends late enough and whose next slot starts
strictly after it (or after the device's last slot), and starts at the latest of the gap's start
and the finish of what it depends on, as the cost model would start it. Events are numbered as
they are committed, and the global order sorts them by (start, number). That order keeps every
dependency (a dependency is committed first and finishes no later than its reader starts) and
every device's slot order (a slot's start never decreases along the device, and two slots with
the same start were appended in commit order), so the scorer times every event as the timeline
does and the makespans are equal.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import NamedTuple

import numba
import numpy as np

from graphopt.costmodels.machine import Machine, MachineArrays
from graphopt.costmodels.validity import Violation
from graphopt.ir.arrays import GraphArrays
from graphopt.ir.graph import Graph
from graphopt.solvers.base import Initial, Problem, Rng, Solver, Tracker
from graphopt.solvers.events import events_from_op_order, offer_op_orders


def _upward_ranks(
    graph: Graph, edge_delay: np.ndarray, placement: np.ndarray | None = None
) -> np.ndarray:
    """[n_ops] runtime[j] + max over tensor edges j -t-> s of (edge_delay[t] + rank[s]), or 0.

    With a placement, an edge between ops on the same device has no delay. Compiled, as is
    `priority_order`: the makespan search re-ranks a placement at every step.
    """
    device = np.full(graph.n_ops, -1, np.int32) if placement is None else placement
    return _rank_kernel(
        graph.arrays,
        graph.topological_order,
        np.ascontiguousarray(edge_delay, dtype=np.float64),
        np.ascontiguousarray(device, dtype=np.int32),
    )


@numba.njit(cache=True)
def _rank_kernel(
    g: GraphArrays,
    topological: np.ndarray,
    delay: np.ndarray,
    device: np.ndarray,
) -> np.ndarray:
    """Upward ranks in reverse topological order; device -1 puts a delay on every edge."""
    rank = np.zeros(g.op_runtime.shape[0], dtype=np.float64)
    for i in range(topological.shape[0] - 1, -1, -1):
        op = topological[i]
        tail = 0.0
        for e in range(g.op_output_ptr[op], g.op_output_ptr[op + 1]):
            t = g.op_output_tensor[e]
            for c in range(g.consumer_ptr[t], g.consumer_ptr[t + 1]):
                successor = g.consumer_op[c]
                apart = device[op] < 0 or device[successor] != device[op]
                tail = max(tail, (delay[t] if apart else 0.0) + rank[successor])
        rank[op] = g.op_runtime[op] + tail
    return rank


def bottom_levels(graph: Graph) -> np.ndarray:
    """Longest runtime-weighted path from each op to a sink, the op's own runtime included.

    Args:
        graph: the graph.

    Returns:
        [n_ops] float64 bottom levels; their maximum is the critical path length.
    """
    return _upward_ranks(graph, np.zeros(graph.n_tensors))


def upward_ranks(graph: Graph, machine: Machine, placement: np.ndarray | None = None) -> np.ndarray:
    """HEFT's upward ranks: bottom levels with each tensor's transfer duration on its edges.

    On one device no transfer can happen and the ranks are the bottom levels.

    Args:
        graph: the graph.
        machine: devices and transfer model.
        placement: [n_ops] devices, when known: only edges between devices then carry a
            transfer duration (the ranks a fixed placement is list-scheduled by).

    Returns:
        [n_ops] float64 upward ranks.
    """
    if machine.n_devices == 1:
        return bottom_levels(graph)
    return _upward_ranks(graph, transfer_durations(graph, machine), placement)


def placement_order(graph: Graph, machine: Machine, placement: np.ndarray) -> np.ndarray:
    """The list by upward ranks for a fixed placement (edges within a device are free)."""
    return priority_order(graph, upward_ranks(graph, machine, placement))


def transfer_durations(graph: Graph, machine: Machine) -> np.ndarray:
    """[n_tensors] float64 seconds to move each tensor, computed as the scorer computes them."""
    return machine.latency + graph.tensor_size / machine.bandwidth


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
    waiting = np.bincount(dst, minlength=graph.n_ops).astype(np.int64)
    negated = -np.asarray(priority, dtype=np.float64)
    return _priority_kernel(succ_ptr, np.ascontiguousarray(dst[by_source]), waiting, negated)


@numba.njit(cache=True)
def _priority_kernel(
    succ_ptr: np.ndarray, successors: np.ndarray, waiting: np.ndarray, negated: np.ndarray
) -> np.ndarray:
    """Kahn's algorithm with a heap keyed by (-priority, op); `waiting` is consumed."""
    ready = [(0.0, 0) for _ in range(0)]
    for op in range(negated.shape[0]):
        if waiting[op] == 0:
            heapq.heappush(ready, (negated[op], op))
    order = np.empty(negated.shape[0], dtype=np.int64)
    n = 0
    while len(ready) > 0:
        _, op = heapq.heappop(ready)
        order[n] = op
        n += 1
        for k in range(succ_ptr[op], succ_ptr[op + 1]):
            successor = successors[k]
            waiting[successor] -= 1
            if waiting[successor] == 0:
                heapq.heappush(ready, (negated[successor], np.int64(successor)))
    return order


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
    graph: Graph,
    machine: Machine,
    pinned: np.ndarray | None = None,
    priority: np.ndarray | None = None,
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
        priority: [n_ops] what the ops are listed by instead of their upward ranks (a
            randomized HEFT lists them by perturbed ranks).

    Returns:
        placement [n_ops] int32, op_order [n_ops] int64.
    """
    if priority is None:
        priority = upward_ranks(graph, machine)
    order = priority_order(graph, priority)
    pins = _pins(graph, pinned)
    devices = list(range(machine.n_devices))
    sync = machine.arrays.sync
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


def heft_events(
    graph: Graph, machine: Machine, pinned: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Plain HEFT's schedule as (placement, event order), with lazy transfers.

    The one schedule the GFlowNet solver, its benchmarks and paper 004's tables call HEFT's.
    """
    placement, order = heft_schedule(graph, machine, pinned)
    return placement, events_from_op_order(graph, placement, order, machine.n_devices, "lazy")


APPEND, SCAN, BLOCKS = 0, 1, 2
"""How an event finds its slot: after the device's last one; in the earliest gap that fits,
scanning slot by slot; or skipping blocks of slots whose largest gap is too short."""

BLOCK = 32
"""Slots per block in the BLOCKS mode."""

BLOCKS_FROM = 8192
"""Ops plus tensors from which insertion keeps block gaps: scanning slot by slot is
quadratic on large graphs, but keeping the blocks exact costs more than it saves on small
ones (measured: 2,000 ops 30% slower with blocks, 5,000 ops and 5,000 tensors 2.5 times
faster, 100,000 ops 16 times faster)."""

START, FINISH, GAPS = 0, 1, 2
"""Rows of a device's timeline array: slot starts, slot finishes, largest gap of each block."""


@numba.njit(cache=True)
def _slot(
    timeline: np.ndarray, length: int, release: float, duration: float, mode: int
) -> tuple[int, float]:
    """(index, start) of the earliest slot of one device for an event released at `release`.

    Only a gap whose next slot starts strictly after the event's start is taken, which keeps
    (start, commit number) a valid global order. The gaps before a slot that starts at or
    before `release` cannot qualify, so the scan starts at the first slot after it; past that
    slot an event starts when the previous slot finishes, so a block whose largest gap is too
    short (by more than rounding) holds no fit.
    """
    starts, finishes, gaps = timeline[START], timeline[FINISH], timeline[GAPS]
    if mode == APPEND or length == 0:
        return length, max(release, finishes[length - 1] if length > 0 else 0.0)
    low, high = 0, length
    while low < high:  # first slot that starts after release
        middle = (low + high) // 2
        if starts[middle] <= release:
            low = middle + 1
        else:
            high = middle
    index = low
    while index < length:
        block = index // BLOCK
        last = min(length, (block + 1) * BLOCK) - 1
        if (
            mode == BLOCKS
            and index > low
            and (gaps[block] <= 0.0 or gaps[block] < duration - 1e-12 * finishes[last])
        ):
            index = last + 1
            continue
        start = max(release, finishes[index - 1]) if index > 0 else release
        if start + duration <= starts[index] and start < starts[index]:
            return index, start
        index += 1
    return length, max(release, finishes[length - 1])


@numba.njit(cache=True)
def _refresh(timeline: np.ndarray, length: int, first: int) -> None:
    """Recomputes the largest gap of every block from the one holding slot `first` on."""
    starts, finishes, gaps = timeline[START], timeline[FINISH], timeline[GAPS]
    for block in range(max(first, 0) // BLOCK, (length + BLOCK - 1) // BLOCK):
        largest = -np.inf
        for i in range(block * BLOCK, min(length, (block + 1) * BLOCK)):
            largest = max(largest, starts[i] - (finishes[i - 1] if i > 0 else 0.0))
        gaps[block] = largest


class _Timelines(NamedTuple):
    """The timeline engine's state: what `_place` commits and `_undo` takes back.

    The engine's steps are inlined and read every field they use once, unconditionally, at
    their top: numba then prunes the tuple's reference counts (passed to compiled calls, or
    read inside branches, it made HEFT 1.5x slower). This way HEFT runs 1.15-1.3x faster
    than with the arrays passed one by one.
    """

    placement: np.ndarray
    """[n_ops] int32: device of each committed op, -1 before."""
    finish: np.ndarray
    """[n_ops] float64: finish of each committed op."""
    arrival: np.ndarray
    """[n_tensors * d] float64: finish of each received copy, -1 before."""
    timelines: np.ndarray
    """[d, 3, capacity] float64: each device's slots (rows START, FINISH) and block gaps (GAPS)."""
    slot_count: np.ndarray
    """[d] int64: slots each device holds."""
    event_code: np.ndarray
    """[events] int64: code of each committed event, in commit order."""
    event_start: np.ndarray
    """[events] float64: its start."""
    event_slot: np.ndarray
    """[events] int64: its slot on its device, -1 for an async receive (no slot)."""
    top: np.ndarray
    """[1] int64: events committed."""
    need_tensor: np.ndarray
    """[n_tensors + 1] int64: scratch of `_place`, the copies an op must receive."""
    need_release: np.ndarray
    """[n_tensors + 1] float64: scratch of `_place`, when each can be sent."""


@numba.njit(cache=True, inline="always")
def _commit(
    code: int,
    device: int,
    release: float,
    duration: float,
    timed: bool,
    mode: int,
    s: _Timelines,
) -> float:
    """Commits one event (in a device slot when `timed`) and returns its finish."""
    timelines, slot_count, top = s.timelines, s.slot_count, s.top
    event_code, event_start, event_slot = s.event_code, s.event_start, s.event_slot
    index, start = -1, release
    if timed:
        timeline, length = timelines[device], slot_count[device]
        index, start = _slot(timeline, length, release, duration, mode)
        for k in range(length, index, -1):
            timeline[START, k] = timeline[START, k - 1]
            timeline[FINISH, k] = timeline[FINISH, k - 1]
        timeline[START, index] = start
        timeline[FINISH, index] = start + duration
        slot_count[device] = length + 1
        if mode == BLOCKS:
            _refresh(timeline, length + 1, index)
    n = top[0]
    event_code[n] = code
    event_start[n] = start
    event_slot[n] = index
    top[0] = n + 1
    return start + duration


@numba.njit(cache=True, inline="always")
def _place(
    op: int,
    device: int,
    g: GraphArrays,
    m: MachineArrays,
    duration: np.ndarray,
    mode: int,
    s: _Timelines,
) -> float:
    """Commits `op` on `device` with the copies it must receive there; returns its finish.

    Inputs whose producer is not placed yet (a lookahead child's other parents) are ignored.
    Copies are received in order of their producers' finish (earliest release first, which
    finishes a run of receives soonest).
    """
    placement, finish, arrival = s.placement, s.finish, s.arrival
    need_tensor, need_release = s.need_tensor, s.need_release
    n_ops = placement.shape[0]
    d = m.n_devices
    ready = 0.0
    needed = 0
    for e in range(g.op_input_ptr[op], g.op_input_ptr[op + 1]):
        t = g.op_input_tensor[e]
        source = g.tensor_producer[t]
        if placement[source] < 0:
            continue
        if placement[source] == device:
            ready = max(ready, finish[source])
        elif arrival[t * d + device] >= 0.0:
            ready = max(ready, arrival[t * d + device])
        else:
            k = needed
            while k > 0 and need_release[k - 1] > finish[source]:
                need_tensor[k] = need_tensor[k - 1]
                need_release[k] = need_release[k - 1]
                k -= 1
            need_tensor[k] = t
            need_release[k] = finish[source]
            needed += 1
    for k in range(needed):
        t = need_tensor[k]
        there = _commit(
            n_ops + t * d + device,
            device,
            need_release[k],
            duration[t],
            m.sync,
            mode,
            s,
        )
        arrival[t * d + device] = there
        ready = max(ready, there)
    done = _commit(
        op,
        device,
        ready,
        g.op_runtime[op],
        True,
        mode,
        s,
    )
    placement[op] = device
    finish[op] = done
    return done


@numba.njit(cache=True, inline="always")
def _undo(
    mark: int,
    d: int,
    mode: int,
    s: _Timelines,
) -> None:
    """Takes back every event committed after the first `mark`, latest first."""
    placement, arrival, timelines, slot_count, top = (
        s.placement,
        s.arrival,
        s.timelines,
        s.slot_count,
        s.top,
    )
    event_code, event_slot = s.event_code, s.event_slot
    n_ops = placement.shape[0]
    while top[0] > mark:
        n = top[0] - 1
        code = event_code[n]
        if code < n_ops:
            device = placement[code]
            placement[code] = -1
        else:
            device = (code - n_ops) % d
            arrival[code - n_ops] = -1.0
        index = event_slot[n]
        if index >= 0:
            timeline, length = timelines[device], slot_count[device] - 1
            for k in range(index, length):
                timeline[START, k] = timeline[START, k + 1]
                timeline[FINISH, k] = timeline[FINISH, k + 1]
            slot_count[device] = length
            if mode == BLOCKS:
                _refresh(timeline, length, min(index, length - 1))
        top[0] = n


@numba.njit(cache=True)
def _timeline_kernel(
    g: GraphArrays,
    m: MachineArrays,
    duration: np.ndarray,
    order: np.ndarray,
    pins: np.ndarray,
    child: np.ndarray,
    insertion: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """List-schedules ops in `order`; returns placement, event codes and op finish times.

    A pinned op goes to its device; a free one to the device where it finishes first or, when
    it has a `child` (>= 0), where that child could then finish first on its best device
    (ties: the op's own finish, then the lower device).
    """
    n_ops = g.op_runtime.shape[0]
    n_tensors = g.tensor_producer.shape[0]
    d = m.n_devices
    mode = APPEND if not insertion else BLOCKS if n_ops + n_tensors >= BLOCKS_FROM else SCAN
    capacity = n_ops + n_tensors + 1
    placement = np.full(n_ops, -1, dtype=np.int32)
    finish = np.zeros(n_ops, dtype=np.float64)
    events = n_ops + n_tensors * (d - 1) + 1
    event_start = np.empty(events, dtype=np.float64)
    top = np.zeros(1, dtype=np.int64)
    s = _Timelines(
        placement,
        finish,
        np.full(n_tensors * d, -1.0),
        np.empty((d, 3, capacity), dtype=np.float64),
        np.zeros(d, dtype=np.int64),
        np.empty(events, dtype=np.int64),
        event_start,
        np.empty(events, dtype=np.int64),
        top,
        np.empty(n_tensors + 1, dtype=np.int64),
        np.empty(n_tensors + 1, dtype=np.float64),
    )
    for op in order:
        best = pins[op]
        if best < 0:
            best_key, best_finish = np.inf, np.inf
            for device in range(d):
                mark = top[0]
                done = _place(op, device, g, m, duration, mode, s)
                key = done
                c = child[op]
                if c >= 0:
                    key = np.inf
                    for target in range(d):
                        if pins[c] >= 0 and pins[c] != target:
                            continue
                        inner = top[0]
                        key = min(
                            key,
                            _place(c, target, g, m, duration, mode, s),
                        )
                        _undo(inner, d, mode, s)
                _undo(mark, d, mode, s)
                if key < best_key or (key == best_key and done < best_finish):
                    best, best_key, best_finish = device, key, done
        _place(op, best, g, m, duration, mode, s)
    n = top[0]
    by_start = np.argsort(event_start[:n], kind="mergesort")
    return placement, s.event_code[:n][by_start], finish


@dataclass(frozen=True)
class TimedSchedule:
    """A list schedule with its timeline.

    Attributes:
        placement: [n_ops] int32 device of each op.
        events: [n_events] int64 event codes, one valid order (docs/format.md section 2).
        finish: [n_ops] float64 finish of each op; the scorer times the events alike.
        makespan: latest finish (a received copy finishes before its reader).
    """

    placement: np.ndarray
    events: np.ndarray
    finish: np.ndarray
    makespan: float


def most_critical_children(graph: Graph, rank: np.ndarray) -> np.ndarray:
    """[n_ops] int64 the successor of each op with the highest rank (ties: lower index), or -1."""
    src, dst = graph.edge_index
    child = np.full(graph.n_ops, -1, dtype=np.int64)
    by_rank = np.lexsort((-dst, rank[dst], src))  # per source, the best successor comes last
    src, dst = src[by_rank], dst[by_rank]
    last = np.append(src[1:] != src[:-1], True) if src.size else np.zeros(0, dtype=bool)
    child[src[last]] = dst[last]
    return child


def timeline_schedule(
    graph: Graph,
    machine: Machine,
    order: np.ndarray,
    pinned: np.ndarray | None = None,
    *,
    insertion: bool = True,
    child: np.ndarray | None = None,
) -> TimedSchedule:
    """List-schedules ops in `order` on per-device timelines, honouring pins and transfers.

    Each op, in turn, goes to its pinned device, or else to the device where it finishes first
    (with `child`: where its child could then finish first, lookahead HEFT). There the copies
    it lacks are received (in `sync` mode each in the earliest slot of the device after its
    producer finishes; in `async` mode they arrive their duration after it), then the op runs
    in its earliest slot after its inputs are there: a gap between earlier events with
    `insertion` (HEFT's insertion policy), else after the device's last event.

    Args:
        graph: the graph.
        machine: devices and transfer model.
        order: [n_ops] a topological order of all ops (the list).
        pinned: [n_ops] device of each pinned op, -1 where free; None when nothing is pinned. A
            placement with no -1 fixes every op's device.
        insertion: whether ops and receives may fill gaps between earlier events.
        child: [n_ops] op whose finish decides each op's device (lookahead), -1 for its own.

    Returns:
        The schedule; the scorer's makespan of (placement, events) equals its makespan.
    """
    n = graph.n_ops
    pins = np.full(n, -1, dtype=np.int64) if pinned is None else np.asarray(pinned, np.int64)
    children = np.full(n, -1, dtype=np.int64) if child is None else np.asarray(child, np.int64)
    placement, events, finish = _timeline_kernel(
        graph.arrays,
        machine.arrays,
        transfer_durations(graph, machine),
        np.ascontiguousarray(order, dtype=np.int64),
        np.ascontiguousarray(pins),
        np.ascontiguousarray(children),
        insertion,
    )
    return TimedSchedule(placement, events, finish, float(finish.max(initial=0.0)))


HEFT_VARIANTS = {"insertion": (True, False), "lookahead": (False, True), "both": (True, True)}
"""Timeline HEFT variants: name -> (insertion policy, lookahead on the most critical child)."""


def heft_timeline(
    graph: Graph,
    machine: Machine,
    pinned: np.ndarray | None = None,
    *,
    insertion: bool = True,
    lookahead: bool = False,
) -> TimedSchedule:
    """HEFT on timelines: ops by decreasing upward rank, each to its earliest finish.

    With `insertion`, HEFT's insertion policy (Topcuoglu et al. 2002): an op may fill an idle
    gap of a device. With `lookahead`, a device is chosen by the earliest finish its most
    critical child (highest upward rank) could then reach on its own best device (lookahead
    HEFT, Bittencourt, Sakellariou and Madeira 2010, restricted to one child).

    Args:
        graph: the graph.
        machine: devices and transfer model.
        pinned: [n_ops] device of each pinned op, -1 where free; None when nothing is pinned.
        insertion: HEFT's insertion policy.
        lookahead: choose by the most critical child's finish.

    Returns:
        The schedule (see `timeline_schedule`).
    """
    rank = upward_ranks(graph, machine)
    order = priority_order(graph, rank)
    child = most_critical_children(graph, rank) if lookahead else None
    return timeline_schedule(graph, machine, order, pinned, insertion=insertion, child=child)


def heft_timelines(
    graph: Graph, machine: Machine, pinned: np.ndarray | None = None
) -> dict[str, TimedSchedule]:
    """`heft_timeline` of every variant in `HEFT_VARIANTS`, by name; ranks and order once.

    What the `heft` solver offers after plain HEFT, and the GFlowNet solver beside its samples.
    """
    rank = upward_ranks(graph, machine)
    order = priority_order(graph, rank)
    child = most_critical_children(graph, rank)
    return {
        variant: timeline_schedule(
            graph, machine, order, pinned, insertion=insertion, child=child if lookahead else None
        )
        for variant, (insertion, lookahead) in HEFT_VARIANTS.items()
    }


class CriticalPathScheduler(Solver):
    """Critical-path list scheduling (`critical_path_schedule`), honouring pins."""

    name = "critical-path"

    def run(self, problem: Problem, tracker: Tracker, rng: Rng, initial: Initial) -> None:
        """Offers the schedule with lazy and eager transfers."""
        placement, order = critical_path_schedule(
            problem.graph, problem.machine.n_devices, problem.pinned
        )
        offer_op_orders(problem, tracker, placement, [order])


class HeftScheduler(Solver):
    """HEFT, plain (`heft_schedule`) and on timelines (`heft_timeline`), honouring pins.

    Each variant wins on some graphs (insertion fills idle gaps, lookahead avoids greedy
    placements that strand a critical child), and each costs one or two evaluations, so all
    are offered and the tracker keeps the best: never worse than plain HEFT.
    """

    name = "heft"

    def __init__(self) -> None:
        self.schedules: dict[str, TimedSchedule] = {}
        """The last run's timeline schedules by variant (`auto`'s partition hints reuse them)."""

    def run(self, problem: Problem, tracker: Tracker, rng: Rng, initial: Initial) -> None:
        """Offers plain HEFT with lazy and eager transfers, then each timeline variant."""
        graph, machine, pinned = problem.graph, problem.machine, problem.pinned
        self.schedules.clear()
        placement, order = heft_schedule(graph, machine, pinned)
        offer_op_orders(problem, tracker, placement, [order])
        self.schedules.update(heft_timelines(graph, machine, pinned))
        for timed in self.schedules.values():
            offer_timed(problem, tracker, timed)


def offer_timed(problem: Problem, tracker: Tracker, timed: TimedSchedule) -> None:
    """Scores a timed schedule exactly and offers it to the tracker."""
    peaks, makespan, (violation, _, _) = problem.scorer.evaluate(timed.placement, timed.events)
    if violation != Violation.NONE:  # a broken timeline invariant, never a property of the input
        raise AssertionError(f"timeline schedule is invalid (violation {violation})")
    tracker.offer(timed.placement, timed.events, peaks, makespan)
