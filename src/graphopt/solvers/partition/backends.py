"""The external partitioners: METIS (through pymetis) and Mt-KaHyPar, with pins and refinement.

METIS (Karypis and Kumar 1998) is the faster, usually weaker alternative to Kernighan-Lin that
paper 001 notes; Mt-KaHyPar partitions the tensors' hypergraph itself. Both share `_partition`:
the checks, the graphs they cannot split, the pins and the k-way pass that restores balance.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np
import pymetis

from graphopt.ir.graph import Graph
from graphopt.solvers.base import SolverError
from graphopt.solvers.partition.hypergraph import Hypergraph, tensor_hypergraph
from graphopt.solvers.partition.kway import refine_kway
from graphopt.solvers.partition.weights import Weighting, checked_pins, vertex_weights

_METIS_TOTAL_WEIGHT = 2**30
"""Edge and vertex weights are scaled to integers summing to about this (well inside METIS)."""

_EXHAUSTIVE_RELABEL_DEVICES = 8
"""Up to this many devices, the relabelling of parts that best matches the pins is exhaustive."""


def metis_partition(
    graph: Graph,
    n_devices: int,
    balance: Weighting = "runtime",
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

    def split(hypergraph: Hypergraph, weights: np.ndarray, pins: np.ndarray) -> np.ndarray | None:
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
    balance: Weighting = "runtime",
    seed: int = 0,
    *,
    pinned: np.ndarray | None = None,
    imbalance: float = 0.05,
    max_passes: int = 16,
) -> np.ndarray:
    """Balanced placement from Mt-KaHyPar, a multilevel hypergraph partitioner.

    Unlike METIS's op graph, the hypergraph's nets are the tensors themselves (pins: producer and
    consumers, weight: bytes), and Mt-KaHyPar minimizes the (lambda - 1) connectivity, which is
    exactly the transfer volume (`hypergraph`). Pinned ops are fixed vertices. The k-way pass
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

    def split(hypergraph: Hypergraph, weights: np.ndarray, pins: np.ndarray) -> np.ndarray | None:
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


Split = Callable[[Hypergraph, np.ndarray, np.ndarray], np.ndarray | None]
"""A partitioner's core: (hypergraph, weights, pins) -> [n_ops] parts, or None to spread."""


def _partition(
    graph: Graph,
    n_devices: int,
    balance: Weighting,
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
    pins = checked_pins(graph, n_devices, pinned)
    weights = vertex_weights(graph, balance)
    if n_devices == 1 or graph.n_ops == 0:
        return np.zeros(graph.n_ops, dtype=np.int32)
    hypergraph = tensor_hypergraph(graph)
    parts = None if graph.n_ops <= n_devices else split(hypergraph, weights, pins)
    placement = _spread_by_weight(weights, pins, n_devices) if parts is None else parts
    placement = np.where(pins >= 0, pins, placement)
    refine_kway(
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
