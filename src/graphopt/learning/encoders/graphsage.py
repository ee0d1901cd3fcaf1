"""GDP's GraphSAGE encoder (paper 003 equations 2-3) on torch-geometric's `SAGEConv`.

Each layer gathers a neighbourhood by max-pooling its projected neighbours,
h_N(v) = max_u sigma(W_pool h_u + b) (eq. 2, `project=True`, `aggr="max"`), and updates
h_v = l2-normalize(W [h_v, h_N(v)]) (eq. 3, `normalize=True`). Edges are read in both directions:
an op's placement depends on its producers and its consumers alike. Max pooling, unlike a sum,
keeps a node's scale independent of its degree, so one trained encoder reads graphs of any size.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch_geometric.nn import SAGEConv

from graphopt.learning.batching import GraphBatch
from graphopt.learning.encoders.mlp import mlp


class GraphSAGEEncoder(nn.Module):
    """An input MLP, then `layers` max-pool GraphSAGE layers, each with a residual connection.

    Args:
        node_features: F, columns of the node features.
        hidden: width of every state.
        layers: GraphSAGE layers (neighbourhood hops).
    """

    def __init__(self, node_features: int, hidden: int, layers: int) -> None:
        super().__init__()
        self.input = mlp(node_features, hidden)
        self.layers = nn.ModuleList(
            SAGEConv(hidden, hidden, aggr="max", project=True, normalize=True)
            for _ in range(layers)
        )

    def forward(self, batch: GraphBatch) -> Tensor:
        """Node representations [N, hidden] of a batch with x and edge_index."""
        h = self.input(batch.x)
        edges = torch.cat([batch.edge_index, batch.edge_index.flip(0)], dim=1)
        for layer in self.layers:
            h = h + layer(h, edges)
        return h
