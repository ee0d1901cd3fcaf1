"""REGAL's message-passing encoder (paper 001 equations 1-5, paper 000 appendix A.3).

h_v^0 = MLP_n(x_v) and h_e = MLP_e(x_e); each of T rounds computes a forward message
MLP_msg([h_s, h_t, h_e]) delivered to the edge's target and a backward message
MLP'_msg([h_s, h_t, h_e]) delivered to its source, and updates
h_v = MLP_node([h_v, aggregated messages]). The MLPs are shared across rounds, so a trained
encoder runs any number of rounds' worth of graph, and messages are aggregated by mean (A.5),
so that a node's scale does not grow with its degree on graphs larger than any seen in training.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch_geometric.data import Batch
from torch_geometric.utils import scatter

from graphopt.learning.encoders.mlp import mlp


class DirectedMessages(nn.Module):
    """Messages along edges (forward) or against them (backward), from both ends and the edge.

    Gathers and scatters directly (torch_geometric's `scatter`) rather than through
    `MessagePassing.propagate`, whose per-call bookkeeping cost more than the arithmetic on the
    graphs REGAL sees: the forward pass is on every solve's critical path.

    Shapes:
        pairs: [E, 3H] the edges' [h_source, h_target, h_edge]; at: [E] the node each message
        goes to -> [N, H] aggregated messages.
    """

    def __init__(self, hidden: int, aggregation: str) -> None:
        super().__init__()
        self.aggregation = aggregation
        self.message_mlp = mlp(3 * hidden, hidden)

    def forward(self, pairs: Tensor, at: Tensor, n_nodes: int) -> Tensor:
        """MLP of each edge's [h_source, h_target, h_edge], aggregated at `at`."""
        return scatter(self.message_mlp(pairs), at, 0, n_nodes, self.aggregation)


class MPNNEncoder(nn.Module):
    """Node and edge encoders plus T rounds of bidirectional message passing.

    Args:
        node_features: F, columns of the node features.
        edge_features: columns of the edge features.
        hidden: state width (32 in paper 001).
        rounds: T, message-passing rounds (16 in paper 001; 0 ignores the graph's edges).
        aggregation: 'mean' or 'add' (equation 5's sum).
    """

    def __init__(
        self, node_features: int, edge_features: int, hidden: int, rounds: int, aggregation: str
    ) -> None:
        super().__init__()
        self.rounds = rounds
        self.node_encoder = mlp(node_features, hidden)
        self.edge_encoder = mlp(edge_features, hidden)
        self.forward_messages = DirectedMessages(hidden, aggregation)
        self.backward_messages = DirectedMessages(hidden, aggregation)
        self.update = mlp(2 * hidden, hidden)

    def forward(self, batch: Batch) -> Tensor:
        """Node representations [N, hidden] of a batch with x, edge_index and edge_attr."""
        h = self.node_encoder(batch.x)
        edge_h = self.edge_encoder(batch.edge_attr)
        source, target = batch.edge_index
        n_nodes = h.shape[0]
        for _ in range(self.rounds):
            pairs = torch.cat([h.index_select(0, source), h.index_select(0, target), edge_h], -1)
            messages = self.forward_messages(pairs, target, n_nodes) + self.backward_messages(
                pairs, source, n_nodes
            )
            h = self.update(torch.cat([h, messages], dim=-1))
        return h
