"""REGAL's policy p(y | G) and baseline b(G) (paper 001 equations 6 and 9).

An encoder (message passing, or GAS's LSTM) gives each op a representation h_v; one MLP per
Beta slot (each device's placement gene, the priority gene; paper 000's MLP_{a, i % (d+1)})
turns it into the logits of the quantized (m, v) pair, and one more into the elite bias's
logits. Actions are conditionally independent across ops given the h_v. The baseline is a
separate encoder whose representations are mean-pooled per graph:
b(G) = MLP_b(mean_v MLP_g(h_v)). Batches hold several graphs (`GraphBatch`).

Optionally (`anchor`) the mean logits of each Beta slot get a learned pull -a (m - t)^2 toward a
target level t read from the op's features: the op's share of the feature run's population on
that device for a placement gene, and one minus its expected schedule position for the
priority gene (early ops get high priorities). The start is then the heuristic "draw mutants
near where the feature run's population puts each op", and learning moves the strengths a
(one per slot) and the network around it. This is not in paper 001; with 4 levels the
heuristic alone beats uniform mutants for makespan, which the unanchored network, started
from uniform, does not find within a CPU training budget.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from graphopt.learning.batching import GraphBatch, graph_mean, graph_sum
from graphopt.learning.encoders.mlp import mlp
from graphopt.learning.encoders.mpnn import MPNNEncoder
from graphopt.learning.encoders.sequence import SequenceEncoder
from graphopt.learning.features import EDGE_FEATURE_NAMES, node_feature_names
from graphopt.learning.systems.regal.config import ENCODERS, PolicyConfig  # noqa: F401 (re-exported)


class RegalPolicy(nn.Module):
    """Per-op categorical action heads over an encoder, plus the baseline network.

    Args:
        config: the network's shape.
    """

    def __init__(self, config: PolicyConfig) -> None:
        super().__init__()
        self.config = config
        d, hidden = config.n_devices, config.hidden
        n_nodes = len(node_feature_names(d))
        self.encoder = self._encoder(n_nodes)
        self.baseline_encoder = self._encoder(n_nodes)
        k = config.actions.levels
        self.beta_heads = nn.ModuleList(
            mlp(hidden, hidden, 2 * k) for _ in range(config.actions.beta_slots(d))
        )
        self.bias_head = mlp(hidden, hidden, k) if config.actions.elite_bias else None
        self.anchor = None
        if config.anchor is not None:
            slots = config.actions.beta_slots(d)
            self.anchor = nn.Parameter(torch.full((slots,), float(config.anchor)))
        self.baseline_node = mlp(hidden, hidden)
        self.baseline_graph = mlp(hidden, hidden, 1)
        # Every op starts with the same most likely action, whose mutants are distributed like
        # uniform BRKGA's (only the ranks of iid keys matter; see actions.py), and samples
        # explore around it: a neutral start that learning moves only where rewards say so.
        for head in self.beta_heads:
            nn.init.zeros_(head[-1].weight)
            bias = torch.zeros(2, k)
            if self.anchor is None:
                bias[0, (k - 1) // 2] = bias[1, k // 2] = config.initial_mode_logit
            else:
                bias[1, 0] = config.initial_mode_logit
            head[-1].bias.data.copy_(bias.view(-1))
        if self.bias_head is not None:
            nn.init.zeros_(self.bias_head[-1].weight)
            nn.init.zeros_(self.bias_head[-1].bias)
            self.bias_head[-1].bias.data[round(0.4 * k)] = config.initial_mode_logit
        # The reward of uniform BRKGA is -1 by construction: start the baseline there.
        nn.init.constant_(self.baseline_graph[-1].bias, -1.0)

    def _encoder(self, n_nodes: int) -> nn.Module:
        config = self.config
        if config.encoder == "lstm":
            return SequenceEncoder(n_nodes, config.hidden)
        return MPNNEncoder(
            n_nodes, len(EDGE_FEATURE_NAMES), config.hidden, config.rounds, config.aggregation
        )

    def forward(self, batch: GraphBatch) -> Tensor:
        """Action logits [N, n_heads, k] (heads: per Beta slot m then v, then the elite bias)."""
        k = self.config.actions.levels
        h = self.encoder(batch)
        heads = [head(h).view(-1, 2, k) for head in self.beta_heads]
        if self.anchor is not None:
            heads = [torch.cat(heads, dim=1) + self._anchor_logits(batch.x)]
        if self.bias_head is not None:
            heads.append(self.bias_head(h).view(-1, 1, k))
        return torch.cat(heads, dim=1)

    def _anchor_logits(self, x: Tensor) -> Tensor:
        """[N, 2 * slots, k]: -a (m - t)^2 on each slot's mean head, 0 on its variance head."""
        assert self.anchor is not None
        k = self.config.actions.levels
        targets = [
            1.0 - x[:, cols] if flip else x[:, cols] for cols, flip in self.config.anchor_targets()
        ]
        target = torch.cat(targets, dim=1) * (k - 1)
        levels = torch.arange(k, dtype=x.dtype, device=x.device)
        pull = -self.anchor[None, :, None] * (levels - target[..., None]) ** 2
        return torch.stack([pull, torch.zeros_like(pull)], dim=2).flatten(1, 2)

    def baseline(self, batch: GraphBatch) -> Tensor:
        """[n_graphs] b(G), the expected reward the baseline network predicts.

        A graph without ops pools to zeros; the number of graphs comes from `ptr`, since a
        trailing graph without ops has no entry in `batch.batch`.
        """
        pooled = graph_mean(
            self.baseline_node(self.baseline_encoder(batch)), batch.batch, batch.ptr.shape[0] - 1
        )
        return self.baseline_graph(pooled).squeeze(-1)


def sample_actions(
    logits: Tensor, generator: torch.Generator | None = None, samples: int = 1
) -> Tensor:
    """[samples, N, n_heads] actions drawn independently from the categorical logits."""
    probabilities = torch.softmax(logits, dim=-1).reshape(-1, logits.shape[-1])
    drawn = torch.multinomial(probabilities, samples, replacement=True, generator=generator)
    return drawn.T.reshape(samples, *logits.shape[:-1])


def antithetic_actions(logits: Tensor, generator: torch.Generator | None, samples: int) -> Tensor:
    """[samples, N, n_heads] actions in antithetic pairs: sample i + samples/2 mirrors sample i.

    Each action is the inverse CDF of its categorical at a uniform u, its partner's at 1 - u:
    each sample is distributed as `sample_actions`' draws, and a pair's rewards are negatively
    correlated when the reward is monotone in the levels (paper 001's levels are ordered).
    """
    if samples % 2:
        raise ValueError(f"antithetic samples come in pairs, got {samples}")
    probabilities = torch.softmax(logits, dim=-1)
    cdf = probabilities.cumsum(dim=-1)
    u = torch.rand((samples // 2, *logits.shape[:-1], 1), generator=generator)
    u = torch.cat([u, 1.0 - u])
    drawn = (cdf.unsqueeze(0) < u).sum(dim=-1)
    return drawn.clamp(max=logits.shape[-1] - 1)


def greedy_actions(logits: Tensor) -> Tensor:
    """[N, n_heads] most likely actions (what a trained policy uses zero-shot)."""
    return logits.argmax(dim=-1)


def log_probability(logits: Tensor, actions: Tensor, graph_index: Tensor, n_graphs: int) -> Tensor:
    """[n_graphs] log p(y | G): the sum over a graph's ops and heads of log p(y_v)."""
    chosen = torch.log_softmax(logits, dim=-1).gather(-1, actions.unsqueeze(-1)).squeeze(-1)
    return graph_sum(chosen.sum(dim=1), graph_index, n_graphs)


def entropy(logits: Tensor, graph_index: Tensor, n_graphs: int) -> Tensor:
    """[n_graphs] mean entropy per op of the action distributions (a training diagnostic)."""
    log_p = torch.log_softmax(logits, dim=-1)
    per_op = -(log_p.exp() * log_p).sum(dim=(-1, -2))
    return graph_mean(per_op, graph_index, n_graphs)
