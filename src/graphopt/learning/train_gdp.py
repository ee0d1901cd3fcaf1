"""Training GDP's placement policy with PPO (paper 003 section 4), top to bottom.

Each step picks `graphs_per_step` training graphs (seeded by (run.seed, step)), samples `samples`
placements of each from the policy in one forward pass per graph, scores them exactly in the
placement environment (`envs.placement`: GO's ready-queue schedule, GDP's reward), and takes
PPO's clipped-surrogate updates (`objectives.ppo`) over minibatches of those samples, every op's
device one action, with Adam and gradient clipping. The baseline is the mean reward of the
graph's samples (`trajectory_advantages`), GDP's alternative to a value network. One graph is
GDP-one; several are GDP-batch, whose graphs share the network through its superposition on
the graph embedding. The entropy weight and learning rate decay over `run.steps` as functions
of the step.

Every `run.validate_every` steps the policy's most likely placement of each validation graph is
scored; their mean reward is the validation reward, and the best policy is kept in best.pt
(step 0 is the untrained start, which the learned policy must beat). Everything random in step
s is seeded by (run.seed, s), so a run resumed from last.pt continues exactly as the
uninterrupted one; a resumed run's config must equal the checkpoint's (only run.steps and
run.workers may change). log.csv and TensorBoard as every run (`learning.runs`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

from graphopt.configs import FieldError, read_config
from graphopt.costmodels.machine import Machine
from graphopt.datasets import Dataset
from graphopt.ir.graph import Graph
from graphopt.learning import runs
from graphopt.learning.batching import GraphBatch, make_batch
from graphopt.learning.envs.placement import PlacementEnv
from graphopt.learning.networks.gdp import GDPPolicy
from graphopt.learning.networks.gdp_config import GDP_FORMAT, GDPConfig
from graphopt.learning.objectives.ppo import (
    PPOConfig,
    PPOLoss,
    ppo_loss,
    trajectory_advantages,
)
from graphopt.learning.optim import AdamConfig, clipped_step, learning_rate, minibatches
from graphopt.learning.placement_features import placement_features
from graphopt.learning.runs import (
    GRAPH_PREFIX,
    RunConfig,
    RunLog,
    RunState,
    TrainingError,
    graph_files,
    load_config,
    open_run,
    restore_run,
    run_steps,
    training_graphs,
    write_config,
)


@dataclass(frozen=True)
class MachineConfig:
    """The machine placements are scored on (contract section 2).

    Attributes:
        devices: d, the devices the policy places onto (2..the policy's max_devices).
        latency: seconds added to every transfer.
        bandwidth: bytes per second of a transfer (None: unlimited; JSON has no infinity).
        mode: 'sync' (a receive occupies its device) or 'async'.
        capacity: bytes of memory per device (None: unlimited); a placement over it gets
            `envs.placement.INFEASIBLE_REWARD`.
    """

    devices: int = 4
    latency: float = 1e-5
    bandwidth: float | None = 1e10
    mode: Literal["sync", "async"] = "sync"
    capacity: int | None = None

    def __post_init__(self) -> None:
        if not 2 <= self.devices:
            raise FieldError("devices", f"must be >= 2, got {self.devices}")
        if not self.latency >= 0:
            raise FieldError("latency", f"must be >= 0, got {self.latency}")
        if self.bandwidth is not None and not self.bandwidth > 0:
            raise FieldError("bandwidth", f"must be > 0 (or null: unlimited), got {self.bandwidth}")
        if self.capacity is not None and not self.capacity > 0:
            raise FieldError("capacity", f"must be > 0 (or null: unlimited), got {self.capacity}")

    def machine(self) -> Machine:
        """The `Machine` these settings describe."""
        bandwidth = math.inf if self.bandwidth is None else self.bandwidth
        return Machine(
            self.devices, self.capacity, latency=self.latency, bandwidth=bandwidth, mode=self.mode
        )


@dataclass(frozen=True)
class TrainConfig:
    """Everything that defines a GDP training run (saved with every checkpoint).

    Attributes:
        name: the run's name.
        dataset: a built dataset directory, a dataset config JSON, a shipped config name, or
            `graph:PATH[,PATH...]`: graph files, each trained and validated on (GDP-one: one).
        policy: the network.
        machine: devices and transfer model of every placement.
        samples: placements sampled per graph and step (PPO's batch, split in minibatches).
        graphs_per_step: training graphs per step (GDP-batch; all of them when fewer).
        ppo: clipping, epochs, minibatches, entropy bonus, decays.
        optimizer: Adam and gradient clipping.
        run: steps, cadence, graphs used, seed.
    """

    name: str = "gdp"
    dataset: str = "default"
    policy: GDPConfig = field(default_factory=GDPConfig)
    machine: MachineConfig = field(default_factory=MachineConfig)
    samples: int = 16
    graphs_per_step: int = 4
    ppo: PPOConfig = field(default_factory=lambda: PPOConfig(epochs=4, minibatches=2))
    optimizer: AdamConfig = field(default_factory=lambda: AdamConfig(learning_rate=1e-3))
    run: RunConfig = field(default_factory=RunConfig)

    def __post_init__(self) -> None:
        if not 2 <= self.samples <= 1 << 16:
            raise FieldError("samples", f"must be in [2, 65536], got {self.samples}")
        if self.ppo.minibatches > self.samples:
            raise FieldError(
                "ppo.minibatches", f"must be at most samples ({self.samples}), got "
                f"{self.ppo.minibatches}",
            )  # fmt: skip
        if self.graphs_per_step < 1:
            raise FieldError("graphs_per_step", f"must be >= 1, got {self.graphs_per_step}")
        if self.machine.devices > self.policy.max_devices:
            raise FieldError(
                "machine.devices",
                f"must be at most policy.max_devices ({self.policy.max_devices}), got "
                f"{self.machine.devices}",
            )

    @classmethod
    def from_dict(cls, data: Any) -> TrainConfig:
        """A config from a JSON object; unknown fields and wrong types are refused, named."""
        return read_config(cls, data, "GDP training config", TrainingError)

    @classmethod
    def load(cls, source: str | Path) -> TrainConfig:
        """A config from a JSON file, or the shipped config of that name."""
        return load_config(cls, source, "GDP training config")


LOG_COLUMNS = (
    "step",
    "seconds",
    "reward",
    "loss",
    "grad_norm",
    "entropy",
    "clip_fraction",
    "approx_kl",
    "validation_reward",
)
"""What log.csv records: per step the mean sampled reward over its graphs, and the loss, gradient
norm, per-op entropy, clipped share and approximate KL averaged over its updates; per validation
the mean reward of the most likely placements."""


class Graphs:
    """A run's graphs by (split, index), each with its environment and features, built once."""

    def __init__(self, splits: dict[str, Sequence[Graph]], machine: Machine) -> None:
        self.splits = splits
        self.machine = machine
        self.cache: dict[tuple[str, int], tuple[PlacementEnv, GraphBatch]] = {}

    def get(self, split: str, index: int) -> tuple[PlacementEnv, GraphBatch]:
        """The environment and the policy's input of one graph."""
        key = (split, index)
        if key not in self.cache:
            graph = self.splits[split][index]
            self.cache[key] = (
                PlacementEnv(graph, self.machine),
                make_batch([placement_features(graph)]),
            )
        return self.cache[key]


class GDPTrainer:
    """PPO steps on training graphs (GDP-one, GDP-batch), seeded by (seed, step).

    Args:
        policy: the network to train (in place).
        graphs: where the training graphs are.
        train_ids: indices of the training graphs in the "train" split.
        config: the run's config.
    """

    def __init__(
        self, policy: GDPPolicy, graphs: Graphs, train_ids: np.ndarray, config: TrainConfig
    ) -> None:
        self.policy = policy
        self.graphs = graphs
        self.train_ids = np.asarray(train_ids)
        self.config = config
        self.optimizer = config.optimizer.optimizer(policy.parameters())

    def step(self, step: int) -> dict[str, float]:
        """PPO's updates on placements of `graphs_per_step` training graphs; the log row."""
        config, ppo = self.config, self.config.ppo
        rng = np.random.default_rng([config.run.seed, step])
        generator = torch.Generator().manual_seed(int(rng.integers(2**62)))
        count = min(config.graphs_per_step, len(self.train_ids))
        picks = rng.choice(self.train_ids, count, replace=False)
        self.policy.train()
        rollouts = []
        for index in picks.tolist():
            env, batch = self.graphs.get("train", index)
            placements, old_log_p = sample(
                self.policy, batch, env.n_devices, config.samples, generator
            )
            reward = torch.from_numpy(env.step(placements).reward)
            advantages = trajectory_advantages(reward, ppo.normalize_advantages)
            actions = torch.from_numpy(placements).long()
            rollouts.append((batch, env.n_devices, actions, old_log_p, advantages, reward))
        progress = step / config.run.steps
        entropy_weight = ppo.entropy_weight_at(progress)
        rate = config.optimizer.learning_rate * ppo.learning_rate_factor(progress)
        totals = np.zeros(5)  # loss, gradient norm, entropy, clip fraction, approximate KL
        with learning_rate(self.optimizer, rate):
            for chunk in minibatches(rng, config.samples, ppo.epochs, ppo.minibatches):
                losses = [
                    self._loss(batch, d, actions[chunk], old[chunk], gain[chunk], entropy_weight)
                    for batch, d, actions, old, gain, _ in rollouts
                ]
                total = torch.stack([loss.total for loss in losses]).mean()
                norm = clipped_step(
                    self.policy, self.optimizer, total, step, config.optimizer.grad_clip
                )
                totals += [
                    float(total.detach()),
                    norm,
                    float(np.mean([float(loss.entropy) for loss in losses])),
                    float(np.mean([float(loss.clip_fraction) for loss in losses])),
                    float(np.mean([float(loss.approx_kl) for loss in losses])),
                ]
        means = totals / ppo.updates
        return {
            "step": step + 1,
            "reward": float(np.mean([float(r[5].mean()) for r in rollouts])),
            "loss": float(means[0]),
            "grad_norm": float(means[1]),
            "entropy": float(means[2]),
            "clip_fraction": float(means[3]),
            "approx_kl": float(means[4]),
        }

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


def sample(
    policy: GDPPolicy, batch: GraphBatch, n_devices: int, samples: int, generator: torch.Generator
) -> tuple[np.ndarray, torch.Tensor]:
    """Placements [samples, n_ops] of one graph and their per-op log-probabilities, no gradient."""
    with torch.no_grad():
        log_p = torch.log_softmax(policy(batch, n_devices), dim=-1)
    actions = torch.multinomial(log_p.exp(), samples, replacement=True, generator=generator)
    return actions.T.numpy().astype(np.int32), log_p.gather(1, actions).T


def most_likely(policy: GDPPolicy, batch: GraphBatch, n_devices: int) -> np.ndarray:
    """The policy's most likely placement [n_ops] (zero-shot inference)."""
    policy.eval()
    with torch.no_grad():
        return policy(batch, n_devices).argmax(dim=-1).numpy().astype(np.int32)


def train(
    config: TrainConfig,
    run_dir: str | Path,
    resume: bool = False,
    progress: Callable[[dict[str, float]], None] | None = None,
) -> RunState:
    """Trains a GDP policy as `config` says, writing checkpoints and logs into `run_dir`.

    Files: config.json, log.csv, tensorboard/, last.pt (resumable), best.pt (the policy).

    Raises:
        TrainingError: an existing run without `resume`, a resumed run with another config,
            or non-finite values (the last good checkpoint is kept).
    """
    run_dir, last = open_run(run_dir, resume)
    torch.manual_seed(config.run.seed)
    policy = GDPPolicy(config.policy)
    machine = config.machine.machine()
    if config.dataset.startswith(GRAPH_PREFIX):
        files = graph_files(config.dataset)
        graphs = Graphs({"train": files, "valid": files}, machine)
        train_ids = valid_ids = np.arange(len(files))
    else:
        dataset, train_ids, valid_ids = training_graphs(config.dataset, run_dir, config.run)
        splits = {split: Dataset.open(dataset, split) for split in ("train", "valid")}
        graphs = Graphs(splits, machine)
    trainer = GDPTrainer(policy, graphs, train_ids, config)
    state = RunState()
    if resume and last.exists():
        state = restore_run(
            last,
            GDP_FORMAT,
            TrainConfig.from_dict,
            config,
            policy,
            lambda: GDPPolicy(config.policy),
            trainer.optimizer,
            config.ppo.updates,
            config.optimizer.grad_clip,
        )
    write_config(run_dir, config)
    log = RunLog(run_dir, LOG_COLUMNS, state.step if resume else None)
    try:
        return run_steps(
            state,
            config.run.cadence,
            trainer.step,
            lambda step: _validate(policy, graphs, valid_ids, step),
            lambda state: save_run(run_dir / "best.pt", policy, None, config, state),
            lambda state: save_run(last, policy, trainer.optimizer, config, state),
            log,
            progress,
        )
    finally:
        log.close()


def _validate(policy: GDPPolicy, graphs: Graphs, ids: np.ndarray, step: int) -> dict[str, float]:
    """Mean reward of the most likely placement of each validation graph."""
    rewards = []
    for index in ids.tolist():
        env, batch = graphs.get("valid", index)
        rewards.append(float(env.step(most_likely(policy, batch, env.n_devices)).reward[0]))
    return {"step": step, "validation_reward": float(np.mean(rewards))}


def save_run(
    path: Path,
    policy: GDPPolicy,
    optimizer: torch.optim.Optimizer | None,
    config: TrainConfig,
    state: RunState,
) -> None:
    """Writes best.pt (the policy) or last.pt (with the optimizer and run state)."""
    fields = {
        "policy_config": json.dumps(asdict(config.policy)),
        "machine": json.dumps(asdict(config.machine)),
    }
    runs.save_run(path, GDP_FORMAT, policy, optimizer, config, state, fields)
