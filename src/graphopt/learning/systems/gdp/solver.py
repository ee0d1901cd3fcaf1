"""GDP's placement policy as a solver (paper 003): zero-shot placement, optionally fine-tuned.

The policy places every op in one forward pass; its environment's schedulers order the events
(`learning.placement`: GO's ready queues, and insertion timelines when it was trained with them),
and the scorer scores them. The solver offers, one evaluation each: the partition hint itself
when the policy takes one (so that it never returns worse than its classical start: trained on
small graphs, the shipped policy strays from the hint on resnet18 by 15-28 %), the policy's
most likely placement (zero-shot), then, with `finetune` > 0, every placement sampled by that
many PPO steps on this graph alone from the checkpoint's weights with its training settings
(GDP's fine-tuning, "in under 50 steps") and the most likely placement again; then `samples`
placements sampled from the policy. The tracker keeps the best. Pinned ops keep their pins in
every placement scored, fine-tuning's included, so PPO learns from what the problem allows.
With `search` (the registry's `gdp`; `gdp-policy` is the policy alone), `auto`'s search then
spends the rest of the budget, started from the best distinct placements the policy gave
(`learning.seeding`): alone, the policy was its hint and no better on unseen models, and `auto`
in the same time was ahead (issue 45).
Without a `policy`, the shipped one (`graphopt/policies/gdp-makespan.pt`) is used; a policy
places onto 2..its `max_devices` devices.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache, partial
from typing import Any

import numpy as np
import torch

from graphopt.learning.formats import CheckpointError, CheckpointFormat, shipped_policy_path
from graphopt.learning.placement.env import PlacementEnv
from graphopt.learning.runs import stored_configs
from graphopt.learning.saving import load_weights, read_checkpoint
from graphopt.learning.seeding import Elite, search_rest
from graphopt.learning.systems.gdp.config import GDP_FORMAT, GDPConfig, TrainConfig
from graphopt.learning.systems.gdp.env import Graphs, most_likely, sample
from graphopt.learning.systems.gdp.network import GDPPolicy
from graphopt.solvers.base import Initial, Objective, Problem, Rng, Solver, SolverError, Tracker
from graphopt.solvers.ready_queue import offer_only_placement


@dataclass(frozen=True)
class GDPSolverConfig:
    """How the trained policy is used.

    Attributes:
        policy: path of a GDP checkpoint (best.pt of `graphopt train gdp`); None: the shipped.
        finetune: PPO steps on the graph before placing it (0: zero-shot).
        samples: placements sampled and offered after the most likely one.
        scratch: start from an untrained network of the checkpoint's shape, seeded by the
            solve's seed, instead of its weights: GDP-one (paper 003), a policy trained on
            this graph alone for `finetune` steps.
        search: after the policy's offers, run `auto`'s search for the rest of the budget,
            started from the `seeds` best distinct solutions they gave.
        seeds: how many of the policy's best distinct solutions start that search.
        policy_share: with `search`, the most of the budget the policy's offers may take; the
            offers left when it is spent are dropped, so a slow policy cannot eat the search.
            Fine-tuning asked for (`finetune` > 0) takes what it needs instead.
    """

    policy: str | None = None
    finetune: int = 0
    samples: int = 64
    scratch: bool = False
    search: bool = True
    seeds: int = 8
    policy_share: float = 0.25

    def __post_init__(self) -> None:
        if not 0 <= self.finetune <= 100_000:
            raise SolverError(f"finetune must be in [0, 100000] steps, got {self.finetune}")
        if self.samples < 0:
            raise SolverError(f"samples must be >= 0, got {self.samples}")
        if self.seeds < 1:
            raise SolverError(f"seeds must be >= 1, got {self.seeds}")
        if not 0.0 < self.policy_share <= 1.0:
            raise SolverError(f"policy_share must be in (0, 1], got {self.policy_share}")


@cache
def load_system_checkpoint(
    path: str,
    form: CheckpointFormat,
    parse: Callable[[Any], Any],
    network: Callable[[Any], torch.nn.Module],
    network_config: type,
) -> tuple[Any, dict, Any]:
    """A PPO system's checkpoint: network config, checked weights and training config.

    Read once per process: a compiler solves many graphs with one policy.

    Args:
        path: the checkpoint.
        form: the system's checkpoint format.
        parse: its training config reader (`TrainConfig.from_dict`).
        network: builds its untrained network from a network config.
        network_config: its network config dataclass.

    Raises:
        CheckpointError: not a checkpoint of that system, or malformed.
    """
    record = read_checkpoint(path, form)
    trained, config = stored_configs(record, path, parse, network_config)
    state = record["model_state"]
    load_weights(network(config), state, f"{path}: model_state")
    return config, state, trained


def load_gdp_checkpoint(path: str) -> tuple[GDPConfig, dict, TrainConfig]:
    """A GDP checkpoint's network config, weights and training config (`load_system_checkpoint`).

    Raises:
        CheckpointError: not a GDP checkpoint, or malformed.
    """
    return GDP()._load(path)


class GDP(Solver):
    """Placements from a trained GDP policy, zero-shot or fine-tuned on the graph.

    Args:
        config: the checkpoint, fine-tuning steps and samples.
    """

    name = "gdp"
    system = "gdp"
    """The system's name: its shipped policy's and `graphopt train`'s."""
    objectives = frozenset({Objective.MAKESPAN})
    network: Callable[[Any], GDPPolicy] = GDPPolicy
    network_config: type = GDPConfig
    trained_config: Any = TrainConfig
    form = GDP_FORMAT
    """The system's checkpoints: their format, network and training config."""
    places_only = True
    """It decides placements alone, so one device (one placement) leaves it nothing to do."""

    def __init__(self, config: GDPSolverConfig | None = None) -> None:
        self.config = config or GDPSolverConfig()

    def _load(self, path: str) -> tuple[Any, dict, Any]:
        """(network config, weights, training config) of a checkpoint of this system."""
        cls = type(self)
        return load_system_checkpoint(
            path, cls.form, cls.trained_config.from_dict, cls.network, cls.network_config
        )

    def _readable(self, path: str) -> tuple[Any, dict, Any]:
        """`_load`, with an unreadable checkpoint refused as a SolverError naming it."""
        try:
            return self._load(path)
        except CheckpointError as error:
            raise SolverError(str(error)) from None

    def _check(self, path: str, config: Any, problem: Problem) -> None:
        """Refuses a checkpoint that cannot serve this problem, naming both."""
        n_devices = problem.machine.n_devices
        if not 2 <= n_devices <= config.max_devices:
            raise SolverError(
                f"{path} places onto 2..{config.max_devices} devices, the machine has {n_devices}"
            )

    def _checkpoint(self, problem: Problem, rng: Rng) -> tuple[Any, Any]:
        """A network with the checkpoint's weights (untrained: scratch) and its training config."""
        d = problem.machine.n_devices
        path = self.config.policy or shipped_policy_path(self.system, "makespan", d)
        if path is None:
            raise SolverError(
                f"no shipped {self.system} policy; train one with `graphopt train {self.system} "
                "CONFIG` and pass it with --policy"
            )
        config, state, trained = self._readable(str(path))
        self._check(str(path), config, problem)
        network = type(self).network
        if self.config.scratch:
            with torch.random.fork_rng():
                torch.manual_seed(int(rng.integers(2**62)))
                return network(config), trained
        policy = network(config)
        policy.load_state_dict(state)
        return policy, trained

    def run(self, problem: Problem, tracker: Tracker, rng: Rng, initial: Initial) -> None:
        """Fine-tunes (if asked), offers the most likely and the sampled placements, searches."""
        if self.config.policy is not None:  # refused before an offer can end the run
            self._readable(str(self.config.policy))
        if self.places_only and offer_only_placement(problem, tracker):
            return
        elite = Elite(problem, self.config.seeds)
        if not self.config.search:
            with tracker.exempt_from_stall():
                self._offer_policy(problem, tracker, rng, elite)
            return
        share = 1.0 if self.config.finetune else self.config.policy_share
        with tracker.exempt_from_stall(), tracker.phase(share):
            self._offer_policy(problem, tracker, rng, elite)
        search_rest(problem, tracker, rng, [*initial, *elite.solutions()])

    def _offer_policy(self, problem: Problem, tracker: Tracker, rng: Rng, elite: Elite) -> None:
        """Offers the hint, the most likely placement, fine-tuning's and the sampled ones."""
        graph, machine = problem.graph, problem.machine
        policy, trained = self._checkpoint(problem, rng)
        graphs = Graphs(
            {"train": [graph]}, machine, policy.hint_strength is not None, trained.schedulers,
            problem.pinned,
        )  # fmt: skip
        task = graphs.get("train", 0)
        offer = partial(offer_scheduled, tracker, task.env, elite)
        if task.hint is not None:
            offer(task.hint.numpy())
        offer(most_likely(policy, task))
        if self.config.finetune:
            from graphopt.learning.systems.gdp.finetune import fine_tune

            fine_tune(policy, graphs, trained, self.config.finetune, rng, offer)
            offer(most_likely(policy, task))
        if self.config.samples:
            generator = torch.Generator().manual_seed(int(rng.integers(2**62)))
            sampled, _ = sample(policy, task, self.config.samples, generator)
            offer(sampled)


def offer_scheduled(
    tracker: Tracker, env: PlacementEnv, elite: Elite | None, placements: np.ndarray
) -> None:
    """Offers placements ([B, n_ops] or [n_ops]) scheduled as `env` schedules them.

    The policy learned what its environment's schedulers make of a placement, so its solutions
    are scheduled the same way; as many rows as the budget has left; `env` keeps the problem's
    pins. `elite`, when given, keeps the best of them as seeds of the search that follows.
    """
    placements = np.atleast_2d(np.asarray(placements, dtype=np.int32))[: tracker.remaining]
    placements = env.check(placements)
    peaks, makespans, events = env.schedules(placements)
    if elite is not None:
        elite.add(placements, events, peaks, makespans)
    for placement, peak, makespan, order in zip(placements, peaks, makespans, events, strict=True):
        tracker.offer(placement, order, peak, float(makespan))


class GDPAlone(GDP):
    """GDP's policy alone, no search after it: paper 003's placer, and `gdp`'s ablation."""

    name = "gdp-policy"

    def __init__(self, config: GDPSolverConfig | None = None) -> None:
        super().__init__(replace(config or GDPSolverConfig(), search=False))


SEARCH_SAMPLES = 16
"""Samples `gdp` and `go` draw before their search: 8 seeds are kept from them, and a batch
of 64 placements took a quarter of a 2 s budget on 800-op graphs (issue 45)."""


def gdp(policy: str | None = None, finetune: int = 0) -> GDP:
    """GDP with the checkpoint at `policy` (None: the shipped one), then `auto`'s search."""
    return GDP(GDPSolverConfig(policy=policy, finetune=finetune, samples=SEARCH_SAMPLES))


def gdp_policy(policy: str | None = None, finetune: int = 0) -> GDPAlone:
    """GDP's policy alone with the checkpoint at `policy` (None: the shipped one)."""
    return GDPAlone(GDPSolverConfig(policy=policy, finetune=finetune))
