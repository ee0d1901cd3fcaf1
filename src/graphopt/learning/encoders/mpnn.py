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

from graphopt.learning.batching import GraphBatch
from graphopt.learning.encoders.mlp import mlp


class Aggregation:
    """Sums or means of per-edge messages at one end of each edge, set up once per forward pass.

    torch_geometric's `scatter` rebuilds the expanded index and, for a mean, the per-node
    message counts on every call; they depend only on the graph, so the encoder builds them
    once and its 2T aggregations each cost one scatter-add (and one division). The arithmetic
    is scatter's own: same scatter-add, same clamped counts.

    Args:
        at: [E] node each message goes to.
        nodes: [N, H] node states (the shape, dtype and device of the aggregates).
        aggregation: 'mean' or 'add'.
    """

    def __init__(self, at: Tensor, nodes: Tensor, aggregation: str) -> None:
        self.index = at.view(-1, 1).expand(-1, nodes.shape[1])
        self.n_nodes = nodes.shape[0]
        self.count: Tensor | None = None
        if aggregation == "mean":
            count = nodes.new_zeros(self.n_nodes).scatter_add_(0, at, nodes.new_ones(at.shape[0]))
            self.count = count.clamp(min=1).view(-1, 1)

    def __call__(self, messages: Tensor) -> Tensor:
        """[E, H] messages -> [N, H] their sum or mean at each node."""
        out = messages.new_zeros(self.n_nodes, messages.shape[1]).scatter_add_(
            0, self.index, messages
        )
        return out if self.count is None else out / self.count


class DirectedMessages(nn.Module):
    """Messages along edges (forward) or against them (backward), from both ends and the edge.

    Gathers and aggregates directly rather than through `MessagePassing.propagate`, whose
    per-call bookkeeping cost more than the arithmetic on the graphs REGAL sees: the forward
    pass is on every solve's critical path.

    Shapes:
        pairs: [E, 3H] the edges' [h_source, h_target, h_edge] -> [N, H] aggregated messages.
    """

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.message_mlp = mlp(3 * hidden, hidden)

    def forward(self, pairs: Tensor, aggregate: Aggregation) -> Tensor:
        """MLP of each edge's [h_source, h_target, h_edge], aggregated where `aggregate` says."""
        return aggregate(self.message_mlp(pairs))


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
        self.aggregation = aggregation
        self.node_encoder = mlp(node_features, hidden)
        self.edge_encoder = mlp(edge_features, hidden)
        self.forward_messages = DirectedMessages(hidden)
        self.backward_messages = DirectedMessages(hidden)
        self.update = mlp(2 * hidden, hidden)

    def forward(self, batch: GraphBatch) -> Tensor:
        """Node representations [N, hidden] of a batch with x, edge_index and edge_attr."""
        h = self.node_encoder(batch.x)
        edge_h = self.edge_encoder(batch.edge_attr)
        source, target = batch.edge_index
        at_target = Aggregation(target, h, self.aggregation)
        at_source = Aggregation(source, h, self.aggregation)
        for _ in range(self.rounds):
            pairs = torch.cat([h.index_select(0, source), h.index_select(0, target), edge_h], -1)
            messages = self.forward_messages(pairs, at_target) + self.backward_messages(
                pairs, at_source
            )
            h = self.update(torch.cat([h, messages], dim=-1))
        return h
