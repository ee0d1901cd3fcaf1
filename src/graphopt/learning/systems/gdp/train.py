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

Every `run.validate_every` steps the policy's most likely placement of each validation graph,
and the best of `validation_samples` samples beside it (what the solver offers), is scored;
their mean reward is the validation reward, and the best policy is kept in best.pt
(step 0 is the untrained start, which the learned policy must beat). Everything random in step
s is seeded by (run.seed, s), so a run resumed from last.pt continues exactly as the
uninterrupted one; a resumed run's config must equal the checkpoint's (only run.steps and
run.workers may change). log.csv and TensorBoard as every run (`learning.runs`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch

from graphopt.learning import runs
from graphopt.learning.formats import CheckpointFormat
from graphopt.learning.objectives.ppo import PPOLoss, ppo_loss, trajectory_advantages
from graphopt.learning.optim import clipped_step, learning_rate, minibatches
from graphopt.learning.placement.env import PlacementOutcome
from graphopt.learning.runs import (
    GRAPH_PREFIX,
    Phase,
    RunLog,
    RunState,
    open_run,
    restore_run,
    run_steps,
    training_graphs,
    unwatched,
    write_config,
)
from graphopt.learning.systems.gdp.config import GDP_FORMAT, TrainConfig
from graphopt.learning.systems.gdp.env import (
    Graphs,
    GraphSource,
    PlacementTask,
    most_likely,
    sample,
)
from graphopt.learning.systems.gdp.network import GDPPolicy
from graphopt.learning.workers import Workers, make_workers

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
the mean best reward of what the solver offers (`_validate`)."""


class ScoringEnv:
    """A worker's copy of the run's graphs: scores sampled placements (`--ray`, run.workers).

    Scoring is exact and depends only on the placements, so a run scores alike in this process,
    in worker processes or on a Ray cluster.
    """

    def __init__(self, source: GraphSource) -> None:
        self.graphs = source.graphs()

    def score(self, item: tuple[str, int, np.ndarray]) -> PlacementOutcome:
        """(split, graph index, placements [B, n_ops]) -> their outcome."""
        split, index, placements = item
        return self.graphs.env(split, index).score(placements)


Rollout = tuple[PlacementTask, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]
"""One graph's samples in a step: task, actions, their old log-probs, advantages, rewards."""


class GDPTrainer:
    """PPO steps on training graphs (GDP-one, GDP-batch), seeded by (seed, step).

    Args:
        policy: the network to train (in place).
        graphs: where the training graphs are.
        train_ids: indices of the training graphs in the "train" split.
        config: the run's config.
        workers: score the sampled placements there (`ScoringEnv`); None: in this process.
    """

    def __init__(
        self,
        policy: GDPPolicy,
        graphs: Graphs,
        train_ids: np.ndarray,
        config: TrainConfig,
        workers: Workers[ScoringEnv] | None = None,
    ) -> None:
        self.policy = policy
        self.graphs = graphs
        self.workers = workers
        self.train_ids = np.asarray(train_ids)
        self.config = config
        self.optimizer = config.optimizer.optimizer(policy.parameters())
        self.sampled: list[tuple[int, np.ndarray, PlacementOutcome]] = []
        """The last step's (graph index, placements, outcome) per graph: a search keeps them."""

    def step(self, step: int) -> dict[str, float]:
        """PPO's updates on placements of `graphs_per_step` training graphs; the log row."""
        rng, rollouts = self.roll_out(step)
        return self.update(step, rng, rollouts)

    def roll_out(self, step: int) -> tuple[np.random.Generator, list[Rollout]]:
        """Step `step`'s samples of its graphs, scored (kept in `sampled`), and the step's rng."""
        config, ppo = self.config, self.config.ppo
        rng = np.random.default_rng([config.run.seed, step])
        generator = torch.Generator().manual_seed(int(rng.integers(2**62)))
        count = min(config.graphs_per_step, len(self.train_ids))
        picks = rng.choice(self.train_ids, count, replace=False)
        self.policy.train()
        tasks = [self.graphs.get("train", index) for index in picks.tolist()]
        drawn = [self.draw(task, config.samples, generator) for task in tasks]
        items = [
            ("train", index, placements)
            for index, (placements, _) in zip(picks.tolist(), drawn, strict=True)
        ]
        if self.workers is None:
            outcomes = [task.env.score(item[2]) for task, item in zip(tasks, items, strict=True)]
        else:
            outcomes = self.workers.map(ScoringEnv.score, items)
        self.sampled = [
            (index, p, outcome) for (_, index, p), outcome in zip(items, outcomes, strict=True)
        ]
        rollouts = []
        for task, (placements, old_log_p), outcome in zip(tasks, drawn, outcomes, strict=True):
            reward = torch.from_numpy(outcome.reward)
            advantages = trajectory_advantages(reward, ppo.normalize_advantages)
            actions = torch.from_numpy(placements).long()
            rollouts.append((task, actions, old_log_p, advantages, reward))
        return rng, rollouts

    def update(
        self, step: int, rng: np.random.Generator, rollouts: list[Rollout]
    ) -> dict[str, float]:
        """PPO's clipped updates on a step's rollouts; the log row."""
        config, ppo = self.config, self.config.ppo
        progress = step / config.run.steps
        entropy_weight = ppo.entropy_weight_at(progress)
        rate = config.optimizer.learning_rate * ppo.learning_rate_factor(progress)
        totals = np.zeros(5)  # loss, gradient norm, entropy, clip fraction, approximate KL
        with learning_rate(self.optimizer, rate):
            for chunk in minibatches(rng, config.samples, ppo.epochs, ppo.minibatches):
                losses = [
                    self._loss(task, actions[chunk], old[chunk], gain[chunk], entropy_weight)
                    for task, actions, old, gain, _ in rollouts
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
            "reward": float(np.mean([float(r[4].mean()) for r in rollouts])),
            "loss": float(means[0]),
            "grad_norm": float(means[1]),
            "entropy": float(means[2]),
            "clip_fraction": float(means[3]),
            "approx_kl": float(means[4]),
        }

    def draw(
        self, task: PlacementTask, samples: int, generator: torch.Generator
    ) -> tuple[np.ndarray, torch.Tensor]:
        """A graph's sampled actions (here placements [samples, n_ops]) and per-op log-probs."""
        return sample(self.policy, task, samples, generator)

    def _loss(
        self,
        task: PlacementTask,
        actions: torch.Tensor,
        old_log_p: torch.Tensor,
        advantages: torch.Tensor,
        entropy_weight: float,
    ) -> PPOLoss:
        """PPO's loss on a minibatch of one graph's samples (every op one step)."""
        log_p = torch.log_softmax(task.logits(self.policy), dim=-1)
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


@dataclass(frozen=True)
class System:
    """What differs between the PPO systems trained by `run_training` (GDP here, GO beside it).

    Attributes:
        form: the checkpoints' format.
        parse: a training config from a JSON object (`TrainConfig.from_dict`).
        policy: the untrained network of a config.
        hints: whether a config's network takes partition hints.
        source: the run's graphs (dataset, config, hints) as a picklable `GraphSource`.
        trainer: the PPO trainer class.
        validate: (policy, graphs, validation ids, step, config) -> the validation row.
    """

    form: CheckpointFormat
    parse: Callable[[Any], Any]
    policy: Callable[[Any], torch.nn.Module]
    hints: Callable[[Any], bool]
    source: Callable[[str, Any, bool], GraphSource]
    trainer: type[GDPTrainer]
    validate: Callable[[Any, Graphs, np.ndarray, int, Any], dict[str, float]]


def train(
    config: TrainConfig,
    run_dir: str | Path,
    resume: bool = False,
    progress: Callable[[dict[str, float]], None] | None = None,
    ray_address: str | None = None,
    phase: Phase = unwatched,
) -> RunState:
    """Trains a GDP policy as `config` says, writing checkpoints and logs into `run_dir`.

    Files: config.json, log.csv, tensorboard/, last.pt (resumable), best.pt (the policy).
    Sampled placements are scored in `run.workers` processes, or on the Ray cluster at
    `ray_address` ('local': in-process), when either is set; the run is the same. `progress`
    gets every logged row, `phase` what takes seconds besides the steps.

    Raises:
        TrainingError: an existing run without `resume` (or `resume` without one), a resumed
            run with another config, or non-finite values (the last good checkpoint is kept).
    """
    return run_training(config, run_dir, resume, progress, ray_address, GDP_SYSTEM, phase)


def run_training(
    config: Any,
    run_dir: str | Path,
    resume: bool,
    progress: Callable[[dict[str, float]], None] | None,
    ray_address: str | None,
    system: System,
    phase: Phase = unwatched,
) -> RunState:
    """`train` for any `System`: run directory, graphs, workers, resume, steps and checkpoints."""
    run_dir, last = open_run(run_dir, resume)
    torch.manual_seed(config.run.seed)
    policy = system.policy(config.policy)
    hints = system.hints(config.policy)
    if config.dataset.startswith(GRAPH_PREFIX):
        source = system.source(config.dataset, config, hints)
        graphs = source.graphs()
        train_ids = valid_ids = np.arange(len(graphs.splits["train"]))
    else:
        dataset, train_ids, valid_ids = training_graphs(config.dataset, run_dir, config.run, phase)
        source = system.source(str(dataset), config, hints)
        graphs = source.graphs()
    workers = (
        make_workers(partial(ScoringEnv, source), config.run.workers, ray_address)
        if config.run.workers or ray_address is not None
        else None
    )
    trainer = system.trainer(policy, graphs, train_ids, config, workers)
    state = RunState()
    if resume:
        state = restore_run(
            last,
            system.form,
            system.parse,
            config,
            policy,
            lambda: system.policy(config.policy),
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
            lambda step: system.validate(policy, graphs, valid_ids, step, config),
            lambda state: save_policy(run_dir / "best.pt", system, policy, None, config, state),
            lambda state: save_policy(last, system, policy, trainer.optimizer, config, state),
            log,
            progress,
            phase,
        )
    finally:
        log.close()
        if workers is not None:
            workers.close()


def validate_offers(
    graphs: Graphs,
    ids: np.ndarray,
    step: int,
    config: Any,
    most_likely_of: Callable[[PlacementTask], np.ndarray],
    samples_of: Callable[[PlacementTask, int, torch.Generator], tuple[np.ndarray, torch.Tensor]],
) -> dict[str, float]:
    """Mean over the validation graphs of the best reward among what the solver offers.

    That is the most likely actions and `validation_samples` samples, drawn from a generator
    seeded by the run's seed and the graph alone, so every step is judged alike (GDP's and GO's
    validation, each with its own actions).
    """
    rewards = []
    generator = torch.Generator()
    for index in ids.tolist():
        task = graphs.get("valid", index)
        actions = most_likely_of(task)[None]
        if config.validation_samples:
            generator.manual_seed(config.run.seed + index)
            sampled, _ = samples_of(task, config.validation_samples, generator)
            actions = np.concatenate([actions, sampled])
        rewards.append(float(task.env.score(actions).reward.max()))
    return {"step": step, "validation_reward": float(np.mean(rewards))}


def _validate(
    policy: GDPPolicy, graphs: Graphs, ids: np.ndarray, step: int, config: TrainConfig
) -> dict[str, float]:
    """`validate_offers` with the `gdp` solver's offers: the most likely and sampled placements."""
    return validate_offers(
        graphs, ids, step, config, partial(most_likely, policy), partial(sample, policy)
    )


GDP_SYSTEM = System(
    GDP_FORMAT,
    TrainConfig.from_dict,
    GDPPolicy,
    lambda policy: policy.partition_prior is not None,
    lambda dataset, config, hints: GraphSource(dataset, config.machine, hints, config.schedulers),
    GDPTrainer,
    _validate,
)
"""GDP's pieces for `run_training`."""


def save_policy(
    path: Path,
    system: System,
    policy: torch.nn.Module,
    optimizer: torch.optim.Optimizer | None,
    config: Any,
    state: RunState,
) -> None:
    """Writes best.pt (the policy) or last.pt (with the optimizer and run state) of a system."""
    fields = {
        "policy_config": json.dumps(asdict(config.policy)),
        "machine": json.dumps(asdict(config.machine)),
    }
    runs.save_run(path, system.form, policy, optimizer, config, state, fields)
