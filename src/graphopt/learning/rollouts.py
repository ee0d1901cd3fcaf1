"""Rollouts: the BRKGA runs that turn a policy's actions into rewards, here or in workers.

A rollout task names a graph by (split, index) in a built dataset plus the integer actions and a
seed, so tasks are small and their results depend on nothing but their content: the same run
gives the same rewards on one process, a pool of worker processes (the default), or a Ray
cluster (`--ray ADDRESS`; Ray stays an optional dependency). Each worker rebuilds problems from
the dataset and caches each graph's feature run, which is seeded by the graph's index.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from graphopt.costmodels.machine import Machine
from graphopt.datasets import Dataset
from graphopt.errors import GraphoptError
from graphopt.learning.actions import ActionConfig, gene_distributions
from graphopt.learning.envs.regal import InnerSearch
from graphopt.learning.features import FeatureRun, GraphFeatures, compute_features
from graphopt.learning.regal import RegalConfig, random_sampling
from graphopt.solvers.base import Budget, Problem, Tracker
from graphopt.solvers.brkga import BRKGA
from graphopt.solvers.random_keys import RandomKeyDecoder

if TYPE_CHECKING:
    from graphopt.learning.checkpoints import TrainedPolicy

FEATURE_SEED = 7_000_000
"""Feature runs of graph i use seed FEATURE_SEED + i (same on every worker)."""
REFERENCE_SEED = 8_000_000
"""Uniform BRKGA reference runs of graph i use seeds REFERENCE_SEED + 1000 i + r."""


@dataclass(frozen=True)
class EnvSpec:
    """What a worker needs to rebuild any training or validation problem (picklable).

    Attributes:
        dataset: directory of a built dataset.
        n_devices: devices of the machine.
        objective: 'peak-memory' or 'makespan'.
        search: 'brkga' or 'random' (IDRS).
        feature_evaluations: evaluations of each graph's feature run.
        actions: the action space the tasks' actions come from.
        inner: how BRKGA continues after the feature run.
    """

    dataset: str
    n_devices: int
    objective: str
    search: str
    feature_evaluations: int
    actions: ActionConfig
    inner: InnerSearch = InnerSearch()

    @classmethod
    def for_policy(cls, dataset: str, policy: TrainedPolicy) -> EnvSpec:
        """The environment a trained policy was trained in, on another built dataset."""
        return cls(
            dataset,
            policy.config.n_devices,
            policy.objective,
            policy.search,
            policy.feature_evaluations,
            policy.config.actions,
            policy.inner,
        )


@dataclass(frozen=True)
class RolloutTask:
    """One search on one graph with the policy's actions.

    Attributes:
        split: dataset split of the graph.
        index: graph index within the split.
        actions: [n_ops, n_heads] int8 actions.
        evaluations: total budget, feature run included.
        seed: seeds the search.
    """

    split: str
    index: int
    actions: np.ndarray
    evaluations: int
    seed: int


@dataclass(frozen=True)
class Prepared:
    """A graph's features and its uniform-BRKGA reference objective (mean over seeds)."""

    features: GraphFeatures
    reference: float


class RolloutEnv:
    """Problems, cached feature runs and the rollout itself, inside one process."""

    def __init__(self, spec: EnvSpec) -> None:
        self.spec = spec
        self.machine = Machine(n_devices=spec.n_devices)
        self._datasets: dict[str, Dataset] = {}
        self._runs: dict[tuple[str, int], tuple[Problem, FeatureRun]] = {}

    def feature_run(self, split: str, index: int) -> tuple[Problem, FeatureRun]:
        """The problem of a graph and its (cached, seeded) feature run."""
        key = (split, index)
        if key not in self._runs:
            if split not in self._datasets:
                self._datasets[split] = Dataset.open(self.spec.dataset, split)
            problem = Problem(self._datasets[split][index], self.machine, self.spec.objective)
            tracker = Tracker(problem, Budget(evaluations=self.spec.feature_evaluations))
            rng = np.random.default_rng(FEATURE_SEED + index)
            self._runs[key] = (
                problem,
                compute_features(problem, tracker, rng, self.spec.feature_evaluations),
            )
        return self._runs[key]

    def features(self, item: tuple[str, int]) -> GraphFeatures:
        """Features of the graph (split, index)."""
        return self.feature_run(*item)[1].features

    def prepare(self, item: tuple[str, int, int, int]) -> Prepared:
        """Features of a graph and its uniform-BRKGA reference.

        Args:
            item: (split, index, evaluations, seeds): the reference is the mean value of
                `seeds` uniform BRKGA runs of `evaluations` each.
        """
        split, index, evaluations, seeds = item
        problem, run = self.feature_run(split, index)
        values = [
            BRKGA()
            .solve(problem, Budget(evaluations=evaluations), REFERENCE_SEED + 1000 * index + r)
            .value
            for r in range(seeds)
        ]
        return Prepared(run.features, float(np.mean(values)))

    def rollout(self, task: RolloutTask) -> float:
        """The best objective value of the search steered by the task's actions.

        The feature run's evaluations count inside the task's budget and its best solution
        counts as found, as in the solver (`graphopt.learning.regal`).
        """
        problem, run = self.feature_run(task.split, task.index)
        decoder = RandomKeyDecoder(problem)
        genes = gene_distributions(
            task.actions,
            self.spec.actions,
            decoder.layout,
            problem.graph.tensor_producer,
            self.spec.inner.config(self.spec.objective),
        )
        remaining = task.evaluations - self.spec.feature_evaluations
        best = float(run.population.value[0])
        if remaining < 1:
            return best
        tracker = Tracker(problem, Budget(evaluations=remaining))
        rng = np.random.default_rng(task.seed)
        if self.spec.search == "brkga":
            self.spec.inner.evolve(problem, tracker, rng, genes, run.population)
        else:
            random_sampling(decoder, genes, tracker, rng, RegalConfig().population_size)
        return min(best, tracker.best_key[1])


class Rollouts(Protocol):
    """Runs RolloutEnv methods over many items, returning results in order."""

    def map(self, method: str, items: Sequence[Any]) -> list[Any]:
        """[getattr(env, method)(item) for item in items], possibly in parallel."""

    def close(self) -> None:
        """Releases workers."""


class SerialRollouts:
    """Everything in this process (workers = 0; tests and debugging)."""

    def __init__(self, spec: EnvSpec) -> None:
        self.env = RolloutEnv(spec)

    def map(self, method: str, items: Sequence[Any]) -> list[Any]:
        """Runs the items one after another."""
        call: Callable[[Any], Any] = getattr(self.env, method)
        return [call(item) for item in items]

    def close(self) -> None:
        """Nothing to release."""


_WORKER_ENV: RolloutEnv | None = None


def _start_worker(spec: EnvSpec, parent: int) -> None:
    global _WORKER_ENV
    _WORKER_ENV = RolloutEnv(spec)
    threading.Thread(target=_exit_with_parent, args=(parent,), daemon=True).start()


def _exit_with_parent(parent: int) -> None:
    """Ends the worker once its parent is gone (a killed training run leaves no orphans)."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(0)


def _call(method: str, item: Any) -> Any:
    assert _WORKER_ENV is not None
    return getattr(_WORKER_ENV, method)(item)


class ProcessRollouts:
    """A pool of worker processes (spawned, so no torch state is forked)."""

    def __init__(self, spec: EnvSpec, workers: int) -> None:
        self.workers = workers
        self.pool = ProcessPoolExecutor(
            workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_start_worker,
            initargs=(spec, os.getpid()),
        )

    def map(self, method: str, items: Sequence[Any]) -> list[Any]:
        """Spreads the items over the workers in chunks."""
        chunk = max(1, len(items) // (4 * self.workers))
        return list(self.pool.map(_call, [method] * len(items), items, chunksize=chunk))

    def close(self) -> None:
        """Stops the workers."""
        self.pool.shutdown(cancel_futures=True)


class RayRollouts:
    """Actors on a Ray cluster, one RolloutEnv each.

    Args:
        spec: the environment.
        address: the cluster's address ('auto', 'ray://host:port', or 'local' for an
            in-process cluster).
        workers: number of actors.
    """

    def __init__(self, spec: EnvSpec, address: str, workers: int) -> None:
        try:
            import ray
        except ImportError:
            raise GraphoptError(
                "--ray needs the optional Ray dependency: pip install 'graphopt[ray]'"
            ) from None
        self.ray = ray
        if not ray.is_initialized():
            if address == "local":
                ray.init(num_cpus=max(workers, 1), include_dashboard=False, log_to_driver=False)
            else:
                ray.init(address=address, log_to_driver=False)
        actor = ray.remote(_RayEnv)
        self.actors = [actor.remote(spec) for _ in range(max(workers, 1))]

    def map(self, method: str, items: Sequence[Any]) -> list[Any]:
        """Round-robin over the actors; results in item order."""
        n = len(self.actors)
        futures = [self.actors[i % n].call.remote(method, item) for i, item in enumerate(items)]
        return self.ray.get(futures)

    def close(self) -> None:
        """Releases the actors (the cluster itself is left running)."""
        for actor in self.actors:
            self.ray.kill(actor)


class _RayEnv:
    """A RolloutEnv as a Ray actor."""

    def __init__(self, spec: EnvSpec) -> None:
        self.env = RolloutEnv(spec)

    def call(self, method: str, item: Any) -> Any:
        return getattr(self.env, method)(item)


def make_rollouts(spec: EnvSpec, workers: int, ray_address: str | None) -> Rollouts:
    """Ray actors when an address is given, else worker processes, else (0) this process."""
    if ray_address is not None:
        return RayRollouts(spec, ray_address, workers)
    if workers > 0:
        return ProcessRollouts(spec, workers)
    return SerialRollouts(spec)
