"""What GDP's placement policy reads of a graph: static per-op features, no search needed.

GDP (paper 003 section 3.1) embeds each op from its type, output shape and adjacency. Here every
column is a number the contract defines, scaled per graph so that graphs of any size and unit
share one range: runtime, output and temp bytes, weights (persistent outputs), fan-in and
fan-out, and where the op sits in the graph (topological position, top and bottom levels of the
critical path, as fractions of the longest path). Edges carry the tensor's scaled size and
whether it is persistent. The policy learns placements from these; d is given to the network
separately, so one set of features serves every device count.
"""

from __future__ import annotations

import numpy as np

from graphopt.ir.graph import Graph
from graphopt.learning.features import GraphFeatures
from graphopt.solvers.list_scheduling import bottom_levels

PLACEMENT_FEATURE_NAMES = (
    "runtime",
    "output_bytes",
    "temp_bytes",
    "weight_bytes",
    "fan_in",
    "fan_out",
    "topological_position",
    "top_level",
    "bottom_level",
)
"""Columns of `placement_features(...).node`."""


def _scaled(values: np.ndarray) -> np.ndarray:
    """log1p(value / the graph's mean of the nonzero values): 0 for 0, about 0.7 for typical."""
    positive = values[values > 0]
    scale = float(positive.mean()) if positive.size else 1.0
    return np.log1p(values / scale)


def placement_features(graph: Graph) -> GraphFeatures:
    """The policy's input for one graph (`GraphFeatures`, columns `PLACEMENT_FEATURE_NAMES`)."""
    n = graph.n_ops
    size = graph.tensor_size.astype(np.float64)
    producer = graph.tensor_producer
    persistent = graph.tensor_persistent
    output_bytes = np.bincount(producer, weights=np.where(persistent, 0.0, size), minlength=n)
    weight_bytes = np.bincount(producer, weights=np.where(persistent, size, 0.0), minlength=n)
    src, dst = graph.edge_index
    fan_in = np.bincount(dst, minlength=n).astype(np.float64)
    fan_out = np.bincount(src, minlength=n).astype(np.float64)
    position = np.empty(n, dtype=np.float64)
    position[graph.topological_order] = np.arange(n) / max(n - 1, 1)
    runtime = graph.op_runtime.astype(np.float64)
    bottom = bottom_levels(graph)  # longest path from each op's start to the end
    longest = float(bottom.max(initial=0.0)) or 1.0
    top = np.zeros(n, dtype=np.float64)  # longest path from the start to each op's start
    for op in graph.topological_order.tolist():
        for successor in graph.successors(op).tolist():
            top[successor] = max(top[successor], top[op] + runtime[op])
    node = np.stack(
        [
            _scaled(runtime),
            _scaled(output_bytes),
            _scaled(graph.op_temp_memory.astype(np.float64)),
            _scaled(weight_bytes),
            np.log1p(fan_in),
            np.log1p(fan_out),
            position,
            top / longest,
            bottom / longest,
        ],
        axis=1,
    )
    edge_tensor = _edge_tensors(graph)
    edge = np.stack([_scaled(size)[edge_tensor], persistent[edge_tensor]], axis=1)
    rank = np.empty(n, dtype=np.int64)
    rank[graph.topological_order] = np.arange(n)
    return GraphFeatures(
        node=node.astype(np.float32),
        edge_index=np.stack([src, dst]).astype(np.int64),
        edge=edge.astype(np.float32),
        topological_rank=rank,
    )


def _edge_tensors(graph: Graph) -> np.ndarray:
    """[n_edges] the tensor each edge of `graph.edge_index` carries (the largest, if several)."""
    src, dst = graph.edge_index
    best: dict[tuple[int, int], int] = {}
    for t in range(graph.n_tensors):
        a = int(graph.tensor_producer[t])
        for b in graph.consumers(t).tolist():
            key = (a, b)
            if key not in best or graph.tensor_size[t] > graph.tensor_size[best[key]]:
                best[key] = t
    return np.array([best[(int(a), int(b))] for a, b in zip(src, dst, strict=True)], np.int64)
