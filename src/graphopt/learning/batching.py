"""Batches of graph features: several graphs as one graph of disjoint parts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from graphopt.learning.features import GraphFeatures


@dataclass(frozen=True, eq=False)
class GraphBatch:
    """Several graphs' features as one graph of disjoint parts (what the networks read).

    Built directly rather than with torch_geometric's `Batch.from_data_list`, whose generic
    collation cost a solve more than the policy's whole output layer.

    Shapes:
        x: [N, F] float32 node features; edge_index: [2, E] int64 (ops numbered across the
        batch); edge_attr: [E, 2] float32; topological_rank: [N] int64 (within its graph);
        batch: [N] int64 graph of each op; ptr: [G + 1] int64 first op of each graph.
    """

    x: Tensor
    edge_index: Tensor
    edge_attr: Tensor
    topological_rank: Tensor
    batch: Tensor
    ptr: Tensor


def make_batch(features: Sequence[GraphFeatures]) -> GraphBatch:
    """One batch of several graphs' features (a lone graph's arrays, but for its edges, shared)."""
    sizes = np.array([f.node.shape[0] for f in features], dtype=np.int64)
    ptr = np.concatenate([[0], np.cumsum(sizes)])

    def joined(arrays: list[np.ndarray], axis: int = 0) -> Tensor:
        return torch.from_numpy(arrays[0] if len(arrays) == 1 else np.concatenate(arrays, axis))

    return GraphBatch(
        x=joined([f.node for f in features]),
        edge_index=joined(
            [f.edge_index + start for f, start in zip(features, ptr[:-1], strict=True)], axis=1
        ),
        edge_attr=joined([f.edge for f in features]),
        topological_rank=joined([f.topological_rank for f in features]),
        batch=torch.from_numpy(np.repeat(np.arange(len(features)), sizes)),
        ptr=torch.from_numpy(ptr),
    )


def graph_sum(values: Tensor, graph_index: Tensor, n_graphs: int) -> Tensor:
    """[n_graphs, ...] sum of per-op `values` [N, ...] over each graph's ops (0 for none).

    torch_geometric's `scatter` computes the same with the same kernels; calling it imported all
    of torch_geometric (seconds) into every process that loads a policy.
    """
    index = graph_index.view(-1, *([1] * (values.dim() - 1))).expand_as(values)
    return values.new_zeros((n_graphs, *values.shape[1:])).scatter_add_(0, index, values)


def graph_mean(values: Tensor, graph_index: Tensor, n_graphs: int) -> Tensor:
    """[n_graphs, ...] mean of per-op `values` [N, ...] over each graph's ops (0 for none)."""
    count = values.new_zeros(n_graphs).scatter_add_(
        0, graph_index, values.new_ones(values.shape[0])
    )
    total = graph_sum(values, graph_index, n_graphs)
    return total / count.clamp(min=1).view(-1, *([1] * (values.dim() - 1)))
