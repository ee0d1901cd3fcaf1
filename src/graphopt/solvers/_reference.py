"""Plain twins of the solver kernels, used as test oracles (ARCHITECTURE.md principle 4)."""

from __future__ import annotations

import heapq

import numpy as np

from graphopt.costmodels.machine import Machine
from graphopt.ir.graph import Graph
from graphopt.ir.solution import MAX_GROUP_OPS, Solution, implied_transfers
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


def acyclic_after_merge(graph: Graph, unit: list[int], a: int, b: int) -> bool:
    """Whether the quotient graph (each op's unit one node) stays acyclic once a and b are one.

    Checked by contracting it and running Kahn's algorithm.
    """
    merged = [b if unit[op] == a else unit[op] for op in range(graph.n_ops)]
    arcs = {
        (merged[p], merged[c]) for p, c in graph.edge_index.T.tolist() if merged[p] != merged[c]
    }
    waiting = dict.fromkeys(merged, 0)
    for _, c in arcs:
        waiting[c] += 1
    ready = [n for n, count in waiting.items() if count == 0]
    done = 0
    while ready:
        n = ready.pop()
        done += 1
        for p, c in arcs:
            if p == n:
                waiting[c] -= 1
                if waiting[c] == 0:
                    ready.append(c)
    return done == len(waiting)


def reference_priority_fusion(
    graph: Graph, placement: np.ndarray, priorities: np.ndarray, threshold: float
) -> np.ndarray:
    """`fusion.priority_groups` from the plain rules of docs/format.md section 13.

    Same visits and choices (ops by descending priority, ties to the lower op; each joins the
    first legal neighbour by descending priority), but a merge is legal when the merged units
    pass the group rules and the quotient graph (each unit one node) stays acyclic, checked by
    contracting it and running Kahn's algorithm, with no ranks.

    Returns:
        [n_ops] int32 group of each op (-1: alone), numbered in the order of their lowest op.
    """
    classes = graph.op_fusion
    place = [int(p) for p in placement]
    unit = list(range(graph.n_ops))
    members: dict[int, set[int]] = {op: {op} for op in range(graph.n_ops)}

    def legal(a: int, b: int) -> bool:
        together = members[a] | members[b]
        return (
            place[a] == place[b]
            and len(together) <= MAX_GROUP_OPS
            and sum(int(classes[op]) == 3 for op in together) <= 1
            and all(classes[op] != 0 for op in together)
            and acyclic_after_merge(graph, unit, a, b)
        )

    def eligible(op: int) -> bool:
        return priorities[op] > threshold and classes[op] != 0

    for v in sorted(range(graph.n_ops), key=lambda op: -priorities[op]):
        if not eligible(v):
            continue
        near = {int(w) for w in graph.successors(v)} | {int(w) for w in graph.predecessors(v)}
        near = {w for w in near if eligible(w) and place[w] == place[v] and unit[w] != unit[v]}
        for w in sorted(near, key=lambda op: (-priorities[op], op)):
            a, b = unit[v], unit[w]
            if legal(a, b):
                for op in members.pop(a):
                    unit[op] = b
                    members[b].add(op)
                break
    group = np.full(graph.n_ops, -1, dtype=np.int32)
    ids: dict[int, int] = {}
    for op in range(graph.n_ops):
        if len(members[unit[op]]) >= 2:
            group[op] = ids.setdefault(unit[op], len(ids))
    return group


def reference_ready_queue_order(
    graph: Graph, machine: Machine, placement: np.ndarray, priority: np.ndarray
) -> list[int]:
    """GO's per-device ready-queue schedule (`ready_queue.ready_queue_kernel`), plainly.

    Each step: every device's earliest possible start (when it is free if one of its released
    events is ready by then, else when its first released event becomes ready); the earliest
    device (ties: lower) runs, of its events ready by then, the one of highest priority (ties:
    lower code). A sync copy is an event of its destination, with the highest priority of its
    readers there; an async one follows its producer.
    """
    n_ops, d = graph.n_ops, machine.n_devices
    sync = machine.mode == "sync"

    def seconds(t: int) -> float:
        return machine.latency + float(graph.tensor_size[t]) / machine.bandwidth

    waiting = [len(graph.inputs(op)) for op in range(n_ops)]
    ready_at: dict[int, float] = {}
    rank = {op: float(priority[op]) for op in range(n_ops)}
    released: list[set[int]] = [set() for _ in range(d)]
    device_free = [0.0] * d
    order: list[int] = []
    sent: set[int] = set()

    def arrive(op: int, at: float) -> None:
        ready_at[op] = max(ready_at.get(op, 0.0), at)
        waiting[op] -= 1
        if waiting[op] == 0:
            released[int(placement[op])].add(op)

    for op in range(n_ops):
        if waiting[op] == 0:
            ready_at[op] = 0.0
            released[int(placement[op])].add(op)
    while any(released):
        starts = {
            b: max(device_free[b], min(ready_at[c] for c in released[b]))
            for b in range(d)
            if released[b]
        }
        device = min(starts, key=lambda b: (starts[b], b))
        start = starts[device]
        code = min(
            (c for c in released[device] if ready_at[c] <= start), key=lambda c: (-rank[c], c)
        )
        released[device].remove(code)
        order.append(code)
        if code >= n_ops:
            t = (code - n_ops) // d
            device_free[device] = start + seconds(t)
            for consumer in graph.consumers(t).tolist():
                if int(placement[consumer]) == device:
                    arrive(consumer, device_free[device])
            continue
        finish = device_free[device] = start + float(graph.op_runtime[code])
        for t in graph.outputs(code).tolist():
            for consumer in graph.consumers(t).tolist():
                there = int(placement[consumer])
                if there == device:
                    arrive(consumer, finish)
                    continue
                copy = n_ops + t * d + there
                if copy not in sent:
                    sent.add(copy)
                    if sync:
                        ready_at[copy] = finish
                        rank[copy] = max(
                            float(priority[c])
                            for c in graph.consumers(t).tolist()
                            if int(placement[c]) == there
                        )
                        released[there].add(copy)
                    else:
                        order.append(copy)
                if not sync:
                    arrive(consumer, finish + seconds(t))
    return order
