"""Training GDP's placement policy with PPO (paper 003 section 4), top to bottom.

Each step picks `graphs_per_step` training graphs (seeded by (run.seed, step)), samples `samples`
placements of each from the policy in one forward pass per graph, scores them exactly in the
placement environment (`learning.placement`: GO's ready-queue schedule, GDP's reward), and takes
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
from dataclasses import asdict
from functools import partial
from typing import Any

import numpy as np
import torch

from graphopt.errors import GraphoptError
from graphopt.learning.labels import Labels
from graphopt.learning.objectives.imitation import matched_cross_entropy
from graphopt.learning.objectives.ppo import (
    PPOLoss,
    ppo_loss,
    ppo_update,
    trajectory_advantages,
)
from graphopt.learning.optim import clipped_step, learning_rate
from graphopt.learning.placement.env import PlacementOutcome
from graphopt.learning.run_dir import TrainingError
from graphopt.learning.runs import (
    GRAPH_PREFIX,
    Row,
    training_graphs,
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
from graphopt.learning.training import Run, Session, System, nothing
from graphopt.learning.workers import Workers, make_workers

PPO_LOG_COLUMNS = (
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
"""What a PPO run's log.csv records: per step the mean sampled reward over its graphs, and the
loss, gradient norm, per-op entropy, clipped share and approximate KL averaged over its updates;
per validation the mean best reward of what the solver offers (`GDPSystem.validate`)."""
LOG_COLUMNS = (*PPO_LOG_COLUMNS, "imitation_loss", "label_agreement")
"""GDP's: PPO's, and with `imitation` the step's imitation loss and the share of ops whose most
likely device is the (renamed) label's."""
IMITATION_STREAM = 1
"""Seeds an imitation step's graph picks by (run.seed, step, this), apart from PPO's stream, so
that a run without imitation draws exactly as before it existed."""


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
        optimizer: Adam over the policy (the run's, restored on resume); None: a new one.
    """

    def __init__(
        self,
        policy: GDPPolicy,
        graphs: Graphs,
        train_ids: np.ndarray,
        config: TrainConfig,
        workers: Workers[ScoringEnv] | None = None,
        optimizer: torch.optim.Optimizer | None = None,
    ) -> None:
        self.policy = policy
        self.graphs = graphs
        self.workers = workers
        self.train_ids = np.asarray(train_ids)
        self.config = config
        self.optimizer = optimizer or config.optimizer.optimizer(policy.parameters())
        self.sampled: list[tuple[int, np.ndarray, PlacementOutcome]] = []
        """The last step's (graph index, placements, outcome) per graph: a search keeps them."""
        self.labels = {} if config.imitation is None else read_labels(config, graphs, train_ids)
        """Each labelled training graph's search placement (`imitation`), by index."""

    def step(self, step: int) -> dict[str, float]:
        """PPO's updates on `graphs_per_step` training graphs, then imitation's; the log row.

        Without `imitation`, PPO's alone; with `imitation.ppo` false, imitation's alone.
        """
        imitation = self.config.imitation
        row = {"step": step + 1}
        if imitation is None or imitation.ppo:
            rng, rollouts = self.roll_out(step)
            row = self.update(step, rng, rollouts)
        if imitation is not None:
            row.update(self.imitate(step))
        return row

    def imitate(self, step: int) -> dict[str, float]:
        """One clipped Adam step on the imitation loss of `graphs_per_step` labelled graphs.

        The loss is the mean over the graphs of the cross-entropy against each graph's label,
        its devices renamed as the policy likes best (`matched_cross_entropy`), times the
        config's weight; the learning rate decays as PPO's does.
        """
        config, imitation = self.config, self.config.imitation
        assert imitation is not None
        rng = np.random.default_rng([config.run.seed, step, IMITATION_STREAM])
        labelled = np.array(sorted(self.labels))
        picks = rng.choice(labelled, min(config.graphs_per_step, labelled.size), replace=False)
        self.policy.train()
        losses = []
        for index in picks.tolist():
            task = self.graphs.get("train", index)
            log_p = torch.log_softmax(task.logits(self.policy), dim=-1)
            losses.append(matched_cross_entropy(log_p, self.labels[index], task.n_devices))
        loss = imitation.weight * torch.stack([item.loss for item in losses]).mean()
        rate = config.optimizer.learning_rate * config.ppo.learning_rate_factor(
            step / config.run.steps
        )
        with learning_rate(self.optimizer, rate):
            clipped_step(self.policy, self.optimizer, loss, step, config.optimizer.grad_clip)
        return {
            "imitation_loss": float(loss.detach()),
            "label_agreement": float(np.mean([item.agreement for item in losses])),
        }

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
        """PPO's clipped updates on a step's rollouts (`ppo_update`); the log row.

        A minibatch is the same sample indices of every graph of the step; its loss is the
        mean of the graphs' losses.
        """

        def minibatch(chunk: torch.Tensor, entropy_weight: float) -> PPOLoss:
            losses = [
                self._loss(task, actions[chunk], old[chunk], gain[chunk], entropy_weight)
                for task, actions, old, gain, _ in rollouts
            ]
            logged = [
                torch.tensor(np.mean([float(value) for value in values]), dtype=torch.float64)
                for values in zip(*[loss[2:] for loss in losses], strict=True)
            ]
            return PPOLoss(
                torch.stack([loss.total for loss in losses]).mean(),
                torch.stack([loss.policy for loss in losses]).mean(),
                *logged,
            )

        config = self.config
        means = ppo_update(
            self.policy, self.optimizer, config.ppo, config.optimizer, step / config.run.steps,
            step, rng, config.samples, minibatch,
        )  # fmt: skip
        reward = float(np.mean([float(r[4].mean()) for r in rollouts]))
        return {"step": step + 1, "reward": reward, **means}

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
        """PPO's loss on a minibatch of one graph's samples, scored by `_log_p_entropy`."""
        log_p, entropy = self._log_p_entropy(task, actions)
        return ppo_loss(log_p, old_log_p, advantages, entropy, self.config.ppo.clip, entropy_weight)

    def _log_p_entropy(
        self, task: PlacementTask, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-op log-probs and entropies of sampled actions (every op one step).

        The one part of PPO's loss a subclass's actions change (GO: one joint action per op).
        """
        log_p = torch.log_softmax(task.logits(self.policy), dim=-1)
        new_log_p = log_p.gather(1, actions.T).T
        probabilities = log_p.exp()
        entropy = -(probabilities * torch.where(probabilities > 0, log_p, 0.0)).sum(-1)
        return new_log_p, entropy.expand_as(new_log_p)


def read_labels(
    config: TrainConfig, graphs: Graphs, train_ids: np.ndarray
) -> dict[int, np.ndarray]:
    """The imitation labels of a run's training graphs, by index, checked against them.

    Raises:
        TrainingError: the labels are unreadable, were made for another device count, or
            label none of the run's training graphs.
    """
    assert config.imitation is not None
    where = config.imitation.labels
    try:
        labels = Labels.open(where)
    except GraphoptError as error:
        raise TrainingError(f"imitation.labels: {error}") from None
    if labels.config.devices != config.machine.devices:
        raise TrainingError(
            f"imitation.labels: {where} places onto {labels.config.devices} devices, the run's "
            f"machine has {config.machine.devices}"
        )
    found = {}
    for index in train_ids.tolist():
        graph = graphs.splits["train"][index]
        try:
            placement = labels.placement("train", index, graph)
        except GraphoptError as error:
            raise TrainingError(f"imitation.labels: {error}") from None
        if placement is not None:
            found[index] = placement
    if not found:
        raise TrainingError(
            f"imitation.labels: {where} labels none of the run's training graphs (label "
            f"them with `graphopt dataset label {config.dataset}`)"
        )
    return found


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


class GDPSystem(System):
    """GDP for the training skeleton (`training.train`); GO's system derives from it."""

    name = "gdp"
    form = GDP_FORMAT
    log_columns = LOG_COLUMNS
    config_class = TrainConfig
    trainer: Callable[..., GDPTrainer] = GDPTrainer

    def network(self, config: Any) -> torch.nn.Module:
        """The untrained placement network."""
        return GDPPolicy(config.policy)

    def hints(self, config: Any) -> bool:
        """Whether the network takes partition hints."""
        return config.policy.partition_prior is not None

    def source(self, dataset: str, config: Any, hints: bool) -> GraphSource:
        """The run's graphs as a picklable source (workers open them too)."""
        return GraphSource(dataset, config.machine, hints, config.schedulers)

    def validate(self, policy: Any, graphs: Graphs, ids: np.ndarray, step: int, config: Any) -> Row:
        """`validate_offers` with the `gdp` solver's offers: most likely and sampled placements."""
        return validate_offers(
            graphs, ids, step, config, partial(most_likely, policy), partial(sample, policy)
        )

    def updates_per_step(self, config: Any) -> int:
        """PPO's epochs times minibatches (when it runs), and one imitation step (when asked)."""
        imitation = config.imitation
        ppo = config.ppo.updates if imitation is None or imitation.ppo else 0
        return ppo + (imitation is not None)

    def fields(self, config: Any) -> dict[str, Any]:
        """The network's config and the machine, which the solver reads back."""
        return {
            "policy_config": json.dumps(asdict(config.policy)),
            "machine": json.dumps(asdict(config.machine)),
        }

    def start(self, run: Run) -> Session:
        """The graphs, the scoring workers (when asked for) and the trainer.

        A `graph:` dataset's files are trained and validated on; workers score when
        `run.workers` or `ray_address` asks for them.
        """
        config = run.config
        hints = self.hints(config)
        if config.dataset.startswith(GRAPH_PREFIX):
            source = self.source(config.dataset, config, hints)
            graphs = source.graphs()
            train_ids = valid_ids = np.arange(len(graphs.splits["train"]))
        else:
            dataset, train_ids, valid_ids = training_graphs(
                config.dataset, run.run_dir, config.run, run.phase
            )
            source = self.source(str(dataset), config, hints)
            graphs = source.graphs()
        if not config.run.workers and run.ray_address is None:
            workers = None
        else:
            workers = make_workers(partial(ScoringEnv, source), config.run.workers, run.ray_address)
        trainer = self.trainer(run.network, graphs, train_ids, config, workers, run.optimizer)
        return Session(
            trainer.step,
            lambda step: self.validate(run.network, graphs, valid_ids, step, config),
            nothing if workers is None else workers.close,
        )


SYSTEM = GDPSystem()
"""GDP's system (`training.SYSTEMS['gdp']`)."""
