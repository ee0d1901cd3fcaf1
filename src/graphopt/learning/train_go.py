"""Training GO's multi-task policy with PPO (paper 002 sections 4-5), as GDP's is trained.

The loop is GDP's (`train_gdp.run_training` and `GDPTrainer`): each step samples `samples`
decisions of `graphs_per_step` graphs, scores them exactly in GO's environment (`envs.go`: GO's
priority ready queues and fusion decoder) and takes PPO's clipped updates, every op one action
whose log-probability is the sum of its tasks'. What GO changes is what an action is: a device,
a scheduling level and a fusion level per op, from one forward pass (`networks.go`).

The mode (`GOConfig.mode`, GO fig. 6) sets what is trained when. Tasks joined by '+' are one
stage: sampled together, the later conditioned on the earlier's actions. Stages separated by '|'
split `run.steps` equally and are trained one after another: in stage k its tasks are sampled,
the earlier stages' tasks take their trained heads' most likely actions and the later stages'
tasks are left undecided, so the environment gives them the compiler's defaults (critical-path
order, XLA-like default fusion): each task is optimized knowing only the decisions before it,
as GO's single-task modes are. Validation scores every task's most likely action, and the best
of `validation_samples` samples beside it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

from graphopt.configs import FieldError, read_config
from graphopt.costmodels.machine import Machine
from graphopt.ir.graph import Graph
from graphopt.learning.envs.go import GOEnv
from graphopt.learning.networks.go import Acted, Behaviour, GOPolicy
from graphopt.learning.networks.go_config import GO_FORMAT, GOConfig
from graphopt.learning.objectives.ppo import PPOLoss, ppo_loss
from graphopt.learning.runs import Phase, RunState, TrainingError, load_config, unwatched
from graphopt.learning.train_gdp import (
    GDPTrainer,
    Graphs,
    GraphSource,
    PlacementTask,
    Rollout,
    System,
    TrainConfig,
    run_training,
    validate_offers,
)


@dataclass(frozen=True)
class GOTrainConfig(TrainConfig):
    """Everything that defines a GO training run: GDP's fields with GO's network and fusion.

    Attributes:
        policy: the multi-task network and its mode.
        compiler_fusion: how graphs fuse when the mode has no fusion task: 'default'
            (XLA-like, the compiler's) or 'none'.
        schedulers: GO orders events with its priority ready queues only: 'ready-queue'.
    """

    name: str = "go"
    policy: GOConfig = field(default_factory=GOConfig)
    compiler_fusion: Literal["none", "default"] = "default"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.schedulers != ("ready-queue",):
            raise FieldError(
                "schedulers",
                f"GO orders events with its priority ready queues: ['ready-queue'], got "
                f"{list(self.schedulers)}",
            )

    @classmethod
    def from_dict(cls, data: Any) -> GOTrainConfig:
        """A config from a JSON object; unknown fields and wrong types are refused, named."""
        return read_config(cls, data, "GO training config", TrainingError)

    @classmethod
    def load(cls, source: str | Path) -> GOTrainConfig:
        """A config from a JSON file, or the shipped config of that name."""
        return load_config(cls, source, "GO training config")


class GOGraphs(Graphs):
    """A run's graphs with GO's environments (`GOEnv`)."""

    def __init__(
        self,
        splits: dict[str, Sequence[Graph]],
        machine: Machine,
        hints: bool,
        levels: int,
        compiler_fusion: Literal["none", "default"],
        fusion_levels: bool = True,
        pinned: np.ndarray | None = None,
        hint_fusion: bool = True,
    ) -> None:
        super().__init__(splits, machine, hints, pinned=pinned)
        self.levels = levels
        self.compiler_fusion = compiler_fusion
        self.fusion_levels = fusion_levels
        self.hint_fusion = hint_fusion

    def make_env(self, graph: Graph) -> GOEnv:
        """GO's environment of one graph."""
        return GOEnv(
            graph, self.machine, self.levels, self.compiler_fusion,
            fusion_levels=self.fusion_levels, pinned=self.pinned, hint_fusion=self.hint_fusion,
        )  # fmt: skip


@dataclass(frozen=True)
class GOGraphSource(GraphSource):
    """`GraphSource` for GO: the levels, compiler fusion and hint fusion its environments need."""

    levels: int = 8
    compiler_fusion: Literal["none", "default"] = "default"
    hint_fusion: bool = True

    def graphs(self) -> GOGraphs:
        """The run's graphs with GO's environments."""
        return GOGraphs(
            self.splits(), self.machine.machine(), self.hints, self.levels, self.compiler_fusion,
            hint_fusion=self.hint_fusion,
        )  # fmt: skip


def stage_behaviour(config: GOConfig, step: int, steps: int) -> dict[str, Behaviour]:
    """Each task's behaviour in step `step` of `steps`: its stage's sampled, earlier ones greedy.

    The later stages' tasks are left out (undecided: the compiler's defaults).
    """
    stages = config.stages
    k = min(step * len(stages) // max(steps, 1), len(stages) - 1)
    done = {task for stage in stages[:k] for task in stage}
    return {
        task: "sample" if task in stages[k] else "greedy"
        for task in config.tasks
        if task in stages[k] or task in done
    }


def act(
    policy: GOPolicy,
    task: PlacementTask,
    behaviour: dict[str, Behaviour],
    samples: int = 1,
    generator: torch.Generator | None = None,
    actions: torch.Tensor | None = None,
    centre: np.ndarray | None = None,
) -> Acted:
    """The policy's decisions on one graph (`GOPolicy.act` with the task's inputs)."""
    env = task.env
    assert isinstance(env, GOEnv)
    fusable = torch.from_numpy(env.fusable)
    pulled = None if centre is None else torch.from_numpy(centre)
    return policy.act(
        task.batch, task.n_devices, task.hint, behaviour, samples, generator, actions, fusable,
        pulled,
    )  # fmt: skip


def most_likely_actions(policy: GOPolicy, task: PlacementTask) -> np.ndarray:
    """[3, n_ops] every task's most likely action (zero-shot inference)."""
    policy.eval()
    with torch.no_grad():
        acted = act(policy, task, dict.fromkeys(policy.go.tasks, "greedy"))
    return acted.actions[0].numpy()


def sample_actions(
    policy: GOPolicy,
    task: PlacementTask,
    samples: int,
    generator: torch.Generator,
    behaviour: dict[str, Behaviour] | None = None,
    centre: np.ndarray | None = None,
) -> tuple[np.ndarray, torch.Tensor]:
    """Sampled actions [samples, 3, n_ops] (every task, or as `behaviour` says) and log-probs.

    With `centre` ([3, n_ops]) the priors pull toward it instead of the defaults.
    """
    behaviour = behaviour or dict.fromkeys(policy.go.tasks, "sample")
    with torch.no_grad():
        acted = act(policy, task, behaviour, samples, generator, centre=centre)
    return acted.actions.numpy(), acted.log_p


class GOTrainer(GDPTrainer):
    """GDP's PPO steps on GO's actions, stage by stage (`stage_behaviour`)."""

    policy: GOPolicy
    behaviour: dict[str, Behaviour]
    centre: np.ndarray | None = None
    """[3, n_ops] the decisions the priors pull toward (`CentredGOTrainer`); None: defaults."""

    def step(self, step: int) -> dict[str, float]:
        """One PPO step of the stage `step` falls in."""
        self.behaviour = stage_behaviour(self.policy.go, step, self.config.run.steps)
        return super().step(step)

    def draw(
        self, task: PlacementTask, samples: int, generator: torch.Generator
    ) -> tuple[np.ndarray, torch.Tensor]:
        """The stage's sampled actions [samples, 3, n_ops] and their per-op log-probs."""
        return sample_actions(self.policy, task, samples, generator, self.behaviour, self.centre)

    def _loss(
        self,
        task: PlacementTask,
        actions: torch.Tensor,
        old_log_p: torch.Tensor,
        advantages: torch.Tensor,
        entropy_weight: float,
    ) -> PPOLoss:
        """PPO's loss on a minibatch of one graph's samples (every op one joint action)."""
        acted = act(self.policy, task, self.behaviour, actions=actions, centre=self.centre)
        return ppo_loss(
            acted.log_p,
            old_log_p,
            advantages,
            acted.entropy,
            self.config.ppo.clip,
            entropy_weight,
        )


class CentredGOTrainer(GOTrainer):
    """GO-one as a learned local search: PPO on one graph, sampling around the best so far.

    GO's priors spread samples far from the start: on gpt2-tiny's training graph (368 ops, 4
    devices) a sample of the shipped priors changes about 21 devices, 64 scheduling levels and
    the levels of most fusable ops, and is 2.2 times slower than the start (median); none of
    640 beat it, though 241 of its 5,822 single-decision changes do. Here the priors pull toward
    an incumbent (`GOPolicy.act`'s `centre`) with strengths set so that a sample changes about
    `explore` decisions per task (`GOPolicy.explore`), and a step's best sample becomes the
    incumbent when it beats it, after the step's updates (so each step's samples and its PPO
    ratios share one distribution). PPO learns which changes pay, in the heads' logits and the
    strengths; with `learn` False the same search runs on the unchanging network, the control
    that shows what learning adds.

    Args:
        policy, graphs, train_ids, config, workers: as `GDPTrainer`; one training graph.
        centre: [3, n_ops] the first incumbent's decisions (every task decided).
        reward: its reward.
        explore: decisions per task a sample changes, about.
        learn: take PPO's updates.
    """

    def __init__(
        self,
        policy: GOPolicy,
        graphs: Graphs,
        train_ids: np.ndarray,
        config: TrainConfig,
        workers: Any = None,
        *,
        centre: np.ndarray,
        reward: float,
        explore: float,
        learn: bool = True,
    ) -> None:
        super().__init__(policy, graphs, train_ids, config, workers)
        if len(self.train_ids) != 1:
            raise TrainingError(f"a centred search trains on one graph, got {len(train_ids)}")
        env = graphs.env("train", int(self.train_ids[0]))
        assert isinstance(env, GOEnv)
        policy.explore(env.n_devices, env.graph.n_ops, int(env.fusable.sum()), explore)
        self.centre = np.array(centre, dtype=np.int64)
        self.reward = reward
        self.learn = learn

    def update(
        self, step: int, rng: np.random.Generator, rollouts: list[Rollout]
    ) -> dict[str, float]:
        """PPO's updates when learning; the frozen control leaves the network as it is."""
        return super().update(step, rng, rollouts) if self.learn else {"step": step + 1}

    def step(self, step: int) -> dict[str, float]:
        """A step's samples around the incumbent and its updates, then the incumbent's move."""
        row = super().step(step)
        for _, actions, outcome in self.sampled:
            best = int(np.argmax(outcome.reward))
            if outcome.reward[best] > self.reward:
                self.centre = actions[best].astype(np.int64)
                self.reward = float(outcome.reward[best])
        return row


def _validate(
    policy: GOPolicy, graphs: Graphs, ids: np.ndarray, step: int, config: GOTrainConfig
) -> dict[str, float]:
    """`validate_offers` with the `go` solver's offers: the most likely and sampled decisions."""
    return validate_offers(
        graphs, ids, step, config, partial(most_likely_actions, policy),
        partial(sample_actions, policy),
    )  # fmt: skip


GO_SYSTEM = System(
    GO_FORMAT,
    GOTrainConfig.from_dict,
    GOPolicy,
    lambda policy: policy.placer.partition_prior is not None,
    lambda dataset, config, hints: GOGraphSource(
        dataset,
        config.machine,
        hints,
        levels=config.policy.levels,
        compiler_fusion=config.compiler_fusion,
        hint_fusion=config.policy.places_fused,
    ),  # fmt: skip
    GOTrainer,
    _validate,
)
"""GO's pieces for `train_gdp.run_training`."""


def train(
    config: GOTrainConfig,
    run_dir: str | Path,
    resume: bool = False,
    progress: Callable[[dict[str, float]], None] | None = None,
    ray_address: str | None = None,
    phase: Phase = unwatched,
) -> RunState:
    """Trains a GO policy as `config` says, into `run_dir` (files and errors as GDP's `train`)."""
    return run_training(config, run_dir, resume, progress, ray_address, GO_SYSTEM, phase)
