"""The GFlowNet scheduling policy (paper 004 section 3.3, appendix D).

A Topoformer encodes the graph together with the partial schedule's per-op state features
(`gflownet.env`); separate MLP heads give the forward policy's logits over (ready op,
device) and the backward policy's logits over removable ops. The temperature enters as
log sigma, embedded by a two-layer ReLU MLP (eq. 29), and modulates the first linear layer of
every MLP, the encoder's and the heads' (FiLM, eq. 30). A third head pools the encoding of the
empty schedule into log Z(G, sigma), which only the trajectory-balance ablation uses.

The sampler that runs it on partial schedules is `sampling.py`.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from graphopt.learning.encoders.topoformer import FiLMLinear, Topoformer
from graphopt.learning.systems.gflownet.config import GFlowNetConfig
from graphopt.learning.systems.gflownet.env import PartialSchedules, feature_names


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
        self.prior_weights: nn.Linear | None = None
        if config.prior == "list":
            # softplus(0.5413) = 1: both preferences start at weight 1 at every temperature
            self.prior_weights = nn.Linear(condition, 2)
            nn.init.zeros_(self.prior_weights.weight)
            nn.init.constant_(self.prior_weights.bias, math.log(math.e - 1.0))

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
            weights = nn.functional.softplus(self.prior_weights(condition))
            forward = forward + (prior * weights[:, None, None, :]).sum(dim=-1)
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
