"""Incremental evaluation of device and order moves, shared by local search and annealing.

Local search (`local_search.py`) and simulated annealing (`annealing.py`) walk the same moves
from one current solution; this module scores those moves without re-scoring the whole
solution, applies them, and holds the helpers both searches (and random search) share: random
placements, starting points, offering scored moves to the tracker and option checks.

A solution is a placement and one full event order (docs/format.md section 2). The moves:

- device move: op j goes to device b. The transfers its placement implies change: an input
  transfer to j's old device disappears when j was its only reader there, an input transfer to
  b is added right before j (or an existing one moved up to there), j's output transfer to b
  disappears and one to j's old device is added right before its first reader there.
- order move: op j moves to another position between the event that makes its last input
  available and the first event that reads one of its outputs.

Moves are evaluated incrementally (`IncrementalEvaluator`): the current solution is scored once
with per-step profiles (memory at the start of each step, prefix and suffix peaks, device clocks),
and a move only replays the steps where residency changes, between the first and last step
whose memory differs. Before and after that window the peaks come from the profiles, shifted
by the bytes a device move carries along: its persistent outputs' bytes at every step, and its
graph outputs' bytes (held from its step to the last, section 5) after the window, which
always contains the moved op's step. The makespan replays the window and every later step,
from the device clocks at the window start. Batches of moves run in parallel.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numba
import numpy as np

from graphopt.costmodels._kernels import op_step, transfer_step
from graphopt.costmodels.machine import MachineArrays
from graphopt.ir.arrays import GraphArrays
from graphopt.ir.ready import order_window
from graphopt.solvers.base import Initial, Problem, Rng, SolverError, Tracker
from graphopt.solvers.events import events_from_op_order

DEVICE_MOVE = 0
"""Move kind: (DEVICE_MOVE, op, device) puts op on another device."""
ORDER_MOVE = 1
"""Move kind: (ORDER_MOVE, op, anchor) moves op right before the event now at position anchor."""

_NO_PEAK = -(2**62)
"""Suffix peak after the last step: below any memory, even shifted by persistent bytes."""

_MOVES_PER_THREAD = 8
"""Smallest share of a batch worth handing to another thread."""

_MAX_THREADS = 8
"""Most threads a batch is split over (each needs its own scratch row of O(n_tensors * d))."""


class _Current(NamedTuple):
    """The current solution and its per-step profiles.

    Shapes:
        placement: [n_ops]; order: [L]; position: [n_ops + n_tensors * d] step of each event
        code, -1 when absent; n_consumers: [n_tensors * d] consumers of each tensor per device;
        n_transfers: [n_tensors]; ready: [n_tensors * d] time each copy becomes available
        (-1 when absent); resident, prefix_peak, suffix_peak: [L + 1, d] memory at the start
        of each step, largest memory before it, largest memory from it on; device_free:
        [L + 1, d] device clocks at the start of each step; prefix_makespan: [L + 1].
    """

    placement: np.ndarray
    order: np.ndarray
    position: np.ndarray
    n_consumers: np.ndarray
    n_transfers: np.ndarray
    ready: np.ndarray
    resident: np.ndarray
    prefix_peak: np.ndarray
    suffix_peak: np.ndarray
    device_free: np.ndarray
    prefix_makespan: np.ndarray


class _Scratch(NamedTuple):
    """Per-thread work arrays; row r belongs to thread chunk r.

    `shift` holds the bytes a device move carries from device to device before its window,
    `tail_shift` those after it (graph outputs included). Entries are valid only where their
    stamp equals the evaluation's stamp, so rows are never cleared between evaluations.
    """

    memory_stamp: np.ndarray
    readers_left: np.ndarray
    time_stamp: np.ndarray
    ready: np.ndarray
    consumers_stamp: np.ndarray
    consumers: np.ndarray
    transfers_stamp: np.ndarray
    transfers: np.ndarray
    deleted: np.ndarray
    anchor: np.ndarray
    code: np.ndarray
    shift: np.ndarray
    tail_shift: np.ndarray
    memory: np.ndarray
    device_free: np.ndarray


# ------------------------------------------------------------------------------- profiles
@numba.njit(cache=True)
def _profile(
    g: GraphArrays, m: MachineArrays, placement: np.ndarray, order: np.ndarray
) -> _Current:
    """Scores a valid solution step by step, with the scorer's steps, keeping what moves need."""
    d = m.n_devices
    n_ops = placement.shape[0]
    n_tensors = g.tensor_size.shape[0]
    n_events = order.shape[0]
    position = np.full(n_ops + n_tensors * d, -1, dtype=np.int64)
    for k in range(n_events):
        position[order[k]] = k
    n_consumers = np.zeros(n_tensors * d, dtype=np.int64)
    n_transfers = np.zeros(n_tensors, dtype=np.int64)
    readers_left = np.zeros(n_tensors * d, dtype=np.int64)  # home copies' count for op_step
    memory = np.zeros(d, dtype=np.int64)
    for t in range(n_tensors):
        home = placement[g.tensor_producer[t]]
        for e in range(g.consumer_ptr[t], g.consumer_ptr[t + 1]):
            device = placement[g.consumer_op[e]]
            if n_consumers[t * d + device] == 0 and device != home:
                n_transfers[t] += 1
            n_consumers[t * d + device] += 1
        readers_left[t * d + home] = n_consumers[t * d + home] + n_transfers[t]
        if g.tensor_persistent[t]:
            memory[home] += g.tensor_size[t]
    ready = np.full(n_tensors * d, -1.0)
    resident = np.empty((n_events + 1, d), dtype=np.int64)
    prefix_peak = np.zeros((n_events + 1, d), dtype=np.int64)
    measured = np.empty((n_events, d), dtype=np.int64)
    device_free = np.zeros((n_events + 1, d))
    prefix_makespan = np.zeros(n_events + 1)
    clock = np.zeros(d)
    makespan = 0.0
    for k in range(n_events):
        for x in range(d):
            resident[k, x] = memory[x]
            device_free[k, x] = clock[x]
            measured[k, x] = memory[x]
        prefix_makespan[k] = makespan
        code = order[k]
        if code < n_ops:
            device = placement[code]
            finish, current, _ = op_step(
                g,
                m,
                code,
                device,
                ready,
                readers_left,
                clock,
                memory,
            )
        else:
            t = (code - n_ops) // d
            device = code - n_ops - t * d
            home = placement[g.tensor_producer[t]]
            finish, current, _ = transfer_step(
                m,
                g.tensor_size[t],
                t,
                device,
                home,
                n_consumers[t * d + device],
                ready,
                readers_left,
                clock,
                memory,
            )
        measured[k, device] = current
        makespan = max(makespan, finish)
        for x in range(d):
            prefix_peak[k + 1, x] = max(prefix_peak[k, x], measured[k, x])
    for x in range(d):
        resident[n_events, x] = memory[x]
        device_free[n_events, x] = clock[x]
    prefix_makespan[n_events] = makespan
    suffix_peak = np.full((n_events + 1, d), _NO_PEAK, dtype=np.int64)
    for k in range(n_events - 1, -1, -1):
        for x in range(d):
            suffix_peak[k, x] = max(suffix_peak[k + 1, x], measured[k, x])
    return _Current(
        placement,
        order,
        position,
        n_consumers,
        n_transfers,
        ready,
        resident,
        prefix_peak,
        suffix_peak,
        device_free,
        prefix_makespan,
    )


# ------------------------------------------------------------------------- move edits
@numba.njit(cache=True)
def _coordinate(
    position: np.ndarray,
    code: int,
    deleted: np.ndarray,
    n_deleted: int,
    anchor: np.ndarray,
    codes: np.ndarray,
    n_inserted: int,
) -> int:
    """Where an event runs after the move, in steps of the current order; -1 when absent."""
    for i in range(n_inserted):
        if codes[i] == code:
            return anchor[i]
    p = position[code]
    for i in range(n_deleted):
        if deleted[i] == p:
            return -1
    return p


@numba.njit(cache=True)
def _interval(
    g: GraphArrays,
    m: MachineArrays,
    placement: np.ndarray,
    position: np.ndarray,
    t: int,
    device: int,
    after: bool,
    moved_op: int,
    moved_device: int,
    deleted: np.ndarray,
    n_deleted: int,
    anchor: np.ndarray,
    codes: np.ndarray,
    n_inserted: int,
) -> tuple[int, int]:
    """(creation, last reader) steps of copy (t, device) before or `after` a device move.

    (-1, -1) when the copy does not exist, or is a persistent home copy (resident throughout,
    so its interval never matters). A graph output's home copy is never freed, so its readers
    never matter: (creation, creation); the bytes it holds after the window are `tail_shift`'s.
    """
    n_ops = placement.shape[0]
    d = m.n_devices
    producer = g.tensor_producer[t]
    home = moved_device if after and producer == moved_op else placement[producer]
    if device == home and g.tensor_persistent[t]:
        return -1, -1
    if device == home:
        created = position[producer]
        if g.tensor_output[t]:
            return created, created
    elif after:
        created = _coordinate(
            position, n_ops + t * d + device, deleted, n_deleted, anchor, codes, n_inserted
        )
    else:
        created = position[n_ops + t * d + device]
    if created < 0:
        return -1, -1
    last = created
    for e in range(g.consumer_ptr[t], g.consumer_ptr[t + 1]):
        u = g.consumer_op[e]
        on = moved_device if after and u == moved_op else placement[u]
        if on == device:
            last = max(last, position[u])
    if device == home:
        for x in range(d):
            code = n_ops + t * d + x
            if after:
                step = _coordinate(position, code, deleted, n_deleted, anchor, codes, n_inserted)
            else:
                step = position[code]
            last = max(last, step)
    return created, last


@numba.njit(cache=True)
def _sort_edits(
    deleted: np.ndarray, n_deleted: int, anchor: np.ndarray, codes: np.ndarray, n_inserted: int
) -> None:
    """Sorts deletions by step and insertions stably by anchor (both lists are tiny)."""
    for i in range(1, n_deleted):
        value = deleted[i]
        k = i
        while k > 0 and deleted[k - 1] > value:
            deleted[k] = deleted[k - 1]
            k -= 1
        deleted[k] = value
    for i in range(1, n_inserted):
        a, c = anchor[i], codes[i]
        k = i
        while k > 0 and anchor[k - 1] > a:
            anchor[k] = anchor[k - 1]
            codes[k] = codes[k - 1]
            k -= 1
        anchor[k] = a
        codes[k] = c


@numba.njit(cache=True)
def _prepare(
    g: GraphArrays,
    m: MachineArrays,
    cur: _Current,
    s: _Scratch,
    row: int,
    stamp: int,
    kind: int,
    op: int,
    target: int,
) -> tuple[int, int, int, int, int]:
    """Turns a move into edits of the current order and reader-count overrides.

    Writes the deleted steps, the inserted (anchor, code) events and the byte shifts per device
    (persistent bytes before the window, persistent and graph output bytes after it) into row
    `row` of the scratch, stamps the consumer and transfer counts the move changes, and returns
    (op's new device, deletions, insertions, first step, last step) where [first, last] covers
    every step whose memory can differ.
    """
    d = m.n_devices
    placement, order, position, n_consumers, n_transfers = cur[:5]
    consumers_stamp, consumers = s.consumers_stamp[row], s.consumers[row]
    transfers_stamp, transfers = s.transfers_stamp[row], s.transfers[row]
    deleted, anchor, codes, shift = s.deleted[row], s.anchor[row], s.code[row], s.shift[row]
    tail_shift = s.tail_shift[row]
    n_ops = placement.shape[0]
    shift[:] = 0
    tail_shift[:] = 0
    p = position[op]
    a = np.int64(placement[op])
    if kind == ORDER_MOVE:
        deleted[0] = p
        anchor[0] = target
        codes[0] = op
        return a, 1, 1, min(p, target), max(p, target)
    b = target
    n_inputs = g.op_input_ptr[op + 1] - g.op_input_ptr[op]
    n_outputs = g.op_output_ptr[op + 1] - g.op_output_ptr[op]
    affected = np.empty((3 * n_inputs + 2 * n_outputs, 2), dtype=np.int64)
    n_affected = np.int64(0)
    n_deleted = np.int64(0)
    n_inserted = np.int64(0)
    for e in range(g.op_input_ptr[op], g.op_input_ptr[op + 1]):
        t = g.op_input_tensor[e]
        home = np.int64(placement[g.tensor_producer[t]])
        change = 0
        if a != home and n_consumers[t * d + a] == 1:
            deleted[n_deleted] = position[n_ops + t * d + a]
            n_deleted += 1
            change -= 1
        if b != home:
            code = n_ops + t * d + b
            if n_consumers[t * d + b] == 0:
                change += 1
                anchor[n_inserted] = p
                codes[n_inserted] = code
                n_inserted += 1
            elif position[code] > p:
                deleted[n_deleted] = position[code]
                n_deleted += 1
                anchor[n_inserted] = p
                codes[n_inserted] = code
                n_inserted += 1
        for device in range(d):
            if device == a or device == b or device == home:
                affected[n_affected, 0] = t
                affected[n_affected, 1] = device
                n_affected += 1
            if device == a or device == b:
                copy = t * d + device
                count = consumers[copy] if consumers_stamp[copy] == stamp else n_consumers[copy]
                consumers[copy] = count + (1 if device == b else -1)
                consumers_stamp[copy] = stamp
        transfers[t] = n_transfers[t] + change
        transfers_stamp[t] = stamp
    for e in range(g.op_output_ptr[op], g.op_output_ptr[op + 1]):
        t = g.op_output_tensor[e]
        change = 0
        if n_consumers[t * d + b] > 0:
            deleted[n_deleted] = position[n_ops + t * d + b]
            n_deleted += 1
            change -= 1
        if n_consumers[t * d + a] > 0:
            first_reader = order.shape[0]
            for c in range(g.consumer_ptr[t], g.consumer_ptr[t + 1]):
                u = g.consumer_op[c]
                if placement[u] == a:
                    first_reader = min(first_reader, position[u])
            anchor[n_inserted] = first_reader
            codes[n_inserted] = n_ops + t * d + a
            n_inserted += 1
            change += 1
        transfers[t] = n_transfers[t] + change
        transfers_stamp[t] = stamp
        if g.tensor_persistent[t]:
            shift[a] -= g.tensor_size[t]
            shift[b] += g.tensor_size[t]
        if g.tensor_persistent[t] or g.tensor_output[t]:
            tail_shift[a] -= g.tensor_size[t]
            tail_shift[b] += g.tensor_size[t]
        for device in range(d):
            if device == a or device == b:
                affected[n_affected, 0] = t
                affected[n_affected, 1] = device
                n_affected += 1
    _sort_edits(deleted, n_deleted, anchor, codes, n_inserted)
    first = p
    last = p
    for i in range(n_deleted):
        first = min(first, deleted[i])
        last = max(last, deleted[i])
    for i in range(n_inserted):
        first = min(first, anchor[i])
        last = max(last, anchor[i])
    interval = np.empty((2, 2), dtype=np.int64)
    for i in range(n_affected):
        t, device = affected[i, 0], affected[i, 1]
        for after in range(2):
            interval[after, 0], interval[after, 1] = _interval(
                g,
                m,
                placement,
                position,
                t,
                device,
                after == 1,
                op,
                b,
                deleted,
                n_deleted,
                anchor,
                codes,
                n_inserted,
            )
        (old_created, old_last), (new_created, new_last) = interval
        if old_created < 0 and new_created < 0:
            continue
        if old_created < 0:
            first, last = min(first, new_created), max(last, new_last)
        elif new_created < 0:
            first, last = min(first, old_created), max(last, old_last)
        elif old_created != new_created:
            first = min(first, old_created, new_created)
            last = max(last, old_last, new_last)
        elif old_last != new_last:
            first = min(first, old_last, new_last)
            last = max(last, old_last, new_last)
    return b, n_deleted, n_inserted, first, last


# ------------------------------------------------------------------------------- replay
@numba.njit(cache=True)
def _readers_after_move(
    t: int,
    device: int,
    home: int,
    d: int,
    n_consumers: np.ndarray,
    consumers_stamp: np.ndarray,
    consumers: np.ndarray,
    n_transfers: np.ndarray,
    transfers_stamp: np.ndarray,
    transfers: np.ndarray,
    stamp: int,
) -> int:
    """Readers of copy (t, device) after the move: its consumers there, plus transfers at home."""
    copy = t * d + device
    readers = consumers[copy] if consumers_stamp[copy] == stamp else n_consumers[copy]
    if device == home:
        readers += transfers[t] if transfers_stamp[t] == stamp else n_transfers[t]
    return readers


@numba.njit(cache=True)
def _evaluate_move(
    g: GraphArrays,
    m: MachineArrays,
    cur: _Current,
    s: _Scratch,
    row: int,
    stamp: int,
    kind: int,
    op: int,
    target: int,
    with_makespan: bool,
    peak: np.ndarray,
) -> float:
    """Peaks (into `peak`) and makespan (nan unless asked) of the current solution after a move.

    Replays the moved order from the first step whose memory can differ, by the scorer's rules
    (docs/format.md sections 5 and 6); memory stops after the last such step (the profile's
    suffix peaks cover the rest), the clocks go on to the end. A copy that existed before the
    first replayed step starts with its readers after the move minus those already run.
    """
    d = m.n_devices
    placement, order, position, n_consumers, n_transfers, ready = cur[:6]
    resident, prefix_peak, suffix_peak, device_free, prefix_makespan = cur[6:]
    memory_stamp, readers_left = s.memory_stamp[row], s.readers_left[row]
    time_stamp, ready_after = s.time_stamp[row], s.ready[row]
    consumers_stamp, consumers = s.consumers_stamp[row], s.consumers[row]
    transfers_stamp, transfers = s.transfers_stamp[row], s.transfers[row]
    deleted, anchor, codes, shift = s.deleted[row], s.anchor[row], s.code[row], s.shift[row]
    tail_shift = s.tail_shift[row]
    memory, clock = s.memory[row], s.device_free[row]
    n_ops = placement.shape[0]
    n_events = order.shape[0]
    moved_device, n_deleted, n_inserted, first, last = _prepare(
        g, m, cur, s, row, stamp, kind, op, target
    )
    for x in range(d):
        memory[x] = resident[first, x] + shift[x]
        clock[x] = device_free[first, x]
        peak[x] = prefix_peak[first, x] + shift[x] if first > 0 else 0
    makespan = prefix_makespan[first]
    k = first
    i_inserted = 0
    i_deleted = 0
    suffix_added = False
    while True:
        step = k
        if i_inserted < n_inserted and anchor[i_inserted] == k:
            code = codes[i_inserted]
            i_inserted += 1
        elif k == n_events:
            break
        elif i_deleted < n_deleted and deleted[i_deleted] == k:
            i_deleted += 1
            k += 1
            continue
        else:
            code = order[k]
            k += 1
        if step > last and not suffix_added:
            for x in range(d):
                peak[x] = max(peak[x], suffix_peak[step, x] + tail_shift[x])
            suffix_added = True
        if step > last and not with_makespan:
            break
        is_op = code < n_ops
        if is_op:
            device = moved_device if code == op else np.int64(placement[code])
            moved_tensor = -1
            reads_begin, reads_end = g.op_input_ptr[code], g.op_input_ptr[code + 1]
        else:
            moved_tensor = (code - n_ops) // d
            device = code - n_ops - moved_tensor * d
            reads_begin, reads_end = 0, 1
        if step <= last:
            if not is_op:
                copy = code - n_ops
                memory[device] += g.tensor_size[moved_tensor]
                memory_stamp[copy] = stamp
                readers_left[copy] = (
                    consumers[copy] if consumers_stamp[copy] == stamp else n_consumers[copy]
                )
                for x in range(d):
                    peak[x] = max(peak[x], memory[x])
            freed = 0
            for e in range(reads_begin, reads_end):
                t = g.op_input_tensor[e] if is_op else moved_tensor
                producer = g.tensor_producer[t]
                home = moved_device if producer == op else np.int64(placement[producer])
                at = device if is_op else home
                if (g.tensor_persistent[t] or g.tensor_output[t]) and at == home:
                    continue  # never freed
                copy = t * d + at
                if memory_stamp[copy] != stamp:
                    left = _readers_after_move(
                        t,
                        at,
                        home,
                        d,
                        n_consumers,
                        consumers_stamp,
                        consumers,
                        n_transfers,
                        transfers_stamp,
                        transfers,
                        stamp,
                    )
                    for c in range(g.consumer_ptr[t], g.consumer_ptr[t + 1]):
                        u = g.consumer_op[c]
                        on = moved_device if u == op else placement[u]
                        if position[u] < first and on == at:
                            left -= 1
                    if at == home:
                        for x in range(d):
                            if 0 <= position[n_ops + t * d + x] < first:
                                left -= 1
                    memory_stamp[copy] = stamp
                    readers_left[copy] = left
                readers_left[copy] -= 1
                if readers_left[copy] == 0 and is_op:
                    freed += g.tensor_size[t]
                elif readers_left[copy] == 0:
                    memory[at] -= g.tensor_size[t]
            if is_op:
                held = memory[device]
                for e in range(g.op_output_ptr[code], g.op_output_ptr[code + 1]):
                    t = np.int64(g.op_output_tensor[e])  # as the reads' t: one signature below
                    copy = t * d + device
                    readers = _readers_after_move(
                        t,
                        device,
                        device,
                        d,
                        n_consumers,
                        consumers_stamp,
                        consumers,
                        n_transfers,
                        transfers_stamp,
                        transfers,
                        stamp,
                    )
                    memory_stamp[copy] = stamp
                    readers_left[copy] = readers
                    if not g.tensor_persistent[t]:
                        held += g.tensor_size[t]
                        if readers == 0 and not g.tensor_output[t]:
                            freed += g.tensor_size[t]
                for x in range(d):
                    if x == device:
                        peak[x] = max(peak[x], held + g.op_temp_memory[code])
                    else:
                        peak[x] = max(peak[x], memory[x])
                memory[device] = held - freed
        if with_makespan and is_op:
            start = clock[device]
            for e in range(g.op_input_ptr[code], g.op_input_ptr[code + 1]):
                copy = g.op_input_tensor[e] * d + device
                start = max(start, ready_after[copy] if time_stamp[copy] == stamp else ready[copy])
            finish = start + g.op_runtime[code]
            clock[device] = finish
            for e in range(g.op_output_ptr[code], g.op_output_ptr[code + 1]):
                copy = g.op_output_tensor[e] * d + device
                time_stamp[copy] = stamp
                ready_after[copy] = finish
            makespan = max(makespan, finish)
        elif with_makespan:
            producer = g.tensor_producer[moved_tensor]
            source = moved_tensor * d + (
                moved_device if producer == op else np.int64(placement[producer])
            )
            produced = ready_after[source] if time_stamp[source] == stamp else ready[source]
            duration = m.latency + g.tensor_size[moved_tensor] / m.bandwidth
            if m.sync:
                finish = max(clock[device], produced) + duration
                clock[device] = finish
            else:
                finish = produced + duration
            time_stamp[code - n_ops] = stamp
            ready_after[code - n_ops] = finish
            makespan = max(makespan, finish)
    if not suffix_added:
        for x in range(d):
            peak[x] = max(peak[x], suffix_peak[min(last + 1, n_events), x] + tail_shift[x])
    return makespan if with_makespan else np.nan


@numba.njit(cache=True, nogil=True)
def _evaluate_moves(
    g: GraphArrays,
    m: MachineArrays,
    cur: _Current,
    s: _Scratch,
    row: int,
    first_stamp: int,
    moves: np.ndarray,
    begin: int,
    end: int,
    with_makespan: bool,
    peaks: np.ndarray,
    makespans: np.ndarray,
) -> None:
    """Evaluates moves[begin:end] on scratch row `row` (threads run disjoint chunks)."""
    for i in range(begin, end):
        makespans[i] = _evaluate_move(
            g,
            m,
            cur,
            s,
            row,
            first_stamp + i,
            moves[i, 0],
            moves[i, 1],
            moves[i, 2],
            with_makespan,
            peaks[i],
        )


@numba.njit(cache=True)
def _apply_move(
    g: GraphArrays,
    m: MachineArrays,
    cur: _Current,
    s: _Scratch,
    stamp: int,
    kind: int,
    op: int,
    target: int,
) -> tuple[np.ndarray, np.ndarray]:
    """The placement and full event order after a move."""
    moved_device, n_deleted, n_inserted, _, _ = _prepare(
        g, m, cur, s, np.int64(0), stamp, kind, op, target
    )
    deleted, anchor, codes = s.deleted[0], s.anchor[0], s.code[0]
    current_order = cur.order
    n_events = current_order.shape[0]
    order = np.empty(n_events - n_deleted + n_inserted, dtype=np.int64)
    n = 0
    i_inserted = 0
    i_deleted = 0
    for k in range(n_events + 1):
        while i_inserted < n_inserted and anchor[i_inserted] == k:
            order[n] = codes[i_inserted]
            n += 1
            i_inserted += 1
        if k == n_events:
            break
        if i_deleted < n_deleted and deleted[i_deleted] == k:
            i_deleted += 1
            continue
        order[n] = current_order[k]
        n += 1
    placement = cur.placement.copy()
    placement[op] = moved_device
    return placement, order


# ------------------------------------------------------------------------------- moves
@numba.njit(cache=True)
def _sample_moves(
    g: GraphArrays,
    m: MachineArrays,
    cur: _Current,
    movable_ops: np.ndarray,
    device_move_probability: float,
    uniforms: np.ndarray,
    moves: np.ndarray,
) -> int:
    """Draws moves from pre-drawn uniforms ([attempts, 3]); returns how many it wrote.

    A device move takes a movable (unpinned) op to a uniformly drawn other device; an order
    move takes a uniformly drawn op to a uniformly drawn other place in its window, between
    the step that makes its last input available and the first step that reads an output.
    Attempts that find no move (an op with no room to move) are skipped.
    """
    d = m.n_devices
    placement, order, position = cur[:3]
    n_ops = placement.shape[0]
    count = 0
    if n_ops == 0:  # no op to move (and the kernel reads placement[op] unchecked)
        return count
    for i in range(uniforms.shape[0]):
        if count == moves.shape[0]:
            break
        if d > 1 and movable_ops.shape[0] > 0 and uniforms[i, 0] < device_move_probability:
            op = movable_ops[int(uniforms[i, 1] * movable_ops.shape[0])]
            device = int(uniforms[i, 2] * (d - 1))
            if device >= placement[op]:
                device += 1
            moves[count, 0] = DEVICE_MOVE
            moves[count, 1] = op
            moves[count, 2] = device
            count += 1
            continue
        op = int(uniforms[i, 1] * n_ops)
        low, high = order_window(g, op, placement[op], d, placement, position, order.shape[0])
        room = high - low - 2
        if room <= 0:
            continue
        p = position[op]
        anchor = low + 1 + int(uniforms[i, 2] * room)
        if anchor >= p:
            anchor += 2
        moves[count, 0] = ORDER_MOVE
        moves[count, 1] = op
        moves[count, 2] = anchor
        count += 1
    return count


class IncrementalEvaluator:
    """The current solution of a search, and the scores of moves from it without full re-scoring.

    Batches of moves are split over up to `numba.get_num_threads()` threads (at most 8).

    Args:
        problem: the problem; its pins decide which ops device moves may take.
    """

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        self._graph = problem.graph.arrays
        self._machine = problem.machine.arrays
        graph, d = problem.graph, problem.machine.n_devices
        pins = problem.pinned
        self.movable_ops = np.flatnonzero(pins < 0) if pins is not None else np.arange(graph.n_ops)
        rows = min(numba.config.NUMBA_NUM_THREADS, _MAX_THREADS)
        n_copies = graph.n_tensors * d
        inputs = int(np.diff(graph.op_input_ptr).max(initial=0))
        outputs = int(np.diff(graph.op_output_ptr).max(initial=0))
        edits = 2 * inputs + 2 * outputs + 1
        self._scratch = _Scratch(
            memory_stamp=np.zeros((rows, n_copies), dtype=np.int64),
            readers_left=np.zeros((rows, n_copies), dtype=np.int64),
            time_stamp=np.zeros((rows, n_copies), dtype=np.int64),
            ready=np.zeros((rows, n_copies)),
            consumers_stamp=np.zeros((rows, n_copies), dtype=np.int64),
            consumers=np.zeros((rows, n_copies), dtype=np.int64),
            transfers_stamp=np.zeros((rows, graph.n_tensors), dtype=np.int64),
            transfers=np.zeros((rows, graph.n_tensors), dtype=np.int64),
            deleted=np.zeros((rows, edits), dtype=np.int64),
            anchor=np.zeros((rows, edits), dtype=np.int64),
            code=np.zeros((rows, edits), dtype=np.int64),
            shift=np.zeros((rows, d), dtype=np.int64),
            tail_shift=np.zeros((rows, d), dtype=np.int64),
            memory=np.zeros((rows, d), dtype=np.int64),
            device_free=np.zeros((rows, d)),
        )
        self._stamp = 0
        self._current: _Current | None = None
        # Helper threads for batches of moves (the kernels release the GIL); they exit when the
        # evaluator is garbage-collected.
        self._pool = ThreadPoolExecutor(max_workers=max(rows - 1, 1))

    def _next_stamps(self, count: int) -> int:
        """First of `count` fresh stamps (stamps only grow, so scratch rows need no clearing)."""
        first = self._stamp + 1
        self._stamp += count
        return first

    @property
    def current(self) -> _Current:
        """The current solution's arrays and profiles."""
        if self._current is None:
            raise SolverError("the evaluator has no current solution; call reset first")
        return self._current

    @property
    def placement(self) -> np.ndarray:
        """[n_ops] int32 current placement."""
        return self.current.placement

    @property
    def order(self) -> np.ndarray:
        """[L] int64 current event order."""
        return self.current.order

    def reset(self, placement: np.ndarray, order: np.ndarray) -> tuple[np.ndarray, float]:
        """Makes a valid solution current and profiles it.

        Args:
            placement: [n_ops] devices.
            order: [L] a valid event order for that placement.

        Returns:
            (peaks [n_devices] int64, makespan) of the solution.
        """
        current = _profile(
            self._graph,
            self._machine,
            np.array(placement, dtype=np.int32),
            np.array(order, dtype=np.int64),
        )
        self._current = current
        return current.prefix_peak[-1].copy(), float(current.prefix_makespan[-1])

    def sample_moves(
        self, rng: np.random.Generator, count: int, device_move_probability: float
    ) -> np.ndarray:
        """Random moves from the current solution (module docstring).

        Args:
            rng: source of the draws.
            count: moves wanted; fewer come back when ops have little room to move.
            device_move_probability: chance that a move changes a device (if any op may).

        Returns:
            [k, 3] int64 moves (kind, op, device or anchor), k <= count.
        """
        moves = np.empty((count, 3), dtype=np.int64)
        uniforms = rng.random((4 * count, 3))
        written = _sample_moves(
            self._graph,
            self._machine,
            self.current,
            self.movable_ops,
            device_move_probability,
            uniforms,
            moves,
        )
        return moves[:written]

    def evaluate(
        self, moves: np.ndarray, with_makespan: bool = True
    ) -> tuple[np.ndarray, np.ndarray]:
        """Scores of the current solution after each move, in parallel.

        Args:
            moves: [B, 3] moves from `sample_moves` (or valid by the same rules).
            with_makespan: also compute makespans (replays every step after the move's window);
                nan otherwise.

        Returns:
            peaks [B, n_devices] int64, makespans [B] float64.
        """
        moves = np.ascontiguousarray(moves, dtype=np.int64).reshape(-1, 3)
        n_moves = moves.shape[0]
        peaks = np.zeros((n_moves, self.problem.machine.n_devices), dtype=np.int64)
        makespans = np.zeros(n_moves)
        first_stamp = self._next_stamps(n_moves)
        rows = self._scratch.memory.shape[0]
        n_chunks = max(1, min(rows, numba.get_num_threads(), n_moves // _MOVES_PER_THREAD))
        bounds = [row * n_moves // n_chunks for row in range(n_chunks + 1)]

        def run_chunk(row: int) -> None:
            _evaluate_moves(
                self._graph,
                self._machine,
                self.current,
                self._scratch,
                row,
                first_stamp,
                moves,
                bounds[row],
                bounds[row + 1],
                with_makespan,
                peaks,
                makespans,
            )

        others = [self._pool.submit(run_chunk, row) for row in range(1, n_chunks)]
        run_chunk(0)
        for other in others:
            other.result()
        return peaks, makespans

    def neighbour(self, move: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(placement [n_ops] int32, order [L'] int64) after a move, without applying it."""
        kind, op, target = (int(x) for x in move)
        return _apply_move(
            self._graph,
            self._machine,
            self.current,
            self._scratch,
            self._next_stamps(1),
            kind,
            op,
            target,
        )


# ---------------------------------------------------------------------------- starting points
def random_placements(problem: Problem, count: int, rng: np.random.Generator) -> np.ndarray:
    """[count, n_ops] int32 uniformly random devices, pinned ops on their device."""
    shape = (count, problem.graph.n_ops)
    placements = rng.integers(0, problem.machine.n_devices, shape).astype(np.int32)
    if problem.pinned is not None:
        placements = np.where(problem.pinned >= 0, problem.pinned, placements).astype(np.int32)
    return placements


def starts(problem: Problem, rng: Rng, initial: Initial) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Starting points: the given solutions that fit, then random placements (paper 001, 4.2).

    Random starts run the ops in the graph's topological order, transfers placed lazily.
    """
    graph, n_devices = problem.graph, problem.machine.n_devices
    for solution in initial:
        if solution.n_devices == n_devices and solution.placement.shape[0] == graph.n_ops:
            yield np.asarray(solution.placement, dtype=np.int32), np.asarray(solution.order)
    while True:
        placement = random_placements(problem, 1, rng)[0]
        yield placement, events_from_op_order(graph, placement, graph.topological_order, n_devices)


def offer_start(
    problem: Problem, tracker: Tracker, placement: np.ndarray, order: np.ndarray
) -> tuple[np.ndarray, float] | None:
    """Scores a starting solution and offers it; None when it is invalid or breaks a pin."""
    pins = problem.pinned
    if pins is not None and np.any((pins >= 0) & (pins != placement)):
        return None
    peaks, makespan, (violation, _, _) = problem.scorer.evaluate(placement, order)
    if violation:
        return None
    tracker.offer(placement, order, peaks, makespan)
    return peaks, makespan


def current_starts(
    problem: Problem, tracker: Tracker, rng: Rng, initial: Initial
) -> Iterator[tuple[IncrementalEvaluator, np.ndarray, np.ndarray, np.ndarray]]:
    """The starts a search climbs from: each one `offer_start` accepts, made current in turn.

    Local search restarts from the next one; annealing takes the first.

    Yields:
        (evaluator, peaks [n_devices] int64, excess [1], value [1]): one evaluator for every
        start, whose current solution the start now is, and the start's scores.
    """
    evaluator = IncrementalEvaluator(problem)
    for placement, order in starts(problem, rng, initial):
        scored = offer_start(problem, tracker, placement, order)
        if scored is None:
            continue
        peaks, makespan = scored
        evaluator.reset(placement, order)
        excess, value = problem.fitness(peaks[None], np.array([makespan]))
        yield evaluator, peaks, excess, value


def offer_batch(
    tracker: Tracker,
    evaluator: IncrementalEvaluator,
    moves: np.ndarray,
    excess: np.ndarray,
    value: np.ndarray,
) -> None:
    """Counts a batch of evaluated moves and offers the best neighbour to the tracker.

    Only the best neighbour is materialized, and only when it beats the tracker's best.

    Shapes:
        moves: [B, 3]; excess, value: [B] ranking keys of the moved solutions.
    """
    best = int(np.lexsort((value, excess))[0])
    key = (int(excess[best]), float(value[best]))
    if key < tracker.best_key:
        placement, order = evaluator.neighbour(moves[best])
    else:
        placement, order = evaluator.placement, evaluator.order
    tracker.offer_best(placement, order, key[0], key[1], value.shape[0])
