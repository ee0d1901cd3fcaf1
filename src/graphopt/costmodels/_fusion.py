"""numba kernels for fusion groups (COST_MODEL.md section 7): their rules and their scoring.

Rather than teach every kernel about groups, a solution with groups is scored by merging each
group into one op of a smaller graph and running the unchanged `_kernels.score_solution` on it:
the merged op consumes the group's external inputs, produces its members' non-internal outputs,
holds the sum of their temp memory and lasts the group's roofline time; internal tensors are
dropped, since they are never resident and never moved. The merged op sits at the place of the
group's first member, so scoring it is exactly the section-7 walk in which a group is one step.
The twin is `_reference.py`, which walks the groups literally.

The rules are checked group by group in the order section 7 lists them. The one that needs a
search of the graph, convexity, is implied by the others once the schedule is valid (a path that
leaves a group and comes back puts an event between two of its members), so the fast path skips
it and only looks for it after finding some other violation, to name the first rule broken.
"""

from __future__ import annotations

import numba
import numpy as np

from graphopt.costmodels import _kernels
from graphopt.costmodels.machine import MachineArrays
from graphopt.ir.arrays import FusionArrays, GraphArrays, _u

CONTRACTION = 3
"""Index of "contraction" in `FUSION_CLASSES` (0 is "none")."""

# Violation codes shared with `validity.Violation`.
PLACEMENT_OUT_OF_RANGE = 1
UNKNOWN_EVENT = 2
OP_REPEATED = 3
TRANSFER_NOT_IMPLIED = 4
INPUT_NOT_AVAILABLE = 7
OP_MISSING = 8
GROUP_TOO_SMALL = 9
GROUP_UNFUSABLE = 10
GROUP_CONTRACTIONS = 11
GROUP_TOO_LARGE = 12
GROUP_DEVICES = 13
GROUP_DISCONNECTED = 14
GROUP_NOT_CONVEX = 15
GROUP_NOT_CONTIGUOUS = 16


@numba.njit(cache=True, nogil=True)
def _root(parent: np.ndarray, op: int) -> int:
    """Union-find root with path halving."""
    while parent[op] != op:
        parent[op] = parent[parent[op]]
        op = parent[op]
    return op


@numba.njit(cache=True, nogil=True)
def _outside_on_cycle(
    f: FusionArrays, group: np.ndarray, gid: int, members: np.ndarray, mark: np.ndarray
) -> int:
    """Lowest op outside group `gid` that is both a descendant and an ancestor of it, or -1.

    Such an op exists exactly when the group is not convex. Searches only between the group's
    first and last topological positions, where every such op lies. `mark` ([n_ops] int8,
    zeroed) is left zeroed.
    """
    lo = np.iinfo(np.int64).max
    hi = -1
    for op in members:
        lo = min(lo, f.topological_position[op])
        hi = max(hi, f.topological_position[op])
    stack = np.empty(group.shape[0], dtype=np.int64)
    touched = np.empty(group.shape[0], dtype=np.int64)
    n_touched = 0
    for direction in range(2):
        ptr = f.op_successor_ptr if direction == 0 else f.op_predecessor_ptr
        near = f.op_successor if direction == 0 else f.op_predecessor
        top = 0
        for op in members:
            stack[top] = op
            top += 1
        while top > 0:
            top -= 1
            op = stack[top]
            for e in range(ptr[op], ptr[op + 1]):
                other = near[e]
                position = f.topological_position[other]
                if group[other] == gid or position <= lo or position >= hi:
                    continue
                if mark[other] & (1 << direction):
                    continue
                if mark[other] == 0:
                    touched[n_touched] = other
                    n_touched += 1
                mark[other] |= 1 << direction
                stack[top] = other
                top += 1
    found = -1
    for i in range(n_touched):
        op = touched[i]
        if mark[op] == 3 and (found < 0 or op < found):
            found = op
        mark[op] = 0
    return found


@numba.njit(cache=True, nogil=True)
def check_groups(
    g: GraphArrays,
    f: FusionArrays,
    placement: np.ndarray,
    group: np.ndarray,
    max_ops: int,
    convexity: bool,
) -> tuple[int, int, int]:
    """First rule of section 7 a group breaks, as (violation, group, op); (0, -1, -1) if none.

    Groups are taken in order and each group's rules in the order section 7 lists them. The op is
    the lowest that breaks the rule: a "none" member, the second contraction, a member on
    another device than the group's lowest op, one not connected to it, or an op outside the
    group on a path that leaves it and comes back. Convexity is only checked when asked.
    """
    n_ops = group.shape[0]
    n_groups = 0
    for op in range(n_ops):
        n_groups = max(n_groups, group[op] + 1)
    size = np.zeros(n_groups, dtype=np.int64)
    first = np.full(n_groups, -1, dtype=np.int64)
    unfusable = np.full(n_groups, -1, dtype=np.int64)
    contractions = np.zeros(n_groups, dtype=np.int64)
    second_contraction = np.full(n_groups, -1, dtype=np.int64)
    elsewhere = np.full(n_groups, -1, dtype=np.int64)
    parent = np.arange(n_ops)
    for op in range(n_ops):
        gid = group[op]
        if gid < 0:
            continue
        size[gid] += 1
        if first[gid] < 0:
            first[gid] = op
        if f.op_fusion[op] == 0 and unfusable[gid] < 0:
            unfusable[gid] = op
        if f.op_fusion[op] == CONTRACTION:
            contractions[gid] += 1
            if contractions[gid] == 2:
                second_contraction[gid] = op
        if placement[op] != placement[first[gid]] and elsewhere[gid] < 0:
            elsewhere[gid] = op
    for t in range(g.tensor_size.shape[0]):
        producer = g.tensor_producer[t]
        gid = group[producer]
        if gid < 0:
            continue
        for e in range(g.consumer_ptr[t], g.consumer_ptr[t + 1]):
            consumer = g.consumer_op[e]
            if group[consumer] == gid:
                a = _root(parent, producer)
                b = _root(parent, consumer)
                parent[max(a, b)] = min(a, b)
    apart = np.full(n_groups, -1, dtype=np.int64)
    for op in range(n_ops):
        gid = group[op]
        if gid >= 0 and apart[gid] < 0 and _root(parent, op) != _root(parent, first[gid]):
            apart[gid] = op
    members = np.empty(0, dtype=np.int64)
    mark = np.zeros(n_ops if convexity else 0, dtype=np.int8)
    for gid in range(n_groups):
        if size[gid] == 0:
            continue
        if size[gid] < 2:
            return GROUP_TOO_SMALL, gid, first[gid]
        if unfusable[gid] >= 0:
            return GROUP_UNFUSABLE, gid, unfusable[gid]
        if second_contraction[gid] >= 0:
            return GROUP_CONTRACTIONS, gid, second_contraction[gid]
        if size[gid] > max_ops:
            return GROUP_TOO_LARGE, gid, -1
        if elsewhere[gid] >= 0:
            return GROUP_DEVICES, gid, elsewhere[gid]
        if apart[gid] >= 0:
            return GROUP_DISCONNECTED, gid, apart[gid]
        if convexity:
            members = np.flatnonzero(group == gid)
            outside = _outside_on_cycle(f, group, gid, members, mark)
            if outside >= 0:
                return GROUP_NOT_CONVEX, gid, outside
    return 0, -1, -1


@numba.njit(cache=True, nogil=True)
def merge_groups(
    g: GraphArrays, f: FusionArrays, placement: np.ndarray, group: np.ndarray
) -> tuple[GraphArrays, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The graph in which each (legal) group is one op, and how its indices map back.

    Merged ops are numbered in the order of their lowest member (so the lowest missing merged
    op maps to the lowest missing op); kept tensors keep their relative order (so the first
    missing input is the same in both graphs).

    Returns:
        (merged arrays, merged placement, op -> merged op, tensor -> merged tensor or -1 when
        internal, merged tensor -> tensor, ops per group).
    """
    n_ops = group.shape[0]
    n_tensors = g.tensor_size.shape[0]
    n_groups = 0
    for op in range(n_ops):
        n_groups = max(n_groups, group[op] + 1)
    group_size = np.zeros(n_groups, dtype=np.int64)
    group_op = np.full(n_groups, -1, dtype=np.int32)
    op_map = np.empty(n_ops, dtype=np.int32)
    n_merged = 0
    for op in range(n_ops):
        gid = group[_u(op)]
        if gid < 0:
            op_map[_u(op)] = n_merged
            n_merged += 1
            continue
        group_size[_u(gid)] += 1
        if group_op[_u(gid)] < 0:
            group_op[_u(gid)] = n_merged
            n_merged += 1
        op_map[_u(op)] = group_op[_u(gid)]

    tensor_map = np.empty(n_tensors, dtype=np.int32)
    n_kept = 0
    for t in range(n_tensors):
        gid = group[_u(g.tensor_producer[_u(t)])]
        begin, end = g.consumer_ptr[_u(t)], g.consumer_ptr[_u(t + 1)]
        internal = gid >= 0 and end > begin and not g.tensor_persistent[_u(t)]
        for e in range(begin, end):
            if group[_u(g.consumer_op[_u(e)])] != gid:
                internal = False
                break
        tensor_map[_u(t)] = -1 if internal else n_kept
        n_kept += not internal

    tensor_back = np.empty(n_kept, dtype=np.int32)
    size = np.empty(n_kept, dtype=np.int64)
    producer = np.empty(n_kept, dtype=np.int32)
    persistent = np.empty(n_kept, dtype=np.bool_)
    output = np.empty(n_kept, dtype=np.bool_)
    consumer_ptr = np.zeros(n_kept + 1, dtype=np.int64)
    input_count = np.zeros(n_merged + 1, dtype=np.int64)
    output_count = np.zeros(n_merged + 1, dtype=np.int64)
    stamp = np.full(n_merged, -1, dtype=np.int64)
    for t in range(n_tensors):
        k = tensor_map[_u(t)]
        if k < 0:
            continue
        tensor_back[_u(k)] = t
        size[_u(k)] = g.tensor_size[_u(t)]
        source = op_map[_u(g.tensor_producer[_u(t)])]
        producer[_u(k)] = source
        persistent[_u(k)] = g.tensor_persistent[_u(t)]
        output[_u(k)] = g.tensor_output[_u(t)]
        output_count[_u(source + 1)] += 1
        count = 0
        for e in range(g.consumer_ptr[_u(t)], g.consumer_ptr[_u(t + 1)]):
            consumer = op_map[_u(g.consumer_op[_u(e)])]
            if consumer != source and stamp[_u(consumer)] != k:
                stamp[_u(consumer)] = k
                count += 1
                input_count[_u(consumer + 1)] += 1
        consumer_ptr[_u(k + 1)] = consumer_ptr[_u(k)] + count

    consumer_op = np.empty(consumer_ptr[n_kept], dtype=np.int32)
    input_ptr = np.cumsum(input_count)
    output_ptr = np.cumsum(output_count)
    input_tensor = np.empty(input_ptr[n_merged], dtype=np.int32)
    output_tensor = np.empty(n_kept, dtype=np.int32)
    input_fill = input_ptr[:-1].copy()
    output_fill = output_ptr[:-1].copy()
    stamp[:] = -1
    for k in range(n_kept):
        t = tensor_back[_u(k)]
        source = producer[_u(k)]
        output_tensor[_u(output_fill[_u(source)])] = k
        output_fill[_u(source)] += 1
        slot = consumer_ptr[_u(k)]
        for e in range(g.consumer_ptr[_u(t)], g.consumer_ptr[_u(t + 1)]):
            consumer = op_map[_u(g.consumer_op[_u(e)])]
            if consumer != source and stamp[_u(consumer)] != k:
                stamp[_u(consumer)] = k
                consumer_op[_u(slot)] = consumer
                slot += 1
                input_tensor[_u(input_fill[_u(consumer)])] = k
                input_fill[_u(consumer)] += 1

    runtime = np.empty(n_merged, dtype=np.float64)
    temp = np.zeros(n_merged, dtype=np.int64)
    compute = np.zeros(n_merged, dtype=np.float64)
    merged_placement = np.empty(n_merged, dtype=np.int32)
    for op in range(n_ops):
        k = op_map[_u(op)]
        merged_placement[_u(k)] = placement[_u(op)]
        temp[_u(k)] += g.op_temp_memory[_u(op)]
        compute[_u(k)] += f.op_compute_time[_u(op)]
        runtime[_u(k)] = g.op_runtime[_u(op)]
    for gid in range(n_groups):
        k = group_op[_u(gid)]
        if k < 0:
            continue
        traffic = 0
        for e in range(input_ptr[_u(k)], input_ptr[_u(k + 1)]):
            traffic += size[_u(input_tensor[_u(e)])]
        for e in range(output_ptr[_u(k)], output_ptr[_u(k + 1)]):
            traffic += size[_u(output_tensor[_u(e)])]
        runtime[_u(k)] = max(compute[_u(k)], traffic / f.memory_bandwidth) + f.launch_overhead
    merged = GraphArrays(
        size,
        producer,
        persistent,
        output,
        consumer_ptr,
        consumer_op,
        input_ptr,
        input_tensor,
        output_ptr,
        output_tensor,
        runtime,
        temp,
    )
    return merged, merged_placement, op_map, tensor_map, tensor_back, group_size


@numba.njit(cache=True, nogil=True)
def merge_order(
    n_devices: int,
    n_merged: int,
    group: np.ndarray,
    group_size: np.ndarray,
    op_map: np.ndarray,
    tensor_map: np.ndarray,
    order: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, int, int, int]:
    """The schedule in merged codes, up to the first event that breaks a rule only it can see.

    Those rules are: a code that is no event, a repeated op, an event inside an unfinished group
    (not contiguous), a transfer of an internal tensor (never implied) and, at the end, a
    missing op. The merged kernel checks the rest on the events before that one.

    Returns:
        (merged codes, position in `order` of each merged event, violation, where, detail).
    """
    n_ops = group.shape[0]
    n_tensors = tensor_map.shape[0]
    n_codes = n_ops + n_tensors * n_devices
    merged = np.empty(order.shape[0], dtype=np.int64)
    back = np.empty(order.shape[0], dtype=np.int64)
    seen = np.zeros(n_ops, dtype=np.uint8)
    open_group = -1
    left = 0
    k = 0
    for position in range(order.shape[0]):
        code = order[_u(position)]
        if code < 0 or code >= n_codes:
            return merged[:k], back[:k], UNKNOWN_EVENT, position, -1
        if code < n_ops:
            if seen[_u(code)]:
                return merged[:k], back[:k], OP_REPEATED, position, -1
            seen[_u(code)] = 1
            gid = group[_u(code)]
            if left > 0:
                if gid != open_group:
                    return merged[:k], back[:k], GROUP_NOT_CONTIGUOUS, position, open_group
                left -= 1
                continue
            if gid >= 0:
                open_group = gid
                left = group_size[_u(gid)] - 1
            merged[_u(k)] = op_map[_u(code)]
        else:
            if left > 0:
                return merged[:k], back[:k], GROUP_NOT_CONTIGUOUS, position, open_group
            t = (code - n_ops) // n_devices
            device = code - n_ops - t * n_devices
            kept = tensor_map[_u(t)]
            if kept < 0:
                return merged[:k], back[:k], TRANSFER_NOT_IMPLIED, position, -1
            merged[_u(k)] = n_merged + kept * n_devices + device
        back[_u(k)] = position
        k += 1
    for op in range(n_ops):
        if not seen[_u(op)]:
            return merged[:k], back[:k], OP_MISSING, op, -1
    return merged[:k], back[:k], 0, -1, -1


@numba.njit(cache=True, nogil=True)
def score_fused(
    g: GraphArrays,
    f: FusionArrays,
    m: MachineArrays,
    placement: np.ndarray,
    order: np.ndarray,
    group: np.ndarray,
    max_ops: int,
    peak: np.ndarray,
) -> tuple[int, int, int, float]:
    """Scores one solution with fusion groups; the twin of `_kernels.score_solution`.

    Returns:
        (violation, where, detail, makespan) as `score_solution`, with the group rules'
        violations (where: the group, detail: the op) between placement and schedule rules.
    """
    d = m.n_devices
    peak[:] = 0
    for op in range(placement.shape[0]):
        if placement[op] < 0 or placement[op] >= d:
            return PLACEMENT_OUT_OF_RANGE, op, -1, 0.0
    violation, where, detail = check_groups(g, f, placement, group, max_ops, False)
    makespan = 0.0
    if violation == 0:
        merged, merged_placement, op_map, tensor_map, tensor_back, group_size = merge_groups(
            g, f, placement, group
        )
        n_merged = merged_placement.shape[0]
        codes, back, late, late_where, late_detail = merge_order(
            d, n_merged, group, group_size, op_map, tensor_map, order
        )
        violation, where, detail, makespan = _kernels.score_solution(
            merged, m, merged_placement, codes, peak
        )
        if violation == OP_MISSING or violation == 0:
            violation, where, detail = late, late_where, late_detail
        else:
            where = back[where]
            if violation == INPUT_NOT_AVAILABLE:
                detail = tensor_back[detail]
    if violation != 0:
        first = check_groups(g, f, placement, group, max_ops, True)
        if first[0] != 0:
            return first[0], first[1], first[2], 0.0
        return violation, where, detail, 0.0
    return 0, -1, -1, makespan


@numba.njit(cache=True, parallel=True)
def score_fused_population(
    g: GraphArrays,
    f: FusionArrays,
    m: MachineArrays,
    placements: np.ndarray,
    orders: np.ndarray,
    lengths: np.ndarray,
    groups: np.ndarray,
    max_ops: int,
    peaks: np.ndarray,
    status: np.ndarray,
    makespans: np.ndarray,
) -> None:
    """`score_fused` over a population, in parallel.

    Shapes as `_kernels.score_population`, plus groups [B, n_ops].
    """
    for b in numba.prange(placements.shape[0]):
        violation, where, detail, makespan = score_fused(
            g, f, m, placements[b], orders[b, : lengths[b]], groups[b], max_ops, peaks[b]
        )
        status[b, 0] = violation
        status[b, 1] = where
        status[b, 2] = detail
        makespans[b] = makespan
