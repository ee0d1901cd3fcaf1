"""Topoformer: a Transformer encoder whose attention is masked by the graph's topology.

Gagrani et al. 2022 ("Neural topological ordering for computation graphs"), as paper 004 uses it
(appendix D): pre-LayerNorm layers h' = h + MHA(LN(h)), h'' = h' + MLP(LN(h')) with a ReLU MLP,
and no positional encoding: where an op sits in the graph reaches it only through the masks.
The heads are split among topological relations, each head attending only to the ops in its
relation to the query (and to the op itself, so that no row is empty): all ancestors, all
descendants, the ops that are neither (those that may run in parallel), direct predecessors and
direct successors. The first
linear layer of every MLP is modulated by an embedding of the temperature (FiLM, paper 004
eq. 9 and 30): lin1(h, e) = scale(e) * lin1(h) + shift(e).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from graphopt.ir.graph import Graph

RELATIONS = ("ancestors", "descendants", "unrelated", "parents", "children")
"""The topological relations attention heads are restricted to, in head order (round robin):
with three heads or more, each op sees what must run before it, what must run after it, and
what may run beside it."""


def relation_masks(graph: Graph) -> torch.Tensor:
    """[len(RELATIONS), n, n] bool: entry [r, i, j] when op i may attend to op j under relation r.

    Every relation includes the op itself. Takes O(n^2) memory, which bounds the graph sizes the
    encoder serves at once (a 1,000-op graph: 5 MB).
    """
    n = graph.n_ops
    eye = np.eye(n, dtype=bool)
    src, dst = graph.edge_index
    parents = eye.copy()
    parents[dst, src] = True
    children = eye.copy()
    children[src, dst] = True
    descendants = _unpack(graph.reachable_bits(forward=True), n) | eye
    ancestors = _unpack(graph.reachable_bits(forward=False), n) | eye
    unrelated = ~(ancestors | descendants) | eye
    return torch.from_numpy(np.stack([ancestors, descendants, unrelated, parents, children]))


def _unpack(bits: np.ndarray, n: int) -> np.ndarray:
    """[n, n] bool from `Graph.reachable_bits` rows."""
    if n == 0:
        return np.zeros((0, 0), dtype=bool)
    unpacked = np.unpackbits(np.ascontiguousarray(bits).view(np.uint8), axis=1, bitorder="little")
    return unpacked[:, :n].astype(bool)


class FiLMLinear(nn.Module):
    """A linear layer whose output is scaled and shifted by a conditioning embedding (FiLM).

    Scale starts at 1 and shift at 0 (their layers' weights are zero at initialization), so an
    untrained network ignores the condition rather than multiplying by noise.
    """

    def __init__(self, inputs: int, outputs: int, condition: int) -> None:
        super().__init__()
        self.linear = nn.Linear(inputs, outputs)
        self.scale = nn.Linear(condition, outputs)
        self.shift = nn.Linear(condition, outputs)
        for layer in (self.scale, self.shift):
            nn.init.zeros_(layer.weight)
            nn.init.zeros_(layer.bias)

    def forward(self, h: torch.Tensor, condition: torch.Tensor) -> torch.Tensor:
        """h: [B, n, inputs]; condition: [B, condition] -> [B, n, outputs].

        The scale is folded into a per-state weight ([B, inputs, outputs], small next to h), so
        one batched matmul replaces a linear layer and two passes over its output.
        """
        scale = 1.0 + self.scale(condition)
        weight = self.linear.weight.t()[None] * scale[:, None, :]
        bias = self.linear.bias * scale + self.shift(condition)
        return torch.baddbmm(bias[:, None, :], h, weight)


class TopoformerLayer(nn.Module):
    """One pre-LayerNorm layer: masked multi-head attention, then a FiLM-conditioned MLP."""

    def __init__(self, hidden: int, heads: int, condition: int) -> None:
        super().__init__()
        if hidden % heads:
            raise ValueError(f"hidden ({hidden}) must be a multiple of heads ({heads})")
        self.heads = heads
        self.norm_attention = nn.LayerNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.out = nn.Linear(hidden, hidden)
        self.norm_mlp = nn.LayerNorm(hidden)
        self.lin1 = FiLMLinear(hidden, 2 * hidden, condition)
        self.lin2 = nn.Linear(2 * hidden, hidden)

    def forward(
        self,
        h: torch.Tensor,
        masks: torch.Tensor,
        condition: torch.Tensor,
        rows: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """h: [B, n, hidden]; masks: [heads, n, n] bool (True: may attend).

        Returns [B, n, hidden], or with `rows` ([B, r] op indices) the r rows asked for: every
        op is still attended to, but only those rows are computed.
        """
        batch, n, hidden = h.shape
        q, k, v = self.qkv(self.norm_attention(h)).chunk(3, dim=-1)
        if rows is None:
            attn_mask = masks[None]
        else:
            index = rows[..., None].expand(-1, -1, hidden)
            q, h = q.gather(1, index), h.gather(1, index)
            attn_mask = masks[:, rows].transpose(0, 1)  # [B, heads, r, n]
        width = hidden // self.heads

        def split(x: torch.Tensor) -> torch.Tensor:
            return x.view(batch, x.shape[1], self.heads, width).transpose(1, 2)

        attended = F.scaled_dot_product_attention(split(q), split(k), split(v), attn_mask=attn_mask)
        h = h + self.out(attended.transpose(1, 2).reshape(batch, h.shape[1], hidden))
        mlp = self.lin2(torch.relu(self.lin1(self.norm_mlp(h), condition)))
        return h + mlp


class Topoformer(nn.Module):
    """Stacked `TopoformerLayer`s over per-op inputs, conditioned on an embedding.

    Args:
        inputs: features per op.
        hidden: width (a multiple of `heads`).
        layers: number of layers L.
        heads: attention heads per layer, assigned to `RELATIONS` in turn.
        condition: width of the conditioning embedding.
    """

    def __init__(self, inputs: int, hidden: int, layers: int, heads: int, condition: int) -> None:
        super().__init__()
        self.heads = heads
        self.embed = nn.Linear(inputs, hidden)  # h(0): affine, no activation (appendix D)
        self.layers = nn.ModuleList(
            TopoformerLayer(hidden, heads, condition) for _ in range(layers)
        )
        self.norm = nn.LayerNorm(hidden)

    def head_masks(self, masks: torch.Tensor) -> torch.Tensor:
        """[heads, n, n]: each head's relation mask, relations taken in turn."""
        index = torch.arange(self.heads) % masks.shape[0]
        return masks[index]

    def forward(
        self,
        x: torch.Tensor,
        masks: torch.Tensor,
        condition: torch.Tensor,
        rows: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """x: [B, n, inputs]; masks: `relation_masks`; condition: [B, condition].

        Returns [B, n, hidden], or the [B, r, hidden] of `rows` ([B, r] op indices): the last
        layer then computes only the ops a policy needs, the others serving as keys and values.
        """
        per_head = self.head_masks(masks)
        h = self.embed(x)
        for depth, layer in enumerate(self.layers):
            h = layer(h, per_head, condition, rows if depth == len(self.layers) - 1 else None)
        return self.norm(h)
