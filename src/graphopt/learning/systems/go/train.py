"""Training GO's multi-task policy with PPO (paper 002 sections 4-5), as GDP's is trained.

The loop is GDP's (`gdp.train.GDPSystem` and `GDPTrainer`): each step samples `samples`
decisions of `graphs_per_step` graphs, scores them exactly in GO's environment (`go.env`: GO's
priority ready queues and fusion decoder) and takes PPO's clipped updates, every op one action
whose log-probability is the sum of its tasks'. What GO changes is what an action is: a device,
a scheduling level and a fusion level per op, from one forward pass (`go.network`).

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

from functools import partial
from typing import Any

import numpy as np
import torch

from graphopt.learning.run_dir import TrainingError
from graphopt.learning.runs import Row
from graphopt.learning.systems.gdp.config import TrainConfig
from graphopt.learning.systems.gdp.env import Graphs, PlacementTask
from graphopt.learning.systems.gdp.train import (
    PPO_LOG_COLUMNS,
    GDPSystem,
    GDPTrainer,
    Rollout,
    validate_offers,
)
from graphopt.learning.systems.go.config import GO_FORMAT, GOTrainConfig
from graphopt.learning.systems.go.env import (
    GOEnv,
    GOGraphSource,
    act,
    most_likely_actions,
    sample_actions,
    stage_behaviour,
)
from graphopt.learning.systems.go.network import Behaviour, GOPolicy


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

    def _log_p_entropy(
        self, task: PlacementTask, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-op log-probs and entropies of sampled actions (every op one joint action)."""
        acted = act(self.policy, task, self.behaviour, actions=actions, centre=self.centre)
        return acted.log_p, acted.entropy


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


class GOSystem(GDPSystem):
    """GO for the training skeleton: GDP's run with GO's network, environments and actions."""

    name = "go"
    form = GO_FORMAT
    log_columns = PPO_LOG_COLUMNS
    config_class = GOTrainConfig
    trainer = GOTrainer

    def network(self, config: Any) -> torch.nn.Module:
        """The untrained multi-task network."""
        return GOPolicy(config.policy)

    def hints(self, config: Any) -> bool:
        """Whether the placer takes partition hints."""
        return config.policy.placer.partition_prior is not None

    def source(self, dataset: str, config: Any, hints: bool) -> GOGraphSource:
        """The run's graphs with GO's levels, compiler fusion and hint fusion."""
        return GOGraphSource(
            dataset, config.machine, hints, levels=config.policy.levels,
            compiler_fusion=config.compiler_fusion, hint_fusion=config.policy.places_fused,
        )  # fmt: skip

    def validate(self, policy: Any, graphs: Graphs, ids: np.ndarray, step: int, config: Any) -> Row:
        """`validate_offers` with the `go` solver's offers: most likely and sampled decisions."""
        return validate_offers(
            graphs, ids, step, config, partial(most_likely_actions, policy),
            partial(sample_actions, policy),
        )  # fmt: skip


SYSTEM = GOSystem()
"""GO's system (`training.SYSTEMS['go']`)."""
