"""Greedy k-way boundary refinement of the (lambda - 1) volume (METIS-style), in numba.

Every partitioner ends with it: it polishes recursive bisection for d > 2 and restores this
package's balance limit where pins or an external partitioner left it broken.
"""

from __future__ import annotations

import numba
import numpy as np

from graphopt.solvers.partition.hypergraph import Hypergraph
from graphopt.solvers.partition.weights import load_limit


@numba.njit(cache=True)
def _kway_refine(
    hypergraph: Hypergraph,
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
    net_ptr, net_pin, net_weight, vertex_ptr, vertex_net = hypergraph
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


def refine_kway(
    hypergraph: Hypergraph,
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
        hypergraph,
        weights,
        placement,
        pins < 0,
        n_devices,
        load_limit(weights, n_devices, imbalance),
        rng.permutation(placement.shape[0]),
        max_passes,
    )
