"""numba kernels for fusion groups (docs/format.md section 13): their rules and their scoring.

A solution with groups is scored by `score_fused`, the walk of `_kernels.score_solution` in which
a group's first op event runs the whole group as one step: `_kernels.op_step` on op `gid` of a
small graph of groups (`group_ops`), which reads the group's external inputs once, makes its
members' non-internal outputs resident and lasts the group's roofline time; internal tensors
never exist. Ops alone and transfers go through the same `op_step` and `transfer_step` as without
fusion, and the plain scorer runs as before, so scoring a solution without groups costs what it
did. Two other designs were measured and dropped (10,000 ops, 1,500 groups, fresh solutions,
`benchmarks/bench_fusion_scorer.py`): merging the whole graph into one with an op per group and
running the plain kernel on it (2.8x the time without groups: building the merged graph cost
more than the walk), and a step function walking the members' own edges (2.6x: numba does not
inline it well). `group_ops` visits only the members' own edges, group by group, on top of the
readers count the plain walk makes too; a first version that visited every edge of the graph took
1.35x the time of the plain walk by itself. The twin is `_reference.py`, which walks the groups
literally.

The rules are reported group by group in the order section 13 lists them (`check_groups`). The
fast path only notes, on its way, whether some group breaks one; the one that needs a search of
the graph, convexity, it skips, since a valid schedule implies it (a path that leaves a group and
comes back puts an event between two of its members). After any violation `check_groups` runs
in full, convexity included, to name the first rule broken.
"""

from __future__ import annotations

import numba
import numpy as np

from graphopt.costmodels import _kernels
from graphopt.costmodels.machine import MachineArrays
from graphopt.costmodels.validity import Violation
from graphopt.ir.arrays import FusionArrays, GraphArrays, _u

CONTRACTION = 3
"""Index of "contraction" in `FUSION_CLASSES` (0 is "none")."""


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
    """First rule of section 13 a group breaks, as (violation, group, op); (0, -1, -1) if none.

    Groups are taken in order and each group's rules in the order section 13 lists them. The op is
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
            return Violation.GROUP_TOO_SMALL.value, gid, first[gid]
        if unfusable[gid] >= 0:
            return Violation.GROUP_UNFUSABLE.value, gid, unfusable[gid]
        if second_contraction[gid] >= 0:
            return Violation.GROUP_CONTRACTIONS.value, gid, second_contraction[gid]
        if size[gid] > max_ops:
            return Violation.GROUP_TOO_LARGE.value, gid, -1
        if elsewhere[gid] >= 0:
            return Violation.GROUP_DEVICES.value, gid, elsewhere[gid]
        if apart[gid] >= 0:
            return Violation.GROUP_DISCONNECTED.value, gid, apart[gid]
        if convexity:
            members = np.flatnonzero(group == gid)
            outside = _outside_on_cycle(f, group, gid, members, mark)
            if outside >= 0:
                return Violation.GROUP_NOT_CONVEX.value, gid, outside
    return Violation.NONE.value, -1, -1


@numba.njit(cache=True, nogil=True)
def _first_violation(
    g: GraphArrays,
    f: FusionArrays,
    placement: np.ndarray,
    group: np.ndarray,
    max_ops: int,
    violation: int,
    where: int,
    detail: int,
) -> tuple[int, int, int, float]:
    """The first rule broken: `check_groups`'s, convexity included, else the walk's.

    The fast path only sees that some group rule is broken, or finds a schedule violation,
    which a non-convex group (never looked for there) may cause; group rules come first.
    """
    first = check_groups(g, f, placement, group, max_ops, True)
    if first[0] != Violation.NONE.value:
        return first[0], first[1], first[2], 0.0
    return violation, where, detail, 0.0


@numba.njit(cache=True, nogil=True)
def _sort(values: np.ndarray, lo: int, hi: int) -> None:
    """Sorts values[lo:hi] in place: insertion sort, as a group's few tensors need."""
    for i in range(lo + 1, hi):
        value = values[i]
        j = i - 1
        while j >= lo and values[j] > value:
            values[j + 1] = values[j]
            j -= 1
        values[j + 1] = value


@numba.njit(cache=True, nogil=True)
def group_ops(
    g: GraphArrays, f: FusionArrays, placement: np.ndarray, group: np.ndarray, d: int, max_ops: int
) -> tuple[bool, GraphArrays, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each group as one op of a graph of groups, and each copy's readers counting groups once.

    The graph of groups shares the tensors of `g`; op `gid` of it consumes the group's external
    inputs (distinct, ascending), produces its members' non-internal outputs (ascending), holds
    their summed temp memory and lasts the group's roofline time, so that `_kernels.op_step`
    runs a group exactly as section 13 says. A group is one reader of each copy it reads and
    does not read its own members' outputs: `_kernels.count_readers`'s counts, less those reads.

    Only the members' own edges are visited, group by group, so the cost grows with the fused
    ops rather than with the graph. On the way it sees whether a group breaks a rule of section 13
    other than convexity (which a valid schedule implies); `check_groups` then says which rule and
    group come first.

    Returns:
        (whether a group breaks a rule, graph of groups, ops per group [n_groups], consumers
        per copy [n_tensors * d], readers of each home copy [n_tensors * d], persistent bytes
        per device [d]).
    """
    n_ops = group.shape[0]
    n_tensors = g.tensor_size.shape[0]
    n_consumers, readers_left, memory = _kernels.count_readers(g, placement, d)
    n_groups = max(group.max() + 1, 0) if n_ops else 0
    # The members of each group, ascending: a counting sort, bucket 0 holding the lone ops.
    start = np.zeros(n_groups + 2, dtype=np.int64)
    for op in range(n_ops):
        start[_u(group[_u(op)] + 2)] += 1
    start = np.cumsum(start)
    members = np.empty(n_ops, dtype=np.int64)
    for op in range(n_ops):
        bucket = group[_u(op)] + 1
        members[_u(start[_u(bucket)])] = op
        start[_u(bucket)] += 1
    # start[gid + 1] is now where group gid's members end; start[gid] where they begin.
    group_size = np.empty(n_groups, dtype=np.int64)
    seconds = np.empty(n_groups, dtype=np.float64)
    temp = np.zeros(n_groups, dtype=np.int64)
    input_ptr = np.zeros(n_groups + 1, dtype=np.int64)
    output_ptr = np.zeros(n_groups + 1, dtype=np.int64)
    input_tensor = np.empty(g.op_input_tensor.shape[0], dtype=np.int32)
    output_tensor = np.empty(n_tensors, dtype=np.int32)
    seen = np.full(n_tensors, -1, dtype=np.int32)
    parent = np.empty(n_ops, dtype=np.int64)
    broken = False
    n_in = 0
    n_out = 0
    for gid in range(n_groups):
        lo, hi = start[_u(gid)], start[_u(gid + 1)]
        group_size[gid] = hi - lo
        broken |= hi - lo == 1 or hi - lo > max_ops
        if hi == lo:
            seconds[gid] = 0.0
            input_ptr[gid + 1] = n_in
            output_ptr[gid + 1] = n_out
            continue
        device = placement[_u(members[_u(lo)])]
        for i in range(lo, hi):
            parent[_u(members[_u(i)])] = members[_u(i)]
        compute = 0.0
        traffic = 0
        contractions = 0
        for i in range(lo, hi):
            op = members[_u(i)]
            kind = f.op_fusion[_u(op)]
            compute += f.op_compute_time[_u(op)]
            temp[gid] += g.op_temp_memory[_u(op)]
            contractions += kind == CONTRACTION
            broken |= kind == 0 or placement[_u(op)] != device
            for e in range(g.op_input_ptr[_u(op)], g.op_input_ptr[_u(op + 1)]):
                t = g.op_input_tensor[_u(e)]
                producer = g.tensor_producer[_u(t)]
                if group[_u(producer)] == gid:
                    # Internal read; the producer is a member, so t's home is `device` (or a
                    # member is elsewhere, which `broken` notes).
                    n_consumers[_u(t * d + device)] -= 1
                    readers_left[_u(t * d + device)] -= 1
                    a = _root(parent, producer)
                    b = _root(parent, op)
                    parent[max(a, b)] = min(a, b)
                elif seen[_u(t)] == gid:  # another member's read of t: the group reads once
                    n_consumers[_u(t * d + device)] -= 1
                    if placement[_u(producer)] == device:
                        readers_left[_u(t * d + device)] -= 1
                else:
                    seen[_u(t)] = gid
                    input_tensor[_u(n_in)] = t
                    n_in += 1
                    traffic += g.tensor_size[_u(t)]
        # An output is internal when no reader is left outside the group: its home copy's
        # count, less the members' reads, is 0 (other groups' repeated reads never take it to 0).
        for i in range(lo, hi):
            op = members[_u(i)]
            for k in range(g.op_output_ptr[_u(op)], g.op_output_ptr[_u(op + 1)]):
                t = g.op_output_tensor[_u(k)]
                hidden = (
                    readers_left[_u(t * d + device)] == 0
                    and g.consumer_ptr[_u(t + 1)] > g.consumer_ptr[_u(t)]
                    and not g.tensor_persistent[_u(t)]
                )
                if not hidden:
                    output_tensor[_u(n_out)] = t
                    n_out += 1
                    traffic += g.tensor_size[_u(t)]
        broken |= contractions > 1
        lead = _root(parent, members[_u(lo)])
        for i in range(lo + 1, hi):
            broken |= _root(parent, members[_u(i)]) != lead
        _sort(input_tensor, input_ptr[gid], n_in)
        _sort(output_tensor, output_ptr[gid], n_out)
        input_ptr[gid + 1] = n_in
        output_ptr[gid + 1] = n_out
        seconds[gid] = max(compute, traffic / f.memory_bandwidth) + f.launch_overhead
    groups = GraphArrays(
        g.tensor_size,
        g.tensor_producer,
        g.tensor_persistent,
        g.tensor_output,
        g.consumer_ptr,
        g.consumer_op,
        input_ptr,
        input_tensor[:n_in],
        output_ptr,
        output_tensor[:n_out],
        seconds,
        temp,
    )
    return broken, groups, group_size, n_consumers, readers_left, memory


@numba.njit(cache=True, nogil=True)
def _missing(a: GraphArrays, op: int, ready: np.ndarray, d: int, device: int) -> int:
    """The first input of `op` (of graph `a`) whose copy on `device` is not ready."""
    for e in range(a.op_input_ptr[op], a.op_input_ptr[op + 1]):
        t = a.op_input_tensor[e]
        if ready[t * d + device] < 0.0:
            return t
    return -1


@numba.njit(cache=True, nogil=True)
def _walk(
    g: GraphArrays,
    m: MachineArrays,
    placement: np.ndarray,
    order: np.ndarray,
    group: np.ndarray,
    groups: GraphArrays,
    group_size: np.ndarray,
    n_consumers: np.ndarray,
    readers_left: np.ndarray,
    memory: np.ndarray,
    peak: np.ndarray,
) -> tuple[int, int, int, float]:
    """The walk of `score_fused`: `_kernels.score_solution`'s, with groups as steps.

    A group's first op event runs the whole group, as op `gid` of the graph of groups
    (`group_ops`); its other op events must follow at once and do nothing more.
    """
    n_ops = placement.shape[0]
    n_tensors = g.tensor_size.shape[0]
    d = m.n_devices
    ready = np.full(n_tensors * d, -1.0)
    op_done = np.zeros(n_ops, dtype=np.uint8)
    device_free = np.zeros(d, dtype=np.float64)
    makespan = 0.0
    n_codes = n_ops + n_tensors * d
    open_group = -1
    left = 0
    for position in range(order.shape[0]):
        code = order[_u(position)]
        if code < 0 or code >= n_codes:
            return Violation.UNKNOWN_EVENT.value, position, -1, 0.0
        if code < n_ops:
            if op_done[_u(code)]:
                return Violation.OP_REPEATED.value, position, -1, 0.0
            op_done[_u(code)] = 1
            gid = group[_u(code)]
            if left > 0:
                if gid != open_group:
                    return Violation.GROUP_NOT_CONTIGUOUS.value, position, open_group, 0.0
                left -= 1
                continue
            device = placement[_u(code)]
            if gid < 0:
                finish, current, earliest = _kernels.op_step(
                    g, m, code, device, ready, readers_left, device_free, memory
                )
                if earliest < 0.0:
                    return (
                        Violation.INPUT_NOT_AVAILABLE.value,
                        position,
                        _missing(g, code, ready, d, device),
                        0.0,
                    )
            else:
                finish, current, earliest = _kernels.op_step(
                    groups, m, gid, device, ready, readers_left, device_free, memory
                )
                if earliest < 0.0:
                    return (
                        Violation.INPUT_NOT_AVAILABLE.value,
                        position,
                        _missing(groups, gid, ready, d, device),
                        0.0,
                    )
                open_group = gid
                left = group_size[_u(gid)] - 1
            if current > peak[_u(device)]:
                peak[_u(device)] = current
        else:
            if left > 0:
                return Violation.GROUP_NOT_CONTIGUOUS.value, position, open_group, 0.0
            t = (code - n_ops) // d
            device = code - n_ops - t * d
            home = placement[_u(g.tensor_producer[_u(t)])]
            copy = t * d + device
            if device == home or n_consumers[_u(copy)] == 0:
                return Violation.TRANSFER_NOT_IMPLIED.value, position, -1, 0.0
            if ready[_u(copy)] >= 0.0:
                return Violation.TRANSFER_REPEATED.value, position, -1, 0.0
            if ready[_u(t * d + home)] < 0.0:
                return Violation.TRANSFER_BEFORE_PRODUCER.value, position, -1, 0.0
            finish, arrived, held = _kernels.transfer_step(
                m, g.tensor_size[_u(t)], t, device, home, n_consumers[_u(copy)],
                ready, readers_left, device_free, memory,
            )  # fmt: skip
            if arrived > peak[_u(device)]:
                peak[_u(device)] = arrived
            if held > peak[_u(home)]:
                peak[_u(home)] = held
        if finish > makespan:
            makespan = finish
    for op in range(n_ops):
        if op_done[_u(op)] == 0:
            return Violation.OP_MISSING.value, op, -1, 0.0
    return Violation.NONE.value, -1, -1, makespan


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
    """Scores one solution with fusion groups; the twin of `_reference.reference_score`.

    `_kernels.score_solution` with two changes: a copy's readers count a group once and not
    its reads of its own members' outputs, and a group's first op event runs the whole group
    (`group_ops`), its other op events following at once and doing nothing more. Group rules
    are checked first (`check_groups`, convexity only once something else is broken).

    Returns:
        (violation, where, detail, makespan) as `_kernels.score_solution`, with the group
        rules' violations (where: the group, detail: the op) between placement and schedule.
    """
    n_ops = placement.shape[0]
    d = m.n_devices
    peak[:] = 0
    for op in range(n_ops):
        if placement[_u(op)] < 0 or placement[_u(op)] >= d:
            return Violation.PLACEMENT_OUT_OF_RANGE.value, op, -1, 0.0
    broken, groups, group_size, n_consumers, readers_left, memory = group_ops(
        g, f, placement, group, d, max_ops
    )
    if broken:
        return _first_violation(g, f, placement, group, max_ops, Violation.NONE.value, -1, -1)
    violation, where, detail, makespan = _walk(
        g, m, placement, order, group, groups, group_size, n_consumers, readers_left, memory, peak
    )
    if violation != Violation.NONE.value:
        return _first_violation(g, f, placement, group, max_ops, violation, where, detail)
    return Violation.NONE.value, -1, -1, makespan


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
