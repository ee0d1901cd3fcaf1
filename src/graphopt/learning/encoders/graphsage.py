"""GDP's GraphSAGE encoder (paper 003 equations 2-3): torch-geometric's `SAGEConv`, in torch.

Each layer gathers a neighbourhood by max-pooling its projected neighbours,
h_N(v) = max_u sigma(W_pool h_u + b) (eq. 2, `project=True`, `aggr="max"`), and updates
h_v = l2-normalize(W [h_v, h_N(v)]) (eq. 3, `normalize=True`). Edges are read in both directions:
an op's placement depends on its producers and its consumers alike. Max pooling, unlike a sum,
keeps a node's scale independent of its degree, so one trained encoder reads graphs of any size.

`SAGELayer` is `SAGEConv(aggr="max", project=True, normalize=True)` written out in torch: the same
parameters under the same names, drawn from the same random stream, and the same kernels in the
same order, so checkpoints load unchanged and give the same outputs bit for bit
(`tests/learning/test_graphsage.py` compares them). Importing torch-geometric imports its datasets
and, through them, transformers: 1-2 s that every solve with a GDP or GO policy paid before its
first placement, inside the budget of `optimize --time` (issue 45).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from graphopt.learning.batching import GraphBatch
from graphopt.learning.encoders.mlp import mlp


class _Linear(nn.Linear):
    """A linear layer initialized as torch-geometric's `Linear` is, with its formulas."""

    def reset_parameters(self) -> None:
        """torch-geometric's default draws (`nn.Linear.__init__` calls this once, as it does)."""
        fan, a = self.in_features, math.sqrt(5)
        with torch.no_grad():
            bound = math.sqrt(6 / ((1 + a**2) * fan))
            self.weight.uniform_(-bound, bound)
            if self.bias is not None:
                self.bias.uniform_(-1.0 / math.sqrt(fan), 1.0 / math.sqrt(fan))


class SAGELayer(nn.Module):
    """One max-pool GraphSAGE layer: normalize(W_l max_u relu(W h_u + b) + W_r h_v).

    Args:
        hidden: width of its input and output states.
    """

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.lin = _Linear(hidden, hidden, bias=True)
        self.lin_l = _Linear(hidden, hidden, bias=True)
        self.lin_r = _Linear(hidden, hidden, bias=False)
        for layer in (self.lin, self.lin_l, self.lin_r):  # SAGEConv resets them once more
            layer.reset_parameters()

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        """States [N, hidden] from states x [N, hidden] and edges [2, E] (source, target)."""
        projected = self.lin(x).relu()
        messages = projected.index_select(0, edge_index[0])
        index = edge_index[1].view(-1, 1).expand_as(messages)
        pooled = messages.new_zeros(x.shape).scatter_reduce_(
            0, index, messages, reduce="amax", include_self=False
        )
        return F.normalize(self.lin_l(pooled) + self.lin_r(x), p=2.0, dim=-1)


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
        self.layers = nn.ModuleList(SAGELayer(hidden) for _ in range(layers))

    def forward(self, batch: GraphBatch) -> Tensor:
        """Node representations [N, hidden] of a batch with x and edge_index."""
        h = self.input(batch.x)
        edges = torch.cat([batch.edge_index, batch.edge_index.flip(0)], dim=1)
        for layer in self.layers:
            h = h + layer(h, edges)
        return h
