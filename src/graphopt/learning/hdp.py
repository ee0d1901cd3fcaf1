"""HDP, the hierarchical device placer (Mirhoseini et al. 2018), as a per-graph search baseline.

GDP (paper 003 section 4.1) compares against HDP: a two-level policy trained from scratch on the
one graph it places, with REINFORCE. A *grouper* (a feed-forward net over each op's features)
gives every op a softmax over G groups and each op samples its group; a *placer* (an LSTM over
the groups in order, each group read as the mean features of its member ops and its size) gives
every group a softmax over the d devices and each group samples its device. Every op runs on
its group's device. Grouping first keeps the placer's sequence short (G, not n_ops), which is
what let HDP place graphs of tens of thousands of ops. The reward of a placement is GDP's,
`-sqrt(makespan / reference)` (`envs.placement`: GO's ready-queue schedule, scored exactly),
the negative square-root runtime HDP uses; the baseline is an exponential moving average of the
mean sampled reward, and both networks are trained jointly with one Adam optimizer. There is no
pre-training, so the search starts from near-uniform placements on every graph.

Simplified from the paper: the grouper reads `placement_features` (runtime, bytes, fan-in and
fan-out, position in the graph) instead of embeddings of op type, output shape and adjacency;
the placer is a bidirectional LSTM encoder whose per-group softmaxes are independent given the
grouping, instead of a sequence-to-sequence decoder with attention that conditions each group's
device on the devices chosen before it; and runtimes come from the cost model, not from running
the placement on hardware.

As a solver (`HDP`), each REINFORCE step samples up to `samples` placements (each one
evaluation of the budget; pinned ops keep their pins), scores them in one batch, and offers the
batch's best to the tracker with GO's ready-queue order; steps go on until the budget or the
time is spent.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from graphopt.costmodels.machine import Machine
from graphopt.ir.graph import Graph
from graphopt.ir.solution import Solution
from graphopt.learning.envs.placement import PlacementEnv, PlacementOutcome
from graphopt.learning.placement_features import PLACEMENT_FEATURE_NAMES, placement_features
from graphopt.learning.threads import one_torch_thread
from graphopt.solvers.base import Objective, Problem, Solver, SolverError, Tracker
from graphopt.solvers.ready_queue import offer_only_placement, ready_queue_orders

GROUP_FEATURES = len(PLACEMENT_FEATURE_NAMES) + 2
"""What the placer reads of a group: its ops' mean features, log1p(size), size / n_ops."""


def _is_number(value: object) -> bool:
    """A finite int or float, not a bool."""
    return not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)


@dataclass(frozen=True)
class HDPConfig:
    """HDP's policy and REINFORCE settings.

    Attributes:
        groups: G, the groups the grouper chooses from (capped at the graph's op count).
        hidden: width of the grouper's hidden layer and of each direction of the placer's LSTM.
        samples: placements sampled per REINFORCE step (each one evaluation).
        learning_rate: Adam's step size for both networks.
        baseline_decay: weight of the old value in the moving-average reward baseline.
        entropy_weight: weight of the grouper's and placer's mean entropies in the loss, which
            keeps the search from settling before it has seen much.
    """

    groups: int = 16
    hidden: int = 64
    samples: int = 16
    learning_rate: float = 0.01
    baseline_decay: float = 0.9
    entropy_weight: float = 0.01

    def __post_init__(self) -> None:
        for name in ("groups", "hidden", "samples"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
                raise SolverError(f"hdp {name} must be an integer >= 1, got {value!r}")
        reals = {
            "learning_rate": ("a number > 0", lambda v: v > 0),
            "baseline_decay": ("a number in [0, 1)", lambda v: 0 <= v < 1),
            "entropy_weight": ("a number >= 0", lambda v: v >= 0),
        }
        for name, (expected, valid) in reals.items():
            value = getattr(self, name)
            if not (_is_number(value) and valid(value)):
                raise SolverError(f"hdp {name} must be {expected}, got {value!r}")


class Grouper(nn.Module):
    """Per-op group logits from per-op features: a two-layer feed-forward net (HDP's grouper)."""

    def __init__(self, n_features: int, hidden: int, groups: int) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(n_features, hidden), nn.Tanh(), nn.Linear(hidden, groups)
        )

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """[n_ops, F] features -> [n_ops, G] logits."""
        return self.net(features)


class Placer(nn.Module):
    """Per-group device logits: an LSTM over the groups 0..G-1 in order (HDP's placer)."""

    def __init__(self, n_features: int, hidden: int, n_devices: int) -> None:
        super().__init__()
        self.lstm = nn.LSTM(n_features, hidden, batch_first=True, bidirectional=True)
        self.head = nn.Linear(2 * hidden, n_devices)

    def forward(self, groups: torch.Tensor) -> torch.Tensor:
        """[B, G, F] group features -> [B, G, d] logits."""
        encoded, _ = self.lstm(groups)
        return self.head(encoded)


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
            self.grouper = Grouper(self.features.shape[1], self.config.hidden, self.n_groups)
            self.placer = Placer(GROUP_FEATURES, self.config.hidden, machine.n_devices)
        parameters = [*self.grouper.parameters(), *self.placer.parameters()]
        self.optimizer = torch.optim.Adam(parameters, lr=self.config.learning_rate)
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
        """Samples `samples` placements (default: the config's), scores them, updates both nets."""
        batch = self.config.samples if samples is None else samples
        with one_torch_thread():
            group_log_p = torch.log_softmax(self.grouper(self.features), dim=-1)
            groups = torch.multinomial(
                group_log_p.exp(), batch, replacement=True, generator=self.generator
            ).T
            device_log_p = torch.log_softmax(self.placer(self._group_features(groups)), dim=-1)
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
            loss = -((reward - baseline) * log_p).mean() - self.config.entropy_weight * (
                group_entropy + device_entropy
            )
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
        decay = self.config.baseline_decay
        self.baseline = decay * baseline + (1 - decay) * mean
        return HDPStep(placements, outcome, baseline)

    def most_likely(self) -> np.ndarray:
        """[n_ops] int32: each op on its likeliest group's likeliest device (pins applied)."""
        with torch.no_grad(), one_torch_thread():
            groups = self.grouper(self.features).argmax(dim=-1)[None]
            devices = self.placer(self._group_features(groups)).argmax(dim=-1)
        return self._pinned(devices.gather(1, groups)[0].numpy().astype(np.int32))


class HDP(Solver):
    """HDP's per-graph REINFORCE search; every step's best sampled placement is offered.

    Args:
        config: network sizes and REINFORCE settings.
    """

    name = "hdp"
    objectives = frozenset({Objective.MAKESPAN})

    def __init__(self, config: HDPConfig | None = None) -> None:
        self.config = config or HDPConfig()

    def run(
        self,
        problem: Problem,
        tracker: Tracker,
        rng: np.random.Generator,
        initial: Sequence[Solution],
    ) -> None:
        """Trains on the graph step after step until the tracker's budget or time is spent."""
        graph, machine = problem.graph, problem.machine
        if offer_only_placement(problem, tracker):
            return
        trainer = HDPTrainer(
            graph, machine, self.config, seed=int(rng.integers(2**62)), pinned=problem.pinned
        )
        while True:
            step = trainer.step(min(self.config.samples, tracker.remaining))
            excess, value = problem.fitness(step.outcome.peaks, step.outcome.makespan)
            best = int(np.lexsort((value, excess))[0])
            placement = step.placements[best]
            orders, lengths = ready_queue_orders(graph, machine, placement, trainer.env.priorities)
            # The batch was scored once in the environment: all of it counts, its best is kept.
            tracker.offer_best(
                placement,
                orders[0, : lengths[0]],
                int(excess[best]),
                float(value[best]),
                len(value),
            )
