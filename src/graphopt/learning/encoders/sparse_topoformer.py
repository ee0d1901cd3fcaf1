"""Sparse Topoformer: the Topoformer with attention restricted to each op's DAG neighbours.

The dense `Topoformer` builds [relations, n, n] masks and attends over every pair of ops, so its
time and memory grow as n^2 and a 50,000-op graph is out of reach. Here each head attends only to
the op's direct parents or direct children (and itself), computed over edge lists: scores per
edge, a softmax over the edges of each query op, values summed back with `index_add`. Time and
memory are O(edges x hidden), so the GFlowNet scheduler's fast policy can encode large graphs.
The layer is the dense one's without FiLM: pre-LayerNorm h' = h + MHA(LN(h)),
h'' = h' + MLP(LN(h')). Information travels one hop per layer, so an op sees only the ops within
`layers` hops of it (in either direction).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from graphopt.ir.graph import Graph

SPARSE_RELATIONS = ("parents", "children")
"""The relations heads attend over, in head order (head h takes relation h % 2); each includes
the op itself, so that every query has at least one key."""


@dataclass(frozen=True, eq=False)
class DagEdges:
    """Per relation, the (query op, key op) pairs attention runs over, as edge lists.

    `dst[r]` and `src[r]` are int64 [E_r] tensors for relation `SPARSE_RELATIONS[r]`, sorted by
    dst (then src), self loops included and each op pair once: two tensors between the same two
    ops are one edge, so a pair is not weighted twice in the softmax. `n` is the number of ops.
    (eq=False: comparing tensors field by field has no single truth value.)
    """

    dst: tuple[Tensor, ...]
    src: tuple[Tensor, ...]
    n: int


def dag_edges(graph: Graph) -> DagEdges:
    """The `DagEdges` of a graph, from `Graph.edge_index` in a few vectorized numpy passes."""
    n = graph.n_ops
    producer, consumer = graph.edge_index
    ops = np.arange(n, dtype=np.int64)
    base = max(n, 1)
    dst, src = [], []
    for query, key in ((consumer, producer), (producer, consumer)):  # parents, children
        # One int64 key per pair (n <= 2**30, so n * n fits): np.unique removes repeated pairs
        # and sorts by query op, then key op.
        pairs = np.unique(np.concatenate([query, ops]) * base + np.concatenate([key, ops]))
        dst.append(torch.from_numpy(pairs // base))
        src.append(torch.from_numpy(pairs % base))
    return DagEdges(dst=tuple(dst), src=tuple(src), n=n)


def _edge_attention(q: Tensor, k: Tensor, v: Tensor, dst: Tensor, src: Tensor) -> Tensor:
    """Attention of every head at once over one edge list: q, k, v [n, heads, width] -> same.

    Each query's scores are softmaxed over its own edges. The per-query max subtracted for
    stability is detached: softmax does not change when its inputs shift, so that path's
    gradient is zero anyway and skipping it avoids amax's backward.
    """
    n, heads, width = q.shape
    scores = (q[dst] * k[src]).sum(-1) / math.sqrt(width)  # [E, heads]
    peak = scores.new_full((n, heads), -math.inf).scatter_reduce(
        0, dst[:, None].expand(-1, heads), scores.detach(), "amax"
    )
    weights = torch.exp(scores - peak[dst])
    total = weights.new_zeros(n, heads).index_add(0, dst, weights)
    alpha = weights / total[dst]  # every query has its self loop: total >= 1
    return v.new_zeros(n, heads, width).index_add(0, dst, alpha[..., None] * v[src])


class SparseTopoformerLayer(nn.Module):
    """One pre-LayerNorm layer: edge-list multi-head attention, then a ReLU MLP."""

    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        if heads < 1 or hidden % heads:
            raise ValueError(f"hidden ({hidden}) must be a multiple of heads ({heads}), heads >= 1")
        self.heads = heads
        self.norm_attention = nn.LayerNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.out = nn.Linear(hidden, hidden)
        self.norm_mlp = nn.LayerNorm(hidden)
        self.lin1 = nn.Linear(hidden, 2 * hidden)
        self.lin2 = nn.Linear(2 * hidden, hidden)

    def forward(self, h: Tensor, edges: DagEdges) -> Tensor:
        """h: [n, hidden] -> [n, hidden]; head i attends over relation i % len(edges.dst)."""
        n, hidden = h.shape
        width = hidden // self.heads
        q, k, v = self.qkv(self.norm_attention(h)).view(n, 3, self.heads, width).unbind(1)
        relations = len(edges.dst)
        attended = h.new_empty(n, self.heads, width)
        # The heads of one relation (a strided slice) are computed together.
        for r in range(min(relations, self.heads)):
            heads = slice(r, None, relations)
            attended[:, heads] = _edge_attention(
                q[:, heads], k[:, heads], v[:, heads], edges.dst[r], edges.src[r]
            )
        h = h + self.out(attended.view(n, hidden))
        return h + self.lin2(torch.relu(self.lin1(self.norm_mlp(h))))


class SparseTopoformer(nn.Module):
    """Stacked `SparseTopoformerLayer`s over per-op inputs of one graph.

    Args:
        inputs: features per op.
        hidden: width (a multiple of `heads`).
        layers: number of layers, also how many hops away an op's output can see.
        heads: attention heads per layer, assigned to `SPARSE_RELATIONS` in turn.
    """

    def __init__(self, inputs: int, hidden: int, layers: int, heads: int) -> None:
        super().__init__()
        if layers < 0:
            raise ValueError(f"layers must be >= 0, got {layers}")
        self.inputs = inputs
        self.embed = nn.Linear(inputs, hidden)  # h(0): affine, no activation, as the dense one
        self.layers = nn.ModuleList(SparseTopoformerLayer(hidden, heads) for _ in range(layers))
        self.norm = nn.LayerNorm(hidden)

    def forward(self, x: Tensor, edges: DagEdges) -> Tensor:
        """x: [n, inputs]; edges: `dag_edges` of the graph -> [n, hidden]."""
        if x.shape != (edges.n, self.inputs):
            raise ValueError(
                f"x must be [n_ops, inputs] = [{edges.n}, {self.inputs}], got {list(x.shape)}"
            )
        if len(edges.dst) != len(SPARSE_RELATIONS) or len(edges.src) != len(SPARSE_RELATIONS):
            raise ValueError(f"edges must hold one edge list per relation {SPARSE_RELATIONS}")
        h = self.embed(x)
        for layer in self.layers:
            h = layer(h, edges)
        return self.norm(h)
