"""Sampling schedules from the GFlowNet policy: whole trajectories, and replaying them.

`sample_trajectories` runs the policy (`network`) on a batch of partial schedules (`env`) until
they are complete, summing log P_F of the actions taken and log P_B of undoing them: what the
losses of `learning.objectives` need. It records the actions, so that `replay_trajectories` can
score the same trajectories again under the policy as it is later (PPO's epochs over one batch).
The solver and the trainer both sample here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from graphopt.costmodels.machine import Machine
from graphopt.ir.graph import Graph
from graphopt.learning.memory import release_freed_memory
from graphopt.learning.systems.gflownet.config import PLAIN, Decoding
from graphopt.learning.systems.gflownet.env import PAIR_FEATURES, ActionError, PartialSchedules
from graphopt.learning.systems.gflownet.network import GraphEncodedPolicy, Policy


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


INPUTS_HERE = PAIR_FEATURES.index("inputs_here")
"""The pair feature `Decoding.locality` weights."""


def sample_trajectories(
    policy: Policy,
    graph: Graph,
    machine: Machine,
    batch: int,
    sigma: float | Tensor,
    generator: torch.Generator,
    context: object | None = None,
    pinned: np.ndarray | None = None,
    uniform_backward: bool = False,
    backward: bool = True,
    decoding: Decoding = PLAIN,
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
        context: `policy.context(graph, machine)`, when the caller keeps it across calls.
        pinned: [n] device each op must run on, -1 where free (a problem's pins); the forward
            policy never offers another device to a pinned op.
        uniform_backward: log P_B of a fixed uniform choice among the removable ops instead of
            the backward head's (a GFlowNet may learn P_B or fix it).
        backward: False: a per-graph policy skips log P_B (left 0), which only the losses
            need (the solver samples without it).
        decoding: how P_F's logits become the draw (`Decoding`; the default samples P_F
            itself); log_pf is that of the distribution sampled. Locality needs a per-graph
            policy.
    """
    d = _devices(policy, machine)
    log_sigma = _log_sigma(sigma, batch)
    allowed = _allowed_devices(pinned, graph.n_ops, d)
    context = policy.context(graph, machine) if context is None else context
    if isinstance(policy, GraphEncodedPolicy):
        return _walk(
            policy,
            graph,
            machine,
            log_sigma,
            context,
            allowed,
            uniform_backward,
            generator,
            backward=backward,
            decoding=decoding,
        )[0]
    if decoding.locality:
        raise ValueError("locality decoding needs a per-graph policy (its pair features)")
    masks = context
    schedules = PartialSchedules(graph, machine, batch)
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
        log_p = (logits / decoding.logit_temperature).log_softmax(dim=1)
        action = torch.multinomial(log_p.detach().exp(), 1, generator=generator).squeeze(1)
        taken = log_p[rows, action]
        log_pf = log_pf + taken
        actions[:, step] = action
        step_log_pf[:, step] = taken.detach()
        last = action // d
        schedules.step(last.numpy(), (action % d).numpy())
    return Trajectories(schedules, log_pf, log_pb, log_sigma, actions, step_log_pf)


def score_trajectories(
    policy: GraphEncodedPolicy,
    graph: Graph,
    machine: Machine,
    actions: Tensor,
    sigma: float,
    context: object | None = None,
    uniform_backward: bool = False,
) -> Trajectories:
    """Given trajectories (a search's: `experts`) with their log P_F and log P_B, as if sampled.

    Under the caller's grad mode, so a GFlowNet loss can train on them beside sampled ones.

    Args:
        policy: a per-graph policy.
        graph: the graph.
        machine: the proxy's machine.
        actions: [B, n] actions, op * d + device, each among its state's candidates.
        sigma: the temperature (> 0) they are scored at.
        context: `policy.context(graph, machine)`, when the caller keeps it.
        uniform_backward: as `sample_trajectories`'.

    Raises:
        ActionError: an action that is not one of its state's candidates.
    """
    _devices(policy, machine)
    context = policy.context(graph, machine) if context is None else context
    log_sigma = _log_sigma(sigma, actions.shape[0])
    walked, _ = _walk(
        policy, graph, machine, log_sigma, context, None, uniform_backward, None, actions
    )
    return walked


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
    policy: Policy,
    graph: Graph,
    machine: Machine,
    actions: Tensor,
    sigma: float | Tensor,
    context: object | None = None,
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
        context: `policy.context(graph, machine)`, when the caller keeps it.

    A per-graph policy (`GraphEncodedPolicy`) replays step by step instead (`_walk` with the
    actions forced): its steps are light, and the graph is encoded once for all of them.

    Raises:
        ActionError: an action that is not valid in its state.
        ValueError: a policy for another device count.
    """
    d, n = _devices(policy, machine), graph.n_ops
    batch = actions.shape[0]
    log_sigma = _log_sigma(sigma, batch)
    context = policy.context(graph, machine) if context is None else context
    if isinstance(policy, GraphEncodedPolicy):
        walked, entropy = _walk(
            policy, graph, machine, log_sigma, context, None, True, None, actions, backward=False
        )
        return Replay(walked.schedules, walked.step_log_pf, entropy)
    masks = context
    schedules = PartialSchedules(graph, machine, batch)
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


def _devices(policy: Policy, machine: Machine) -> int:
    """The machine's device count, if the policy places on that many."""
    d = machine.n_devices
    if not policy.serves(d):
        raise ValueError(
            f"the policy places on {policy.config.n_devices} devices, the machine has {d}"
        )
    return d


def _log_sigma(sigma: float | Tensor, batch: int) -> Tensor:
    """[B] log temperatures, checked > 0."""
    sigmas = torch.as_tensor(sigma, dtype=torch.float32).expand(batch)
    if not bool((sigmas > 0).all()):
        raise ValueError(f"temperature sigma must be > 0, got {float(sigmas.min())}")
    return torch.log(sigmas)


TRIM_EVERY = 16
"""Steps between two `release_freed_memory` calls of a per-graph walk (`learning.memory`)."""
TRIM_FROM = 8192
"""Candidate pairs per step (B x window x d) from which a walk trims at all: smaller steps do
not fragment the heap, and each trim walks the whole heap (17 ms with a 20,000-op graph's
state, a quarter of 8 schedules' walk of 20,000 steps)."""


def _walk(
    policy: GraphEncodedPolicy,
    graph: Graph,
    machine: Machine,
    log_sigma: Tensor,
    context: object,
    allowed: Tensor | None,
    uniform_backward: bool,
    generator: torch.Generator | None,
    forced: Tensor | None = None,
    backward: bool = True,
    decoding: Decoding = PLAIN,
) -> tuple[Trajectories, Tensor | None]:
    """Runs a per-graph policy over B schedules, sampling each action or taking `forced`'s.

    The graph is encoded once; each step builds its candidates' features (`PartialSchedules.
    candidates`, `pair_features`: O(B x ready x d)) and runs the light heads on them. With
    `forced` ([B, n] actions, op * d + device) the actions are replayed and the second result
    holds each step's entropy, under gradient when enabled (PPO's replays); else it is None.
    P_F's logits are decoded by `decoding` (`sample_trajectories`).
    """
    d, n = machine.n_devices, graph.n_ops
    batch = log_sigma.shape[0]
    if not bool((log_sigma == log_sigma[0]).all()):
        raise ValueError("a per-graph policy samples a batch at one temperature")
    schedules = PartialSchedules(graph, machine, batch)
    prepared = policy.prepare(context, float(log_sigma[0]))
    trims = batch * policy.config.window * d >= TRIM_FROM
    rows = torch.arange(batch)
    log_pf, log_pb = torch.zeros(batch), torch.zeros(batch)
    actions = torch.empty(batch, n, dtype=torch.int64) if forced is None else forced
    step_log_pf = []
    entropies = []
    last = None
    for step in range(n + 1):
        if last is not None and backward:
            removable = torch.from_numpy(schedules.removable())
            can = removable >= 0
            if uniform_backward:
                log_pb = log_pb - torch.log(can.sum(dim=1).to(log_pb.dtype))
            else:
                features = torch.from_numpy(schedules.removable_features(removable.numpy()))
                scores = policy.backward_logits(prepared, removable, features)
                undo = scores.masked_fill(~can, -math.inf).log_softmax(dim=1)
                log_pb = log_pb + undo[rows, (removable == last[:, None]).to(torch.int8).argmax(1)]
        if step == n:
            break
        ops_np, counts_np = schedules.candidates(policy.config.window)
        pairs, prior = schedules.pair_features(ops_np, counts_np)
        ops = torch.from_numpy(ops_np)
        real = ops >= 0
        packed = ops[real]
        pair_tensor = torch.from_numpy(pairs)
        logits = policy.forward_logits(prepared, packed, pair_tensor, torch.from_numpy(prior))
        if decoding.locality:
            logits = logits + decoding.locality * pair_tensor[..., INPUTS_HERE]
        if decoding.logit_temperature != 1.0:
            logits = logits / decoding.logit_temperature
        if allowed is not None:
            logits = logits.masked_fill(~allowed[packed], -math.inf)
        full = logits.new_full((batch, ops.shape[1], d), -math.inf)
        log_p = full.masked_scatter(real[:, :, None], logits).reshape(batch, -1).log_softmax(1)
        if forced is None:
            noise = -torch.log(-torch.log(torch.rand(log_p.shape, generator=generator)))
            index = (log_p.detach() + noise).argmax(dim=1)
            op = ops[rows, index // d]
            actions[:, step] = op * d + index % d
        else:
            op, device = forced[:, step] // d, forced[:, step] % d
            slot = (ops == op[:, None]).to(torch.int8).argmax(dim=1)
            wrong = (ops[rows, slot] != op) | (device < 0) | (device >= d)
            if bool(wrong.any()):
                bad = int(wrong.nonzero()[0])
                raise ActionError(
                    f"schedule {bad}: action {int(forced[bad, step])} at step {step} is not a "
                    f"valid action (one of the {policy.config.window} ready ops with the "
                    "largest bottom levels, on a device in range)"
                )
            index = slot * d + device
            entropies.append(-(log_p.exp() * log_p.masked_fill(log_p == -math.inf, 0.0)).sum(1))
        taken = log_p[rows, index]
        log_pf = log_pf + taken
        step_log_pf.append(taken if forced is not None else taken.detach())
        last = op
        schedules.step(op.numpy(), (actions[:, step] % d).numpy())
        if step % TRIM_EVERY == TRIM_EVERY - 1 and trims:
            release_freed_memory()
    steps = torch.stack(step_log_pf, dim=1) if step_log_pf else torch.zeros(batch, 0)
    walked = Trajectories(schedules, log_pf, log_pb, log_sigma, actions, steps)
    return walked, torch.stack(entropies, dim=1) if forced is not None else None


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
