"""Plain twins of the solver kernels, used as test oracles (ARCHITECTURE.md principle 4)."""

from __future__ import annotations

import heapq

import numpy as np

from graphopt.ir.graph import Graph
from graphopt.ir.solution import Solution, implied_transfers
from graphopt.solvers.random_keys import code_bits, pack


def reference_decode(
    graph: Graph, keys: np.ndarray, n_devices: int, pins: np.ndarray | None = None
) -> Solution:
    """Random-key decoding (paper 001 section 3.2.1) written for clarity, not speed.

    Placement by highest affinity (lowest device on ties, pins first); then a topological sort
    of ops and implied transfers that always runs the ready event of highest priority, ties
    to the lower event code, priorities compared as the kernel packs them (`pack`).
    """
    d = n_devices
    n_ops = graph.n_ops
    affinity = np.asarray(keys[: n_ops * d]).reshape(n_ops, d)
    placement = np.argmax(affinity, axis=1).astype(np.int64) if n_ops else np.zeros(0, np.int64)
    if pins is not None:
        placement = np.where(np.asarray(pins) >= 0, pins, placement)

    bits = code_bits(n_ops + graph.n_tensors * d)

    def priority(code: int) -> int:
        """Larger runs first: the quantized priority, ties to the lower code."""
        if code < n_ops:
            return int(pack(float(keys[n_ops * d + code]), code, bits))
        return int(pack(float(keys[n_ops * (d + 1) + code - n_ops]), code, bits))

    transfers = {int(code) for code in implied_transfers(graph, placement, d)}
    # What each event waits for: an op waits for each input's copy on its device.
    waits: dict[int, set[int]] = {}
    for j in range(n_ops):
        needed = set()
        for t in graph.inputs(j):
            producer = int(graph.tensor_producer[t])
            if placement[producer] == placement[j]:
                needed.add(producer)
            else:
                needed.add(n_ops + int(t) * d + int(placement[j]))
        waits[j] = needed
    for code in transfers:
        waits[code] = {int(graph.tensor_producer[(code - n_ops) // d])}

    done: set[int] = set()
    ready = [(-priority(e), e) for e, needed in waits.items() if not needed]
    heapq.heapify(ready)
    queued = {e for _, e in ready}
    order = []
    while ready:
        _, event = heapq.heappop(ready)
        order.append(event)
        done.add(event)
        for other, needed in waits.items():
            if other not in queued and needed <= done:
                heapq.heappush(ready, (-priority(other), other))
                queued.add(other)
    return Solution(placement, np.asarray(order, dtype=np.int64), d)


def reference_forced_live_bytes(graph: Graph) -> np.ndarray:
    """`bounds.forced_live_bytes` from plain ancestor sets.

    For each op j: the bytes of non-persistent tensors that j neither reads nor makes, made by
    an ancestor of j and either read by a descendant of j or graph outputs (held to the end).
    """
    ancestors: list[set[int]] = [set() for _ in range(graph.n_ops)]
    for op in graph.topological_order.tolist():
        for parent in graph.predecessors(op).tolist():
            ancestors[op] |= ancestors[parent] | {parent}
    forced = np.zeros(graph.n_ops, dtype=np.int64)
    for j in range(graph.n_ops):
        for tensor in range(graph.n_tensors):
            consumers = graph.consumers(tensor).tolist()
            if (
                not graph.tensor_persistent[tensor]
                and int(graph.tensor_producer[tensor]) in ancestors[j]
                and j not in consumers
                and (
                    graph.tensor_output[tensor]
                    or any(j in ancestors[consumer] for consumer in consumers)
                )
            ):
                forced[j] += int(graph.tensor_size[tensor])
    return forced
