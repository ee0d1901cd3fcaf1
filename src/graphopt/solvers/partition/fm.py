"""Fiduccia-Mattheyses refinement of a bisection, and the initial splits it starts from (numba).

Fiduccia-Mattheyses is the linear-time form of Kernighan-Lin: single-vertex moves chosen from
gain heaps, every vertex moved once per pass, the best prefix of the pass kept. The cut it
lowers is the weight of the nets with pins on both sides.
"""

from __future__ import annotations

import numba
import numpy as np

from graphopt.solvers._heap import push, remove, sift_down, sift_up
from graphopt.solvers.partition.hypergraph import Hypergraph


# ------------------------------------------------------------------------------ gain heaps
@numba.njit(cache=True)
def _before(key: np.ndarray, tie: np.ndarray, u: int, v: int) -> bool:
    """Gain heap order: larger gain first, then smaller random tie-break."""
    return key[u] > key[v] or (key[u] == key[v] and tie[u] < tie[v])


@numba.njit(cache=True)
def _change_gain(
    heap: np.ndarray,
    where: np.ndarray,
    gain: np.ndarray,
    tie: np.ndarray,
    size: int,
    v: int,
    delta: int,
) -> None:
    """Adds delta to the gain of v, which is in the heap."""
    gain[v] += delta
    if delta > 0:
        sift_up(heap, where, _before, gain, tie, where[v])
    else:
        sift_down(heap, where, _before, gain, tie, size, where[v])


# ----------------------------------------------------------------------- Fiduccia-Mattheyses
@numba.njit(cache=True)
def _overload(load: np.ndarray, cap: np.ndarray) -> float:
    return max(load[0] - cap[0], 0.0) + max(load[1] - cap[1], 0.0)


@numba.njit(cache=True)
def bisection_cut(hypergraph: Hypergraph, side: np.ndarray, active: np.ndarray) -> int:
    """Weight of the nets with active pins on both sides."""
    net_ptr, net_pin, net_weight, _, _ = hypergraph
    cut = 0
    for e in range(net_ptr.shape[0] - 1):
        seen = 0
        for i in range(net_ptr[e], net_ptr[e + 1]):
            u = net_pin[i]
            if active[u]:
                seen |= 1 << side[u]
        if seen == 3:
            cut += net_weight[e]
    return cut


@numba.njit(cache=True)
def fm_refine(
    hypergraph: Hypergraph,
    weight: np.ndarray,
    side: np.ndarray,
    active: np.ndarray,
    movable: np.ndarray,
    cap: np.ndarray,
    tie: np.ndarray,
    max_passes: int,
) -> None:
    """Fiduccia-Mattheyses passes on a bisection of the active vertices, in place on `side`.

    Each pass moves every movable vertex at most once, always the best-gain move that keeps the
    balance (or reduces the overload), then rolls back to the best prefix: least overload, then
    largest cut reduction. A pass stops early after many moves without a new best.
    """
    net_ptr, net_pin, net_weight, vertex_ptr, vertex_net = hypergraph
    n = weight.shape[0]
    n_nets = net_ptr.shape[0] - 1
    count = np.zeros((n_nets, 2), dtype=np.int64)
    gain = np.zeros(n, dtype=np.int64)
    where = np.full(n, -1, dtype=np.int64)
    heaps = np.empty((2, n), dtype=np.int64)
    moves = np.empty(n, dtype=np.int64)
    load = np.zeros(2)
    n_movable = 0
    for v in range(n):
        n_movable += active[v] and movable[v]
    stall_limit = max(64, n_movable // 4)
    for _ in range(max_passes):
        count[:] = 0
        load[:] = 0.0
        for v in range(n):
            if active[v]:
                load[side[v]] += weight[v]
        for e in range(n_nets):
            for i in range(net_ptr[e], net_ptr[e + 1]):
                u = net_pin[i]
                if active[u]:
                    count[e, side[u]] += 1
        sizes = np.zeros(2, dtype=np.int64)
        for v in range(n):
            if not (active[v] and movable[v]):
                continue
            s = side[v]
            g = 0
            for i in range(vertex_ptr[v], vertex_ptr[v + 1]):
                e = vertex_net[i]
                if count[e, s] == 1:
                    g += net_weight[e]
                if count[e, 1 - s] == 0:
                    g -= net_weight[e]
            gain[v] = g
            sizes[s] = push(heaps[s], where, _before, gain, tie, sizes[s], v)

        total_gain = 0
        best_gain = 0
        best_overload = _overload(load, cap)
        best_length = 0
        n_moves = 0
        while True:
            overload = _overload(load, cap)
            chosen = -1
            for s in range(2):
                while sizes[s] > 0:
                    v = heaps[s, 0]
                    t = 1 - s
                    load[s] -= weight[v]
                    load[t] += weight[v]
                    fits = load[t] <= cap[t] or _overload(load, cap) < overload
                    load[s] += weight[v]
                    load[t] -= weight[v]
                    if fits:
                        if chosen < 0 or gain[v] > gain[chosen]:
                            chosen = v
                        break
                    sizes[s] = remove(heaps[s], where, _before, gain, tie, sizes[s], v)
            if chosen < 0:
                break
            v = chosen
            f = side[v]
            t = 1 - f
            sizes[f] = remove(heaps[f], where, _before, gain, tie, sizes[f], v)
            total_gain += gain[v]
            side[v] = t
            for i in range(vertex_ptr[v], vertex_ptr[v + 1]):
                e = vertex_net[i]
                w = net_weight[e]
                if count[e, t] == 0:
                    for k in range(net_ptr[e], net_ptr[e + 1]):
                        u = net_pin[k]
                        if where[u] >= 0:
                            _change_gain(heaps[side[u]], where, gain, tie, sizes[side[u]], u, w)
                elif count[e, t] == 1:
                    for k in range(net_ptr[e], net_ptr[e + 1]):
                        u = net_pin[k]
                        if u != v and active[u] and side[u] == t:
                            if where[u] >= 0:
                                _change_gain(heaps[t], where, gain, tie, sizes[t], u, -w)
                            break
                count[e, f] -= 1
                count[e, t] += 1
                if count[e, f] == 0:
                    for k in range(net_ptr[e], net_ptr[e + 1]):
                        u = net_pin[k]
                        if where[u] >= 0:
                            _change_gain(heaps[side[u]], where, gain, tie, sizes[side[u]], u, -w)
                elif count[e, f] == 1:
                    for k in range(net_ptr[e], net_ptr[e + 1]):
                        u = net_pin[k]
                        if active[u] and side[u] == f:
                            if where[u] >= 0:
                                _change_gain(heaps[f], where, gain, tie, sizes[f], u, w)
                            break
            load[f] -= weight[v]
            load[t] += weight[v]
            moves[n_moves] = v
            n_moves += 1
            overload = _overload(load, cap)
            if overload < best_overload or (overload == best_overload and total_gain > best_gain):
                best_overload = overload
                best_gain = total_gain
                best_length = n_moves
            elif n_moves - best_length > stall_limit:
                break
        for s in range(2):
            for i in range(sizes[s]):
                where[heaps[s, i]] = -1
        for i in range(n_moves - 1, best_length - 1, -1):
            side[moves[i]] = 1 - side[moves[i]]
        if best_length == 0:
            break


@numba.njit(cache=True)
def grow_side_zero(
    hypergraph: Hypergraph,
    weight: np.ndarray,
    side: np.ndarray,
    active: np.ndarray,
    movable: np.ndarray,
    target: float,
    seeds: np.ndarray,
    breadth_first: bool,
) -> None:
    """Moves vertices to side 0 until it weighs `target`: `seeds` in turn, or grown from them.

    Movable active vertices start on side 1; fixed ones keep their side. Breadth first, each
    seed grows side 0 through the nets before the next seed is taken; otherwise the seeds are
    taken in their order (a prefix of a topological order, say).
    """
    net_ptr, net_pin, _, vertex_ptr, vertex_net = hypergraph
    n = weight.shape[0]
    load = 0.0
    for v in range(n):
        if active[v]:
            if movable[v]:
                side[v] = 1
            elif side[v] == 0:
                load += weight[v]
    queue = np.empty(n, dtype=np.int64)
    queued = np.zeros(n, dtype=np.bool_)
    head = 0
    tail = 0
    next_seed = 0
    while load < target:
        if head == tail:
            while next_seed < seeds.shape[0] and queued[seeds[next_seed]]:
                next_seed += 1
            if next_seed == seeds.shape[0]:
                return
            queue[tail] = seeds[next_seed]
            queued[seeds[next_seed]] = True
            tail += 1
        v = queue[head]
        head += 1
        side[v] = 0
        load += weight[v]
        if not breadth_first:
            continue
        for i in range(vertex_ptr[v], vertex_ptr[v + 1]):
            e = vertex_net[i]
            for k in range(net_ptr[e], net_ptr[e + 1]):
                u = net_pin[k]
                if active[u] and movable[u] and not queued[u]:
                    queued[u] = True
                    queue[tail] = u
                    tail += 1
