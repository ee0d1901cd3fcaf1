"""HDP's REINFORCE steps on the one graph it places (its search: HDP has no pre-training).

The steps are the platform's: Adam with its clipping from `optim` (`AdamConfig`,
`clipped_step`) and REINFORCE's loss from `objectives.reinforce` (a moving-average baseline, so
no learned baseline term). HDP does not run through `training.train`: it trains inside a solve,
for as long as the solve's budget lasts, with no run directory, validation or checkpoint to
keep; the solver's loop offers every step's best placement to the tracker instead.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from graphopt.costmodels.machine import Machine
from graphopt.ir.graph import Graph
from graphopt.learning.objectives.reinforce import reinforce_loss
from graphopt.learning.optim import AdamConfig, clipped_step
from graphopt.learning.placement.env import PlacementEnv, PlacementOutcome
from graphopt.learning.placement.features import placement_features
from graphopt.learning.systems.hdp.config import HDPConfig
from graphopt.learning.systems.hdp.network import HDPPolicy
from graphopt.learning.threads import one_torch_thread
from graphopt.solvers.base import SolverError


@dataclass(frozen=True)
class HDPStep:
    """One REINFORCE step: what was sampled and how it scored.

    Attributes:
        placements: [B, n_ops] int32 sampled placements (pins applied).
        outcome: their scores and rewards from the placement environment.
        baseline: the moving-average baseline the step's advantages were taken against.
    """

    placements: np.ndarray
    outcome: PlacementOutcome
    baseline: float

    @property
    def reward(self) -> float:
        """Mean sampled reward of the step."""
        return float(self.outcome.reward.mean())


class HDPTrainer:
    """HDP's grouper and placer trained with REINFORCE on one graph.

    Args:
        graph: the graph to place (at least one op).
        machine: the machine to place it on (at least 2 devices).
        config: network sizes and REINFORCE settings.
        seed: seeds the networks' initial weights and every sample, so the same seed trains
            the same way.
        pinned: [n_ops] device of each pinned op, -1 where free, or None: pinned ops keep their
            device in every placement, and their group choice is left out of the gradient.
    """

    def __init__(
        self,
        graph: Graph,
        machine: Machine,
        config: HDPConfig | None = None,
        seed: int = 0,
        pinned: np.ndarray | None = None,
    ) -> None:
        self.config = config or HDPConfig()
        if graph.n_ops == 0 or machine.n_devices < 2:
            raise SolverError("hdp trains on a graph with ops, on a machine of 2 or more devices")
        self.env = PlacementEnv(graph, machine)
        self.features = torch.from_numpy(placement_features(graph).node)
        self.n_groups = min(self.config.groups, graph.n_ops)
        self.pins = None if pinned is None else np.asarray(pinned, dtype=np.int32)
        free = np.ones(graph.n_ops) if self.pins is None else self.pins < 0
        self.free = torch.from_numpy(np.asarray(free, dtype=np.float32))
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.policy = HDPPolicy(
                self.features.shape[1], self.config.hidden, self.n_groups, machine.n_devices
            )
        self.adam = AdamConfig(self.config.learning_rate, grad_clip=self.config.grad_clip)
        self.optimizer = self.adam.optimizer(self.policy.parameters())
        self.steps = 0
        self.generator = torch.Generator().manual_seed(seed)
        self.baseline: float | None = None

    def _group_features(self, groups: torch.Tensor) -> torch.Tensor:
        """[B, n_ops] group of each op -> [B, G, GROUP_FEATURES] what the placer reads."""
        member = nn.functional.one_hot(groups, self.n_groups).to(self.features.dtype)
        size = member.sum(dim=1)
        mean = torch.einsum("bng,nf->bgf", member, self.features) / size.clamp(min=1)[..., None]
        n_ops = self.features.shape[0]
        return torch.cat([mean, torch.log1p(size)[..., None], (size / n_ops)[..., None]], dim=-1)

    def _pinned(self, placements: np.ndarray) -> np.ndarray:
        if self.pins is None:
            return placements
        return np.where(self.pins >= 0, self.pins, placements).astype(np.int32)

    def step(self, samples: int | None = None) -> HDPStep:
        """Samples `samples` placements (default: the config's), scores them, updates both nets.

        Raises:
            TrainingError: a non-finite loss or gradient (the networks are left unchanged).
        """
        batch = self.config.samples if samples is None else samples
        with one_torch_thread():
            group_log_p = torch.log_softmax(self.policy.grouper(self.features), dim=-1)
            groups = torch.multinomial(
                group_log_p.exp(), batch, replacement=True, generator=self.generator
            ).T
            device_log_p = torch.log_softmax(
                self.policy.placer(self._group_features(groups)), dim=-1
            )
            devices = torch.multinomial(
                device_log_p.reshape(-1, device_log_p.shape[-1]).exp(), 1, generator=self.generator
            ).reshape(batch, self.n_groups)
        placements = self._pinned(devices.gather(1, groups).numpy().astype(np.int32))
        outcome = self.env.step(placements)
        with one_torch_thread():
            used = (nn.functional.one_hot(groups, self.n_groups).sum(dim=1) > 0).float()
            log_p = (group_log_p.gather(1, groups.T).T * self.free).sum(dim=1) + (
                device_log_p.gather(2, devices[..., None])[..., 0] * used
            ).sum(dim=1)
            group_entropy = -(group_log_p.exp() * group_log_p).sum(dim=1).mean()
            device_entropy = -(device_log_p.exp() * device_log_p).sum(dim=2)
            device_entropy = (device_entropy * used).sum() / used.sum()
            reward = torch.from_numpy(outcome.reward.astype(np.float32))
            mean = float(reward.mean())
            baseline = mean if self.baseline is None else self.baseline
            loss = reinforce_loss(
                log_p,
                reward,
                torch.tensor(baseline),
                group_entropy + device_entropy,
                baseline_weight=0.0,
                entropy_weight=self.config.entropy_weight,
            )
            clipped_step(self.policy, self.optimizer, loss.total, self.steps, self.adam.grad_clip)
        self.steps += 1
        decay = self.config.baseline_decay
        self.baseline = decay * baseline + (1 - decay) * mean
        return HDPStep(placements, outcome, baseline)

    def most_likely(self) -> np.ndarray:
        """[n_ops] int32: each op on its likeliest group's likeliest device (pins applied)."""
        with torch.no_grad(), one_torch_thread():
            groups = self.policy.grouper(self.features).argmax(dim=-1)[None]
            devices = self.policy.placer(self._group_features(groups)).argmax(dim=-1)
        return self._pinned(devices.gather(1, groups)[0].numpy().astype(np.int32))
