"""Recomputation baselines on one device: what a user gets today without a search.

`checkpoint_segments` is Chen et al.'s sqrt(n) checkpointing (arXiv 1604.06174), written for any
graph rather than a chain: split the program order into segments. A tensor that the next segment
reads (it crosses a segment boundary: a checkpoint), one read only by the segment that made it,
and one whose producer may not run again are kept as usual. Any other is freed after its own
segment, and its producer runs again, after whatever it needs that was freed too, just before
the first op of each later segment that reads it. On a training step
that is `torch.utils.checkpoint` around every segment of the forward pass: each checkpointed
activation is recomputed once, at its backward. `segment_sweep` tries several segment lengths,
which trades peak memory against the recomputed seconds.
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


def _trace(graph: Graph, order: np.ndarray) -> tuple[int, float, np.ndarray]:
    """(peak, makespan, memory at every step) of a valid one-device recomputing order."""
    peak = np.zeros(1, dtype=np.int64)
    trace = np.zeros(order.shape[0], dtype=np.int64)
    machine = Machine(n_devices=1)
    violation, where, _, makespan = score_remat(
        graph.arrays,
        machine.arrays,
        np.zeros(graph.n_ops, dtype=np.int32),
        np.ascontiguousarray(order, dtype=np.int64),
        graph.op_recomputable,
        peak,
        trace,
    )
    if violation:
        raise ValueError(f"greedy_recompute made an invalid order (rule {violation} at {where})")
    return int(peak[0]), float(makespan), trace


def _idle_spans(graph: Graph, order: np.ndarray, step: int) -> list[tuple[int, int]]:
    """(tensor, next read) of every instance resident across `step` that `step` does not read.

    An instance is made at one event and read at later ones; a span between two of its
    consecutive events (made or read) that contains `step` is idle there. Running the tensor's
    producer again just before the next read frees it across the span (section 15).
    """
    last: dict[int, int] = {}  # tensor -> position of the latest event of its current instance
    spans = []
    for position, op in enumerate(order.tolist()):
        for t in graph.inputs(op).tolist():
            if last.get(t, step) < step < position:
                spans.append((t, position))
            last[t] = position
        for t in graph.outputs(op).tolist():
            last[t] = position
    return spans


def _uses(graph: Graph, order: np.ndarray) -> dict[int, tuple[list[int], list[int]]]:
    """Per tensor: (positions that make it, positions that read it) in `order`, ascending."""
    uses: dict[int, tuple[list[int], list[int]]] = {}
    for position, op in enumerate(order.tolist()):
        for t in graph.inputs(op).tolist():
            uses.setdefault(t, ([], []))[1].append(position)
        for t in graph.outputs(op).tolist():
            uses.setdefault(t, ([], []))[0].append(position)
    return uses


def _read_on(uses: dict[int, tuple[list[int], list[int]]], t: int, position: int) -> bool:
    """Whether the instance of t current at `position` is read there or later anyway."""
    makes, reads = uses.get(t, ([], []))
    made = bisect.bisect_left(makes, position)
    next_made = makes[made] if made < len(makes) else math.inf
    read = bisect.bisect_left(reads, position)
    return read < len(reads) and reads[read] < next_made


def _remake(
    graph: Graph,
    uses: dict[int, tuple[list[int], list[int]]],
    t: int,
    before: int,
    depth: int,
    can: np.ndarray,
) -> list[int]:
    """The ops that make t again just before `before`, inputs' producers first.

    An input that nothing reads at or after `before` would be kept alive until then only to
    be read again; it is made again too (up to `depth` producers back) when it can be.
    """
    producer = int(graph.tensor_producer[t])
    ops: list[int] = []
    if depth > 0:
        for u in graph.inputs(producer).tolist():
            if can[u] and not _read_on(uses, u, before):
                ops += [
                    op for op in _remake(graph, uses, u, before, depth - 1, can) if op not in ops
                ]
    return [*ops, producer]


def greedy_recompute(
    graph: Graph,
    order: np.ndarray,
    max_overhead: float = math.inf,
    capacity: int | None = None,
    candidates: int = 32,
    max_rounds: int = 1_000,
    seconds: float = math.inf,
) -> tuple[Solution, int]:
    """Lowers a one-device schedule's peak by recomputing what lies idle across the peak step.

    DTR's rule (Kirisame et al., ICLR 2021) made offline: at the peak step, every resident
    tensor that the step does not read is a candidate, ranked by size / its producer's seconds
    (DTR evicts the lowest cost / (size x staleness)). The `candidates` best are each tried by
    running the producer again just before the tensor's next read, alone and with the producers
    of what it reads that would otherwise be kept alive only for it (`_remake`, up to
    `CHAIN_DEPTH` back: a chain of activations comes back as Chen's segments do). Each try is
    scored exactly; the one that lowers the peak most is kept, then the one that leaves the
    fewest steps at the peak (a peak several steps share comes down one step at a time), then
    the fewest seconds. Rounds repeat until no try lowers the peak or its step count, the
    recomputed seconds would pass `max_overhead` x the step's seconds, or the peak fits
    `capacity`.

    Args:
        graph: the graph.
        order: a valid one-device order (op codes; it may recompute already).
        max_overhead: most recomputed seconds, as a fraction of the sum of op runtimes.
        capacity: stop once the peak is at most this many bytes.
        candidates: tensors tried per round.
        max_rounds: most recomputations added.
        seconds: no round starts after this many seconds.

    Returns:
        (the solution, evaluations made).
    """
    order = np.asarray(order, dtype=np.int64)
    limit = math.inf if math.isinf(max_overhead) else graph.total_runtime * (1 + max_overhead)
    peak, makespan, trace = _trace(graph, order)
    at_peak = int((trace == peak).sum())
    evaluations = 1
    held = graph.tensor_persistent | graph.tensor_output
    can = ~held & graph.op_recomputable[graph.tensor_producer]
    deadline = time.perf_counter() + seconds
    for _ in range(max_rounds):
        if (capacity is not None and peak <= capacity) or time.perf_counter() > deadline:
            break
        spans = [(t, b) for t, b in _idle_spans(graph, order, int(np.argmax(trace))) if can[t]]
        producer_time = graph.op_runtime[graph.tensor_producer]
        spans.sort(key=lambda s: -graph.tensor_size[s[0]] / max(producer_time[s[0]], 1e-12))
        uses = _uses(graph, order)
        moves = {
            (before, tuple(_remake(graph, uses, t, before, depth, can)))
            for t, before in spans[:candidates]
            for depth in (0, CHAIN_DEPTH)
        }
        best = None
        for before, ops in sorted(moves):
            tried = np.insert(order, before, ops)
            new_peak, new_makespan, new_trace = _trace(graph, tried)
            evaluations += 1
            key = (new_peak, int((new_trace == new_peak).sum()), new_makespan)
            if new_makespan > limit * (1 + 1e-12) or key[:2] >= (peak, at_peak):
                continue
            if best is None or key < best[0]:
                best = (key, new_trace, tried)
        if best is None:
            break
        (peak, at_peak, makespan), trace, order = best
    solution = Solution(
        placement=np.zeros(graph.n_ops, dtype=np.int32),
        order=order,
        n_devices=1,
        remat=order.shape[0] > graph.n_ops,
    )
    return solution, evaluations
