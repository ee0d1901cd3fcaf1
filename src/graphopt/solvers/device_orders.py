"""Per-device memory orders merged into one valid event order, for a placement on d devices.

A device's memory at each step depends only on the relative order of its own events: the ops it
runs, the copies it receives and the copies it sends (docs/format.md section 5). So the best
order for a placement can mix heuristics: each device takes the compiler order (XLA's, Inductor's,
`memory_schedulers.PORTFOLIO`) under which its own peak is lowest, and the per-device orders are
merged into one topological order of all ops. Transfers then go right before their first reader
("lazy": as late as possible, so the received copy lives shortest) or right after their producer.

The merge advances, at each step, the device whose next preferred op is ready and is least far
along its own order (so devices progress together and a sent copy waits little for its reader).
Per-device orders of different heuristics need not be compatible (device 0 may want a before b
while b's input comes from device 1's op that device 1 wants after one that reads a's output);
when no device's next op is ready, the ready op that comes first in its device's order runs
instead, so the merge always ends in a valid order.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import numba
import numpy as np

from graphopt.ir.arrays import GraphArrays
from graphopt.ir.graph import Graph
from graphopt.solvers.base import Problem
from graphopt.solvers.events import events_from_op_order
from graphopt.solvers.memory_schedulers import PORTFOLIO, OrderFunction


def merge_device_orders(
    graph: Graph, placement: np.ndarray, rank: np.ndarray, n_devices: int
) -> np.ndarray:
    """One topological order of all ops that keeps each device's preferred order where it can.

    Args:
        graph: the graph.
        placement: [n_ops] device of each op.
        rank: [n_ops] position of each op in its device's preferred order (any numbers; lower
            runs first on that device).
        n_devices: number of devices d.

    Returns:
        [n_ops] int64 op order.
    """
    placement = np.ascontiguousarray(placement, dtype=np.int64)
    rank = np.asarray(rank, dtype=np.float64)
    by_device = np.lexsort((np.arange(graph.n_ops), rank, placement))
    counts = np.bincount(placement, minlength=n_devices)
    device_ptr = np.zeros(n_devices + 1, dtype=np.int64)
    np.cumsum(counts, out=device_ptr[1:])
    position = np.empty(graph.n_ops, dtype=np.int64)
    position[by_device] = np.arange(graph.n_ops) - device_ptr[placement[by_device]]
    return _merge(
        graph.arrays,
        placement,
        by_device.astype(np.int64),
        device_ptr,
        position,
    )


@numba.njit(cache=True)
def _merge(
    g: GraphArrays,
    placement: np.ndarray,
    by_device: np.ndarray,
    device_ptr: np.ndarray,
    position: np.ndarray,
) -> np.ndarray:
    n_ops = placement.shape[0]
    d = device_ptr.shape[0] - 1
    waiting = np.zeros(n_ops, dtype=np.int64)
    for j in range(n_ops):
        waiting[j] = g.op_input_ptr[j + 1] - g.op_input_ptr[j]
    done = np.zeros(n_ops, dtype=np.uint8)
    head = device_ptr[:-1].copy()
    out = np.empty(n_ops, dtype=np.int64)
    for step in range(n_ops):
        chosen = -1
        best = np.inf
        for x in range(d):
            while head[x] < device_ptr[x + 1] and done[by_device[head[x]]]:
                head[x] += 1
            if head[x] == device_ptr[x + 1]:
                continue
            j = by_device[head[x]]
            if waiting[j] == 0:
                progress = (head[x] - device_ptr[x]) / (device_ptr[x + 1] - device_ptr[x])
                if progress < best:
                    best, chosen = progress, j
        if chosen < 0:
            for j in range(n_ops):
                if not done[j] and waiting[j] == 0 and position[j] < best:
                    best, chosen = position[j], j
        done[chosen] = 1
        out[step] = chosen
        for e in range(g.op_output_ptr[chosen], g.op_output_ptr[chosen + 1]):
            t = g.op_output_tensor[e]
            for c in range(g.consumer_ptr[t], g.consumer_ptr[t + 1]):
                waiting[g.consumer_op[c]] -= 1
    return out


def device_order_candidates(
    problem: Problem,
    placement: np.ndarray,
    known: Mapping[OrderFunction, np.ndarray] | None = None,
) -> Iterator[np.ndarray]:
    """Op orders for a placement: every compiler order, then their per-device best merged.

    Each order of `PORTFOLIO` is scored with lazy transfers; the merged order gives each device
    the order under which its own peak was lowest (module docstring). On one device, or when one
    order is best on every device, the merge adds nothing and is skipped.

    Args:
        problem: the problem (its scorer measures each device's peak).
        placement: [n_ops] device of each op.
        known: orders of `PORTFOLIO` the caller already computed for this placement.

    Yields:
        [n_ops] int64 topological op orders.
    """
    graph, n_devices = problem.graph, problem.machine.n_devices
    placement = np.asarray(placement, dtype=np.int32)
    known = known or {}
    orders = [
        known[schedule] if schedule in known else schedule(graph, placement, n_devices)
        for schedule in PORTFOLIO
    ]
    peaks = np.empty((len(orders), n_devices), dtype=np.int64)
    for k, op_order in enumerate(orders):
        yield op_order
        events = events_from_op_order(graph, placement, op_order, n_devices)
        peaks[k] = problem.scorer.evaluate(placement, events)[0]
    best = np.argmin(peaks, axis=0)
    if n_devices == 1 or np.all(best == best[0]):
        return
    rank = np.empty(graph.n_ops, dtype=np.int64)
    for x in range(n_devices):
        op_order = orders[int(best[x])]
        on_x = op_order[placement[op_order] == x]
        rank[on_x] = np.arange(on_x.shape[0])
    yield merge_device_orders(graph, placement, rank, n_devices)
