"""Training GDP's placement policy with PPO (paper 003 section 4): GDP-one and GDP-batch steps.

Each step samples `samples` placements of every training graph from the policy in one forward
pass per graph, scores them exactly in the placement environment (`envs.placement`: GO's
ready-queue schedule, GDP's reward), and takes PPO's clipped-surrogate updates
(`objectives.ppo`) over minibatches of those samples, every op's device one action. The
baseline is the mean reward of the graph's samples (`trajectory_advantages`), GDP's alternative
to a value network. One graph is GDP-one; several are GDP-batch, whose graphs share the network
through its superposition on the graph embedding. The run conventions (config file, progress,
checkpoints, exact resume, validation) wrap `GDPTrainer.step`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from graphopt.configs import FieldError
from graphopt.learning.batching import GraphBatch, make_batch
from graphopt.learning.envs.placement import PlacementEnv
from graphopt.learning.networks.gdp import GDPPolicy
from graphopt.learning.objectives.ppo import (
    PPOConfig,
    PPOLoss,
    ppo_loss,
    trajectory_advantages,
)
from graphopt.learning.placement_features import placement_features


@dataclass(frozen=True)
class GDPTrainConfig:
    """PPO settings of a GDP run.

    Attributes:
        samples: placements sampled per graph and step (PPO's batch; minibatches split it).
        learning_rate: Adam's step size at the start (`ppo.learning_rate_end` decays it).
        steps: steps of the run (the decays of the learning rate and entropy weight span it).
        ppo: clipping, epochs, minibatches, entropy bonus.
    """

    samples: int = 16
    learning_rate: float = 1e-3
    steps: int = 100
    ppo: PPOConfig = field(default_factory=lambda: PPOConfig(epochs=4, minibatches=2))

    def __post_init__(self) -> None:
        if not 2 <= self.samples <= 1 << 16:
            raise FieldError("samples", f"must be in [2, 65536], got {self.samples}")
        if self.samples < self.ppo.minibatches:
            raise FieldError(
                "samples",
                f"must be >= ppo.minibatches ({self.ppo.minibatches}), got {self.samples}",
            )
        if not self.learning_rate > 0:
            raise FieldError("learning_rate", f"must be > 0, got {self.learning_rate}")
        if not self.steps >= 1:
            raise FieldError("steps", f"must be >= 1, got {self.steps}")


@dataclass(frozen=True)
class StepRecord:
    """What one step measured: each graph's mean sampled reward and the loss's parts."""

    step: int
    reward: tuple[float, ...]
    loss: float
    entropy: float
    clip_fraction: float
    approx_kl: float


class GDPTrainer:
    """PPO on one or more placement environments (GDP-one, GDP-batch).

    Args:
        policy: the network to train (in place).
        envs: one environment per training graph.
        config: PPO settings.
        seed: with the step number, seeds every sample a step draws, so that a run resumed
            from its weights, Adam's state and `step_index` continues exactly.
    """

    def __init__(
        self,
        policy: GDPPolicy,
        envs: Sequence[PlacementEnv],
        config: GDPTrainConfig,
        seed: int = 0,
    ) -> None:
        self.policy = policy
        self.envs = list(envs)
        self.config = config
        self.batches = [make_batch([placement_features(env.graph)]) for env in self.envs]
        self.optimizer = torch.optim.Adam(policy.parameters(), lr=config.learning_rate)
        self.seed = seed
        self.step_index = 0

    def sample(
        self, index: int, samples: int, generator: torch.Generator
    ) -> tuple[np.ndarray, torch.Tensor]:
        """Placements [samples, n_ops] of graph `index` and their per-op log-probabilities."""
        env, batch = self.envs[index], self.batches[index]
        with torch.no_grad():
            log_p = torch.log_softmax(self.policy(batch, env.machine.n_devices), dim=-1)
        actions = torch.multinomial(log_p.exp(), samples, replacement=True, generator=generator).T
        return actions.numpy().astype(np.int32), log_p.gather(1, actions.T).T

    def step(self) -> StepRecord:
        """One PPO step over every training graph."""
        config, ppo = self.config, self.config.ppo
        progress = self.step_index / max(config.steps - 1, 1)
        for group in self.optimizer.param_groups:
            group["lr"] = config.learning_rate * ppo.learning_rate_factor(progress)
        entropy_weight = ppo.entropy_weight_at(progress)
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + self.step_index)
        rollouts = []
        for index, env in enumerate(self.envs):
            placements, old_log_p = self.sample(index, config.samples, generator)
            reward = torch.from_numpy(env.step(placements).reward)
            advantages = trajectory_advantages(reward, ppo.normalize_advantages)
            rollouts.append((torch.from_numpy(placements).long(), old_log_p, advantages, reward))
        parts = []
        for _ in range(ppo.epochs):
            order = torch.randperm(config.samples, generator=generator)
            for chunk in order.chunk(ppo.minibatches):
                self.optimizer.zero_grad()
                total = 0.0
                for index, env in enumerate(self.envs):
                    actions, old_log_p, advantages, _ = rollouts[index]
                    loss = self._loss(
                        self.batches[index], env.machine.n_devices, actions[chunk],
                        old_log_p[chunk], advantages[chunk], entropy_weight,
                    )  # fmt: skip
                    total = total + loss.total / len(self.envs)
                    parts.append(loss)
                total.backward()
                self.optimizer.step()
        self.step_index += 1
        return StepRecord(
            step=self.step_index,
            reward=tuple(float(r[3].mean()) for r in rollouts),
            loss=float(np.mean([float(p.total.detach()) for p in parts])),
            entropy=float(np.mean([float(p.entropy) for p in parts])),
            clip_fraction=float(np.mean([float(p.clip_fraction) for p in parts])),
            approx_kl=float(np.mean([float(p.approx_kl) for p in parts])),
        )

    def _loss(
        self,
        batch: GraphBatch,
        n_devices: int,
        actions: torch.Tensor,
        old_log_p: torch.Tensor,
        advantages: torch.Tensor,
        entropy_weight: float,
    ) -> PPOLoss:
        """PPO's loss on a minibatch of one graph's samples (every op one step)."""
        log_p = torch.log_softmax(self.policy(batch, n_devices), dim=-1)
        new_log_p = log_p.gather(1, actions.T).T
        probabilities = log_p.exp()
        entropy = -(probabilities * torch.where(probabilities > 0, log_p, 0.0)).sum(-1)
        return ppo_loss(
            new_log_p,
            old_log_p,
            advantages,
            entropy.expand_as(new_log_p),
            self.config.ppo.clip,
            entropy_weight,
        )

    def greedy(self, index: int) -> np.ndarray:
        """The policy's most likely placement [n_ops] of graph `index` (zero-shot inference)."""
        env, batch = self.envs[index], self.batches[index]
        with torch.no_grad():
            logits = self.policy(batch, env.machine.n_devices)
        return logits.argmax(dim=-1).numpy().astype(np.int32)
