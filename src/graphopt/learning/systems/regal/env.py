"""REGAL's environment: the feature run, and the search a policy steers after it (paper 001 A.1).

The feature run (`feature_population`) is a short uniform BRKGA run inside the search's budget;
`features.build_features` turns its last population into the policy's input.

A policy's actions become per-gene Beta distributions; `steered_search` spends the rest of the
budget with them, by BRKGA (REGAL, GAS) or by random sampling (IDRS). The solver
(`solver.py`) and training (`RolloutEnv`) both run it, so a policy is trained on
exactly the search it steers at inference. A policy is trained for one `InnerSearch`, and its
checkpoint records it.

`RolloutEnv` is the training side: a rollout task names a graph by (split, index) in a built
dataset plus the integer actions and a seed, so tasks are small and their results depend on
nothing but their content, whether run here or in workers (`graphopt.learning.workers`). Each
environment rebuilds problems from the dataset and caches each graph's feature run, seeded by
the graph's index.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Literal, get_args

import numpy as np

from graphopt.costmodels.machine import Machine
from graphopt.datasets import Dataset
from graphopt.ir.graph import Graph
from graphopt.ir.solution import Solution
from graphopt.learning.features import (
    FEATURE_EVALUATIONS,
    FeatureRun,
    GraphFeatures,
    build_features,
)
from graphopt.learning.graphs import GraphCache
from graphopt.learning.systems.regal.actions import ActionConfig, gene_distributions
from graphopt.solvers.base import Budget, BudgetExhausted, Problem, SolverError, Tracker
from graphopt.solvers.beta_tables import BetaSampler
from graphopt.solvers.brkga import BRKGA, BRKGAConfig, FinalPopulation, GeneDistributions
from graphopt.solvers.random_keys import RandomKeyDecoder, offer_decoded

Search = Literal["brkga", "random"]
"""How the distributions are used: evolved by BRKGA (REGAL, GAS) or sampled at random (IDRS)."""
SEARCHES: tuple[str, ...] = get_args(Search)
RANDOM_BATCH = 100
"""Chromosomes sampled per batch by the random search (IDRS)."""


@dataclass(frozen=True)
class InnerSearch:
    """How BRKGA continues after the feature run (a policy is trained for one of these).

    Attributes:
        brkga: name of a BRKGA preset (`BRKGAConfig.preset`, chosen for the objective), or
            None for paper 001's hyper-parameters (population 100, 10 elites, 80 children).
        kept: how many of the feature run's best chromosomes start the search; the rest of
            the first population is sampled from the policy's distributions (None: keep
            the whole last population).
    """

    brkga: str | None = None
    kept: int | None = None

    def __post_init__(self) -> None:
        if self.brkga is not None:
            BRKGAConfig.preset(self.brkga)
        if self.kept is not None and self.kept < 1:
            raise SolverError(f"kept must be >= 1 (or None for all), got {self.kept}")

    def config(self, objective: str) -> BRKGAConfig:
        """The BRKGA hyper-parameters for an objective."""
        return BRKGAConfig() if self.brkga is None else BRKGAConfig.preset(self.brkga, objective)

    def evolve(
        self,
        problem: Problem,
        tracker: Tracker,
        rng: np.random.Generator,
        genes: GeneDistributions,
        feature_run: FinalPopulation,
        initial: Sequence[Solution] = (),
    ) -> None:
        """BRKGA with the policy's distributions, from the feature run's best members."""
        kept = feature_run if self.kept is None else feature_run.best(self.kept)
        config = self.config(problem.objective.value)
        BRKGA(config, genes=genes).evolve(problem, tracker, rng, initial, resume=kept)


def compute_features(
    problem: Problem,
    tracker: Tracker,
    rng: np.random.Generator,
    evaluations: int = FEATURE_EVALUATIONS,
) -> FeatureRun:
    """Runs the uniform BRKGA feature run on the tracker's budget and builds the features.

    The run spends `evaluations` or what is left of the budget, whichever is less.
    """
    return build_features(problem, feature_population(problem, tracker, rng, evaluations))


def feature_population(
    problem: Problem,
    tracker: Tracker,
    rng: np.random.Generator,
    evaluations: int = FEATURE_EVALUATIONS,
) -> FinalPopulation:
    """The uniform BRKGA feature run (`compute_features`' search half): its last population."""
    with tracker.phase(1.0, evaluations):
        population = BRKGA().evolve(problem, tracker, rng)
    return population


def random_sampling(
    decoder: RandomKeyDecoder,
    genes: GeneDistributions,
    tracker: Tracker,
    rng: np.random.Generator,
    batch: int = RANDOM_BATCH,
) -> None:
    """IDRS: chromosomes drawn gene by gene from the distributions until the budget is spent.

    Each batch is offered with its fusion groups (when the problem fuses ops), so the best
    solution is the one its value was scored on.
    """
    genes.check(decoder.n_genes)
    sample = BetaSampler(genes.alpha, genes.beta, rng)
    while True:
        decoded = decoder.evaluate(sample(min(batch, tracker.remaining)), reuse=True)
        try:
            offer_decoded(tracker, decoded)
        except BudgetExhausted:
            return


def steered_search(
    search: str,
    inner: InnerSearch,
    decoder: RandomKeyDecoder,
    tracker: Tracker,
    rng: np.random.Generator,
    genes: GeneDistributions,
    feature_run: FinalPopulation,
    initial: Sequence[Solution] = (),
    batch: int = RANDOM_BATCH,
) -> None:
    """The search after inference, on the tracker's remaining budget.

    Args:
        search: 'brkga' (evolve from the feature run's best members) or 'random' (IDRS).
        inner: how BRKGA continues after the feature run.
        decoder: the problem's random-key decoder.
        tracker: counts evaluations and keeps the best solution.
        rng: seeds the search.
        genes: the policy's distributions.
        feature_run: the feature run's last population.
        initial: known solutions BRKGA starts from.
        batch: chromosomes per batch of the random search.
    """
    if search == "brkga":
        inner.evolve(decoder.problem, tracker, rng, genes, feature_run, initial)
    else:
        random_sampling(decoder, genes, tracker, rng, batch)


FEATURE_SEED = 7_000_000
"""Feature runs of graph i use seed FEATURE_SEED + i (same on every worker)."""
REFERENCE_SEED = 8_000_000
"""Uniform BRKGA reference runs of graph i use seeds REFERENCE_SEED + 1000 i + r."""


def relative_rewards(values: np.ndarray, references: np.ndarray) -> np.ndarray:
    """REGAL's reward -objective / objective of uniform BRKGA (paper 001 3.3), per graph.

    Shapes:
        values: [..., n_graphs]; references: [n_graphs] (a zero reference divides by 1).
    """
    return -values / np.where(references > 0, references, 1.0)


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
        self._runs = GraphCache(partial(Dataset.open, spec.dataset), self._feature_run)

    def feature_run(self, split: str, index: int) -> tuple[Problem, FeatureRun]:
        """The problem of a graph and its (cached, seeded) feature run."""
        return self._runs.get(split, index)

    def _feature_run(self, _split: str, index: int, graph: Graph) -> tuple[Problem, FeatureRun]:
        problem = Problem(graph, self.machine, self.spec.objective)
        tracker = Tracker(problem, Budget(evaluations=self.spec.feature_evaluations))
        rng = np.random.default_rng(FEATURE_SEED + index)
        return problem, compute_features(problem, tracker, rng, self.spec.feature_evaluations)

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
        counts as found, as in the solver (`solver.py`), which runs the same
        `steered_search`.
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
        steered_search(
            self.spec.search, self.spec.inner, decoder, tracker, rng, genes, run.population
        )
        return min(best, tracker.best_key[1])
