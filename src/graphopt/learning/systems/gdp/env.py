"""The graphs GDP's policy acts on, and its two ways to act on one: sample and most likely.

A `PlacementTask` is one graph's placement environment (`learning.placement`), the policy's
input and its partition hint, built once per graph by `Graphs`; the solver (one graph) and the
trainer (a dataset's splits) both use them, so that a policy is trained on what it sees at
inference.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from graphopt.costmodels.machine import Machine
from graphopt.datasets import Dataset
from graphopt.ir.graph import Graph
from graphopt.learning.batching import GraphBatch, make_batch
from graphopt.learning.graphs import GraphCache
from graphopt.learning.placement.env import PlacementEnv
from graphopt.learning.placement.features import placement_features
from graphopt.learning.placement.hint import partition_hint
from graphopt.learning.runs import GRAPH_PREFIX, graph_files
from graphopt.learning.systems.gdp.config import MachineConfig
from graphopt.learning.systems.gdp.network import GDPPolicy


@dataclass(frozen=True)
class PlacementTask:
    """One graph as the policy sees it: its environment, features and partition hint."""

    env: PlacementEnv
    batch: GraphBatch
    hint: torch.Tensor | None

    @property
    def n_devices(self) -> int:
        """d, the devices to place onto."""
        return self.env.n_devices

    def logits(self, policy: GDPPolicy) -> torch.Tensor:
        """[n_ops, max_devices] the policy's placement logits of this graph."""
        return policy(self.batch, self.n_devices, self.hint)


class Graphs:
    """A run's graphs by (split, index), each with its environment and features, built once.

    Args:
        splits: the graphs of each split.
        machine: devices and transfer model.
        hints: whether to compute each graph's partition hint (the policy takes one).
        schedulers: how placements become schedules (`placement.env.SCHEDULERS`).
        pinned: pins every environment keeps (`PlacementEnv`'s), for a solve's one graph.
    """

    def __init__(
        self,
        splits: dict[str, Sequence[Graph]],
        machine: Machine,
        hints: bool = False,
        schedulers: Sequence[str] = ("ready-queue",),
        pinned: np.ndarray | None = None,
    ) -> None:
        self.splits = splits
        self.machine = machine
        self.hints = hints
        self.schedulers = tuple(schedulers)
        self.pinned = pinned
        self.envs = GraphCache(splits.__getitem__, lambda _s, _i, graph: self.make_env(graph))
        self.tasks = GraphCache(splits.__getitem__, self._task)

    def env(self, split: str, index: int) -> PlacementEnv:
        """The environment of one graph (all a scoring worker needs)."""
        return self.envs.get(split, index)

    def make_env(self, graph: Graph) -> PlacementEnv:
        """A graph's environment (a system with another environment overrides this)."""
        return PlacementEnv(graph, self.machine, schedulers=self.schedulers, pinned=self.pinned)

    def get(self, split: str, index: int) -> PlacementTask:
        """The environment, the policy's input and the hint of one graph."""
        return self.tasks.get(split, index)

    def _task(self, split: str, index: int, graph: Graph) -> PlacementTask:
        env = self.env(split, index)
        hint = torch.from_numpy(partition_hint(env)) if self.hints else None
        return PlacementTask(env, make_batch([placement_features(graph)]), hint)


@dataclass(frozen=True)
class GraphSource:
    """Where a run's graphs come from, picklable, so that workers can open them too.

    Attributes:
        dataset: `graph:PATH[,PATH...]` (each graph in both splits) or a built dataset's folder.
        machine: devices and transfer model.
        hints: whether the policy takes partition hints.
        schedulers: how placements become schedules.
    """

    dataset: str
    machine: MachineConfig
    hints: bool = False
    schedulers: tuple[str, ...] = ("ready-queue",)

    def splits(self) -> dict[str, Sequence[Graph]]:
        """The run's graphs by split, opened."""
        if self.dataset.startswith(GRAPH_PREFIX):
            files = graph_files(self.dataset)
            return {"train": files, "valid": files}
        return {split: Dataset.open(self.dataset, split) for split in ("train", "valid")}

    def graphs(self) -> Graphs:
        """The run's graphs with their environments."""
        return Graphs(self.splits(), self.machine.machine(), self.hints, self.schedulers)


def sample(
    policy: GDPPolicy, task: PlacementTask, samples: int, generator: torch.Generator
) -> tuple[np.ndarray, torch.Tensor]:
    """Placements [samples, n_ops] of one graph and their per-op log-probabilities, no gradient."""
    with torch.no_grad():
        log_p = torch.log_softmax(task.logits(policy), dim=-1)
    actions = torch.multinomial(log_p.exp(), samples, replacement=True, generator=generator)
    return actions.T.numpy().astype(np.int32), log_p.gather(1, actions).T


def most_likely(policy: GDPPolicy, task: PlacementTask) -> np.ndarray:
    """The policy's most likely placement [n_ops] (zero-shot inference)."""
    policy.eval()
    with torch.no_grad():
        return task.logits(policy).argmax(dim=-1).numpy().astype(np.int32)
