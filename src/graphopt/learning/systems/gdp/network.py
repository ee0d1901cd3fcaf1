"""GDP's placement policy (paper 003 section 3; GO paper 002 section 4): every op's device at once.

GraphSAGE embeds each op (`encoders.graphsage`); a placer reads the ops in topological order in
segments, Transformer-XL style: each segment attends to itself and to the previous segment's
states, kept as a memory without gradient, and no positional encoding is added (the order is in
the features and the memory). Parameter superposition (GDP eq. 4) conditions every placer layer
on the graph: its input is scaled feature-wise by 1 + tanh(W c), with c the mean-pooled op
embedding plus an embedding of the device count d; W starts at zero, so an untrained network is
the plain placer, and one network serves many graphs and every d in 2..max_devices. The head
gives each op logits over max_devices devices, those >= d masked out; ops are placed
independently given the states, so one forward pass samples any number of placements. Two
optional learned priors shape the logits: a pull toward a split along the topological order
(`pipeline_prior`), and toward a classical placement given with the graph
(`partition_prior`, `placement_hint`), which the shipped policy starts from.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from graphopt.learning.batching import GraphBatch, graph_mean
from graphopt.learning.encoders.graphsage import GraphSAGEEncoder
from graphopt.learning.encoders.mlp import mlp
from graphopt.learning.placement.features import PLACEMENT_FEATURE_NAMES
from graphopt.learning.systems.gdp.config import GDPConfig


class SegmentLayer(nn.Module):
    """One placer layer: conditioned input, attention over [memory, segment], feed-forward."""

    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        self.modulation = nn.Linear(hidden, hidden)
        nn.init.zeros_(self.modulation.weight)
        nn.init.zeros_(self.modulation.bias)
        self.attention = nn.MultiheadAttention(hidden, heads, batch_first=True)
        self.attention_norm = nn.LayerNorm(hidden)
        self.feed_forward = mlp(hidden, 2 * hidden, hidden)
        self.feed_forward_norm = nn.LayerNorm(hidden)

    def forward(self, x: Tensor, memory: Tensor | None, condition: Tensor) -> Tensor:
        """[..., S, H] segment states -> [..., S, H], given [..., M, H] memory and [H] condition.

        The memory may be None; a leading dimension is a batch of samples (GO's task layers).
        """
        x = x * (1.0 + torch.tanh(self.modulation(condition)))
        context = x if memory is None else torch.cat([memory, x], dim=-2)
        batched = x.dim() == 3
        query, context = (x, context) if batched else (x[None], context[None])
        attended, _ = self.attention(query, context, context, need_weights=False)
        x = self.attention_norm(x + (attended if batched else attended[0]))
        return self.feed_forward_norm(x + self.feed_forward(x))


class GDPPolicy(nn.Module):
    """Placement logits of every op of a batch of graphs.

    Args:
        config: the network's shape.
    """

    min_devices = 2
    """Fewest devices it places onto (GO's network also schedules and fuses on one device)."""

    def __init__(self, config: GDPConfig) -> None:
        super().__init__()
        self.config = config
        hidden = config.hidden
        self.encoder = GraphSAGEEncoder(len(PLACEMENT_FEATURE_NAMES), hidden, config.sage_layers)
        self.graph_embedding = mlp(hidden, hidden)
        self.device_count = nn.Embedding(config.max_devices + 1, hidden)
        self.layers = nn.ModuleList(
            SegmentLayer(hidden, config.heads) for _ in range(config.placer_layers)
        )
        self.head = mlp(hidden, hidden, config.max_devices)
        self.prior_strength = learned_strength(config.pipeline_prior)
        self.hint_strength = learned_strength(config.partition_prior)

    def forward(self, batch: GraphBatch, n_devices: int, hint: Tensor | None = None) -> Tensor:
        """[N, max_devices] logits, -inf at devices >= n_devices.

        Args:
            batch: the graphs' features.
            n_devices: d, the devices to place onto.
            hint: [N] device of each op in a classical placement (`placement.hint`); required
                exactly when the config has a `partition_prior`.
        """
        placed, _ = self.trunk(batch, n_devices, hint)
        return self.placement_logits(self.head(placed), batch, n_devices, hint)

    def trunk(
        self, batch: GraphBatch, n_devices: int, hint: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """([N, H] op states after the placer layers, [G, H] each graph's condition)."""
        if not self.min_devices <= n_devices <= self.config.max_devices:
            raise ValueError(
                f"this policy places onto {self.min_devices}..{self.config.max_devices} devices, "
                f"got {n_devices}"
            )
        if (hint is None) != (self.hint_strength is None):
            wanted = "a partition hint" if hint is None else "no hint"
            raise ValueError(f"this policy takes {wanted}")
        h = self.encoder(batch)
        n_graphs = batch.ptr.shape[0] - 1
        condition = self.graph_embedding(graph_mean(h, batch.batch, n_graphs))
        condition = condition + self.device_count.weight[n_devices]
        placed = torch.empty_like(h)
        ptr = batch.ptr.tolist()
        for g in range(n_graphs):
            order = ptr[g] + torch.argsort(batch.topological_rank[ptr[g] : ptr[g + 1]])
            placed[order] = segmented(self.layers, h[order], condition[g], self.config.segment)
        return placed, condition

    def placement_logits(
        self, logits: Tensor, batch: GraphBatch, n_devices: int, hint: Tensor | None
    ) -> Tensor:
        """The head's [..., N, max_devices] logits with the priors added and devices >= d masked."""
        if self.prior_strength is not None:
            position = batch.x[:, PLACEMENT_FEATURE_NAMES.index("topological_position")]
            devices = torch.arange(self.config.max_devices, dtype=logits.dtype) + 0.5
            gap = devices[None, :] - n_devices * position[:, None]
            logits = logits - nn.functional.softplus(self.prior_strength) * gap.square()
        if self.hint_strength is not None and hint is not None:
            hinted = nn.functional.one_hot(hint.long(), self.config.max_devices).to(logits.dtype)
            logits = logits + nn.functional.softplus(self.hint_strength) * hinted
        masked = torch.arange(self.config.max_devices) >= n_devices
        return logits.masked_fill(masked, float("-inf"))


def segmented(layers: nn.ModuleList, ops: Tensor, condition: Tensor, segment: int) -> Tensor:
    """[..., n, H] op states in topological order through `layers`, Transformer-XL style.

    Each segment of `segment` ops attends to itself and, in every layer, to that layer's input
    of the previous segment, kept without gradient.
    """
    memories: list[Tensor | None] = [None] * len(layers)
    outputs = []
    for start in range(0, ops.shape[-2], segment):
        x = ops[..., start : start + segment, :]
        for index, layer in enumerate(layers):
            memory = memories[index]
            memories[index] = x.detach()
            x = layer(x, memory, condition)
        outputs.append(x)
    return torch.cat(outputs, dim=-2) if outputs else ops


def learned_strength(initial: float | None) -> nn.Parameter | None:
    """A learned strength kept > 0 as softplus(raw), starting at `initial`; None: no prior."""
    if initial is None:
        return None
    return nn.Parameter(raw_strength(initial))


def raw_strength(value: float) -> Tensor:
    """softplus^-1(value) (> 0), computed stably: the raw parameter of a strength `value`."""
    exact = torch.tensor(float(value), dtype=torch.float64)
    return (exact + torch.log(-torch.expm1(-exact))).float()
