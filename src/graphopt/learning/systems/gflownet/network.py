"""The GFlowNet scheduling policy (paper 004 section 3.3, appendix D) and its trajectory sampler.

A Topoformer encodes the graph together with the partial schedule's per-op state features
(`learning.envs.gflownet`); separate MLP heads give the forward policy's logits over (ready op,
device) and the backward policy's logits over removable ops. The temperature enters as
log sigma, embedded by a two-layer ReLU MLP (eq. 29), and modulates the first linear layer of
every MLP, the encoder's and the heads' (FiLM, eq. 30). A third head pools the encoding of the
empty schedule into log Z(G, sigma), which only the trajectory-balance ablation uses.

`sample_trajectories` runs the policy on a batch of partial schedules until they are complete,
summing log P_F of the actions taken and log P_B of undoing them: what the losses of
`learning.objectives` need. It records the actions, so that `replay_trajectories` can score the
same trajectories again under the policy as it is later (PPO's epochs over one batch).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from graphopt.costmodels.machine import Machine
from graphopt.ir.graph import Graph
from graphopt.learning.encoders.topoformer import FiLMLinear, Topoformer, relation_masks
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


@dataclass
class Trajectories:
    """B complete trajectories of one graph: their schedules and the policies' log-probabilities.

    Attributes:
        schedules: the complete schedules (`PartialSchedules`, `steps` == n).
        log_pf: [B] sum over steps of log P_F of the action taken (with gradient when sampled
            with one).
        log_pb: [B] sum over steps of log P_B of undoing it.
        log_sigma: [B] log temperature each trajectory was sampled at.
        actions: [B, n] int64 the action of each step, op * d + device.
        step_log_pf: [B, n] log P_F of each step's action (no gradient).
    """

    schedules: PartialSchedules
    log_pf: Tensor
    log_pb: Tensor
    log_sigma: Tensor
    actions: Tensor
    step_log_pf: Tensor


def sample_trajectories(
    policy: GFlowNetPolicy,
    graph: Graph,
    machine: Machine,
    batch: int,
    sigma: float | Tensor,
    generator: torch.Generator,
    masks: Tensor | None = None,
    pinned: np.ndarray | None = None,
    uniform_backward: bool = False,
) -> Trajectories:
    """Samples `batch` schedules of `graph` from P_F at temperature `sigma`, op by op.

    Each state is encoded once: its forward logits choose the next action and its backward
    logits give log P_B of undoing the action that led to it. Runs under the caller's grad mode
    (`torch.no_grad()` for inference).

    Args:
        policy: the policy; its `n_devices` must be the machine's.
        graph: the graph.
        machine: the proxy's machine.
        batch: number of trajectories B.
        sigma: the temperature (> 0), one for all or [B].
        generator: the only source of randomness, so equal seeds give equal schedules.
        masks: `relation_masks(graph)`, when the caller keeps them across calls.
        pinned: [n] device each op must run on, -1 where free (a problem's pins); the forward
            policy never offers another device to a pinned op.
        uniform_backward: log P_B of a fixed uniform choice among the removable ops instead of
            the backward head's (a GFlowNet may learn P_B or fix it).
    """
    d = _devices(policy, machine)
    schedules = PartialSchedules(graph, machine, batch)
    masks = relation_masks(graph) if masks is None else masks
    sigmas = torch.as_tensor(sigma, dtype=torch.float32).expand(batch)
    if not bool((sigmas > 0).all()):
        raise ValueError(f"temperature sigma must be > 0, got {float(sigmas.min())}")
    log_sigma = torch.log(sigmas)
    allowed = _allowed_devices(pinned, graph.n_ops, d)
    rows = torch.arange(batch)
    log_pf = torch.zeros(batch)
    log_pb = torch.zeros(batch)
    n = graph.n_ops
    actions = torch.empty(batch, n, dtype=torch.int64)
    step_log_pf = torch.empty(batch, n)
    last = None
    for step in range(n + 1):
        ready = torch.from_numpy(schedules.forward_mask())
        removable = torch.from_numpy(schedules.backward_mask())
        wanted, real = _candidate_rows(ready | removable)
        features = torch.from_numpy(schedules.features())
        outputs = policy(features, masks, log_sigma, wanted, policy.state_prior(schedules))
        forward, backward = _spread(outputs, wanted, real, n)
        if last is not None:
            scores = torch.zeros_like(backward) if uniform_backward else backward
            undo = scores.masked_fill(~removable, -math.inf).log_softmax(dim=1)
            log_pb = log_pb + undo[rows, last]
        if step == n:
            break
        offered = ready[:, :, None] if allowed is None else ready[:, :, None] & allowed
        logits = forward.masked_fill(~offered, -math.inf).reshape(batch, n * d)
        log_p = logits.log_softmax(dim=1)
        action = torch.multinomial(log_p.detach().exp(), 1, generator=generator).squeeze(1)
        taken = log_p[rows, action]
        log_pf = log_pf + taken
        actions[:, step] = action
        step_log_pf[:, step] = taken.detach()
        last = action // d
        schedules.step(last.numpy(), (action % d).numpy())
    return Trajectories(schedules, log_pf, log_pb, log_sigma, actions, step_log_pf)


@dataclass
class Replay:
    """Given trajectories scored under the current policy (`replay_trajectories`).

    Attributes:
        schedules: the complete schedules the actions build.
        log_pf: [B, n] log P_F of each step's action (with gradient when replayed with one).
        entropy: [B, n] entropy of P_F at each step's state.
    """

    schedules: PartialSchedules
    log_pf: Tensor
    entropy: Tensor


def replay_trajectories(
    policy: GFlowNetPolicy,
    graph: Graph,
    machine: Machine,
    actions: Tensor,
    sigma: float | Tensor,
    masks: Tensor | None = None,
) -> Replay:
    """Per-step log P_F and entropy of P_F along recorded trajectories, under the policy now.

    The actions are known, so the states are built first (a fresh `PartialSchedules` stepped
    through them) and the policy then scores all B x n states in one batched call: as fast as
    n calls of B states on one thread, and 5-6x faster with two threads on a loaded 2-core
    machine, where every call pays for their synchronization (25 trajectories of a 50-op graph,
    forward and backward: 1.2 s against 7.0 s). Memory grows with B x n states of n ops
    (attention: B x heads x n^3 scores in all), so callers split large batches into
    minibatches. The last layer computes only the ready ops' rows (sampling also computes the
    removable ones', for P_B), so the replayed log-probabilities equal the sampled ones up to
    float rounding.

    Args:
        policy: the policy.
        graph: the graph.
        machine: the proxy's machine.
        actions: [B, n] `Trajectories.actions`, op * d + device.
        sigma: the temperature (> 0) they were sampled at, one for all or [B].
        masks: `relation_masks(graph)`, when the caller keeps them.

    Raises:
        ActionError: an action that is not valid in its state.
        ValueError: a policy for another device count.
    """
    d, n = _devices(policy, machine), graph.n_ops
    batch = actions.shape[0]
    schedules = PartialSchedules(graph, machine, batch)
    masks = relation_masks(graph) if masks is None else masks
    log_sigma = torch.log(torch.as_tensor(sigma, dtype=torch.float32).expand(batch))
    features, ready, priors = [], [], []
    for step in range(n):
        features.append(schedules.features())
        ready.append(schedules.forward_mask())
        priors.append(policy.state_prior(schedules))
        schedules.step((actions[:, step] // d).numpy(), (actions[:, step] % d).numpy())
    # step-major: state (t, b) is row t * B + b
    states = torch.from_numpy(np.concatenate(features))
    can_add = torch.from_numpy(np.concatenate(ready))
    prior = None if priors[0] is None else torch.cat(priors)
    wanted, real = _candidate_rows(can_add)
    outputs = policy(states, masks, log_sigma.repeat(n), wanted, prior)
    forward, _ = _spread(outputs, wanted, real, n)
    logits = forward.masked_fill(~can_add[:, :, None], -math.inf).reshape(n * batch, n * d)
    log_p = logits.log_softmax(dim=1)
    taken = log_p.gather(1, actions.t().reshape(-1, 1)).view(n, batch).t()
    entropy = -(log_p.exp() * log_p.masked_fill(logits == -math.inf, 0.0)).sum(dim=1)
    return Replay(schedules, taken, entropy.view(n, batch).t())


def _devices(policy: GFlowNetPolicy, machine: Machine) -> int:
    """The machine's device count, if the policy places on that many."""
    d = machine.n_devices
    if policy.config.n_devices != d:
        raise ValueError(
            f"the policy places on {policy.config.n_devices} devices, the machine has {d}"
        )
    return d


def _allowed_devices(pinned: np.ndarray | None, n: int, d: int) -> Tensor | None:
    """[n, d] bool: the devices each op may be placed on (None: all, nothing pinned)."""
    if pinned is None or not (np.asarray(pinned) >= 0).any():
        return None
    pins = torch.as_tensor(np.asarray(pinned, dtype=np.int64).reshape(n))
    return (pins[:, None] < 0) | (pins[:, None] == torch.arange(d)[None, :])


def _candidate_rows(candidates: Tensor) -> tuple[Tensor, Tensor]:
    """([B, r] the ops whose logits a step needs, ready or removable; [B, r] which are real).

    Rows are padded with the row's first op (every state has a ready or a removable op), whose
    copies `_spread` then drops, so that they add no gradient.
    """
    counts = candidates.sum(dim=1)
    width = max(int(counts.max()), 1)
    order = torch.argsort((~candidates).to(torch.int8), dim=1, stable=True)[:, :width]
    real = torch.arange(width)[None, :] < counts[:, None]
    return torch.where(real, order, order[:, :1]), real


def _spread(
    outputs: tuple[Tensor, Tensor, Tensor], rows: Tensor, real: Tensor, n: int
) -> tuple[Tensor, Tensor]:
    """The rows' logits at their ops' places, [B, n, d] and [B, n]; zero where the caller masks."""
    forward, backward, _ = outputs
    batch, _, d = forward.shape
    target = torch.where(real, rows, n)  # padding goes to a column that is cut off
    full_forward = forward.new_zeros(batch, n + 1, d)
    full_forward = full_forward.scatter(1, target[..., None].expand(-1, -1, d), forward)
    full_backward = backward.new_zeros(batch, n + 1).scatter(1, target, backward)
    return full_forward[:, :n], full_backward[:, :n]
