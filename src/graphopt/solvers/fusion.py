"""Fusion heuristics (docs/format.md section 13): compilers' baselines and GO's priority decoder.

Each function takes a graph and a valid solution, keeps its placement, re-decides the fusion
groups from scratch (groups the solution already has are dropped) and re-derives an order in
which every group is contiguous (`fused_order`), so that what it returns always scores.

Groups grow by merging two units (a group, or an op alone) that a tensor links, one producing
what the other consumes, so every group is connected. A merge is refused when it breaks a rule of
section 13 or when a dependency path from one unit to the other passes through a third unit: the
quotient graph (each unit contracted to a node) would get a cycle, the "fusion would create a
cycle" check of XLA and Inductor. To bound that search, the units form a linked list in a
topological order of the quotient graph, ranked with gaps (at first the ops' order in the given
schedule); only units ranked between the two are searched, from the smaller one, and a merge
moves just the units that search found next to the merged unit (a one-sided variant of Pearce and
Kelly's dynamic topological sort, JEA 2006). The bookkeeping and GO's decoder are numba kernels;
`_reference.reference_priority_fusion` is the decoder's plain twin.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import replace
from typing import NamedTuple

import numba
import numpy as np

from graphopt.costmodels._fusion import score_fused
from graphopt.costmodels.machine import Machine, MachineArrays
from graphopt.costmodels.score import Scorer, check_kernel
from graphopt.costmodels.validity import Violation
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


SPACING = 1 << 20
"""Gap between consecutive units' ranks after (re)numbering: room for units moved between."""


class Units(NamedTuple):
    """Fusion units being merged; a unit is named by one of its ops, its representative.

    Arrays indexed by a representative hold the unit's values; the rest is scratch space. The
    units also form a doubly linked list in a topological order of the quotient graph, whose
    ranks ascend along it with gaps, so units can move in the order without renumbering.
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
    """[n_ops] int64 rank of each unit, ascending along the topological order."""
    before: np.ndarray
    """[n_ops] int64 unit before each unit in the topological order, -1 for the first."""
    after: np.ndarray
    """[n_ops] int64 unit after each unit in the topological order, -1 for the last."""
    stamp: np.ndarray
    """[n_ops] int64 visit marks of units (scratch)."""
    tensor_stamp: np.ndarray
    """[n_tensors] int64 visit marks of tensors (scratch)."""
    epoch: np.ndarray
    """[1] int64 current visit mark."""
    stack: np.ndarray
    """[n_ops] int64 search stack (scratch)."""
    found: np.ndarray
    """[n_ops] int64 units found by a search (scratch)."""
    spacing: int
    """Gap between consecutive ranks after (re)numbering (`SPACING`; tests narrow it)."""


@numba.njit(cache=True)
def new_units(
    f: FusionArrays, position: np.ndarray, n_tensors: int, spacing: int = SPACING
) -> Units:
    """Every op a unit of its own, in the order of `position` (a topological order of the ops)."""
    n_ops = position.shape[0]
    contractions = np.zeros(n_ops, dtype=np.int64)
    for op in range(n_ops):
        contractions[op] = f.op_fusion[op] == CONTRACTION
    rank = np.empty(n_ops, dtype=np.int64)
    before = np.full(n_ops, -1, dtype=np.int64)
    after = np.full(n_ops, -1, dtype=np.int64)
    in_order = np.argsort(position)
    for i in range(n_ops):
        rank[in_order[i]] = i * spacing
        if i > 0:
            before[in_order[i]] = in_order[i - 1]
            after[in_order[i - 1]] = in_order[i]
    return Units(
        np.arange(n_ops),
        np.arange(n_ops),
        np.arange(n_ops),
        np.full(n_ops, -1, dtype=np.int64),
        np.ones(n_ops, dtype=np.int64),
        contractions,
        rank,
        before,
        after,
        np.zeros(n_ops, dtype=np.int64),
        np.zeros(n_tensors, dtype=np.int64),
        np.zeros(1, dtype=np.int64),
        np.empty(n_ops, dtype=np.int64),
        np.empty(n_ops, dtype=np.int64),
        spacing,
    )


@numba.njit(cache=True)
def _search(u: Units, ptr: np.ndarray, near: np.ndarray, start: int, target: int) -> int:
    """Units reached from `start` through `near` ranked strictly between start and target.

    Returns how many were written to `u.found`, or -1 when one of them links to `target` (a
    path from start to target through a third unit: merging the two would make a cycle).
    """
    rank, unit, stamp, stack, found = u.rank, u.unit, u.stamp, u.stack, u.found
    head, next_member = u.head, u.next_member
    lo = min(rank[start], rank[target])
    hi = max(rank[start], rank[target])
    u.epoch[0] += 1
    mark = u.epoch[0]
    stack[0] = start
    top = 1
    n_found = 0
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
                found[n_found] = w
                n_found += 1
                stack[top] = w
                top += 1
            m = next_member[m]
    return n_found


@numba.njit(cache=True)
def _unlink(u: Units, v: int) -> None:
    """Takes unit v out of the topological order."""
    if u.before[v] >= 0:
        u.after[u.before[v]] = u.after[v]
    if u.after[v] >= 0:
        u.before[u.after[v]] = u.before[v]
    u.before[v] = u.after[v] = -1


@numba.njit(cache=True)
def _insert(u: Units, chain: np.ndarray, left: int, right: int) -> None:
    """Puts the units of `chain` (unlinked), in turn, between neighbours `left` and `right`.

    Either neighbour may be -1 (the start or the end of the order). Ranks are spread over the
    gap between theirs; when it is too narrow, every unit is ranked anew.
    """
    k = chain.shape[0]
    for i in range(k):
        u.before[chain[i]] = left if i == 0 else chain[i - 1]
        u.after[chain[i]] = right if i == k - 1 else chain[i + 1]
    if left >= 0:
        u.after[left] = chain[0]
    if right >= 0:
        u.before[right] = chain[k - 1]
    lo = u.rank[left] if left >= 0 else u.rank[right] - (k + 1) * u.spacing
    hi = u.rank[right] if right >= 0 else lo + (k + 1) * u.spacing
    if hi - lo > k:
        step = (hi - lo) // (k + 1)
        for i in range(k):
            u.rank[chain[i]] = lo + (i + 1) * step
        return
    v = chain[0]
    while u.before[v] >= 0:
        v = u.before[v]
    i = 0
    while v >= 0:
        u.rank[v] = i * u.spacing
        i += 1
        v = u.after[v]


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
    # Search from the smaller unit (fewer edges to scan): x's descendants ranked before y, or
    # y's ancestors ranked after x. Either search finds a cycle. Without one, the merged unit
    # takes y's place and x's descendants found move right after it (they depend on nothing
    # else ranked after x that y does not precede), or it takes x's place and y's ancestors
    # found move right before it.
    forward = u.size[x] <= u.size[y]
    if forward:
        n_found = _search(u, f.op_successor_ptr, f.op_successor, x, y)
    else:
        n_found = _search(u, f.op_predecessor_ptr, f.op_predecessor, y, x)
    if n_found < 0:
        return False
    keep, gone = (a, b) if u.size[a] >= u.size[b] else (b, a)
    place, other = (y, x) if forward else (x, y)
    found = u.found[:n_found]
    found = found[np.argsort(u.rank[found])]
    for v in found:
        _unlink(u, v)
    _unlink(u, other)
    left, right = u.before[place], u.after[place]
    rank = u.rank[place]
    _unlink(u, place)
    u.rank[keep] = rank
    u.before[keep], u.after[keep] = left, right
    if left >= 0:
        u.after[left] = keep
    if right >= 0:
        u.before[right] = keep
    if n_found > 0:
        if forward:
            _insert(u, found, keep, u.after[keep])
        else:
            _insert(u, found, u.before[keep], keep)
    m = u.head[gone]
    while m >= 0:
        u.unit[m] = keep
        m = u.next_member[m]
    u.next_member[u.tail[keep]] = u.head[gone]
    u.tail[keep] = u.tail[gone]
    u.size[keep] += u.size[gone]
    u.contractions[keep] += u.contractions[gone]
    return True


@numba.njit(cache=True)
def unit_cost(g: GraphArrays, f: FusionArrays, u: Units, a: int, b: int) -> tuple[int, float]:
    """Memory traffic (bytes in + bytes out) and seconds of the union of units a and b.

    b = -1 for unit a alone. Seconds are the op's runtime for a lone op, else section 13's
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
def pair_savings(
    g: GraphArrays, f: FusionArrays, u: Units, pairs: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Bytes of traffic and seconds each pair of units saves by merging (`unit_cost`).

    Args:
        g: the graph's arrays.
        f: its fusion arrays.
        u: the units.
        pairs: [k, 2] ops, one of each unit.

    Returns:
        ([k] int64 bytes saved, [k] float64 seconds saved); 0 for a pair already in one unit.
    """
    saved_bytes = np.zeros(pairs.shape[0], dtype=np.int64)
    saved_seconds = np.zeros(pairs.shape[0], dtype=np.float64)
    for i in range(pairs.shape[0]):
        a, b = pairs[i, 0], pairs[i, 1]
        if u.unit[a] == u.unit[b]:
            continue
        bytes_a, seconds_a = unit_cost(g, f, u, a, -1)
        bytes_b, seconds_b = unit_cost(g, f, u, b, -1)
        bytes_ab, seconds_ab = unit_cost(g, f, u, a, b)
        saved_bytes[i] = bytes_a + bytes_b - bytes_ab
        saved_seconds[i] = seconds_a + seconds_b - seconds_ab
    return saved_bytes, saved_seconds


@numba.njit(cache=True)
def merge_round(
    f: FusionArrays, placement: np.ndarray, u: Units, pairs: np.ndarray, max_ops: int
) -> int:
    """Merges the pairs in turn, each when legal and neither unit merged earlier in the round.

    Returns:
        The number of merges.
    """
    touched = np.zeros(u.unit.shape[0], dtype=np.bool_)
    merged = 0
    for i in range(pairs.shape[0]):
        a, b = u.unit[pairs[i, 0]], u.unit[pairs[i, 1]]
        if touched[a] or touched[b]:
            continue
        if try_merge(f, placement, u, a, b, max_ops):
            touched[a] = touched[b] = True
            merged += 1
    return merged


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


@numba.njit(cache=True)
def fuse_population(
    g: GraphArrays,
    f: FusionArrays,
    m: MachineArrays,
    priorities: np.ndarray,
    placements: np.ndarray,
    orders: np.ndarray,
    lengths: np.ndarray,
    peaks: np.ndarray,
    makespans: np.ndarray,
    groups: np.ndarray,
) -> int:
    """GO's decoder on decoded chromosomes, in place: groups, re-derived orders, new scores.

    Each member's groups come from its fusion priorities (`priority_groups`), its order is
    re-derived with each group contiguous (`_fused_order`) and it is scored again.

    Shapes:
        priorities: [B, n_ops]; placements, orders, lengths, peaks, makespans as
        `random_keys.DecodedPopulation`; groups: [B, n_ops] out.

    Returns:
        -1, or the first member whose fused solution failed to score (a bug, never expected:
        the decoder's groups are legal by construction).
    """
    n_ops = placements.shape[1]
    for b in range(placements.shape[0]):
        length = lengths[b]
        order = orders[b, :length]
        rank = np.empty(n_ops, dtype=np.int64)
        for p in range(length):
            if order[p] < n_ops:
                rank[order[p]] = p
        group = priority_groups(
            f, placements[b], rank, priorities[b], PRIORITY_THRESHOLD, MAX_GROUP_OPS
        )
        groups[b] = group
        if n_ops == 0 or group.max() < 0:
            continue
        fused, status = _fused_order(g, placements[b], order, group, m.n_devices)
        if status != 0:
            return b
        orders[b, :length] = fused
        violation, _, _, makespan = score_fused(
            g, f, m, placements[b], fused, group, MAX_GROUP_OPS, peaks[b]
        )
        if violation != Violation.NONE.value:
            return b
        makespans[b] = makespan
    return -1


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
FUSION_POLICIES = ("none", "default", "xla-priority", "greedy", "anneal")
"""What `apply_fusion` (and `graphopt optimize --fusion`) accepts: no fusion, XLA-like default
fusion, XLA priority fusion, Inductor-like greedy fusion, simulated annealing over priorities."""


def apply_fusion(
    policy: str,
    graph: Graph,
    machine: Machine,
    solution: Solution,
    objective: Objective | str,
    evaluations: int = 1000,
    seed: int = 0,
) -> Solution:
    """The solution with the fusion groups `policy` picks on its placement and order.

    Raises:
        SolutionError: an unknown policy, or a graph with fusion classes but no `kernel`.
    """
    if policy not in FUSION_POLICIES:
        raise SolutionError(
            f"unknown fusion policy {policy!r}; valid policies: {', '.join(FUSION_POLICIES)}"
        )
    if policy == "none":
        return replace(solution, fusion=None)
    if policy == "default":
        return default_fusion(graph, solution)
    if policy == "xla-priority":
        return default_fusion(graph, solution, priority=True)
    if policy == "greedy":
        return greedy_fusion(graph, solution)
    return anneal_fusion(graph, machine, solution, objective, evaluations, seed)


def _fusable(graph: Graph) -> bool:
    """Whether any op has a fusion class; refuses fusing on a graph without a `kernel`."""
    if not np.any(graph.op_fusion):
        return False
    check_kernel(graph)
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
       tensor, they merge through its producer (section 13 wants a group connected, so readers
       of a common tensor can share it only with the op that makes it), each merge when legal.

    `priority=True` is XLA's priority fusion instead: producer-consumer pairs ranked by the time
    the merge saves (section 13's roofline for groups, `runtime` for lone ops), fused greedily
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

    def scored(pairs: np.ndarray) -> list[tuple[float, int, int, int, int]]:
        """Heap entries of the pairs that save time: (-seconds, producer, consumer, versions)."""
        _, seconds = pair_savings(g, f, units, pairs)
        return [
            (-float(s), int(p), int(c), int(version[units.unit[p]]), int(version[units.unit[c]]))
            for s, (p, c) in zip(seconds, pairs, strict=True)
            if s > 0
        ]

    heap = scored(_linked_pairs(graph, placement, units))
    heapq.heapify(heap)
    while heap:
        _, p, c, va, vb = heapq.heappop(heap)
        a, b = int(units.unit[p]), int(units.unit[c])
        if (version[a], version[b]) != (va, vb):
            for fresh in scored(np.array([[p, c]], dtype=np.int64)):
                heapq.heappush(heap, fresh)
            continue
        if try_merge(f, placement, units, p, c, MAX_GROUP_OPS):
            version[units.unit[p]] = max(version[a], version[b]) + 1


def greedy_fusion(graph: Graph, solution: Solution, rounds: int = 10) -> Solution:
    """Inductor-like fusion: rounds of merging the pairs of units that save most memory traffic.

    Candidates are pairs of units on one device that a tensor links (one produces what the
    other consumes; two units that only read a common tensor would not be connected, which
    section 13 forbids). A pair scores the traffic it saves: bytes in + bytes out of each unit
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
        pairs = _linked_pairs(graph, placement, units)
        # One candidate per pair of units: its first linking edge.
        ends = np.sort(units.unit[pairs], axis=1)
        _, first = np.unique(ends, axis=0, return_index=True)
        pairs = pairs[np.sort(first)]
        saved, _ = pair_savings(g, f, units, pairs)
        pairs = pairs[saved > 0]
        saved = saved[saved > 0]
        ranked = pairs[np.lexsort((pairs[:, 1], pairs[:, 0], -saved))]
        if not merge_round(f, placement, units, ranked, MAX_GROUP_OPS):
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
    for step in range(1, evaluations):  # graph.n_ops > 0: some op has a fusion class
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
