"""The GFlowNet scheduling policy (paper 004 section 3.3, appendix D).

A Topoformer encodes the graph together with the partial schedule's per-op state features
(`gflownet.env`); separate MLP heads give the forward policy's logits over (ready op,
device) and the backward policy's logits over removable ops. The temperature enters as
log sigma, embedded by a two-layer ReLU MLP (eq. 29), and modulates the first linear layer of
every MLP, the encoder's and the heads' (FiLM, eq. 30). A third head pools the encoding of the
empty schedule into log Z(G, sigma), which only the trajectory-balance ablation uses.

`GraphEncodedPolicy` is the fast variant (`GFlowNetConfig.encoding` 'per-graph'): the graph is
encoded once, without the schedule, by a `SparseTopoformer`, and each step scores its
(ready op, device) candidates with light FiLM-conditioned heads on the op's encoding and the
pair's state features. Its heads are shared over devices, so one policy serves any device count.

The sampler that runs them on partial schedules is `sampling.py`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from graphopt.costmodels.machine import Machine
from graphopt.ir.graph import Graph
from graphopt.learning.encoders.sparse_topoformer import DagEdges, SparseTopoformer, dag_edges
from graphopt.learning.encoders.topoformer import FiLMLinear, Topoformer, relation_masks
from graphopt.learning.systems.gflownet.config import GFlowNetConfig
from graphopt.learning.systems.gflownet.env import (
    PAIR_FEATURES,
    STATIC_FEATURES,
    PartialSchedules,
    feature_names,
    static_features,
)


class _Head(nn.Module):
    """FiLM-conditioned linear -> ReLU -> linear, applied to every op."""

    def __init__(self, hidden: int, condition: int, outputs: int) -> None:
        super().__init__()
        self.lin1 = FiLMLinear(hidden, hidden, condition)
        self.lin2 = nn.Linear(hidden, outputs)

    def forward(self, h: Tensor, condition: Tensor) -> Tensor:
        return self.lin2(torch.relu(self.lin1(h, condition)))


class GFlowNetPolicy(nn.Module):
    """P_F(s' | s; sigma), P_B(s | s'; sigma) and log Z(G; sigma) over one Topoformer.

    Args:
        config: the network's shape.
    """

    def __init__(self, config: GFlowNetConfig) -> None:
        super().__init__()
        self.config = config
        hidden, condition = config.hidden, config.condition
        self.temperature = nn.Sequential(
            nn.Linear(1, condition), nn.ReLU(), nn.Linear(condition, condition), nn.ReLU()
        )
        n_features = len(feature_names(config.n_devices))
        self.encoder = Topoformer(n_features, hidden, config.layers, config.heads, condition)
        self.forward_head = _Head(hidden, condition, config.n_devices)
        self.backward_head = _Head(hidden, condition, 1)
        self.log_z_head = _Head(hidden, condition, 1)
        self.prior_weights = _prior_weights(config)

    def serves(self, n_devices: int) -> bool:
        """Whether the policy places on `n_devices` devices (only its own count)."""
        return n_devices == self.config.n_devices

    def context(self, graph: Graph, machine: Machine) -> Tensor:
        """What `forward` needs of the graph whatever the state: its `relation_masks`."""
        return relation_masks(graph)

    def forward(
        self,
        features: Tensor,
        masks: Tensor,
        log_sigma: Tensor,
        rows: Tensor | None = None,
        prior: Tensor | None = None,
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Unmasked logits of both policies for B states of one graph.

        Args:
            features: [B, n, F] `PartialSchedules.features`.
            masks: `relation_masks` of the graph.
            log_sigma: [B] log temperature of each state's trajectory.
            rows: [B, r] the ops whose logits are wanted (None: all n); the rest of the graph
                is still encoded, as context.
            prior: [B, n, d, 2] `PartialSchedules.list_prior`, needed with the 'list' prior.

        Returns:
            (forward logits [B, r, d], backward logits [B, r], encoding [B, r, hidden]).
        """
        condition = self.temperature(log_sigma[:, None])
        h = self.encoder(features, masks, condition, rows)
        forward = self.forward_head(h, condition)
        backward = self.backward_head(h, condition).squeeze(-1)
        if self.prior_weights is not None:
            if prior is None:
                raise ValueError("a policy with the 'list' prior needs the states' list_prior")
            if rows is not None:
                prior = prior.gather(1, rows[:, :, None, None].expand(-1, -1, *prior.shape[2:]))
            forward = forward + _prior_term(self.prior_weights, condition, prior)
        return forward, backward, h

    def state_prior(self, schedules: PartialSchedules) -> Tensor | None:
        """What `forward` needs as `prior` for the current states of `schedules`."""
        if self.prior_weights is None:
            return None
        return torch.from_numpy(schedules.list_prior())

    def log_partition(self, features: Tensor, masks: Tensor, log_sigma: Tensor) -> Tensor:
        """[B] log Z of the graph at each temperature, from the empty schedules' features."""
        condition = self.temperature(log_sigma[:, None])
        h = self.encoder(features, masks, condition)
        return self.log_z_head(h, condition).squeeze(-1).mean(dim=1)


def _prior_weights(config: GFlowNetConfig) -> nn.Linear | None:
    """The layer that weights list scheduling's preferences by temperature ('list' prior)."""
    if config.prior != "list":
        return None
    # softplus(0.5413) = 1: both preferences start at weight 1 at every temperature
    layer = nn.Linear(config.condition, 2)
    nn.init.zeros_(layer.weight)
    nn.init.constant_(layer.bias, math.log(math.e - 1.0))
    return layer


def _prior_term(weights: nn.Linear, condition: Tensor, prior: Tensor) -> Tensor:
    """[B, r, d] the weighted sum of [B, r, d, 2] list-scheduling preferences."""
    scale = nn.functional.softplus(weights(condition))
    return (prior * scale[:, None, None, :]).sum(dim=-1)


class _PairHead(nn.Module):
    """logit = w . relu(FiLM(A[op] + W p)) for each candidate op and its [.., k, P] features.

    At one temperature FiLM's scale and shift fold into A = W_h h and W (`fold`, once per
    batch of samples), so a step costs one small matmul over the pair features and a gather.
    The output layer starts at zero: an untrained policy adds nothing to its prior (with the
    'list' prior it samples as a randomized list scheduler; P_B starts uniform), and training
    learns what to change.
    """

    def __init__(self, hidden: int, condition: int, pair: int) -> None:
        super().__init__()
        self.op = nn.Linear(hidden, hidden)
        self.pair = nn.Linear(pair, hidden, bias=False)
        self.scale = nn.Linear(condition, hidden)
        self.shift = nn.Linear(condition, hidden)
        self.out = nn.Linear(hidden, 1)
        for layer in (self.scale, self.shift, self.out):
            nn.init.zeros_(layer.weight)
            nn.init.zeros_(layer.bias)

    def fold(self, h: Tensor, condition: Tensor) -> tuple[Tensor, Tensor]:
        """([n + 1, hidden] scale * A + shift per op, and a row for padding; [P, hidden] W')."""
        scale = 1.0 + self.scale(condition)
        table = self.op(h) * scale + self.shift(condition)
        padding = table.new_zeros(1, table.shape[1])
        return torch.cat([table, padding]), self.pair.weight.t() * scale

    def forward(self, folded: tuple[Tensor, Tensor], ops: Tensor, pairs: Tensor) -> Tensor:
        """[C, k] logits of C candidates `ops` (-1: padding) with pairs [C, k, P]."""
        table, weight = folded
        count, k, width = pairs.shape
        base = table[ops].repeat_interleave(k, dim=0)
        z = torch.addmm(base, pairs.reshape(count * k, width), weight).relu_()
        return torch.addmv(self.out.bias.expand(count * k), z, self.out.weight[0]).view(count, k)


@dataclass
class Prepared:
    """What every step of a walk at one temperature reuses.

    The folded heads (`_PairHead.fold`) and the prior's two weights (None without the 'list'
    prior).
    """

    forward: tuple[Tensor, Tensor]
    backward: tuple[Tensor, Tensor]
    prior: Tensor | None


class GraphEncodedPolicy(nn.Module):
    """P_F, P_B and log Z from one encoding of the graph and per-candidate heads ('per-graph').

    Args:
        config: the network's shape (`n_devices` is not part of it: any count is served).
    """

    def __init__(self, config: GFlowNetConfig) -> None:
        super().__init__()
        self.config = config
        hidden, condition = config.hidden, config.condition
        self.temperature = nn.Sequential(
            nn.Linear(1, condition), nn.ReLU(), nn.Linear(condition, condition), nn.ReLU()
        )
        self.encoder = SparseTopoformer(len(STATIC_FEATURES), hidden, config.layers, config.heads)
        self.forward_head = _PairHead(hidden, condition, len(PAIR_FEATURES))
        self.backward_head = _PairHead(hidden, condition, 1)
        self.log_z_head = _Head(hidden, condition, 1)
        self.prior_weights = _prior_weights(config)

    def serves(self, n_devices: int) -> bool:
        """Whether the policy places on `n_devices` devices (any count)."""
        return n_devices >= 1

    def context(self, graph: Graph, machine: Machine) -> tuple[Tensor, DagEdges]:
        """The graph's `static_features` on `machine` and its DAG edges, for `prepare`."""
        return torch.from_numpy(static_features(graph, machine)), dag_edges(graph)

    def encode(self, context: tuple[Tensor, DagEdges]) -> Tensor:
        """[n, hidden] the graph's encoding, which every state of every sample shares."""
        features, edges = context
        return self.encoder(features, edges)

    def prepare(self, context: tuple[Tensor, DagEdges], log_sigma: float) -> Prepared:
        """Encodes the graph and folds the heads at one temperature, for a whole walk."""
        h = self.encode(context)
        condition = self.temperature(torch.tensor([[log_sigma]], dtype=h.dtype))[0]
        prior = None
        if self.prior_weights is not None:
            prior = nn.functional.softplus(self.prior_weights(condition))
        return Prepared(
            self.forward_head.fold(h, condition), self.backward_head.fold(h, condition), prior
        )

    def forward_logits(
        self, prepared: Prepared, ops: Tensor, pairs: Tensor, prior: Tensor
    ) -> Tensor:
        """[C, d] P_F's unmasked logits of C candidates `ops` on every device.

        `pairs` and `prior` are `PartialSchedules.pair_features` of them.
        """
        logits = self.forward_head(prepared.forward, ops, pairs)
        if prepared.prior is not None:
            logits = logits + prior @ prepared.prior
        return logits

    def backward_logits(self, prepared: Prepared, ops: Tensor, features: Tensor) -> Tensor:
        """[B, d] P_B's unmasked logits of `PartialSchedules.removable`'s ops [B, d]."""
        batch, d = ops.shape
        flat = features.reshape(batch * d, 1, -1)
        return self.backward_head(prepared.backward, ops.reshape(-1), flat).view(batch, d)

    def log_partition(self, encoding: Tensor, log_sigma: Tensor) -> Tensor:
        """[B] log Z of the graph at each temperature, pooled from the graph's encoding."""
        condition = self.temperature(log_sigma[:, None])
        h = encoding[None].expand(condition.shape[0], -1, -1)
        return self.log_z_head(h, condition).squeeze(-1).mean(dim=1)


Policy = GFlowNetPolicy | GraphEncodedPolicy
"""Either network: the paper's, or the per-graph one."""


def build_policy(config: GFlowNetConfig) -> Policy:
    """The untrained network of `config.encoding`."""
    return GraphEncodedPolicy(config) if config.encoding == "per-graph" else GFlowNetPolicy(config)
