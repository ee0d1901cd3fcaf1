"""Recomputation (docs/format.md section 15): the baseline users know, and the `--remat` greedy.

`checkpoint_segments` is Chen et al.'s sqrt(n) checkpointing (arXiv 1604.06174) on one device,
written for any graph rather than a chain: split the program order into segments. A tensor that
the next segment reads (it crosses a segment boundary: a checkpoint), one read only by the
segment that made it, and one whose producer may not run again are kept as usual. Any other is
freed after its own segment, and its producer runs again, after whatever it needs that was freed
too, just before the first op of each later segment that reads it. On a training step that is
`torch.utils.checkpoint` around every segment of the forward pass: each checkpointed activation
is recomputed once, at its backward. `segment_sweep` tries several segment lengths, which trades
peak memory against the recomputed seconds.

`greedy_recompute` searches instead, on any placement: it makes again, one try scored exactly at
a time, what lies idle across the peak step.
"""

from __future__ import annotations

import bisect
import math
import time
from collections.abc import Iterable

import numpy as np

from graphopt.costmodels._remat import score_remat
from graphopt.costmodels.machine import Machine
from graphopt.costmodels.score import Score, Scorer
from graphopt.ir.graph import Graph
from graphopt.ir.solution import Solution


def checkpoint_segments(graph: Graph, order: np.ndarray, length: int) -> Solution:
    """The one-device solution that recomputes by segments of `length` ops of `order`.

    Args:
        graph: the graph.
        order: [n_ops] every op once, in a topological order (the program order).
        length: ops per segment, >= 1.

    Returns:
        A valid solution on one device, `remat` when it runs an op more than once; it
        recomputes nothing when every tensor read by a later segment is a checkpoint.
    """
    order = np.asarray(order, dtype=np.int64)
    segment = np.empty(graph.n_ops, dtype=np.int64)
    segment[order] = np.arange(graph.n_ops) // max(1, length)
    made_in = segment[graph.tensor_producer]
    read_in = segment[graph.consumer_op]
    latest = made_in.copy()
    np.maximum.at(latest, graph.edge_tensor, read_in)
    checkpoint = np.zeros(graph.n_tensors, dtype=bool)
    checkpoint[graph.edge_tensor[read_in == made_in[graph.edge_tensor] + 1]] = True
    kept = (
        (latest == made_in)
        | checkpoint
        | ~graph.op_recomputable[graph.tensor_producer]
        | graph.tensor_persistent
        | graph.tensor_output
    )
    schedule: list[int] = []
    fresh: set[tuple[int, int]] = set()  # (tensor, segment): remade for that segment

    def needed(t: int, now: int) -> bool:
        """Whether segment `now` must run t's producer again before reading t."""
        return not (kept[t] or now == made_in[t] or (t, now) in fresh)

    for op in order.tolist():
        now = int(segment[op])
        # Depth first, iteratively: a producer runs again after what it needs that was freed.
        stack = [(int(t), False) for t in graph.inputs(op)[::-1]]
        while stack:
            t, ready = stack.pop()
            if not needed(t, now):
                continue
            producer = int(graph.tensor_producer[t])
            if ready:
                schedule.append(producer)
                fresh.update((int(out), now) for out in graph.outputs(producer))
            else:
                stack.append((t, True))
                stack.extend((int(u), False) for u in graph.inputs(producer)[::-1])
        schedule.append(op)
    return Solution(
        placement=np.zeros(graph.n_ops, dtype=np.int32),
        order=np.array(schedule, dtype=np.int64),
        n_devices=1,
        remat=len(schedule) > graph.n_ops,
    )


def sqrt_length(graph: Graph) -> int:
    """Chen et al.'s segment length: the square root of the op count, rounded up."""
    return max(1, math.ceil(math.sqrt(graph.n_ops)))


def segment_sweep(
    graph: Graph, order: np.ndarray, lengths: Iterable[int], machine: Machine | None = None
) -> list[tuple[int, Solution, Score]]:
    """(length, solution, score) of `checkpoint_segments` at each length, on one device."""
    scorer = Scorer(graph, machine or Machine(n_devices=1))
    rows = []
    for length in lengths:
        solution = checkpoint_segments(graph, order, length)
        rows.append((length, solution, scorer.score(solution)))
    return rows


CHAIN_DEPTH = 4
"""How many producers back `greedy_recompute` also makes again what a recomputed op reads."""

Copy = tuple[int, int]
"""(tensor, device): where instances live."""


def _trace(
    graph: Graph, machine: Machine, placement: np.ndarray, order: np.ndarray
) -> tuple[int, float, np.ndarray] | None:
    """(peak, makespan, [n_events, 2] memory per step) of a solution; None when it is invalid."""
    peak = np.zeros(machine.n_devices, dtype=np.int64)
    trace = np.full((order.shape[0], 2), -1, dtype=np.int64)
    violation, _, _, makespan = score_remat(
        graph.arrays,
        machine.arrays,
        placement,
        np.ascontiguousarray(order, dtype=np.int64),
        graph.op_recomputable,
        peak,
        trace,
    )
    if violation:
        return None
    return int(peak.max(initial=0)), float(makespan), trace


def _peak_step(
    graph: Graph, placement: np.ndarray, order: np.ndarray, trace: np.ndarray, d: int
) -> Copy:
    """(step, device) of the highest memory: an event's device, or a transfer's source."""
    step, column = np.unravel_index(int(np.argmax(trace)), trace.shape)
    code = int(order[step])
    if code < graph.n_ops:
        return int(step), int(placement[code])
    t, destination = divmod(code - graph.n_ops, d)
    return int(step), destination if column == 0 else int(placement[graph.tensor_producer[t]])


def _events(
    graph: Graph, placement: np.ndarray, order: np.ndarray, d: int
) -> list[tuple[list[Copy], list[Copy]]]:
    """Per event of `order`: (the copies it reads, the copies it makes)."""
    events = []
    for code in order.tolist():
        if code < graph.n_ops:
            device = int(placement[code])
            reads = [(t, device) for t in graph.inputs(code).tolist()]
            events.append((reads, [(t, device) for t in graph.outputs(code).tolist()]))
        else:
            t, device = divmod(code - graph.n_ops, d)
            events.append(([(t, int(placement[graph.tensor_producer[t]]))], [(t, device)]))
    return events


def _idle_spans(
    events: list[tuple[list[Copy], list[Copy]]], step: int, device: int
) -> list[tuple[int, int, int]]:
    """(tensor, next read, made) of every instance on `device` resident across `step` unread.

    An instance is made at one event and read at later ones; a span between two of its
    consecutive events (made or read) that contains `step` is idle there. Making it again just
    before the next read frees it across the span (section 15). `made` is the position of the
    event that made the instance when nothing read it before the span, else -1: that event may
    then move to the next read instead, at no extra seconds.
    """
    last: dict[Copy, int] = {}  # copy -> position of the latest event of its current instance
    made: dict[Copy, int] = {}  # copy -> position that made its current instance, until read
    spans = []
    for position, (reads, makes) in enumerate(events):
        for copy in reads:
            if copy[1] == device and last.get(copy, step) < step < position:
                spans.append((copy[0], position, made.get(copy, -1)))
            last[copy] = position
            made.pop(copy, None)
        for copy in makes:
            last[copy] = made[copy] = position
    return spans


def _uses(events: list[tuple[list[Copy], list[Copy]]]) -> dict[Copy, tuple[list[int], list[int]]]:
    """Per copy: (positions that make it, positions that read it), ascending."""
    uses: dict[Copy, tuple[list[int], list[int]]] = {}
    for position, (reads, makes) in enumerate(events):
        for copy in reads:
            uses.setdefault(copy, ([], []))[1].append(position)
        for copy in makes:
            uses.setdefault(copy, ([], []))[0].append(position)
    return uses


def _read_on(uses: dict[Copy, tuple[list[int], list[int]]], copy: Copy, position: int) -> bool:
    """Whether the instance of `copy` current at `position` is read there or later anyway."""
    makes, reads = uses.get(copy, ([], []))
    made = bisect.bisect_left(makes, position)
    next_made = makes[made] if made < len(makes) else math.inf
    read = bisect.bisect_left(reads, position)
    return read < len(reads) and reads[read] < next_made


def _remake(
    graph: Graph,
    placement: np.ndarray,
    uses: dict[Copy, tuple[list[int], list[int]]],
    t: int,
    before: int,
    depth: int,
    can: np.ndarray,
) -> list[int]:
    """The ops that make t again on its producer's device just before `before`, inputs first.

    An input on the same device that nothing reads at or after `before` would be kept alive
    until then only to be read again; it is made again too (up to `depth` producers back) when
    it can be.
    """
    producer = int(graph.tensor_producer[t])
    device = int(placement[producer])
    ops: list[int] = []
    if depth > 0:
        for u in graph.inputs(producer).tolist():
            home = int(placement[graph.tensor_producer[u]])
            if home == device and can[u] and not _read_on(uses, (u, device), before):
                chain = _remake(graph, placement, uses, u, before, depth - 1, can)
                ops += [op for op in chain if op not in ops]
    return [*ops, producer]


def greedy_recompute(
    graph: Graph,
    order: np.ndarray,
    max_overhead: float = math.inf,
    capacity: int | None = None,
    candidates: int = 32,
    max_rounds: int = 1_000,
    seconds: float = math.inf,
    machine: Machine | None = None,
    placement: np.ndarray | None = None,
) -> tuple[Solution, int]:
    """Lowers a schedule's peak by making again what lies idle across the peak step.

    DTR's rule (Kirisame et al., ICLR 2021) made offline: at the peak step, every instance on
    the peak's device that the step does not read is a candidate, ranked by size / the seconds
    to make it again (DTR evicts the lowest cost / (size x staleness)). The `candidates` best
    are each tried just before the next read: a copy on its producer's device by running the
    producer again, alone and with the producers of what it reads that would otherwise be kept
    alive only for it (`_remake`, up to `CHAIN_DEPTH` back: a chain of activations comes back
    as Chen's segments do); a copy transferred to another device by transferring it again. An
    instance nothing has read yet is also tried with the event that made it moved to the read
    (an order move, at no extra seconds; skipped when it leaves the order invalid).
    Each try is scored exactly; the one that lowers the peak most is kept, then the one that
    leaves the fewest steps at the peak (a peak several steps share comes down one step at a
    time), then the shortest makespan. Rounds repeat until no try lowers the peak or its step
    count, the makespan would pass (1 + `max_overhead`) x the start's, or the peak fits
    `capacity`. The schedule returned is the one with the lowest peak met on the way, at its
    fewest seconds: rounds that only thinned the steps at a peak they could not lower are
    dropped, so the start comes back unchanged when nothing lowered its peak.

    Args:
        graph: the graph.
        order: a valid order of event codes on `placement` (it may recompute already).
        max_overhead: most extra makespan, as a fraction of the start's (on one device without
            recomputation: of the sum of op runtimes).
        capacity: stop once the peak is at most this many bytes.
        candidates: copies tried per round.
        max_rounds: most recomputations added.
        seconds: no round starts after this many seconds.
        machine: the machine (default: one device, free transfers).
        placement: [n_ops] device of each op (default: every op on device 0).

    Returns:
        (the solution, evaluations made).
    """
    machine = Machine(n_devices=1) if machine is None else machine
    d = machine.n_devices
    placement = np.zeros(graph.n_ops, np.int32) if placement is None else placement
    placement = np.ascontiguousarray(placement, dtype=np.int32)
    order = np.asarray(order, dtype=np.int64)
    start = _trace(graph, machine, placement, order)
    if start is None:
        raise ValueError("greedy_recompute: the order is not a valid solution on the placement")
    peak, makespan, trace = start
    at_peak = int((trace == peak).sum())
    limit = makespan * (1 + max_overhead) if math.isfinite(max_overhead) else math.inf
    evaluations = 1
    held = graph.tensor_persistent | graph.tensor_output
    can = ~held & graph.op_recomputable[graph.tensor_producer]
    home = placement[graph.tensor_producer]
    cost = np.where(
        can, graph.op_runtime[graph.tensor_producer], graph.tensor_size / machine.bandwidth
    )
    kept = (peak, makespan, order)  # the lowest peak so far, at the fewest seconds
    deadline = time.perf_counter() + seconds
    for _ in range(max_rounds):
        if (capacity is not None and peak <= capacity) or time.perf_counter() > deadline:
            break
        events = _events(graph, placement, order, d)
        step, device = _peak_step(graph, placement, order, trace, d)
        idle = _idle_spans(events, step, device)
        spans = [s for s in idle if (can[s[0]] if device == home[s[0]] else True)]
        spans.sort(key=lambda s: -graph.tensor_size[s[0]] / max(cost[s[0]], 1e-12))
        uses = _uses(events)
        moves = set()
        for t, before, _ in spans[:candidates]:
            if device != home[t]:  # a transferred copy: transfer it again
                moves.add((before, (graph.n_ops + t * d + device,), -1))
                continue
            for depth in (0, CHAIN_DEPTH):
                chain = tuple(_remake(graph, placement, uses, t, before, depth, can))
                moves.add((before, chain, -1))
        # An instance nothing read yet: its event moves to the read (no extra seconds).
        deferred = sorted({(before, made) for _, before, made in idle if made >= 0})
        moves.update((before, (int(order[made]),), made) for before, made in deferred[:candidates])
        best = None
        for before, codes, made in sorted(moves):
            if made >= 0:
                tried = np.insert(np.delete(order, made), before - 1, codes)
            else:
                tried = np.insert(order, before, codes)
            traced = _trace(graph, machine, placement, tried)
            evaluations += 1
            if traced is None:
                continue
            new_peak, new_makespan, new_trace = traced
            key = (new_peak, int((new_trace == new_peak).sum()), new_makespan)
            if new_makespan > limit * (1 + 1e-12) or key[:2] >= (peak, at_peak):
                continue
            if best is None or key < best[0]:
                best = (key, new_trace, tried)
        if best is None:
            break
        (peak, at_peak, makespan), trace, order = best
        if (peak, makespan) < kept[:2]:
            kept = (peak, makespan, order)
    order = kept[2]
    repeated = np.unique(order).shape[0] < order.shape[0]
    solution = Solution(placement=placement, order=order, n_devices=d, remat=repeated)
    return solution, evaluations
