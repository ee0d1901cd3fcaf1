"""GDP's placement policy as a solver (paper 003): zero-shot placement, optionally fine-tuned.

The policy places every op in one forward pass; GO's ready-queue scheduler orders the events
(`envs.placement`), and the scorer scores them. The solver offers the policy's most likely
placement (zero-shot), then, with `finetune` > 0, takes that many PPO steps on this graph alone
from the checkpoint's weights with its training settings (GDP's fine-tuning, "in under 50
steps"; every placement they sample counts against the budget) and offers the most likely
placement again; then `samples` placements sampled from the policy (each one evaluation). The
tracker keeps the best. Pinned ops keep their pins. Without a `policy`, the shipped one
(`graphopt/policies/gdp-makespan.pt`) is used; a policy places onto 2..its `max_devices`
devices.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources

import numpy as np
import torch

from graphopt.ir.solution import Solution
from graphopt.learning.formats import CheckpointError
from graphopt.learning.networks.gdp import GDPPolicy
from graphopt.learning.networks.gdp_config import GDP_FORMAT, GDPConfig
from graphopt.learning.runs import stored_configs
from graphopt.learning.saving import load_weights, read_checkpoint
from graphopt.learning.train_gdp import GDPTrainer, Graphs, TrainConfig, most_likely, sample
from graphopt.solvers.base import Objective, Problem, Solver, SolverError, Tracker
from graphopt.solvers.ready_queue import offer_placement


@dataclass(frozen=True)
class GDPSolverConfig:
    """How the trained policy is used.

    Attributes:
        policy: path of a GDP checkpoint (best.pt of `graphopt train gdp`); None: the shipped.
        finetune: PPO steps on the graph before placing it (0: zero-shot).
        samples: placements sampled and offered after the most likely one.
    """

    policy: str | None = None
    finetune: int = 0
    samples: int = 64

    def __post_init__(self) -> None:
        if not 0 <= self.finetune <= 100_000:
            raise SolverError(f"finetune must be in [0, 100000] steps, got {self.finetune}")
        if self.samples < 0:
            raise SolverError(f"samples must be >= 0, got {self.samples}")


def shipped_gdp_policy() -> str | None:
    """The packaged GDP policy (one network for every device count it supports), or None."""
    path = resources.files("graphopt.policies").joinpath("gdp-makespan.pt")
    return str(path) if path.is_file() else None


@cache
def load_gdp_checkpoint(path: str) -> tuple[GDPConfig, dict, TrainConfig]:
    """A GDP checkpoint's network config, weights and training config (read once per process).

    Raises:
        CheckpointError: not a GDP checkpoint, or malformed.
    """
    record = read_checkpoint(path, GDP_FORMAT)
    trained, config = stored_configs(record, path, TrainConfig.from_dict, GDPConfig)
    state = record["model_state"]
    load_weights(GDPPolicy(config), lambda: GDPPolicy(config), state, f"{path}: model_state")
    return config, state, trained


class GDP(Solver):
    """Placements from a trained GDP policy, zero-shot or fine-tuned on the graph.

    Args:
        config: the checkpoint, fine-tuning steps and samples.
    """

    name = "gdp"
    objectives = frozenset({Objective.MAKESPAN})

    def __init__(self, config: GDPSolverConfig | None = None) -> None:
        self.config = config or GDPSolverConfig()

    def _checkpoint(self, n_devices: int) -> tuple[GDPPolicy, TrainConfig]:
        """A fresh network with the checkpoint's weights, and the run's training config."""
        path = self.config.policy or shipped_gdp_policy()
        if path is None:
            raise SolverError(
                "no shipped gdp policy; train one with `graphopt train gdp CONFIG` and pass it "
                "with --policy"
            )
        try:
            config, state, trained = load_gdp_checkpoint(str(path))
        except CheckpointError as error:
            raise SolverError(str(error)) from None
        if not 2 <= n_devices <= config.max_devices:
            raise SolverError(
                f"{path} places onto 2..{config.max_devices} devices, the machine has {n_devices}"
            )
        policy = GDPPolicy(config)
        policy.load_state_dict(state)
        return policy, trained

    def run(
        self,
        problem: Problem,
        tracker: Tracker,
        rng: np.random.Generator,
        initial: Sequence[Solution],
    ) -> None:
        """Fine-tunes (if asked), then offers the most likely and the sampled placements."""
        graph, machine = problem.graph, problem.machine
        if machine.n_devices == 1 or graph.n_ops == 0:  # one placement only: no policy needed
            offer_placement(problem, tracker, np.zeros(graph.n_ops, dtype=np.int32))
            return
        policy, trained = self._checkpoint(machine.n_devices)
        graphs = Graphs({"train": [graph]}, machine)
        env, batch = graphs.get("train", 0)
        offer_placement(problem, tracker, most_likely(policy, batch, env.n_devices))
        if self.config.finetune:
            run = replace(trained.run, steps=self.config.finetune, seed=int(rng.integers(2**62)))
            tune = replace(trained, graphs_per_step=1, run=run)
            trainer = GDPTrainer(policy, graphs, np.zeros(1, dtype=np.int64), tune)
            for step in range(self.config.finetune):
                tracker.spend(min(tune.samples, tracker.remaining))
                trainer.step(step)
            offer_placement(problem, tracker, most_likely(policy, batch, env.n_devices))
        placements = []
        if self.config.samples:
            generator = torch.Generator().manual_seed(int(rng.integers(2**62)))
            sampled, _ = sample(policy, batch, env.n_devices, self.config.samples, generator)
            placements.extend(sampled)
        for placement in placements:
            offer_placement(problem, tracker, placement)


def gdp(policy: str | None = None, finetune: int = 0) -> GDP:
    """The GDP placer with the checkpoint at `policy` (None: the shipped one)."""
    return GDP(GDPSolverConfig(policy=policy, finetune=finetune))
