"""Fusion heuristics (COST_MODEL.md section 7): compilers' baselines and GO's priority decoder.

Each function takes a graph and a valid solution, keeps its placement, re-decides the fusion
groups from scratch (groups the solution already has are dropped) and re-derives an order in
which every group is contiguous (`fused_order`), so that what it returns always scores.

Groups grow by merging two units (a group, or an op alone) that a tensor links, one producing
what the other consumes, so every group is connected. A merge is refused when it breaks a rule of
section 7 or when a dependency path from one unit to the other passes through a third unit: the
quotient graph (each unit contracted to a node) would get a cycle, the "fusion would create a
cycle" check of XLA and Inductor. To bound that search, every unit keeps a rank in a topological
order of the quotient graph (at first the ops' positions in the given order); only units ranked
between the two are searched, and a merge re-ranks the few units it must, as Pearce and Kelly's
dynamic topological sort does (JEA 2006). The rank bookkeeping and GO's decoder are numba kernels;
`_reference.reference_priority_fusion` is the decoder's plain twin.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import replace
from typing import NamedTuple

import numba
import numpy as np

from graphopt.costmodels.machine import Machine
from graphopt.costmodels.score import Scorer
from graphopt.errors import SolutionError
from graphopt.ir.arrays import FusionArrays, GraphArrays
from graphopt.ir.graph import FUSION_CLASSES, Graph
from graphopt.ir.solution import MAX_GROUP_OPS, Solution
from graphopt.solvers.base import Objective

ELEMENTWISE = FUSION_CLASSES.index("elementwise")
REDUCTION = FUSION_CLASSES.index("reduction")
CONTRACTION = FUSION_CLASSES.index("contraction")

PRIORITY_THRESHOLD = 0.5
"""Ops whose fusion priority is at most this stay alone: priorities live in [0, 1], so a search
or a policy switches fusion off per op by pushing its priority down."""


class Units(NamedTuple):
    """Fusion units being merged; a unit is named by one of its ops, its representative.

    Arrays indexed by a representative hold the unit's values; the rest is scratch space.
    """

    unit: np.ndarray
    """[n_ops] int64 representative of each op's unit."""
    head: np.ndarray
    """[n_ops] int64 first member of each unit."""
    tail: np.ndarray
    """[n_ops] int64 last member of each unit."""
    next_member: np.ndarray
    """[n_ops] int64 member after each op in its unit's list, -1 at the end."""
    size: np.ndarray
    """[n_ops] int64 ops in each unit."""
    contractions: np.ndarray
    """[n_ops] int64 contraction ops in each unit."""
    rank: np.ndarray
    """[n_ops] int64 slot of each unit in a topological order of the quotient graph."""
    stamp: np.ndarray
    """[n_ops] int64 visit marks of units (scratch)."""
    tensor_stamp: np.ndarray
    """[n_tensors] int64 visit marks of tensors (scratch)."""
    epoch: np.ndarray
    """[1] int64 current visit mark."""
    stack: np.ndarray
    """[n_ops] int64 search stack (scratch)."""
    ahead: np.ndarray
    """[n_ops] int64 units found by the forward search (scratch)."""
    behind: np.ndarray
    """[n_ops] int64 units found by the backward search (scratch)."""


@numba.njit(cache=True)
def new_units(f: FusionArrays, rank: np.ndarray, n_tensors: int) -> Units:
    """Every op a unit of its own, ranked by `rank` (a topological order of the ops)."""
    n_ops = rank.shape[0]
    contractions = np.zeros(n_ops, dtype=np.int64)
    for op in range(n_ops):
        contractions[op] = f.op_fusion[op] == CONTRACTION
    return Units(
        np.arange(n_ops),
        np.arange(n_ops),
        np.arange(n_ops),
        np.full(n_ops, -1, dtype=np.int64),
        np.ones(n_ops, dtype=np.int64),
        contractions,
        rank.astype(np.int64),
        np.zeros(n_ops, dtype=np.int64),
        np.zeros(n_tensors, dtype=np.int64),
        np.zeros(1, dtype=np.int64),
        np.empty(n_ops, dtype=np.int64),
        np.empty(n_ops, dtype=np.int64),
        np.empty(n_ops, dtype=np.int64),
    )


@numba.njit(cache=True)
def _search(
    u: Units, ptr: np.ndarray, near: np.ndarray, start: int, target: int, out: np.ndarray
) -> int:
    """Units reached from `start` through `near` ranked strictly between start and target.

    Returns how many were written to `out`, or -1 when one of them links to `target` (a path
    from start to target through a third unit: merging the two would make a cycle).
    """
    rank, unit, stamp, stack = u.rank, u.unit, u.stamp, u.stack
    head, next_member = u.head, u.next_member
    lo = min(rank[start], rank[target])
    hi = max(rank[start], rank[target])
    u.epoch[0] += 1
    mark = u.epoch[0]
    stack[0] = start
    top = 1
    found = 0
    while top > 0:
        top -= 1
        v = stack[top]
        m = head[v]
        while m >= 0:
            for e in range(ptr[m], ptr[m + 1]):
                w = unit[near[e]]
                if w == start or (w == target and v == start):
                    continue
                if w == target:
                    return -1
                if rank[w] <= lo or rank[w] >= hi or stamp[w] == mark:
                    continue
                stamp[w] = mark
                out[found] = w
                found += 1
                stack[top] = w
                top += 1
            m = next_member[m]
    return found


@numba.njit(cache=True)
def _rerank(u: Units, x: int, y: int, n_behind: int, n_ahead: int) -> int:
    """Re-ranks the units found between x and y when they merge; returns the merged unit's rank.

    The slots of x, y and the units found (`u.behind`: y's ancestors, `u.ahead`: x's
    descendants, all ranked between) go, in ascending order, to y's ancestors by old rank, the
    merged unit, then x's descendants by old rank (Pearce and Kelly). Sorts in place by the key
    rank * n_ops + unit, without allocating.
    """
    n = u.unit.shape[0]
    for found, count in ((u.behind, n_behind), (u.ahead, n_ahead)):
        for i in range(count):
            found[i] = u.rank[found[i]] * n + found[i]
        found[:count].sort()
    slots = u.stack
    slots[0] = u.rank[x]
    i = j = 0
    for k in range(1, n_behind + n_ahead + 1):
        if j >= n_ahead or (i < n_behind and u.behind[i] < u.ahead[j]):
            slots[k] = u.behind[i] // n
            i += 1
        else:
            slots[k] = u.ahead[j] // n
            j += 1
    slots[n_behind + n_ahead + 1] = u.rank[y]
    for i in range(n_behind):
        u.rank[u.behind[i] % n] = slots[i]
    for i in range(n_ahead):
        u.rank[u.ahead[i] % n] = slots[n_behind + 1 + i]
    return slots[n_behind]


@numba.njit(cache=True)
def try_merge(
    f: FusionArrays, placement: np.ndarray, u: Units, a: int, b: int, max_ops: int
) -> bool:
    """Merges the units of ops `a` and `b` if the result keeps every group rule; says whether.

    The caller makes sure a tensor links the two units (so the result is connected). Refused:
    the same unit, two devices, a lone op of class none, more than one contraction or `max_ops`
    ops, or a path from one unit to the other through a third (a cycle once merged).
    """
    a = u.unit[a]
    b = u.unit[b]
    if a == b or placement[a] != placement[b]:
        return False
    if u.size[a] + u.size[b] > max_ops or u.contractions[a] + u.contractions[b] > 1:
        return False
    if (u.size[a] == 1 and f.op_fusion[a] == 0) or (u.size[b] == 1 and f.op_fusion[b] == 0):
        return False
    x, y = (a, b) if u.rank[a] < u.rank[b] else (b, a)
    # Either search finds a cycle; the one from the smaller unit (fewer edges to scan) runs
    # first, and the other only when the first finds units the merged one must be ranked among.
    # When nothing between them depends on x, the merged unit takes y's slot; when y depends on
    # nothing between them, x's; otherwise Pearce-Kelly re-ranks the units found.
    if u.size[x] <= u.size[y]:
        n_ahead = _search(u, f.op_successor_ptr, f.op_successor, x, y, u.ahead)
        if n_ahead < 0:
            return False
        if n_ahead == 0:
            merged_rank = u.rank[y]
        else:
            n_behind = _search(u, f.op_predecessor_ptr, f.op_predecessor, y, x, u.behind)
            merged_rank = u.rank[x] if n_behind == 0 else _rerank(u, x, y, n_behind, n_ahead)
    else:
        n_behind = _search(u, f.op_predecessor_ptr, f.op_predecessor, y, x, u.behind)
        if n_behind < 0:
            return False
        if n_behind == 0:
            merged_rank = u.rank[x]
        else:
            n_ahead = _search(u, f.op_successor_ptr, f.op_successor, x, y, u.ahead)
            merged_rank = u.rank[y] if n_ahead == 0 else _rerank(u, x, y, n_behind, n_ahead)
    keep, gone = (a, b) if u.size[a] >= u.size[b] else (b, a)
    m = u.head[gone]
    while m >= 0:
        u.unit[m] = keep
        m = u.next_member[m]
    u.next_member[u.tail[keep]] = u.head[gone]
    u.tail[keep] = u.tail[gone]
    u.size[keep] += u.size[gone]
    u.contractions[keep] += u.contractions[gone]
    u.rank[keep] = merged_rank
    return True


@numba.njit(cache=True)
def unit_cost(g: GraphArrays, f: FusionArrays, u: Units, a: int, b: int) -> tuple[int, float]:
    """Memory traffic (bytes in + bytes out) and seconds of the union of units a and b.

    b = -1 for unit a alone. Seconds are the op's runtime for a lone op, else section 7's
    roofline: max(compute, traffic / bandwidth) + launch overhead.
    """
    a = u.unit[a]
    b = a if b < 0 else u.unit[b]
    u.epoch[0] += 1
    mark = u.epoch[0]
    traffic = 0
    compute = 0.0
    n = 0
    for k in range(1 if b == a else 2):
        m = u.head[a if k == 0 else b]
        while m >= 0:
            n += 1
            compute += f.op_compute_time[m]
            for e in range(g.op_input_ptr[m], g.op_input_ptr[m + 1]):
                t = g.op_input_tensor[e]
                source = u.unit[g.tensor_producer[t]]
                if source != a and source != b and u.tensor_stamp[t] != mark:
                    u.tensor_stamp[t] = mark
                    traffic += g.tensor_size[t]
            for e in range(g.op_output_ptr[m], g.op_output_ptr[m + 1]):
                t = g.op_output_tensor[e]
                begin, end = g.consumer_ptr[t], g.consumer_ptr[t + 1]
                internal = end > begin and not g.tensor_persistent[t]
                for c in range(begin, end):
                    reader = u.unit[g.consumer_op[c]]
                    if reader != a and reader != b:
                        internal = False
                if not internal:
                    traffic += g.tensor_size[t]
            m = u.next_member[m]
    if n == 1:
        return traffic, g.op_runtime[u.head[a]]
    return traffic, max(compute, traffic / f.memory_bandwidth) + f.launch_overhead


@numba.njit(cache=True)
def group_ids(u: Units) -> np.ndarray:
    """[n_ops] int32 group of each op (-1: alone), numbered in the order of their lowest op."""
    n_ops = u.unit.shape[0]
    ids = np.full(n_ops, -1, dtype=np.int32)
    by_unit = np.full(n_ops, -1, dtype=np.int32)
    n_groups = 0
    for op in range(n_ops):
        rep = u.unit[op]
        if u.size[rep] < 2:
            continue
        if by_unit[rep] < 0:
            by_unit[rep] = n_groups
            n_groups += 1
        ids[op] = by_unit[rep]
    return ids


@numba.njit(cache=True)
def priority_groups(
    f: FusionArrays,
    placement: np.ndarray,
    rank: np.ndarray,
    priorities: np.ndarray,
    threshold: float,
    max_ops: int,
) -> np.ndarray:
    """GO's fusion decoder: groups from per-op fusion priorities, as `group_ids` numbers them.

    Ops are visited by descending priority (ties to the lower op). A visited op above the
    threshold joins the unit of one neighbour (an op it shares a tensor with) that is above the
    threshold, on its device and of a fusable class: the first, by descending priority (ties to
    the lower op), whose merge is legal. Priority rather than tensor size picks the neighbour, so
    that the priorities alone steer which groups form.
    """
    u = new_units(f, rank, 0)
    unit, fusion = u.unit, f.op_fusion
    successor_ptr, successor = f.op_successor_ptr, f.op_successor
    predecessor_ptr, predecessor = f.op_predecessor_ptr, f.op_predecessor
    near = np.empty(successor.shape[0] + predecessor.shape[0], dtype=np.int64)
    visits = np.flatnonzero((priorities > threshold) & (fusion != 0))
    for v in visits[np.argsort(-priorities[visits], kind="mergesort")]:
        k = 0
        for e in range(  # v's successors, then its predecessors
            successor_ptr[v], successor_ptr[v + 1] + predecessor_ptr[v + 1] - predecessor_ptr[v]
        ):
            if e < successor_ptr[v + 1]:
                w = successor[e]
            else:
                w = predecessor[e - successor_ptr[v + 1] + predecessor_ptr[v]]
            if (
                priorities[w] <= threshold
                or fusion[w] == 0
                or placement[w] != placement[v]
                or unit[w] == unit[v]
            ):
                continue
            # Insertion into near[:k], kept by descending priority, ties to the lower op.
            i = k
            while i > 0 and (
                priorities[near[i - 1]] < priorities[w]
                or (priorities[near[i - 1]] == priorities[w] and near[i - 1] > w)
            ):
                i -= 1
            if i > 0 and near[i - 1] == w:  # a repeated neighbour
                continue
            for j in range(k, i, -1):
                near[j] = near[j - 1]
            near[i] = w
            k += 1
        for i in range(k):
            if try_merge(f, placement, u, v, near[i], max_ops):
                break
    return group_ids(u)


@numba.njit(cache=True)
def _fused_order(
    g: GraphArrays,
    placement: np.ndarray,
    order: np.ndarray,
    group: np.ndarray,
    n_devices: int,
) -> tuple[np.ndarray, int]:
    """List-schedules the quotient graph of events; see `fused_order`.

    Returns:
        (new order, status): status 0, or -1 when an op's input has no event that makes it
        available, or -2 when the groups admit no contiguous order.
    """
    n_ops = group.shape[0]
    n_tensors = g.tensor_size.shape[0]
    n_events = order.shape[0]
    op_position = np.full(n_ops, -1, dtype=np.int64)
    transfer_ptr = np.zeros(n_tensors + 1, dtype=np.int64)
    for p in range(n_events):
        code = order[p]
        if code < n_ops:
            op_position[code] = p
        else:
            transfer_ptr[(code - n_ops) // n_devices + 1] += 1
    transfer_ptr = np.cumsum(transfer_ptr)
    transfer_at = np.empty(transfer_ptr[n_tensors], dtype=np.int64)
    fill = transfer_ptr[:-1].copy()
    n_groups = 0
    for op in range(n_ops):
        n_groups = max(n_groups, group[op] + 1)
    first = np.full(n_groups, n_events, dtype=np.int64)
    for p in range(n_events):
        code = order[p]
        if code >= n_ops:
            t = (code - n_ops) // n_devices
            transfer_at[fill[t]] = p
            fill[t] += 1
        elif group[code] >= 0:
            first[group[code]] = min(first[group[code]], p)
    # Each event belongs to the unit named by the position of the unit's first event.
    unit = np.arange(n_events)
    for p in range(n_events):
        code = order[p]
        if code < n_ops and group[code] >= 0:
            unit[p] = first[group[code]]
    # Dependencies between events, as (position it waits for, position waiting).
    n_deps = 0
    deps = np.empty((g.consumer_op.shape[0] + n_events, 2), dtype=np.int64)
    for p in range(n_events):
        code = order[p]
        if code >= n_ops:
            t = (code - n_ops) // n_devices
            deps[n_deps, 0] = op_position[g.tensor_producer[t]]
            deps[n_deps, 1] = p
            n_deps += 1
            continue
        for e in range(g.op_input_ptr[code], g.op_input_ptr[code + 1]):
            t = g.op_input_tensor[e]
            producer = g.tensor_producer[t]
            source = -1
            if placement[producer] == placement[code]:
                source = op_position[producer]
            else:
                for i in range(transfer_ptr[t], transfer_ptr[t + 1]):
                    at = transfer_at[i]
                    if order[at] - n_ops - t * n_devices == placement[code]:
                        source = at
            if source < 0:
                return order.copy(), -1
            deps[n_deps, 0] = source
            deps[n_deps, 1] = p
            n_deps += 1
    waiting = np.zeros(n_events, dtype=np.int64)
    successor_ptr = np.zeros(n_events + 1, dtype=np.int64)
    for i in range(n_deps):
        a, b = unit[deps[i, 0]], unit[deps[i, 1]]
        if a != b:
            waiting[b] += 1
            successor_ptr[a + 1] += 1
    successor_ptr = np.cumsum(successor_ptr)
    successor = np.empty(successor_ptr[n_events], dtype=np.int64)
    fill = successor_ptr[:-1].copy()
    for i in range(n_deps):
        a, b = unit[deps[i, 0]], unit[deps[i, 1]]
        if a != b:
            successor[fill[a]] = b
            fill[a] += 1
    member_ptr = np.zeros(n_events + 1, dtype=np.int64)
    for p in range(n_events):
        member_ptr[unit[p] + 1] += 1
    member_ptr = np.cumsum(member_ptr)
    members = np.empty(n_events, dtype=np.int64)
    fill = member_ptr[:-1].copy()
    for p in range(n_events):  # ascending, so each unit's members keep the given order
        members[fill[unit[p]]] = p
        fill[unit[p]] += 1
    ready = [np.int64(0)]
    ready.pop()
    for p in range(n_events):
        if unit[p] == p and waiting[p] == 0:
            ready.append(np.int64(p))
    heapq.heapify(ready)
    out = np.empty(n_events, dtype=np.int64)
    n_out = 0
    while ready:
        v = heapq.heappop(ready)
        for i in range(member_ptr[v], member_ptr[v + 1]):
            out[n_out] = order[members[i]]
            n_out += 1
        for i in range(successor_ptr[v], successor_ptr[v + 1]):
            w = successor[i]
            waiting[w] -= 1
            if waiting[w] == 0:
                heapq.heappush(ready, w)
    if n_out < n_events:
        return order.copy(), -2
    return out, 0


def fused_order(graph: Graph, solution: Solution, fusion: np.ndarray | None) -> np.ndarray:
    """A valid order of the solution's events in which every group's op events are contiguous.

    List-schedules the quotient graph (each group one unit, every other event its own unit):
    the ready unit whose first event comes earliest in the given order runs next, a group
    emitting its members in their given relative order (valid, as they share a device). So the
    given order comes back unchanged when it is valid and has no groups, and a transfer keeps
    its place unless a group pulls its consumer ahead.

    Args:
        graph: the graph.
        solution: a valid solution (placement and order; its own groups are ignored).
        fusion: None or [n_ops] group of each op (-1: alone).

    Raises:
        SolutionError: when the order misses an event an op needs, or no order keeps every
            group contiguous (a dependency path leaves a group and comes back).
    """
    order = np.ascontiguousarray(solution.order, dtype=np.int64)
    if fusion is None:
        fusion = np.full(graph.n_ops, -1, dtype=np.int32)
    new_order, status = _fused_order(
        graph.arrays,
        np.ascontiguousarray(solution.placement, dtype=np.int32),
        order,
        np.ascontiguousarray(fusion, dtype=np.int32),
        solution.n_devices,
    )
    if status == -1:
        raise SolutionError(
            "order: an op's input has no event that makes it available on its device"
        )
    if status == -2:
        raise SolutionError(
            "fusion: the groups admit no order in which each is contiguous "
            "(a dependency path leaves a group and comes back, through one op or another group)"
        )
    return new_order


# ---------------------------------------------------------------------------- Python drivers


def _fusable(graph: Graph) -> bool:
    """Whether any op has a fusion class; refuses fusing on a graph without a `kernel`."""
    if not np.any(graph.op_fusion):
        return False
    if graph.kernel is None:
        raise SolutionError(
            f"graph '{graph.name}': no 'kernel' field (memory_bandwidth, launch_overhead), which "
            "fusing ops needs (COST_MODEL.md section 7); add it to the graph or run without fusion"
        )
    return True


def _op_ranks(graph: Graph, solution: Solution) -> np.ndarray:
    """[n_ops] int64 position of each op's event in the solution's order: a topological order."""
    order = np.asarray(solution.order, dtype=np.int64)
    ops = order < graph.n_ops
    rank = np.full(graph.n_ops, -1, dtype=np.int64)
    rank[order[ops]] = np.flatnonzero(ops)
    if graph.n_ops and rank.min() < 0:
        missing = int(np.flatnonzero(rank < 0)[0])
        raise SolutionError(f"order: op '{graph.op_names[missing]}' has no event")
    return rank


def _result(graph: Graph, solution: Solution, group: np.ndarray, name: str) -> Solution:
    """The solution with these groups (None when there are none) and an order that fits them."""
    fusion = group if np.any(group >= 0) else None
    return replace(
        solution,
        order=fused_order(graph, solution, fusion),
        fusion=fusion,
        objective={},
        solver={**solution.solver, "fusion": name},
    )


def _start(graph: Graph, solution: Solution) -> Units | None:
    """Every op its own unit, or None when nothing may fuse."""
    if not _fusable(graph):
        return None
    return new_units(graph.fusion_arrays, _op_ranks(graph, solution), graph.n_tensors)


def priority_fusion(
    graph: Graph,
    solution: Solution,
    priorities: np.ndarray,
    threshold: float = PRIORITY_THRESHOLD,
) -> Solution:
    """GO's decoder (paper 002, section 3): groups from one fusion priority per op.

    See `priority_groups` for the rule; ops at or below `threshold` stay alone. This is what a
    search's genes and a policy's fusion head drive, so it is one numba pass.

    Args:
        graph: the graph, with fusion classes and a kernel.
        solution: a valid solution whose placement and order are kept (its groups are not).
        priorities: [n_ops] finite fusion priorities, in [0, 1] by convention.
        threshold: priorities at or below it switch fusion off for the op.
    """
    priorities = np.ascontiguousarray(priorities, dtype=np.float64).reshape(-1)
    if priorities.shape[0] != graph.n_ops or not np.all(np.isfinite(priorities)):
        raise SolutionError(f"priorities: need {graph.n_ops} finite numbers, one per op")
    if not _fusable(graph):
        return _result(graph, solution, np.full(graph.n_ops, -1, np.int32), "priority")
    group = priority_groups(
        graph.fusion_arrays,
        np.ascontiguousarray(solution.placement, dtype=np.int32),
        _op_ranks(graph, solution),
        priorities,
        float(threshold),
        MAX_GROUP_OPS,
    )
    return _result(graph, solution, group, "priority")


def default_fusion(graph: Graph, solution: Solution, priority: bool = False) -> Solution:
    """XLA-like fusion: elementwise producers into their consumers, then multi-output fusion.

    1. Producer-consumer: an elementwise producer joins the unit of its first consumer in the
       order (elementwise or reduction: a contraction reads its operands from memory, as a
       library GEMM does) whose merge is legal; an op sits in one group, so it is never
       duplicated into several consumers as XLA may.
    2. Multi-output (sibling) fusion: when two or more units on the producer's device read one
       tensor, they merge through its producer (section 7 wants a group connected, so readers
       of a common tensor can share it only with the op that makes it), each merge when legal.

    `priority=True` is XLA's priority fusion instead: producer-consumer pairs ranked by the time
    the merge saves (section 7's roofline for groups, `runtime` for lone ops), fused greedily
    from the largest saving while one saves time.
    """
    units = _start(graph, solution)
    if units is None:
        return _result(graph, solution, np.full(graph.n_ops, -1, np.int32), "default")
    placement = np.ascontiguousarray(solution.placement, dtype=np.int32)
    f = graph.fusion_arrays
    if priority:
        _time_greedy(graph, placement, units)
        return _result(graph, solution, group_ids(units), "xla-priority")
    rank = _op_ranks(graph, solution)
    classes = graph.op_fusion
    in_order = np.argsort(rank)
    for producer in in_order:
        if classes[producer] != ELEMENTWISE:
            continue
        consumers = [
            int(c)
            for c in graph.successors(producer)
            if classes[c] in (ELEMENTWISE, REDUCTION) and placement[c] == placement[producer]
        ]
        for consumer in sorted(consumers, key=lambda c: rank[c]):
            if try_merge(f, placement, units, producer, consumer, MAX_GROUP_OPS):
                break
    for producer in in_order:
        if classes[producer] == 0:
            continue
        for t in graph.outputs(producer):
            readers = sorted(
                (
                    int(c)
                    for c in graph.consumers(t)
                    if classes[c] != 0 and placement[c] == placement[producer]
                ),
                key=lambda c: rank[c],
            )
            own = units.unit[producer]
            if len({int(units.unit[c]) for c in readers} - {int(own)}) < 2:
                continue
            for reader in readers:
                try_merge(f, placement, units, producer, reader, MAX_GROUP_OPS)
    return _result(graph, solution, group_ids(units), "default")


def _linked_pairs(graph: Graph, placement: np.ndarray, units: Units) -> np.ndarray:
    """[k, 2] distinct (producer op, consumer op) edges between two fusable units on one device."""
    producer, consumer = graph.edge_index
    classes = graph.op_fusion
    keep = (
        (classes[producer] != 0)
        & (classes[consumer] != 0)
        & (placement[producer] == placement[consumer])
        & (units.unit[producer] != units.unit[consumer])
    )
    pairs = np.stack([producer[keep], consumer[keep]], axis=1).astype(np.int64)
    return np.unique(pairs, axis=0) if pairs.size else pairs.reshape(0, 2)


def _time_greedy(graph: Graph, placement: np.ndarray, units: Units) -> None:
    """XLA priority fusion: merge linked pairs by descending time saved while any saves time.

    A lazy heap: a popped pair whose units changed since it was scored is scored again and
    pushed back, so each merge is the best one by current savings (ties to the lower ops).
    """
    g, f = graph.arrays, graph.fusion_arrays
    version = np.zeros(graph.n_ops, dtype=np.int64)

    def entry(p: int, c: int) -> tuple[float, int, int, int, int] | None:
        a, b = int(units.unit[p]), int(units.unit[c])
        if a == b:
            return None
        saved = unit_cost(g, f, units, a, -1)[1] + unit_cost(g, f, units, b, -1)[1]
        saved -= unit_cost(g, f, units, a, b)[1]
        if not saved > 0:
            return None
        return -saved, p, c, int(version[a]), int(version[b])

    heap = [e for p, c in _linked_pairs(graph, placement, units) if (e := entry(int(p), int(c)))]
    heapq.heapify(heap)
    while heap:
        _, p, c, va, vb = heapq.heappop(heap)
        a, b = int(units.unit[p]), int(units.unit[c])
        if (version[a], version[b]) != (va, vb):
            if (fresh := entry(p, c)) is not None:
                heapq.heappush(heap, fresh)
            continue
        if try_merge(f, placement, units, p, c, MAX_GROUP_OPS):
            version[units.unit[p]] = max(version[a], version[b]) + 1


def greedy_fusion(graph: Graph, solution: Solution, rounds: int = 10) -> Solution:
    """Inductor-like fusion: rounds of merging the pairs of units that save most memory traffic.

    Candidates are pairs of units on one device that a tensor links (one produces what the
    other consumes; two units that only read a common tensor would not be connected, which
    section 7 forbids). A pair scores the traffic it saves: bytes in + bytes out of each unit
    minus those of their union, i.e. tensors that become internal (written and read no more)
    and common inputs read once. Each round merges, by descending score (ties to the lower
    ops), every pair with a positive score whose units no earlier merge of the round touched,
    when legal at that moment; rounds stop when one merges nothing.
    """
    if rounds < 0:
        raise SolutionError(f"rounds must be >= 0, got {rounds}")
    units = _start(graph, solution)
    if units is None:
        return _result(graph, solution, np.full(graph.n_ops, -1, np.int32), "greedy")
    placement = np.ascontiguousarray(solution.placement, dtype=np.int32)
    g, f = graph.arrays, graph.fusion_arrays
    for _ in range(rounds):
        scored = []
        seen = set()
        for p, c in _linked_pairs(graph, placement, units):
            a, b = int(units.unit[p]), int(units.unit[c])
            key = (min(a, b), max(a, b))
            if key in seen:
                continue
            seen.add(key)
            saved = unit_cost(g, f, units, a, -1)[0] + unit_cost(g, f, units, b, -1)[0]
            saved -= unit_cost(g, f, units, a, b)[0]
            if saved > 0:
                scored.append((-saved, int(p), int(c)))
        touched: set[int] = set()
        merged = False
        for _, p, c in sorted(scored):
            a, b = int(units.unit[p]), int(units.unit[c])
            if a in touched or b in touched:
                continue
            if try_merge(f, placement, units, p, c, MAX_GROUP_OPS):
                touched.update((a, b))
                merged = True
        if not merged:
            break
    return _result(graph, solution, group_ids(units), "greedy")


def anneal_fusion(
    graph: Graph,
    machine: Machine,
    solution: Solution,
    objective: Objective | str = Objective.MAKESPAN,
    evaluations: int = 1000,
    seed: int = 0,
) -> Solution:
    """Simulated annealing over the fusion priorities (GO's SA baseline, paper 002 table 3).

    Starts from every priority 0 (no fusion), so the result is never worse than the solution
    without groups. A move redraws one to three priorities uniformly in [0, 1); each candidate
    is decoded by `priority_fusion` and scored exactly. Energy = objective / the start's (plus
    10 x bytes over capacity / the start's peak); the temperature falls geometrically from 0.05
    to 0.0005 over the evaluations, which include the start. Seeded and deterministic.

    Args:
        graph: the graph, with fusion classes and a kernel.
        machine: the machine the solution is scored on.
        solution: a valid solution whose placement and order are kept (its groups are not).
        objective: "makespan" or "peak_memory" (or an `Objective`), lower is better.
        evaluations: decodes and scores, at least 1.
        seed: seed of every random draw.
    """
    objective = Objective.parse(str(objective).replace("_", "-"))
    if evaluations < 1:
        raise SolutionError(f"evaluations must be >= 1, got {evaluations}")
    if not _fusable(graph):
        return _result(graph, solution, np.full(graph.n_ops, -1, np.int32), "annealing")
    scorer = Scorer(graph, machine)
    rng = np.random.default_rng(seed)
    placement = np.ascontiguousarray(solution.placement, dtype=np.int32)
    rank = _op_ranks(graph, solution)
    f = graph.fusion_arrays
    capacity = machine.capacity

    def evaluate(priorities: np.ndarray) -> tuple[float, float, float, np.ndarray, np.ndarray]:
        """(objective, peak, bytes over capacity, groups, order) of one priority vector."""
        group = priority_groups(f, placement, rank, priorities, PRIORITY_THRESHOLD, MAX_GROUP_OPS)
        order = fused_order(graph, solution, group)
        peaks, makespan, (violation, _, _) = scorer.evaluate(placement, order, group)
        if violation:
            raise RuntimeError(f"priority fusion made an invalid solution (violation {violation})")
        peak = float(peaks.max(initial=0))
        value = makespan if objective is Objective.MAKESPAN else peak
        excess = 0.0 if capacity is None else max(peak - capacity, 0.0)
        return value, peak, excess, group, order

    current = np.zeros(graph.n_ops)
    value, peak, excess, best_group, best_order = evaluate(current)
    value_scale = value if value > 0 else 1.0
    memory_scale = max(peak, 1.0)

    def energy(value: float, excess: float) -> float:
        return value / value_scale + 10.0 * excess / memory_scale

    energy_now = best_energy = energy(value, excess)
    hot, cold = 0.05, 0.0005
    for step in range(1, evaluations):
        if graph.n_ops == 0:
            break
        temperature = hot * (cold / hot) ** (step / max(evaluations - 1, 1))
        candidate = current.copy()
        changed = rng.choice(
            graph.n_ops, size=min(int(rng.integers(1, 4)), graph.n_ops), replace=False
        )
        candidate[changed] = rng.random(changed.shape[0])
        value, _, excess, group, order = evaluate(candidate)
        energy_new = energy(value, excess)
        if energy_new <= energy_now or rng.random() < math.exp(
            (energy_now - energy_new) / temperature
        ):
            current, energy_now = candidate, energy_new
        if energy_new < best_energy:
            best_energy, best_group, best_order = energy_new, group, order
    fusion = best_group if np.any(best_group >= 0) else None
    return replace(
        solution,
        order=best_order,
        fusion=fusion,
        objective={},
        solver={**solution.solver, "fusion": "annealing", "evaluations": evaluations, "seed": seed},
    )
