"""PPO's clipped surrogate (Schulman et al. 2017), the baseline of paper 004 section 5.

PPO reuses one batch of sampled trajectories for several epochs of minibatch updates; the
clipped ratio of new to old action probabilities keeps each update near the policy that sampled
them. Each step of a trajectory is one sample of the surrogate, with the ratio of that step's
action: a ratio over a whole trajectory (the product over its n steps) would clip nearly every
sample of a 50-op schedule. The reward comes only at the end (episodic, undiscounted), so every
step of a trajectory gets that trajectory's advantage. Paper 004's PPO (appendix E.1, after
Spinning Up) also trains a critic; here the mean reward of the batch, whose trajectories are all
of one graph, is the baseline instead (`trajectory_advantages`): it needs no value head on the
policy and no loss weight to tune, at the cost of a baseline that ignores the state reached. As
in paper 004 (after Schulman et al. and Ahmed et al. 2019) an entropy bonus is added to the loss,
and its weight and the learning rate decay over the run, linearly here (the paper's learning
rate decays exponentially), as functions of the step so that resumed runs match
(`PPOConfig.entropy_weight_at`, `PPOConfig.learning_rate_factor`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch

from graphopt.configs import FieldError
from graphopt.learning.optim import AdamConfig, clipped_step, learning_rate, minibatches


@dataclass(frozen=True)
class PPOConfig:
    """PPO's settings, a trainer's config section (`ppo_loss` says what the loss does).

    Attributes:
        sigma: the temperature of the reward (U - m) / sigma and of the policy's conditioning
            for schedulers conditioned on one (paper 004: 0.25, "lower was not beneficial");
            PPO trains, validates and samples at this one temperature.
        clip: epsilon, the ratio's clip range [1 - epsilon, 1 + epsilon].
        epochs: passes over each batch of sampled trajectories.
        minibatches: updates per pass, each on an equal share of the trajectories.
        entropy_weight_start: weight of the entropy bonus at the first step.
        entropy_weight_end: its weight at the end of the run (linear decay in between).
        learning_rate_end: the learning rate's factor at the end of the run (linear decay from
            1; 1 keeps it constant).
        normalize_advantages: divide the advantages by their standard deviation over the batch
            (as Spinning Up's PPO does), so that the step size does not depend on a graph's
            spread of rewards or on sigma.
    """

    sigma: float = 0.25
    clip: float = 0.2
    epochs: int = 4
    minibatches: int = 4
    entropy_weight_start: float = 0.01
    entropy_weight_end: float = 0.0
    learning_rate_end: float = 0.1
    normalize_advantages: bool = True

    def __post_init__(self) -> None:
        if not self.sigma > 0:
            raise FieldError("sigma", f"must be > 0, got {self.sigma}")
        if not 0 < self.clip < 1:
            raise FieldError("clip", f"must be in (0, 1), got {self.clip}")
        for name in ("epochs", "minibatches"):
            if not 1 <= getattr(self, name) <= 1000:
                raise FieldError(name, f"must be in [1, 1000], got {getattr(self, name)}")
        for name in ("entropy_weight_start", "entropy_weight_end"):
            if not getattr(self, name) >= 0:
                raise FieldError(name, f"must be >= 0, got {getattr(self, name)}")
        if not 0 < self.learning_rate_end <= 1:
            raise FieldError(
                "learning_rate_end", f"must be in (0, 1], got {self.learning_rate_end}"
            )

    @property
    def updates(self) -> int:
        """Optimizer steps per batch of sampled trajectories."""
        return self.epochs * self.minibatches

    def entropy_weight_at(self, progress: float) -> float:
        """The entropy bonus's weight at `progress` (step / run steps, in [0, 1])."""
        start, end = self.entropy_weight_start, self.entropy_weight_end
        return start + (end - start) * progress

    def learning_rate_factor(self, progress: float) -> float:
        """The factor on the configured learning rate at `progress` (step / run steps)."""
        return 1.0 + (self.learning_rate_end - 1.0) * progress


class PPOLoss(NamedTuple):
    """The loss to minimize and what to log about it (scalars, the last four without gradient)."""

    total: torch.Tensor
    policy: torch.Tensor
    entropy: torch.Tensor
    clip_fraction: torch.Tensor
    approx_kl: torch.Tensor


def trajectory_advantages(reward: torch.Tensor, normalize: bool = True) -> torch.Tensor:
    """Each trajectory's advantage: its reward minus the mean of the batch's, optionally scaled.

    The trajectories of a batch are samples of the same graph (dim 0; further dims are other
    graphs), so their mean reward estimates the value of the empty schedule in place of a critic.

    Args:
        reward: [samples, ...] reward of each trajectory.
        normalize: divide by the rewards' standard deviation over the samples.
    """
    gain = reward - reward.mean(dim=0, keepdim=True)
    if normalize:
        gain = gain / (reward.std(dim=0, unbiased=False, keepdim=True) + 1e-8)
    return gain.detach()


def ppo_loss(
    new_log_p: torch.Tensor,
    old_log_p: torch.Tensor,
    advantages: torch.Tensor,
    entropy: torch.Tensor,
    clip: float = 0.2,
    entropy_weight: float = 0.0,
    mask: torch.Tensor | None = None,
) -> PPOLoss:
    """PPO-clip's loss over the steps of B trajectories, minus the weighted entropy bonus.

    Per step, -min(ratio * A, clip(ratio, 1 - clip, 1 + clip) * A) with ratio =
    exp(new - old): once a step's ratio has moved past the clip range in the direction its
    advantage favours, that step gives no gradient. Steps are averaged (a mask leaves padding
    out), so long and short trajectories weigh by their steps, as in Spinning Up's PPO.

    Args:
        new_log_p: [B, T] log-probability of each step's action under the current policy.
        old_log_p: [B, T] the same under the policy that sampled them (no gradient).
        advantages: [B] each trajectory's advantage, shared by its steps.
        entropy: [B, T] the current policy's entropy at each step.
        clip: epsilon.
        entropy_weight: weight of the mean entropy bonus.
        mask: [B, T] bool, the real steps (None: all).
    """
    if mask is None:
        mask = torch.ones_like(new_log_p, dtype=torch.bool)
    weight = mask.to(new_log_p.dtype) / mask.sum().clamp(min=1)
    log_ratio = torch.where(mask, new_log_p - old_log_p.detach(), 0.0)
    ratio = log_ratio.exp()
    gain = advantages.detach()[:, None]
    surrogate = torch.minimum(ratio * gain, ratio.clamp(1 - clip, 1 + clip) * gain)
    policy = -(surrogate * weight).sum()
    mean_entropy = (torch.where(mask, entropy, 0.0) * weight).sum()
    total = policy - entropy_weight * mean_entropy
    with torch.no_grad():
        clipped = ((ratio - 1).abs() > clip).to(weight.dtype)
        clip_fraction = (clipped * weight).sum()
        approx_kl = ((ratio - 1 - log_ratio) * weight).sum()  # Schulman's k3 estimator, >= 0
    return PPOLoss(total, policy.detach(), mean_entropy.detach(), clip_fraction, approx_kl)


def ppo_update(
    network: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    ppo: PPOConfig,
    adam: AdamConfig,
    progress: float,
    step: int,
    rng: np.random.Generator,
    batch: int,
    minibatch_loss: Callable[[torch.Tensor, float], PPOLoss],
) -> dict[str, float]:
    """PPO's epochs of clipped minibatch updates on one batch of samples; the mean log fields.

    The one update routine of every PPO trainer (GDP, GO, GFlowNet's PPO baseline): the entropy
    weight and learning rate decay with `progress` (step / run steps, so a resumed run repeats
    them), the batch is shuffled by `rng` into `ppo.minibatches` parts per epoch, and each part
    takes one clipped Adam step (`optim.clipped_step`, which stops on non-finite values).

    Args:
        network: the policy being trained.
        optimizer: its Adam.
        ppo: clipping, epochs, minibatches and decays.
        adam: the configured learning rate and gradient clip.
        progress: the step's share of the run, in [0, 1].
        step: the step number (for messages).
        rng: the step's generator (shuffles the minibatches).
        batch: samples in the batch.
        minibatch_loss: (sample indices, entropy weight) -> the loss of that minibatch.

    Returns:
        Means over the updates of the loss, gradient norm, entropy, clipped share and
        approximate KL.
    """
    entropy_weight = ppo.entropy_weight_at(progress)
    rate = adam.learning_rate * ppo.learning_rate_factor(progress)
    totals = np.zeros(5)  # loss, gradient norm, entropy, clip fraction, approximate KL
    with learning_rate(optimizer, rate):
        for index in minibatches(rng, batch, ppo.epochs, ppo.minibatches):
            loss = minibatch_loss(index, entropy_weight)
            norm = clipped_step(network, optimizer, loss.total, step, adam.grad_clip)
            totals += [
                float(loss.total.detach()),
                norm,
                float(loss.entropy),
                float(loss.clip_fraction),
                float(loss.approx_kl),
            ]
    means = totals / ppo.updates
    names = ("loss", "grad_norm", "entropy", "clip_fraction", "approx_kl")
    return {name: float(value) for name, value in zip(names, means, strict=True)}
