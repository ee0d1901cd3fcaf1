"""Memory-aware op schedulers that ML compilers ship, rebuilt from their published descriptions.

Two compilers order the ops of a computation to lower its peak memory, and each runs a small
portfolio of greedy orders and keeps the one with the lowest estimated peak:

- XLA (`hlo_memory_scheduler.cc`; REGAL, paper 001 section 4.2, cites its DFS scheduler for the
  GP+DFS baseline): `ListMemoryScheduler` (greedy list scheduling on bytes freed minus bytes
  defined), `DFSMemoryScheduler` (post-order DFS from the outputs that visits operands with the
  most cumulative fan-out and bytes first) and `PostOrderMemoryScheduler` (plain post-order).
  `DefaultMemoryScheduler` keeps the best of the three.
- PyTorch Inductor (`torch/_inductor/memory.py`, `reorder_for_peak_memory`):
  `topological_sort_lpmf` (least peak memory first), `topological_sort_bfs` (FIFO on the
  execution positions of predecessors) and `topological_sort_dfs` (DFS visiting lighter ops
  first), compared with the original order, keeping the lowest estimated peak.

Every heuristic sees memory as the cost model does (docs/format.md section 5): a tensor is held
from its producer's step until its last reader's step; a tensor nobody reads is freed at once; a
graph output is held to the end, so running its last reader frees nothing; persistent tensors
are resident throughout whatever the order, so they weigh 0 here. Each function returns one
topological order of all ops. With a placement on several devices the order is global and each
device runs its ops in that order; only LPMF keeps memory per device (the others are
placement-independent). Transfers are inserted afterwards by `events_from_op_order`.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Sequence

import numba
import numpy as np

from graphopt.costmodels.machine import Machine
from graphopt.costmodels.score import Scorer
from graphopt.ir.arrays import GraphArrays
from graphopt.ir.graph import Graph
from graphopt.solvers.base import Initial, Problem, Rng, Solver, SolverError, Tracker
from graphopt.solvers.events import events_from_op_order, offer_op_orders

OrderFunction = Callable[[Graph, np.ndarray | None, int], np.ndarray]
"""A scheduler: (graph, placement or None, n_devices) -> [n_ops] int64 topological op order."""

_NO_KEY = np.iinfo(np.int64).max


# ------------------------------------------------------------------------------ shared pieces
def _placement_or_zeros(graph: Graph, placement: np.ndarray | None) -> np.ndarray:
    if placement is None:
        return np.zeros(graph.n_ops, dtype=np.int64)
    return np.asarray(placement, dtype=np.int64)


def _held_sizes(graph: Graph) -> np.ndarray:
    """[n_tensors] int64 bytes an order can change: tensor sizes, 0 for persistent tensors."""
    return np.where(graph.tensor_persistent, 0, graph.tensor_size).astype(np.int64)


def _output_bytes(graph: Graph, sizes: np.ndarray) -> np.ndarray:
    """[n_ops] int64 sum of `sizes` over each op's output tensors."""
    total = np.zeros(graph.n_ops, dtype=np.int64)
    np.add.at(total, graph.tensor_producer, sizes)
    return total


def _kept_sizes(graph: Graph, sizes: np.ndarray) -> np.ndarray:
    """[n_tensors] `sizes` where the tensor outlives its producer's step, else 0.

    A tensor outlives it when it has a reader or is a graph output (held to the end); other
    unread tensors are freed at once.
    """
    return np.where((np.diff(graph.consumer_ptr) > 0) | graph.tensor_output, sizes, 0)


def _freed_sizes(graph: Graph, sizes: np.ndarray) -> np.ndarray:
    """[n_tensors] `sizes` its last reader frees: 0 for graph outputs, held to the end."""
    return np.where(graph.tensor_output, 0, sizes)


def _distinct_dependencies(graph: Graph) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Distinct producer -> consumer op pairs as CSR both ways.

    Returns:
        pred_ptr [n_ops + 1], pred [n_pairs]: each op's predecessors in operand order (the order
        of its input tensors, first occurrence kept); succ_ptr [n_ops + 1], succ [n_pairs]:
        each op's successors, ascending.
    """
    n_ops = graph.n_ops
    consumer = np.repeat(np.arange(n_ops, dtype=np.int64), np.diff(graph.op_input_ptr))
    producer = graph.tensor_producer[graph.op_input_tensor].astype(np.int64)
    _, first = np.unique(consumer * max(n_ops, 1) + producer, return_index=True)
    first.sort()
    consumer, producer = consumer[first], producer[first]
    pred_ptr = np.zeros(n_ops + 1, dtype=np.int64)
    np.cumsum(np.bincount(consumer, minlength=n_ops), out=pred_ptr[1:])
    by_producer = np.lexsort((consumer, producer))
    succ_ptr = np.zeros(n_ops + 1, dtype=np.int64)
    np.cumsum(np.bincount(producer, minlength=n_ops), out=succ_ptr[1:])
    return pred_ptr, producer, succ_ptr, consumer[by_producer]


def _sorted_children(
    pred_ptr: np.ndarray, pred: np.ndarray, keys: Sequence[np.ndarray]
) -> np.ndarray:
    """Each op's predecessors reordered by `keys` of the predecessor (last key primary)."""
    owner = np.repeat(np.arange(pred_ptr.shape[0] - 1, dtype=np.int64), np.diff(pred_ptr))
    return pred[np.lexsort((*(key[pred] for key in keys), owner))]


def _post_order(roots: Iterable[int], child_ptr: np.ndarray, child: np.ndarray) -> np.ndarray:
    """DFS post-order over children (predecessors) from `roots` in turn: a topological order.

    Each op is appended after all its children, visited in their CSR order; an op reached
    again is skipped, as in a recursive DFS with a `seen` set.
    """
    ptr, children = child_ptr.tolist(), child.tolist()
    seen = bytearray(len(ptr) - 1)
    order: list[int] = []
    for root in roots:
        if seen[root]:
            continue
        seen[root] = 1
        stack, cursor = [root], [ptr[root]]
        while stack:
            op, edge = stack[-1], cursor[-1]
            end = ptr[op + 1]
            while edge < end and seen[children[edge]]:
                edge += 1
            if edge < end:
                cursor[-1] = edge + 1
                visit = children[edge]
                seen[visit] = 1
                stack.append(visit)
                cursor.append(ptr[visit])
            else:
                stack.pop()
                cursor.pop()
                order.append(op)
    return np.array(order, dtype=np.int64)


# ------------------------------------------------------------------------------------- XLA
def list_order(graph: Graph, placement: np.ndarray | None = None, n_devices: int = 1) -> np.ndarray:
    """XLA's `ListMemoryScheduler`: greedy list scheduling on the memory an op frees.

    Among the ready ops XLA runs the one with the highest priority (bytes freed if scheduled
    minus bytes defined, then number of users); equal priorities go to the op that became ready
    (or was re-prioritized) last, as XLA's multimap does. Bytes freed are the inputs the op is
    the last unscheduled reader of (graph outputs free nothing, as XLA frees no live-out
    buffer); when a tensor is down to one unscheduled reader, that reader's priority is raised
    in the ready queue. XLA's special cases for scalars, infeed/outfeed and subcomputations have
    no counterpart here.

    An `OrderFunction` whose order is placement-independent (placement and n_devices unused).
    """
    held = _held_sizes(graph)
    defined = _output_bytes(graph, _kept_sizes(graph, held)).tolist()
    sizes = _freed_sizes(graph, held)
    pred_ptr, _, succ_ptr, succ = _distinct_dependencies(graph)
    users = np.diff(succ_ptr).tolist()
    waiting = np.diff(pred_ptr).tolist()
    successors, succ_ptr = succ.tolist(), succ_ptr.tolist()
    input_ptr, inputs = graph.op_input_ptr.tolist(), graph.op_input_tensor.tolist()
    consumer_ptr, consumers = graph.consumer_ptr.tolist(), graph.consumer_op.tolist()
    unscheduled_uses = np.diff(graph.consumer_ptr)
    freed = np.zeros(graph.n_ops, dtype=np.int64)
    single = np.flatnonzero(unscheduled_uses == 1)
    np.add.at(freed, graph.consumer_op[graph.consumer_ptr[single]], sizes[single])
    freed, unscheduled_uses, sizes = freed.tolist(), unscheduled_uses.tolist(), sizes.tolist()

    latest_stamp = [-1] * graph.n_ops
    ready: list[tuple[int, int, int, int]] = []
    stamp = 0

    def push(op: int) -> None:
        nonlocal stamp
        latest_stamp[op] = stamp
        heapq.heappush(ready, (defined[op] - freed[op], -users[op], -stamp, op))
        stamp += 1

    for op in range(graph.n_ops):
        if waiting[op] == 0:
            push(op)
    done = bytearray(graph.n_ops)
    order: list[int] = []
    while ready:
        _, _, negative_stamp, op = heapq.heappop(ready)
        if latest_stamp[op] != -negative_stamp:
            continue
        done[op] = 1
        order.append(op)
        raised: list[int] = []
        for t in inputs[input_ptr[op] : input_ptr[op + 1]]:
            unscheduled_uses[t] -= 1
            if unscheduled_uses[t] != 1 or sizes[t] == 0:
                continue
            for reader in consumers[consumer_ptr[t] : consumer_ptr[t + 1]]:
                if not done[reader]:
                    freed[reader] += sizes[t]
                    if waiting[reader] == 0:
                        raised.append(reader)
                    break
        for successor in successors[succ_ptr[op] : succ_ptr[op + 1]]:
            waiting[successor] -= 1
            if waiting[successor] == 0:
                push(successor)
        for reader in raised:
            push(reader)
    return np.array(order, dtype=np.int64)


def post_order(graph: Graph, placement: np.ndarray | None = None, n_devices: int = 1) -> np.ndarray:
    """XLA's `PostOrderMemoryScheduler`: `MakeInstructionPostOrder`, a plain DFS post-order.

    The DFS starts from each op without users (graph outputs) in index order and visits an
    op's producers in operand order (the order of its input tensors).

    An `OrderFunction` whose order is placement-independent (placement and n_devices unused).
    """
    pred_ptr, pred, _, _ = _distinct_dependencies(graph)
    return _post_order(graph.sinks.tolist(), pred_ptr, pred)


def dfs_order(graph: Graph, placement: np.ndarray | None = None, n_devices: int = 1) -> np.ndarray:
    """XLA's `DFSMemoryScheduler`: DFS post-order from the outputs, heavier operands first.

    Over the plain post-order XLA accumulates, for each op, `extra_users` (its users minus one,
    plus its operands' values) and `total_sizes` (bytes it defines plus its operands' values),
    capped at the op count and at the bytes defined so far against double counting in DAGs.
    The DFS (from each output in index order) then visits operands by decreasing
    `extra_users`, then decreasing `total_sizes`, then index, so each heavy subtree completes
    before the next starts. This is the DFS of REGAL's GP+DFS baseline (paper 001, 4.2).

    An `OrderFunction` whose placement and n_devices are unused: each device runs its ops in
    this global order, which is the DFS order restricted to the device and already a valid merge.
    """
    pred_ptr, pred, succ_ptr, _ = _distinct_dependencies(graph)
    defined = _output_bytes(graph, _held_sizes(graph)).tolist()
    extra = np.maximum(np.diff(succ_ptr) - 1, 0).tolist()
    ptr, preds = pred_ptr.tolist(), pred.tolist()
    total = [0] * graph.n_ops
    cumulative = 0
    for op in _post_order(graph.sinks.tolist(), pred_ptr, pred).tolist():
        operands = preds[ptr[op] : ptr[op + 1]]
        cumulative += defined[op]
        extra[op] = min(extra[op] + sum(extra[p] for p in operands), graph.n_ops)
        total[op] = min(defined[op] + sum(total[p] for p in operands), cumulative)
    children = _sorted_children(
        pred_ptr,
        pred,
        (np.arange(graph.n_ops), -np.array(total, dtype=np.int64), -np.array(extra)),
    )
    return _post_order(graph.sinks.tolist(), pred_ptr, children)


# -------------------------------------------------------------------------------- Inductor
def lpmf_order(graph: Graph, placement: np.ndarray | None = None, n_devices: int = 1) -> np.ndarray:
    """Inductor's `topological_sort_lpmf`: least peak memory first.

    Inductor tracks the live memory and the peak so far. Among ready ops, if some run without
    raising the peak (live + bytes during the op <= peak), it picks the one with the smallest
    net change (bytes kept minus bytes freed), else the one raising the peak least; ties go
    to the lower index. Bytes during an op are its outputs plus its `temp_memory`; bytes kept
    are its outputs that are read or are graph outputs (which no reader frees). With several
    devices each device keeps its own live memory and peak, every device proposes its pick by
    these rules, and the lowest proposal (peak key, net change, index) runs. A segment tree
    over ops sorted by (device, bytes during) answers each pick in O(log n) instead of
    Inductor's scan of the ready set.

    An `OrderFunction` over the devices of `placement` (None: one device).
    """
    placement = _placement_or_zeros(graph, placement)
    sizes = _held_sizes(graph)
    during = _output_bytes(graph, sizes) + graph.op_temp_memory
    leaf_op = np.lexsort((np.arange(graph.n_ops), during, placement))
    device_start = np.searchsorted(placement[leaf_op], np.arange(n_devices + 1))
    _, _, succ_ptr, succ = _distinct_dependencies(graph)
    return _lpmf(
        placement,
        during,
        _output_bytes(graph, _kept_sizes(graph, sizes)),
        leaf_op,
        device_start,
        graph.arrays,
        _freed_sizes(graph, sizes),
        succ_ptr,
        succ,
    )


@numba.njit(cache=True)
def _tree_set(
    tree_net: np.ndarray,
    tree_op: np.ndarray,
    tree_first: np.ndarray,
    position: int,
    net: int,
    op: int,
    ready: bool,
) -> None:
    """Sets leaf `position` (ready with key (net, op), or empty) and updates its ancestors."""
    width = tree_net.shape[0] // 2
    node = position + width
    tree_net[node] = net if ready else _NO_KEY
    tree_op[node] = op if ready else _NO_KEY
    tree_first[node] = position if ready else width
    node //= 2
    while node >= 1:
        left, right = 2 * node, 2 * node + 1
        if tree_net[right] < tree_net[left] or (
            tree_net[right] == tree_net[left] and tree_op[right] < tree_op[left]
        ):
            left = right
        tree_net[node] = tree_net[left]
        tree_op[node] = tree_op[left]
        tree_first[node] = min(tree_first[2 * node], tree_first[2 * node + 1])
        node //= 2


@numba.njit(cache=True)
def _tree_query(
    tree_net: np.ndarray, tree_op: np.ndarray, tree_first: np.ndarray, low: int, high: int
) -> tuple[int, int, int]:
    """Over leaves [low, high): the smallest (net, op) key and the first ready position."""
    width = tree_net.shape[0] // 2
    best_net, best_op, first = _NO_KEY, _NO_KEY, width
    low += width
    high += width
    while low < high:
        if low & 1:
            if tree_net[low] < best_net or (tree_net[low] == best_net and tree_op[low] < best_op):
                best_net, best_op = tree_net[low], tree_op[low]
            first = min(first, tree_first[low])
            low += 1
        if high & 1:
            high -= 1
            if tree_net[high] < best_net or (
                tree_net[high] == best_net and tree_op[high] < best_op
            ):
                best_net, best_op = tree_net[high], tree_op[high]
            first = min(first, tree_first[high])
        low //= 2
        high //= 2
    return best_net, best_op, first


@numba.njit(cache=True)
def _lpmf(
    placement: np.ndarray,
    during: np.ndarray,
    kept: np.ndarray,
    leaf_op: np.ndarray,
    device_start: np.ndarray,
    g: GraphArrays,
    sizes: np.ndarray,
    succ_ptr: np.ndarray,
    succ: np.ndarray,
) -> np.ndarray:
    """`lpmf_order`'s loop; `sizes` are the bytes each tensor's last reader frees."""
    n_ops = placement.shape[0]
    n_devices = device_start.shape[0] - 1
    width = 1
    while width < n_ops:
        width *= 2
    tree_net = np.full(2 * width, _NO_KEY, dtype=np.int64)
    tree_op = np.full(2 * width, _NO_KEY, dtype=np.int64)
    tree_first = np.full(2 * width, width, dtype=np.int64)
    leaf_of = np.empty(n_ops, dtype=np.int64)
    sorted_during = np.empty(n_ops, dtype=np.int64)
    for position in range(n_ops):
        leaf_of[leaf_op[position]] = position
        sorted_during[position] = during[leaf_op[position]]

    remaining = np.diff(g.consumer_ptr)
    freed = np.zeros(n_ops, dtype=np.int64)  # inputs the op is the last unscheduled reader of
    for t in range(remaining.shape[0]):
        if remaining[t] == 1:
            freed[g.consumer_op[g.consumer_ptr[t]]] += sizes[t]
    waiting = np.zeros(n_ops, dtype=np.int64)
    for e in range(succ.shape[0]):
        waiting[succ[e]] += 1
    state = np.zeros(n_ops, dtype=np.uint8)  # 0 waiting, 1 ready, 2 scheduled
    for op in range(n_ops):
        if waiting[op] == 0:
            state[op] = 1
            _tree_set(tree_net, tree_op, tree_first, leaf_of[op], kept[op] - freed[op], op, True)

    live = np.zeros(n_devices, dtype=np.int64)
    peak = np.zeros(n_devices, dtype=np.int64)
    order = np.empty(n_ops, dtype=np.int64)
    for step in range(n_ops):
        pick_peak, pick_net, pick = _NO_KEY, _NO_KEY, _NO_KEY
        for device in range(n_devices):
            low, high = device_start[device], device_start[device + 1]
            if low == high:
                continue
            fits = low + np.searchsorted(
                sorted_during[low:high], peak[device] - live[device], side="right"
            )
            net, op, _ = _tree_query(tree_net, tree_op, tree_first, low, fits)
            key = peak[device]
            if op == _NO_KEY:
                _, _, first = _tree_query(tree_net, tree_op, tree_first, fits, high)
                if first >= width:
                    continue
                smallest = sorted_during[first]
                stop = low + np.searchsorted(sorted_during[low:high], smallest, side="right")
                net, op, _ = _tree_query(tree_net, tree_op, tree_first, first, stop)
                key = live[device] + smallest
            if key < pick_peak or (
                key == pick_peak and (net < pick_net or (net == pick_net and op < pick))
            ):
                pick_peak, pick_net, pick = key, net, op
        order[step] = pick
        state[pick] = 2
        _tree_set(tree_net, tree_op, tree_first, leaf_of[pick], 0, pick, False)
        device = placement[pick]
        peak[device] = max(peak[device], live[device] + during[pick])
        live[device] += kept[pick]
        for e in range(g.op_input_ptr[pick], g.op_input_ptr[pick + 1]):
            t = g.op_input_tensor[e]
            remaining[t] -= 1
            if remaining[t] == 0:
                live[placement[g.tensor_producer[t]]] -= sizes[t]
            elif remaining[t] == 1 and sizes[t] > 0:
                for c in range(g.consumer_ptr[t], g.consumer_ptr[t + 1]):
                    reader = g.consumer_op[c]
                    if state[reader] != 2:
                        freed[reader] += sizes[t]
                        if state[reader] == 1:
                            _tree_set(
                                tree_net,
                                tree_op,
                                tree_first,
                                leaf_of[reader],
                                kept[reader] - freed[reader],
                                reader,
                                True,
                            )
                        break
        for e in range(succ_ptr[pick], succ_ptr[pick + 1]):
            successor = succ[e]
            waiting[successor] -= 1
            if waiting[successor] == 0:
                state[successor] = 1
                _tree_set(
                    tree_net,
                    tree_op,
                    tree_first,
                    leaf_of[successor],
                    kept[successor] - freed[successor],
                    successor,
                    True,
                )
    return order


def bfs_order(graph: Graph, placement: np.ndarray | None = None, n_devices: int = 1) -> np.ndarray:
    """Inductor's `topological_sort_bfs`: FIFO on when an op's predecessors ran.

    An op's priority is the sorted list of the execution positions of its predecessors; the
    ready op with the lexicographically smallest list runs next (ties to the lower index), so
    buffers are consumed soon after they are made. Ops without inputs (empty list) run first.

    An `OrderFunction` whose order is placement-independent (placement and n_devices unused).
    """
    pred_ptr, pred, succ_ptr, succ = _distinct_dependencies(graph)
    pred_ptr_list, preds = pred_ptr.tolist(), pred.tolist()
    succ_ptr_list, successors = succ_ptr.tolist(), succ.tolist()
    waiting = np.diff(pred_ptr).tolist()
    position = [0] * graph.n_ops
    ready: list[tuple[tuple[int, ...], int]] = [
        ((), op) for op in range(graph.n_ops) if waiting[op] == 0
    ]
    order: list[int] = []
    while ready:
        _, op = heapq.heappop(ready)
        position[op] = len(order)
        order.append(op)
        for successor in successors[succ_ptr_list[op] : succ_ptr_list[op + 1]]:
            waiting[successor] -= 1
            if waiting[successor] == 0:
                ran = preds[pred_ptr_list[successor] : pred_ptr_list[successor + 1]]
                priority = tuple(sorted(position[p] for p in ran))
                heapq.heappush(ready, (priority, successor))
    return np.array(order, dtype=np.int64)


def inductor_dfs_order(
    graph: Graph, placement: np.ndarray | None = None, n_devices: int = 1
) -> np.ndarray:
    """Inductor's `topological_sort_dfs`: DFS post-order visiting lighter ops first.

    Each op weighs the bytes of its outputs plus the bytes of its inputs (`size_with_reads`).
    The outer loop visits all ops by increasing weight (ties to the lower index), and each op
    visits its predecessors in the same order before it is appended.

    An `OrderFunction` whose order is placement-independent (placement and n_devices unused).
    """
    sizes = _held_sizes(graph)
    reads = np.zeros(graph.n_ops, dtype=np.int64)
    np.add.at(reads, graph.consumer_op, sizes[graph.edge_tensor])
    weight = _output_bytes(graph, sizes) + reads
    pred_ptr, pred, _, _ = _distinct_dependencies(graph)
    children = _sorted_children(pred_ptr, pred, (np.arange(graph.n_ops), weight))
    roots = np.lexsort((np.arange(graph.n_ops), weight))
    return _post_order(roots.tolist(), pred_ptr, children)


# -------------------------------------------------------------------------------- portfolio
def graph_order(
    graph: Graph, placement: np.ndarray | None = None, n_devices: int = 1
) -> np.ndarray:
    """The graph's own deterministic topological order (Inductor's "baseline" candidate).

    An `OrderFunction` whose placement and n_devices are unused.
    """
    return np.array(graph.topological_order, dtype=np.int64)


PORTFOLIO: tuple[OrderFunction, ...] = (
    graph_order,
    list_order,
    dfs_order,
    post_order,
    lpmf_order,
    bfs_order,
    inductor_dfs_order,
)
"""What `best_of_order` and the compiler-best solver compare: both compilers' heuristics."""


def best_of_order(
    graph: Graph, placement: np.ndarray | None = None, n_devices: int = 1
) -> np.ndarray:
    """The portfolio's order with the lowest exact peak memory, as XLA and Inductor both do.

    Each candidate gets lazy transfers (`events_from_op_order`) and is scored by the cost model
    (peak memory does not depend on transfer durations); ties go to the earlier candidate in
    `PORTFOLIO`.

    An `OrderFunction` over the devices of `placement` (None: one device).
    """
    placement = _placement_or_zeros(graph, placement)
    scorer = Scorer(graph, Machine(n_devices=n_devices))
    op_orders = [schedule(graph, placement, n_devices) for schedule in PORTFOLIO]
    peaks = []
    for op_order in op_orders:
        events = events_from_op_order(graph, placement, op_order, n_devices)
        peaks.append(int(scorer.evaluate(placement, events)[0].max()))
    return op_orders[int(np.argmin(peaks))]


# ---------------------------------------------------------------------------------- solvers
def pinned_placement(problem: Problem) -> np.ndarray:
    """[n_ops] int32 placement: pinned ops on their device, every other op on device 0."""
    if problem.pinned is None:
        return np.zeros(problem.graph.n_ops, dtype=np.int32)
    return np.maximum(problem.pinned, 0).astype(np.int32)


COMPILER_SCHEDULERS: dict[str, tuple[OrderFunction, ...]] = {
    "xla-list": (list_order,),
    "xla-dfs": (dfs_order,),
    "xla-postorder": (post_order,),
    "inductor-lpmf": (lpmf_order,),
    "inductor-bfs": (bfs_order,),
    "inductor-dfs": (inductor_dfs_order,),
    "compiler-best": PORTFOLIO,
}
"""Each compiler scheduler's solver name and the heuristics it runs: XLA's list, DFS and
post-order memory schedulers, Inductor's least-peak-memory-first, BFS and DFS orders, and
compiler-best, every order of `PORTFOLIO`: a superset of every other's candidates, so never worse
than any of them for the problem's objective."""


class CompilerScheduler(Solver):
    """Runs fixed compiler heuristics on the pinned placement and offers their orders.

    Pinned ops run on their device and every other op on device 0 (these are single-device
    schedulers). The evaluation budget only matters through the tracker, since they evaluate a
    handful of candidates.

    Args:
        name: a key of `COMPILER_SCHEDULERS`: the solver's name and its heuristics.
    """

    def __init__(self, name: str) -> None:
        if name not in COMPILER_SCHEDULERS:
            raise SolverError(
                f"unknown compiler scheduler {name!r}; valid: {', '.join(COMPILER_SCHEDULERS)}"
            )
        self.name = name
        self.schedules = COMPILER_SCHEDULERS[name]

    def run(self, problem: Problem, tracker: Tracker, rng: Rng, initial: Initial) -> None:
        """Offers each heuristic's order, with lazy and eager transfers where they differ."""
        placement = pinned_placement(problem)
        n_devices = problem.machine.n_devices
        op_orders = (schedule(problem.graph, placement, n_devices) for schedule in self.schedules)
        offer_op_orders(problem, tracker, placement, op_orders)
