"""Kernighan-Lin partitioning: recursive Fiduccia-Mattheyses bisection, then k-way refinement.

XLA's graph partitioning baseline (paper 001, 4.2) is a modified Kernighan-Lin (Kernighan and
Lin 1970). Each bisection takes the best of several initial splits (a topological-order split
and breadth-first growths), each improved by Fiduccia-Mattheyses passes (`fm.fm_refine`). Cut
nets are split between the two halves, so the cuts of all levels add up to the (lambda - 1)
volume. A greedy k-way pass (`kway.refine_kway`) polishes the result for d > 2.
"""

from __future__ import annotations

import math

import numpy as np

from graphopt.ir.graph import Graph
from graphopt.solvers.base import SolverError
from graphopt.solvers.partition.fm import bisection_cut, fm_refine, grow_side_zero
from graphopt.solvers.partition.hypergraph import Hypergraph, tensor_hypergraph
from graphopt.solvers.partition.kway import refine_kway
from graphopt.solvers.partition.weights import Weighting, checked_pins, vertex_weights


def kernighan_lin_partition(
    graph: Graph,
    n_devices: int,
    balance: Weighting = "runtime",
    rng: np.random.Generator | None = None,
    *,
    pinned: np.ndarray | None = None,
    imbalance: float = 0.05,
    starts: int = 4,
    max_passes: int = 16,
) -> np.ndarray:
    """Balanced placement with few transferred bytes: recursive FM bisection + k-way refinement.

    Args:
        graph: the graph.
        n_devices: number of devices d >= 1.
        balance: what each device gets a fair share of: "runtime", "memory" or weights.
        rng: source of the random initial splits and tie-breaks; default seed 0.
        pinned: [n_ops] device each op must run on, or -1 where free; None when none is.
        imbalance: allowed relative excess of a device's load over the average.
        starts: initial splits per bisection (one topological split, the rest grown breadth
            first from random ops); the one with the best refined cut is kept.
        max_passes: most refinement passes per bisection and for the k-way pass.

    Returns:
        [n_ops] int32 device of each op.
    """
    if n_devices < 1:
        raise SolverError(f"devices must be an integer >= 1, got {n_devices}")
    rng = np.random.default_rng(0) if rng is None else rng
    pins = checked_pins(graph, n_devices, pinned)
    weights = vertex_weights(graph, balance)
    placement = np.zeros(graph.n_ops, dtype=np.int64)
    if n_devices == 1 or graph.n_ops == 0:
        return placement.astype(np.int32)
    hypergraph = tensor_hypergraph(graph)
    levels = math.ceil(math.log2(n_devices))
    level_imbalance = (1.0 + imbalance) ** (1.0 / levels) - 1.0
    topological_rank = np.empty(graph.n_ops, dtype=np.int64)
    topological_rank[graph.topological_order] = np.arange(graph.n_ops)
    pending = [(np.arange(graph.n_ops), 0, n_devices)]
    while pending:
        members, low, high = pending.pop()
        if high - low == 1 or members.size == 0:
            placement[members] = low
            continue
        middle = (low + high) // 2
        side = _bisect(
            hypergraph,
            weights,
            members,
            pins,
            (middle - low) / (high - low),
            middle,
            level_imbalance,
            topological_rank,
            rng,
            starts,
            max_passes,
        )
        pending.append((members[side[members] == 1], middle, high))
        pending.append((members[side[members] == 0], low, middle))
    if n_devices > 2:
        refine_kway(hypergraph, weights, placement, pins, n_devices, imbalance, rng, max_passes)
    return placement.astype(np.int32)


def _bisect(
    hypergraph: Hypergraph,
    weights: np.ndarray,
    members: np.ndarray,
    pins: np.ndarray,
    fraction: float,
    middle: int,
    imbalance: float,
    topological_rank: np.ndarray,
    rng: np.random.Generator,
    starts: int,
    max_passes: int,
) -> np.ndarray:
    """Best refined bisection of `members` over several initial splits.

    Returns:
        [n_ops] int64 side (0 or 1) of each op; meaningful on `members` only.
    """
    n = weights.shape[0]
    active = np.zeros(n, dtype=bool)
    active[members] = True
    pinned_members = members[pins[members] >= 0]
    movable = active & (pins < 0)
    total = float(weights[members].sum())
    heaviest = float(weights[members].max())
    targets = np.array([total * fraction, total * (1.0 - fraction)])
    cap = np.maximum((1.0 + imbalance) * targets, targets + heaviest)
    free = members[movable[members]]
    by_rank = free[np.argsort(topological_rank[free], kind="stable")]
    best_side, best_key = None, None
    for start in range(max(starts, 1)):
        side = np.zeros(n, dtype=np.int64)
        side[pinned_members] = (pins[pinned_members] >= middle).astype(np.int64)
        seeds = by_rank if start == 0 else rng.permutation(free)
        grow_side_zero(hypergraph, weights, side, active, movable, targets[0], seeds, start > 0)
        fm_refine(hypergraph, weights, side, active, movable, cap, rng.random(n), max_passes)
        load = np.bincount(side[members], weights=weights[members], minlength=2)
        overload = float(np.maximum(load - cap, 0.0).sum())
        cut = bisection_cut(hypergraph, side, active)
        if best_key is None or (overload, cut) < best_key:
            best_side, best_key = side, (overload, cut)
    assert best_side is not None
    return best_side
