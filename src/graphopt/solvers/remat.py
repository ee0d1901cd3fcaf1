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

import math
from collections.abc import Iterable

import numpy as np

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
