"""Graph partitioning + DFS scheduling (GP+DFS), the placement baseline of paper 001 section 4.2.

REGAL compares against "the graph partitioning baseline for device placement" combined with an
XLA-like depth-first scheduler: partition the ops over the devices so that few bytes cross
devices while each device gets a fair share of the work, then order each device's ops depth
first. The paper uses XLA's modified Kernighan-Lin (Kernighan and Lin 1970) and notes METIS
(Karypis and Kumar 1998) as the faster, usually weaker alternative; both are here.

The partitioning objective is the exact transfer volume of docs/format.md section 2: a tensor
crosses to every device that holds one of its consumers, other than its producer's device. That
is the (lambda - 1) connectivity of the hypergraph whose nets are tensors (pins: producer and
consumers), so both partitioners refine that metric directly:

- `kernighan_lin_partition` runs recursive bisection; each bisection takes the best of several
  initial splits (a topological-order split and breadth-first growths), each improved by
  Fiduccia-Mattheyses passes (the linear-time form of Kernighan-Lin: single-vertex moves chosen
  from gain heaps, every vertex moved once per pass, the best prefix of the pass kept). Cut nets
  are split between the two halves, so the cuts of all levels add up to the (lambda - 1) volume.
  A greedy k-way pass (METIS-style boundary refinement) polishes the result for d > 2.
- `metis_partition` calls METIS through pymetis on the op graph (edge weight: bytes of the
  tensors between two ops), moves pinned ops to their devices after relabelling parts to agree
  with the pins, and polishes with the same k-way pass.

Balance: the weight of an op is its runtime ("runtime") or the bytes it produces ("memory"); a
device may hold at most max((1 + imbalance) W / d, W / d + w_max) of the total weight W, where
w_max is the heaviest op, since no partition can beat one op's granularity. Pinned ops never move.
"""

from __future__ import annotations

import itertools
import math
from abc import abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, ClassVar, Literal, get_args

import numba
import numpy as np
import pymetis

from graphopt.ir.graph import Graph
from graphopt.ir.solution import Solution, implied_transfers
from graphopt.solvers.base import Objective, Problem, Solver, SolverError, Tracker
from graphopt.solvers.device_orders import device_order_candidates
from graphopt.solvers.events import TransferPlacement, offer_op_orders
from graphopt.solvers.memory_schedulers import dfs_order

Balance = Literal["runtime", "memory"]
"""What a balanced partition spreads evenly: op runtimes or the bytes ops produce."""

_METIS_TOTAL_WEIGHT = 2**30
"""Edge and vertex weights are scaled to integers summing to about this (well inside METIS)."""

_EXHAUSTIVE_RELABEL_DEVICES = 8
"""Up to this many devices, the relabelling of parts that best matches the pins is exhaustive."""


# --------------------------------------------------------------------------- shared quantities
def vertex_weights(graph: Graph, balance: Balance | np.ndarray) -> np.ndarray:
    """Weight of each op under a balance mode, or explicit weights passed through.

    Args:
        graph: the graph.
        balance: "runtime" (seconds), "memory" (bytes of the tensors the op produces), or an
            [n_ops] array of weights (e.g. `memory_weights`).

    Returns:
        [n_ops] float64 weights.
    """
    if isinstance(balance, np.ndarray):
        if (
            balance.shape != (graph.n_ops,)
            or not np.all(np.isfinite(balance))
            or np.any(balance < 0)
        ):
            raise SolverError(f"weights must be {graph.n_ops} finite numbers >= 0")
        return balance.astype(np.float64)
    if balance == "runtime":
        return np.asarray(graph.op_runtime, dtype=np.float64)
    if balance == "memory":
        return np.bincount(
            graph.tensor_producer,
            weights=graph.tensor_size.astype(np.float64),
            minlength=graph.n_ops,
        )
    raise SolverError(f"balance must be 'runtime' or 'memory', got {balance!r}")


def memory_weights(graph: Graph, activation_scale: float) -> np.ndarray:
    """[n_ops] persistent and graph output bytes an op produces in full plus its other bytes scaled.

    A persistent tensor (a weight) sits on its producer's device for the whole run, so spreading
    those bytes evenly is what lowers the peak of a real model on several devices; a graph
    output sits there from its step to the last, so all of them meet at the end; activations
    come and go, so they count only in part (`activation_scale` in [0, 1]). Several scales are
    tried, since the right one depends on how much of the peak the activations make.
    """
    size = graph.tensor_size.astype(np.float64)
    held = graph.tensor_persistent | graph.tensor_output
    weight = np.where(held, size, activation_scale * size)
    return np.bincount(graph.tensor_producer, weights=weight, minlength=graph.n_ops)


def transfer_volume(graph: Graph, placement: np.ndarray, n_devices: int) -> int:
    """Bytes moved by the transfers a placement implies (the partitioning objective).

    Args:
        graph: the graph.
        placement: [n_ops] device of each op.
        n_devices: number of devices d.

    Returns:
        Sum of tensor sizes over the implied transfers.
    """
    codes = implied_transfers(graph, placement, n_devices)
    return int(graph.tensor_size[(codes - graph.n_ops) // n_devices].sum())


def device_loads(
    graph: Graph, placement: np.ndarray, n_devices: int, balance: Balance
) -> np.ndarray:
    """Total op weight on each device.

    Returns:
        [n_devices] float64 loads.
    """
    return np.bincount(
        np.asarray(placement, dtype=np.int64),
        weights=vertex_weights(graph, balance),
        minlength=n_devices,
    )


def load_limit(weights: np.ndarray, n_devices: int, imbalance: float) -> float:
    """Largest load a device may carry in a balanced partition (module docstring).

    Args:
        weights: [n_ops] op weights.
        n_devices: number of devices d.
        imbalance: allowed relative excess over the average load.

    Returns:
        max((1 + imbalance) W / d, W / d + w_max).
    """
    total = float(weights.sum())
    heaviest = float(weights.max()) if weights.size else 0.0
    return max((1.0 + imbalance) * total / n_devices, total / n_devices + heaviest)


def _checked_pins(graph: Graph, n_devices: int, pinned: np.ndarray | None) -> np.ndarray:
    """[n_ops] int64 pinned device of each op, -1 where free."""
    if pinned is None:
        return np.full(graph.n_ops, -1, dtype=np.int64)
    pins = np.asarray(pinned, dtype=np.int64).reshape(-1)
    if pins.shape[0] != graph.n_ops or np.any((pins < -1) | (pins >= n_devices)):
        raise SolverError(f"pinned must hold {graph.n_ops} devices in [-1, {n_devices})")
    return pins


@dataclass(frozen=True)
class _Hypergraph:
    """Tensors as nets over ops (pins: producer first, then consumers), in CSR both ways."""

    net_ptr: np.ndarray
    net_pin: np.ndarray
    net_weight: np.ndarray
    vertex_ptr: np.ndarray
    vertex_net: np.ndarray


def _hypergraph(graph: Graph) -> _Hypergraph:
    """Nets of the tensors that can cost anything: non-empty and consumed."""
    n_consumers = np.diff(graph.consumer_ptr)
    nets = np.flatnonzero((n_consumers > 0) & (graph.tensor_size > 0))
    sizes = n_consumers[nets] + 1
    net_ptr = np.zeros(nets.shape[0] + 1, dtype=np.int64)
    np.cumsum(sizes, out=net_ptr[1:])
    net_pin = np.empty(int(net_ptr[-1]), dtype=np.int64)
    net_pin[net_ptr[:-1]] = graph.tensor_producer[nets]
    consumer_slot = np.ones(int(net_ptr[-1]), dtype=bool)
    consumer_slot[net_ptr[:-1]] = False
    starts, ends = graph.consumer_ptr[nets], graph.consumer_ptr[nets + 1]
    net_pin[consumer_slot] = graph.consumer_op[_ranges(starts, ends)]
    net_of_pin = np.repeat(np.arange(nets.shape[0], dtype=np.int64), sizes)
    by_vertex = np.argsort(net_pin, kind="stable")
    vertex_ptr = np.zeros(graph.n_ops + 1, dtype=np.int64)
    np.cumsum(np.bincount(net_pin, minlength=graph.n_ops), out=vertex_ptr[1:])
    return _Hypergraph(
        net_ptr=net_ptr,
        net_pin=net_pin,
        net_weight=graph.tensor_size[nets].astype(np.int64),
        vertex_ptr=vertex_ptr,
        vertex_net=net_of_pin[by_vertex],
    )


def _ranges(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Concatenation of arange(starts[i], ends[i]) over i."""
    lengths = ends - starts
    offsets = np.repeat(starts - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
    return np.arange(int(lengths.sum()), dtype=np.int64) + offsets


# ------------------------------------------------------------------------------ gain heaps
@numba.njit(cache=True)
def _before(key: np.ndarray, tie: np.ndarray, u: int, v: int) -> bool:
    """Heap order: larger gain first, then smaller random tie-break."""
    return key[u] > key[v] or (key[u] == key[v] and tie[u] < tie[v])


@numba.njit(cache=True)
def _sift_up(heap: np.ndarray, where: np.ndarray, key: np.ndarray, tie: np.ndarray, i: int) -> None:
    v = heap[i]
    while i > 0:
        parent = (i - 1) // 2
        u = heap[parent]
        if not _before(key, tie, v, u):
            break
        heap[i] = u
        where[u] = i
        i = parent
    heap[i] = v
    where[v] = i


@numba.njit(cache=True)
def _sift_down(
    heap: np.ndarray, where: np.ndarray, key: np.ndarray, tie: np.ndarray, size: int, i: int
) -> None:
    v = heap[i]
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        if child + 1 < size and _before(key, tie, heap[child + 1], heap[child]):
            child += 1
        u = heap[child]
        if not _before(key, tie, u, v):
            break
        heap[i] = u
        where[u] = i
        i = child
    heap[i] = v
    where[v] = i


@numba.njit(cache=True)
def _heap_remove(
    heap: np.ndarray, where: np.ndarray, key: np.ndarray, tie: np.ndarray, size: int, v: int
) -> int:
    """Removes v from the heap; returns the new size."""
    i = where[v]
    where[v] = -1
    size -= 1
    if i == size:
        return size
    last = heap[size]
    heap[i] = last
    where[last] = i
    _sift_up(heap, where, key, tie, i)
    _sift_down(heap, where, key, tie, size, where[last])
    return size


@numba.njit(cache=True)
def _heap_change(
    heap: np.ndarray,
    where: np.ndarray,
    key: np.ndarray,
    tie: np.ndarray,
    size: int,
    v: int,
    delta: int,
) -> None:
    """Adds delta to the gain of v, which is in the heap."""
    key[v] += delta
    if delta > 0:
        _sift_up(heap, where, key, tie, where[v])
    else:
        _sift_down(heap, where, key, tie, size, where[v])


# ----------------------------------------------------------------------- Fiduccia-Mattheyses
@numba.njit(cache=True)
def _overload(load: np.ndarray, cap: np.ndarray) -> float:
    return max(load[0] - cap[0], 0.0) + max(load[1] - cap[1], 0.0)


@numba.njit(cache=True)
def _bisection_cut(
    net_ptr: np.ndarray,
    net_pin: np.ndarray,
    net_weight: np.ndarray,
    side: np.ndarray,
    active: np.ndarray,
) -> int:
    """Weight of the nets with active pins on both sides."""
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
def _fm_refine(
    net_ptr: np.ndarray,
    net_pin: np.ndarray,
    net_weight: np.ndarray,
    vertex_ptr: np.ndarray,
    vertex_net: np.ndarray,
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
            heaps[s, sizes[s]] = v
            where[v] = sizes[s]
            sizes[s] += 1
            _sift_up(heaps[s], where, gain, tie, sizes[s] - 1)

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
                    sizes[s] = _heap_remove(heaps[s], where, gain, tie, sizes[s], v)
            if chosen < 0:
                break
            v = chosen
            f = side[v]
            t = 1 - f
            sizes[f] = _heap_remove(heaps[f], where, gain, tie, sizes[f], v)
            total_gain += gain[v]
            side[v] = t
            for i in range(vertex_ptr[v], vertex_ptr[v + 1]):
                e = vertex_net[i]
                w = net_weight[e]
                if count[e, t] == 0:
                    for k in range(net_ptr[e], net_ptr[e + 1]):
                        u = net_pin[k]
                        if where[u] >= 0:
                            _heap_change(heaps[side[u]], where, gain, tie, sizes[side[u]], u, w)
                elif count[e, t] == 1:
                    for k in range(net_ptr[e], net_ptr[e + 1]):
                        u = net_pin[k]
                        if u != v and active[u] and side[u] == t:
                            if where[u] >= 0:
                                _heap_change(heaps[t], where, gain, tie, sizes[t], u, -w)
                            break
                count[e, f] -= 1
                count[e, t] += 1
                if count[e, f] == 0:
                    for k in range(net_ptr[e], net_ptr[e + 1]):
                        u = net_pin[k]
                        if where[u] >= 0:
                            _heap_change(heaps[side[u]], where, gain, tie, sizes[side[u]], u, -w)
                elif count[e, f] == 1:
                    for k in range(net_ptr[e], net_ptr[e + 1]):
                        u = net_pin[k]
                        if active[u] and side[u] == f:
                            if where[u] >= 0:
                                _heap_change(heaps[f], where, gain, tie, sizes[f], u, w)
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
def _grow_side_zero(
    net_ptr: np.ndarray,
    net_pin: np.ndarray,
    vertex_ptr: np.ndarray,
    vertex_net: np.ndarray,
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


# --------------------------------------------------------------------------- k-way refinement
@numba.njit(cache=True)
def _kway_refine(
    net_ptr: np.ndarray,
    net_pin: np.ndarray,
    net_weight: np.ndarray,
    vertex_ptr: np.ndarray,
    vertex_net: np.ndarray,
    weight: np.ndarray,
    part: np.ndarray,
    movable: np.ndarray,
    n_devices: int,
    cap: float,
    visit_order: np.ndarray,
    max_passes: int,
) -> None:
    """Greedy k-way boundary refinement of the (lambda - 1) volume, in place on `part`.

    Visits the movable ops in `visit_order` and moves each to the device with the largest
    positive gain that has room; an op on an overloaded device moves to the best device with
    room whatever its gain, which restores balance where pins or METIS left it broken.
    """
    n_nets = net_ptr.shape[0] - 1
    count = np.zeros((n_nets, n_devices), dtype=np.int64)
    for e in range(n_nets):
        for i in range(net_ptr[e], net_ptr[e + 1]):
            count[e, part[net_pin[i]]] += 1
    load = np.zeros(n_devices)
    for v in range(weight.shape[0]):
        load[part[v]] += weight[v]
    connection = np.zeros(n_devices, dtype=np.int64)
    for _ in range(max_passes):
        moved = 0
        for v in visit_order:
            if not movable[v]:
                continue
            a = part[v]
            overloaded = load[a] > cap
            released = 0
            total = 0
            connection[:] = 0
            for i in range(vertex_ptr[v], vertex_ptr[v + 1]):
                e = vertex_net[i]
                w = net_weight[e]
                total += w
                if count[e, a] == 1:
                    released += w
                for b in range(n_devices):
                    if count[e, b] > 0:
                        connection[b] += w
            if not overloaded and released == 0:
                continue
            best = -1
            best_gain = 0
            for b in range(n_devices):
                if b == a or load[b] + weight[v] > cap:
                    continue
                g = released - total + connection[b]
                if (best < 0 and (overloaded or g > 0)) or (best >= 0 and g > best_gain):
                    best = b
                    best_gain = g
            if best < 0:
                continue
            for i in range(vertex_ptr[v], vertex_ptr[v + 1]):
                e = vertex_net[i]
                count[e, a] -= 1
                count[e, best] += 1
            load[a] -= weight[v]
            load[best] += weight[v]
            part[v] = best
            moved += 1
        if moved == 0:
            break


# -------------------------------------------------------------------------- partitioners
def _refine_kway(
    hypergraph: _Hypergraph,
    weights: np.ndarray,
    placement: np.ndarray,
    pins: np.ndarray,
    n_devices: int,
    imbalance: float,
    rng: np.random.Generator,
    max_passes: int,
) -> None:
    """Runs `_kway_refine` in place on `placement` with the balance limit of `imbalance`."""
    _kway_refine(
        hypergraph.net_ptr,
        hypergraph.net_pin,
        hypergraph.net_weight,
        hypergraph.vertex_ptr,
        hypergraph.vertex_net,
        weights,
        placement,
        pins < 0,
        n_devices,
        load_limit(weights, n_devices, imbalance),
        rng.permutation(placement.shape[0]),
        max_passes,
    )


def kernighan_lin_partition(
    graph: Graph,
    n_devices: int,
    balance: Balance | np.ndarray = "runtime",
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
    pins = _checked_pins(graph, n_devices, pinned)
    weights = vertex_weights(graph, balance)
    placement = np.zeros(graph.n_ops, dtype=np.int64)
    if n_devices == 1 or graph.n_ops == 0:
        return placement.astype(np.int32)
    hypergraph = _hypergraph(graph)
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
        _refine_kway(hypergraph, weights, placement, pins, n_devices, imbalance, rng, max_passes)
    return placement.astype(np.int32)


def _bisect(
    hypergraph: _Hypergraph,
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
        _grow_side_zero(
            hypergraph.net_ptr,
            hypergraph.net_pin,
            hypergraph.vertex_ptr,
            hypergraph.vertex_net,
            weights,
            side,
            active,
            movable,
            targets[0],
            seeds,
            start > 0,
        )
        _fm_refine(
            hypergraph.net_ptr,
            hypergraph.net_pin,
            hypergraph.net_weight,
            hypergraph.vertex_ptr,
            hypergraph.vertex_net,
            weights,
            side,
            active,
            movable,
            cap,
            rng.random(n),
            max_passes,
        )
        load = np.bincount(side[members], weights=weights[members], minlength=2)
        overload = float(np.maximum(load - cap, 0.0).sum())
        cut = _bisection_cut(
            hypergraph.net_ptr, hypergraph.net_pin, hypergraph.net_weight, side, active
        )
        if best_key is None or (overload, cut) < best_key:
            best_side, best_key = side, (overload, cut)
    assert best_side is not None
    return best_side


def metis_partition(
    graph: Graph,
    n_devices: int,
    balance: Balance | np.ndarray = "runtime",
    seed: int = 0,
    *,
    pinned: np.ndarray | None = None,
    imbalance: float = 0.05,
    max_passes: int = 16,
) -> np.ndarray:
    """Balanced placement with few transferred bytes from METIS, then pins and refinement.

    METIS partitions the op graph whose edge weights are the bytes of the tensors between two
    ops (it counts a tensor once per consumer device pair, not once per device); the result is
    relabelled to agree with the pins as much as possible, pinned ops are moved to their
    devices, and the k-way pass refines the exact transfer volume and restores balance.

    Args:
        graph: the graph.
        n_devices: number of devices d >= 1.
        balance: what each device gets a fair share of: "runtime", "memory" or weights.
        seed: METIS's random seed (also seeds the refinement's visit order).
        pinned: [n_ops] device each op must run on, or -1 where free; None when none is.
        imbalance: allowed relative excess of a device's load over the average.
        max_passes: most k-way refinement passes.

    Returns:
        [n_ops] int32 device of each op.
    """

    def split(hypergraph: _Hypergraph, weights: np.ndarray, pins: np.ndarray) -> np.ndarray | None:
        xadj, adjncy, edge_weights = _metis_graph(graph)
        if adjncy.size == 0:
            return None
        _, parts = pymetis.part_graph(
            n_devices,
            pymetis.CSRAdjacency(adj_starts=xadj, adjacent=adjncy),
            vweights=_integer_weights(weights),
            eweights=edge_weights,
            options=pymetis.Options(seed=seed, ufactor=max(1, round(1000 * imbalance))),
        )
        return _relabel_to_pins(np.asarray(parts, dtype=np.int64), pins, n_devices)

    return _partition(graph, n_devices, balance, seed, pinned, imbalance, max_passes, split)


def _metis_graph(graph: Graph) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Undirected op graph in METIS's CSR form, weights = bytes between the ops, scaled.

    Returns:
        xadj [n_ops + 1], adjncy [2m], eweights [2m] int64 (each edge listed both ways).
    """
    size = graph.tensor_size[graph.edge_tensor].astype(np.float64)
    src, dst = graph.edge_index
    keep = size > 0
    src, dst, size = src[keep], dst[keep], size[keep]
    low, high = np.minimum(src, dst), np.maximum(src, dst)
    pair, inverse = np.unique(low * graph.n_ops + high, return_inverse=True)
    pair_size = np.bincount(inverse, weights=size, minlength=pair.shape[0])
    scale = min(1.0, _METIS_TOTAL_WEIGHT / max(2.0 * float(pair_size.sum()), 1.0))
    pair_weight = np.maximum(np.rint(pair_size * scale), 1).astype(np.int64)
    a, b = pair // graph.n_ops, pair % graph.n_ops
    rows = np.concatenate([a, b])
    columns = np.concatenate([b, a])
    both = np.concatenate([pair_weight, pair_weight])
    order = np.argsort(rows, kind="stable")
    xadj = np.zeros(graph.n_ops + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=graph.n_ops), out=xadj[1:])
    return xadj, columns[order].astype(np.int64), both[order]


def _spread_by_weight(weights: np.ndarray, pins: np.ndarray, n_devices: int) -> np.ndarray:
    """Heaviest op first onto the least loaded device, pins respected.

    For what METIS cannot partition: graphs without edges, or with no more ops than parts.
    """
    placement = np.where(pins >= 0, pins, 0)
    load = np.bincount(placement[pins >= 0], weights=weights[pins >= 0], minlength=n_devices)
    free = np.flatnonzero(pins < 0)
    for op in free[np.argsort(-weights[free], kind="stable")]:
        device = int(np.argmin(load))
        placement[op] = device
        load[device] += weights[op]
    return placement


def _relabel_to_pins(parts: np.ndarray, pins: np.ndarray, n_devices: int) -> np.ndarray:
    """Renames parts to devices so that as many pinned ops as possible are already in place."""
    pinned = pins >= 0
    if not pinned.any():
        return parts
    agreement = np.zeros((n_devices, n_devices), dtype=np.int64)
    np.add.at(agreement, (parts[pinned], pins[pinned]), 1)
    if n_devices <= _EXHAUSTIVE_RELABEL_DEVICES:
        labellings = np.array(list(itertools.permutations(range(n_devices))), dtype=np.int64)
        score = agreement[np.arange(n_devices), labellings].sum(axis=1)
        mapping = labellings[int(np.argmax(score))]
    else:
        mapping = np.full(n_devices, -1, dtype=np.int64)
        taken = np.zeros(n_devices, dtype=bool)
        for flat in np.argsort(-agreement, axis=None, kind="stable"):
            part, device = divmod(int(flat), n_devices)
            if mapping[part] < 0 and not taken[device]:
                mapping[part] = device
                taken[device] = True
    return mapping[parts]


def hypergraph_partition(
    graph: Graph,
    n_devices: int,
    balance: Balance | np.ndarray = "runtime",
    seed: int = 0,
    *,
    pinned: np.ndarray | None = None,
    imbalance: float = 0.05,
    max_passes: int = 16,
) -> np.ndarray:
    """Balanced placement from Mt-KaHyPar, a multilevel hypergraph partitioner.

    Unlike METIS's op graph, the hypergraph's nets are the tensors themselves (pins: producer and
    consumers, weight: bytes), and Mt-KaHyPar minimizes the (lambda - 1) connectivity, which is
    exactly the transfer volume (module docstring). Pinned ops are fixed vertices. The k-way pass
    then restores this module's balance limit where the partitioner's own differs. It runs the
    deterministic-quality preset: the default one's result depends on earlier calls in the
    same process, which would make a seeded search unrepeatable.

    Args:
        graph: the graph.
        n_devices: number of devices d >= 1.
        balance: what each device gets a fair share of: "runtime", "memory" or weights.
        seed: Mt-KaHyPar's random seed (also seeds the refinement's visit order).
        pinned: [n_ops] device each op must run on, or -1 where free; None when none is.
        imbalance: allowed relative excess of a device's load over the average.
        max_passes: most k-way refinement passes.

    Returns:
        [n_ops] int32 device of each op.
    """

    def split(hypergraph: _Hypergraph, weights: np.ndarray, pins: np.ndarray) -> np.ndarray | None:
        if hypergraph.net_weight.size == 0:
            return None
        import mtkahypar

        initializer = _kahypar_initializer()
        context = initializer.context_from_preset(mtkahypar.PresetType.DETERMINISTIC_QUALITY)
        context.set_partitioning_parameters(
            n_devices, max(imbalance, 1e-3), mtkahypar.Objective.KM1
        )
        context.logging = False
        mtkahypar.set_seed(seed)
        net_bytes = hypergraph.net_weight.astype(np.float64)
        net_scale = min(1.0, _METIS_TOTAL_WEIGHT / max(float(net_bytes.sum()), 1.0))
        net_ptr = hypergraph.net_ptr.tolist()
        net_pin = hypergraph.net_pin.tolist()
        model = initializer.create_hypergraph(
            context,
            graph.n_ops,
            len(net_ptr) - 1,
            [net_pin[net_ptr[net] : net_ptr[net + 1]] for net in range(len(net_ptr) - 1)],
            _integer_weights(weights).tolist(),
            np.maximum(np.rint(net_bytes * net_scale), 1).astype(np.int64).tolist(),
        )
        if np.any(pins >= 0):
            model.add_fixed_vertices(pins.tolist(), n_devices)
        parts = model.partition(context)
        return np.array([parts.block_id(op) for op in range(graph.n_ops)], dtype=np.int64)

    return _partition(graph, n_devices, balance, seed, pinned, imbalance, max_passes, split)


def _integer_weights(weights: np.ndarray) -> np.ndarray:
    """[n_ops] int64 weights >= 1 summing to about `_METIS_TOTAL_WEIGHT`, for the partitioners."""
    total = float(weights.sum())
    scale = _METIS_TOTAL_WEIGHT / total if total > 0 else 1.0
    return np.maximum(np.rint(weights * scale), 1).astype(np.int64)


Split = Callable[[_Hypergraph, np.ndarray, np.ndarray], np.ndarray | None]
"""A partitioner's core: (hypergraph, weights, pins) -> [n_ops] parts, or None to spread."""


def _partition(
    graph: Graph,
    n_devices: int,
    balance: Balance | np.ndarray,
    seed: int,
    pinned: np.ndarray | None,
    imbalance: float,
    max_passes: int,
    split: Split,
) -> np.ndarray:
    """What METIS and Mt-KaHyPar runs share: checks, the trivial cases, pins and refinement.

    Graphs a partitioner cannot split (no edges, or no more ops than devices) are spread by
    weight instead; pinned ops are moved to their devices; the k-way pass restores balance.
    """
    if n_devices < 1:
        raise SolverError(f"devices must be an integer >= 1, got {n_devices}")
    pins = _checked_pins(graph, n_devices, pinned)
    weights = vertex_weights(graph, balance)
    if n_devices == 1 or graph.n_ops == 0:
        return np.zeros(graph.n_ops, dtype=np.int32)
    hypergraph = _hypergraph(graph)
    parts = None if graph.n_ops <= n_devices else split(hypergraph, weights, pins)
    placement = _spread_by_weight(weights, pins, n_devices) if parts is None else parts
    placement = np.where(pins >= 0, pins, placement)
    _refine_kway(
        hypergraph,
        weights,
        placement,
        pins,
        n_devices,
        imbalance,
        np.random.default_rng(seed),
        max_passes,
    )
    return placement.astype(np.int32)


@cache
def _kahypar_initializer() -> Any:
    """Mt-KaHyPar's initializer, imported on first use and started once with one thread."""
    import mtkahypar

    return mtkahypar.initialize(1, False)


# ------------------------------------------------------------------------------- solvers
@dataclass(frozen=True)
class GraphPartitionConfig:
    """Options of the graph partitioning solvers (the defaults are paper 001's GP+DFS)."""

    imbalances: tuple[float, ...] = (0.05,)
    """Allowed relative excesses of a device's load over the average; each gives a partition."""
    balances: tuple[Balance, ...] = ("runtime", "memory")
    """Balance modes tried; each gives one partition per imbalance."""
    activation_scales: tuple[float, ...] = ()
    """For peak memory, also balance `memory_weights` at each of these activation scales."""
    transfers: tuple[TransferPlacement, ...] = ("lazy", "eager")
    """Transfer placements tried on each order."""
    device_orders: bool = False
    """Beside the DFS order, try every compiler order and each device's best merged."""
    starts: int = 4
    """Initial splits per bisection (Kernighan-Lin only)."""
    max_passes: int = 16
    """Most refinement passes per bisection and for the k-way pass."""

    def __post_init__(self) -> None:
        for name in ("imbalances", "balances", "activation_scales", "transfers"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        if not self.imbalances or any(
            not math.isfinite(value) or value < 0 for value in self.imbalances
        ):
            raise SolverError(f"imbalances must be finite numbers >= 0, got {self.imbalances!r}")
        if not self.balances or any(b not in get_args(Balance) for b in self.balances):
            raise SolverError(f"balances must be 'runtime' and/or 'memory', got {self.balances}")
        if any(not 0.0 <= value <= 1.0 for value in self.activation_scales):
            raise SolverError(
                f"activation_scales must be numbers in [0, 1], got {self.activation_scales!r}"
            )
        if not self.transfers or any(t not in get_args(TransferPlacement) for t in self.transfers):
            raise SolverError(f"transfers must be 'lazy' and/or 'eager', got {self.transfers}")
        if self.starts < 1 or self.max_passes < 1:
            raise SolverError("starts and max_passes must be >= 1")


STRONG = GraphPartitionConfig(
    imbalances=(0.01, 0.05, 0.2),
    activation_scales=(0.0, 0.01, 0.1, 0.3, 1.0),
    device_orders=True,
)
"""Memory-aware partitioning: weights balanced at several activation scales and imbalances, and
every compiler order per device. The METIS and hypergraph solvers run it with the partitioners'
seed 0 whatever the search's seed, so the baselines inside `auto` are exactly the standalone
ones (weightings and imbalances, not seeds, make the candidates differ)."""


HYPERGRAPH = GraphPartitionConfig(
    imbalances=(0.01, 0.1),
    balances=("runtime",),
    activation_scales=(0.0, 0.1, 1.0),
    device_orders=True,
)
"""`STRONG` thinned to 8 partitions: Mt-KaHyPar takes about 0.4 s per partition of a 2,000-op
graph (METIS 0.02 s), so the hypergraph solver tries the weightings that win most often."""


def weightings(problem: Problem, config: GraphPartitionConfig) -> list[Balance | np.ndarray]:
    """What the partitions balance: the balance modes, and for peak memory `memory_weights`."""
    found: list[Balance | np.ndarray] = list(config.balances)
    if problem.objective is Objective.PEAK_MEMORY:
        found += [memory_weights(problem.graph, scale) for scale in config.activation_scales]
    return found


def offer_partition(
    problem: Problem, tracker: Tracker, placement: np.ndarray, config: GraphPartitionConfig
) -> None:
    """Offers a placement with the DFS order and, when configured, every device order."""
    graph, n_devices = problem.graph, problem.machine.n_devices
    depth_first = dfs_order(graph, placement, n_devices)
    orders: Iterable[np.ndarray] = [depth_first]
    if config.device_orders:
        others = device_order_candidates(problem, placement, {dfs_order: depth_first})
        orders = itertools.chain(orders, others)
    offer_op_orders(problem, tracker, placement, orders, config.transfers)


class _GraphPartitionSolver(Solver):
    """Partition for each weighting and imbalance, then order each device and offer."""

    objectives = frozenset(Objective)

    def __init__(self, config: GraphPartitionConfig | None = None) -> None:
        self.config = config or GraphPartitionConfig()

    @abstractmethod
    def partition(
        self,
        problem: Problem,
        balance: Balance | np.ndarray,
        imbalance: float,
        rng: np.random.Generator,
    ) -> np.ndarray:
        """[n_ops] device of each op for one weighting and imbalance."""

    def run(
        self,
        problem: Problem,
        tracker: Tracker,
        rng: np.random.Generator,
        initial: Sequence[Solution],
    ) -> None:
        """Offers each distinct partition with its orders and transfer placements."""
        seen: set[bytes] = set()
        for balance in weightings(problem, self.config):
            for imbalance in self.config.imbalances:
                placement = self.partition(problem, balance, imbalance, rng)
                if placement.tobytes() not in seen:
                    seen.add(placement.tobytes())
                    offer_partition(problem, tracker, placement, self.config)


class KernighanLinSolver(_GraphPartitionSolver):
    """GP+DFS with the Kernighan-Lin / Fiduccia-Mattheyses partitioner (paper 001, 4.2)."""

    name = "gp-kl"

    def partition(
        self,
        problem: Problem,
        balance: Balance | np.ndarray,
        imbalance: float,
        rng: np.random.Generator,
    ) -> np.ndarray:
        """[n_ops] device of each op from `kernighan_lin_partition`."""
        return kernighan_lin_partition(
            problem.graph,
            problem.machine.n_devices,
            balance,
            rng,
            pinned=problem.pinned,
            imbalance=imbalance,
            starts=self.config.starts,
            max_passes=self.config.max_passes,
        )


class _SeededSolver(_GraphPartitionSolver):
    """A partitioner run with seed 0 whatever the search's seed (see `STRONG`)."""

    default: ClassVar[GraphPartitionConfig]
    partitioner: ClassVar[Callable[..., np.ndarray]]

    def __init__(self, config: GraphPartitionConfig | None = None) -> None:
        super().__init__(config or self.default)

    def partition(
        self,
        problem: Problem,
        balance: Balance | np.ndarray,
        imbalance: float,
        rng: np.random.Generator,
    ) -> np.ndarray:
        """[n_ops] device of each op from the partitioner with seed 0."""
        return self.partitioner(
            problem.graph,
            problem.machine.n_devices,
            balance,
            0,
            pinned=problem.pinned,
            imbalance=imbalance,
            max_passes=self.config.max_passes,
        )


class MetisSolver(_SeededSolver):
    """METIS partitions balancing weights (`STRONG`), each device's best compiler order."""

    name = "gp-metis"
    default = STRONG
    partitioner = staticmethod(metis_partition)


class HypergraphSolver(_SeededSolver):
    """Mt-KaHyPar partitions balancing weights (`HYPERGRAPH`), each device's best compiler order."""

    name = "gp-hypergraph"
    default = HYPERGRAPH
    partitioner = staticmethod(hypergraph_partition)
