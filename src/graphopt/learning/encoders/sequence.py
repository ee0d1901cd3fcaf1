"""GAS, the graph-as-sequence baseline of paper 001 section 4.2 (after Mirhoseini et al.).

The ops of each graph are read in a topological order by a bidirectional LSTM over their encoded
features; its outputs replace the message-passing representations, so the policy heads see each
op in the context of the sequence but not of the graph's edges.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_sequence, unpack_sequence

from graphopt.learning.batching import GraphBatch
from graphopt.learning.encoders.mlp import mlp


class SequenceEncoder(nn.Module):
    """MLP_n on each op, then a bidirectional LSTM along each graph's topological order.

    Args:
        node_features: F, columns of the node features.
        hidden: output width (each direction has hidden / 2 units).
    """

    def __init__(self, node_features: int, hidden: int) -> None:
        super().__init__()
        if hidden % 2:
            raise ValueError(f"the GAS encoder needs an even width, got {hidden}")
        self.node_encoder = mlp(node_features, hidden)
        self.lstm = nn.LSTM(hidden, hidden // 2, batch_first=True, bidirectional=True)

    def forward(self, batch: GraphBatch) -> Tensor:
        """Node representations [N, hidden] of a batch with x, topological_rank and ptr."""
        h = self.node_encoder(batch.x)
        ptr = batch.ptr.tolist()
        orders = [
            ptr[g] + torch.argsort(batch.topological_rank[ptr[g] : ptr[g + 1]])
            for g in range(len(ptr) - 1)
        ]
        # Graphs without ops have no sequence to read (and torch cannot pack an empty one).
        orders = [order for order in orders if order.numel()]
        result = h.new_empty(h.shape[0], 2 * self.lstm.hidden_size)
        if not orders:
            return result
        packed = pack_sequence([h[order] for order in orders], enforce_sorted=False)
        outputs, _ = self.lstm(packed)
        for order, output in zip(orders, unpack_sequence(outputs), strict=True):
            result[order] = output
        return result
