"""The tensors as nets of a hypergraph over the ops, which the partitioners cut.

The transfer volume of a placement is the (lambda - 1) connectivity of this hypergraph: a net
(a tensor; pins: its producer and its consumers) costs its bytes once per device it reaches
beyond its producer's.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from graphopt.ir.graph import Graph


class Hypergraph(NamedTuple):
    """Tensors as nets over ops (pins: producer first, then consumers), in CSR both ways.

    A NamedTuple, so that the numba kernels take it whole (and unpack it into locals).
    """

    net_ptr: np.ndarray
    net_pin: np.ndarray
    net_weight: np.ndarray
    vertex_ptr: np.ndarray
    vertex_net: np.ndarray


def tensor_hypergraph(graph: Graph) -> Hypergraph:
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
    return Hypergraph(
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
