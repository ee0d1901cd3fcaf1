"""From an order of ops to a full event order: where the implied transfers go.

Schedulers that order ops only (compiler memory schedulers, list scheduling, partition + DFS)
need the transfers inserted. A transfer is placed right before the first op on its destination
device that reads it ("lazy", which keeps the received copy resident for the shortest time), or
right after its producer ("eager", which frees the source copy soonest and lets a sync receive
overlap earlier work).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal, get_args

import numba
import numpy as np

from graphopt.costmodels.validity import Violation
from graphopt.errors import SolutionError
from graphopt.ir.arrays import GraphArrays, _u
from graphopt.ir.graph import Graph
from graphopt.ir.ready import (
    initial_waiting,
    inputs_run,
    release_capacity,
    release_copy,
    release_op,
)
from graphopt.solvers.base import Problem, Tracker

TransferPlacement = Literal["lazy", "eager"]


def events_from_op_order(
    graph: Graph,
    placement: np.ndarray,
    op_order: np.ndarray,
    n_devices: int,
    transfers: TransferPlacement = "lazy",
) -> np.ndarray:
    """Event codes of a full valid order that runs ops in `op_order` with implied transfers.

    Args:
        graph: the graph.
        placement: [n_ops] device of each op.
        op_order: [n_ops] a topological order of all ops.
        n_devices: number of devices d.
        transfers: 'lazy' (before the first reader) or 'eager' (after the producer).

    Returns:
        [n_ops + n_transfers] int64 event codes.

    Raises:
        SolutionError: when `op_order` is not a permutation in topological order.
    """
    op_order = np.ascontiguousarray(op_order, dtype=np.int64)
    placement = np.ascontiguousarray(placement, dtype=np.int32)
    if transfers not in get_args(TransferPlacement):
        raise SolutionError(f"transfers must be 'lazy' or 'eager', got {transfers!r}")
    if op_order.shape[0] != graph.n_ops:
        raise SolutionError(f"op order has {op_order.shape[0]} entries for {graph.n_ops} ops")
    order, bad = _events(graph.arrays, placement, op_order, n_devices, transfers == "lazy")
    if bad >= 0:
        raise SolutionError(
            f"op order is not a topological order of all ops: op {graph.op_names[bad]!r} "
            "is missing, repeated or runs before one of its inputs"
        )
    return order


@numba.njit(cache=True)
def _events(
    g: GraphArrays,
    placement: np.ndarray,
    op_order: np.ndarray,
    d: int,
    lazy: bool,
) -> tuple[np.ndarray, int]:
    """Walks `op_order` with the shared ready rule (`graphopt.ir.ready`), inserting transfers.

    Lazy: each op is checked at its turn (`inputs_run`) and preceded by the transfers of its
    inputs not yet on its device. Eager: each op's release step names the transfers it makes
    ready, written right after it, and an op still waiting at its turn is out of order.
    Returns (events, -1), or (empty, op) for the first op that is out of range, repeated, or
    not ready at its turn.
    """
    n_ops = placement.shape[0]
    n_tensors = g.tensor_producer.shape[0]
    done = np.zeros(n_ops, dtype=np.uint8)
    out = np.empty(n_ops + n_tensors * d, dtype=np.int64)
    n = 0
    if lazy:
        sent = np.zeros(n_tensors * d, dtype=np.uint8)
        for position in range(n_ops):
            j = op_order[position]
            if j < 0 or j >= n_ops or done[j]:
                return out[:0], max(min(j, n_ops - 1), 0)
            if not inputs_run(g, j, done):
                return out[:0], j
            device = placement[j]
            for e in range(g.op_input_ptr[_u(j)], g.op_input_ptr[_u(j + 1)]):
                t = g.op_input_tensor[_u(e)]
                copy = t * d + device
                if placement[_u(g.tensor_producer[_u(t)])] != device and not sent[_u(copy)]:
                    sent[_u(copy)] = 1
                    out[_u(n)] = n_ops + copy
                    n += 1
            done[_u(j)] = 1
            out[_u(n)] = j
            n += 1
        return out[:n].copy(), -1
    waiting = initial_waiting(g)
    readers_left = np.zeros(n_tensors * d, dtype=np.int32)
    newly = np.empty(release_capacity(g), dtype=np.int64)
    spare = np.empty(release_capacity(g), dtype=np.int64)  # what a transfer makes ready
    for position in range(n_ops):
        j = op_order[position]
        if j < 0 or j >= n_ops or done[j]:
            return out[:0], max(min(j, n_ops - 1), 0)
        if waiting[j] > 0:
            return out[:0], j
        done[j] = 1
        out[n] = j
        n += 1
        device = placement[j]
        count = release_op(g, j, device, d, placement, waiting, readers_left, newly)
        for i in range(count):
            code = newly[i]
            if code >= n_ops:
                out[n] = code
                n += 1
                copy = code - n_ops
                t = copy // d
                release_copy(g, t, copy - t * d, placement, waiting, spare)
    return out[:n].copy(), -1


def offer_op_order(
    problem: Problem, tracker: Tracker, placement: np.ndarray, op_order: np.ndarray
) -> tuple[np.ndarray, float]:
    """Scores one valid op order with lazy transfers and offers it; (peaks, makespan).

    For searches that score many placements with one order and rank them themselves.
    """
    events = events_from_op_order(problem.graph, placement, op_order, problem.machine.n_devices)
    peaks, makespan, _ = problem.scorer.evaluate(placement, events)
    tracker.offer(placement, events, peaks, makespan)
    return peaks, float(makespan)


def offer_op_orders(
    problem: Problem,
    tracker: Tracker,
    placement: np.ndarray,
    op_orders: Iterable[np.ndarray],
    modes: Sequence[TransferPlacement] = ("lazy", "eager"),
) -> None:
    """Scores each op order with lazy and eager transfers and offers it to the tracker.

    Orders whose events repeat an earlier candidate's are skipped, and only the first mode is
    tried when the placement implies no transfers.

    Args:
        problem: the problem (its scorer scores every candidate).
        tracker: receives each valid candidate.
        placement: [n_ops] device of each op.
        op_orders: [n_ops] topological op orders.
        modes: where transfers go ('lazy', 'eager'), each tried in turn.
    """
    graph, n_devices = problem.graph, problem.machine.n_devices
    src, dst = graph.edge_index
    modes = tuple(modes) if np.any(placement[src] != placement[dst]) else tuple(modes[:1])
    seen: set[bytes] = set()
    for op_order in op_orders:
        for mode in modes:
            events = events_from_op_order(graph, placement, op_order, n_devices, mode)
            if events.tobytes() in seen:
                continue
            seen.add(events.tobytes())
            peaks, makespan, (violation, _, _) = problem.scorer.evaluate(placement, events)
            if violation == Violation.NONE:
                tracker.offer(placement, events, peaks, makespan)
