"""BRKGA: the biased random-key genetic algorithm REGAL drives (paper 001 section 3.2).

Each generation keeps the `elites` best chromosomes, adds `children` made by crossing a uniformly
chosen elite with a uniformly chosen non-elite (gene i from the elite with probability rho_i),
and fills the rest with mutants sampled gene by gene from Beta(alpha_i, beta_i). Standard BRKGA
(Goncalves and Resende, 2011) is the special case rho_i = 0.7, alpha_i = beta_i = 1 (uniform),
with the defaults of paper 001 section 4.2: pi = 100, pi_e = 10, pi_c = 80.

REGAL's policy predicts the per-gene arrays, so they are constructor arguments
(`GeneDistributions`); everything else is a `BRKGAConfig`. Fitness is decoded and scored by
`RandomKeyDecoder`, ranked feasible-first (`Problem.fitness`), and every evaluation counts
against the budget: elites carried over are not re-evaluated.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from functools import cache
from importlib import resources
from typing import Any

import numba
import numpy as np

from graphopt.configs import read_config
from graphopt.ir.solution import Solution
from graphopt.solvers.base import (
    BudgetExhausted,
    Initial,
    Problem,
    Rng,
    Solver,
    SolverError,
    Tracker,
)
from graphopt.solvers.beta_tables import BetaSampler
from graphopt.solvers.random_keys import DecodedPopulation, RandomKeyDecoder, offer_decoded


@dataclass(frozen=True)
class BRKGAConfig:
    """BRKGA hyper-parameters (paper 001 sections 3.2 and 4.2).

    Attributes:
        population: chromosomes per generation (pi).
        elites: best chromosomes kept unchanged (pi_e).
        children: chromosomes made by crossover per generation (pi_c); the rest are mutants.
        elite_bias: probability rho that a child takes a gene from its elite parent.
        mutant_alpha: alpha of the Beta distribution of every mutant gene (1 = uniform).
        mutant_beta: beta of the Beta distribution of every mutant gene (1 = uniform).
        symmetry_breaking: pin the op with the most memory to device 0 (paper 001 A.1).
    """

    population: int = 100
    elites: int = 10
    children: int = 80
    elite_bias: float = 0.7
    mutant_alpha: float = 1.0
    mutant_beta: float = 1.0
    symmetry_breaking: bool = True

    def __post_init__(self) -> None:
        for name in ("population", "elites", "children"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise SolverError(f"BRKGA {name} must be an integer, got {value!r}")
        if self.population < 2:
            raise SolverError(f"BRKGA population must be >= 2, got {self.population}")
        if not 1 <= self.elites < self.population:
            raise SolverError(
                f"BRKGA elites must be in [1, population - 1] = [1, {self.population - 1}], "
                f"got {self.elites}"
            )
        if self.children < 0 or self.elites + self.children > self.population:
            raise SolverError(
                f"BRKGA children must be in [0, population - elites] = "
                f"[0, {self.population - self.elites}], got {self.children}"
            )
        if not 0.5 <= self.elite_bias <= 1.0:
            raise SolverError(f"BRKGA elite_bias must be in [0.5, 1], got {self.elite_bias}")
        if not (self.mutant_alpha > 0 and self.mutant_beta > 0):
            raise SolverError(
                f"BRKGA mutant Beta parameters must be > 0, got alpha={self.mutant_alpha}, "
                f"beta={self.mutant_beta}"
            )

    @property
    def mutants(self) -> int:
        """Mutants per generation: population - elites - children."""
        return self.population - self.elites - self.children

    @classmethod
    def preset(cls, name: str, objective: str | None = None) -> BRKGAConfig:
        """A named configuration shipped with the package (e.g. 'tuned', see tuning.py).

        A preset tuned for a particular objective, `brkga-<name>-<objective>.json`, is chosen
        over the plain `brkga-<name>.json` (tuned for peak memory) when it exists. Each file is
        read once per process: REGAL resolves its preset on every solve and training rollout.
        """
        return _preset(name, objective)


def preset_file_name(name: str, objective: str | None = None) -> str:
    """File name of preset `name` tuned for `objective` (None: the plain one, for peak memory)."""
    return f"brkga-{name}.json" if objective is None else f"brkga-{name}-{objective}.json"


@cache
def _preset(name: str, objective: str | None) -> BRKGAConfig:
    """`BRKGAConfig.preset`, read from the package (configs are frozen, so sharing them is safe)."""
    folder = resources.files("graphopt.solvers.presets")
    path = folder.joinpath(preset_file_name(name))
    if objective is not None and folder.joinpath(preset_file_name(name, objective)).is_file():
        path = folder.joinpath(preset_file_name(name, objective))
    if not path.is_file():
        raise SolverError(f"no BRKGA preset named {name!r}")
    data = json.loads(path.read_text())
    return read_config(BRKGAConfig, data["config"], f"BRKGA preset {path.name}", SolverError)


@dataclass(frozen=True, eq=False)
class GeneDistributions:
    """Per-gene mutant distributions and elite biases (REGAL's actions, paper 001 3.2).

    Shapes:
        alpha, beta: [n_genes] Beta parameters (> 0) of each gene's mutant distribution.
        elite_bias: [n_genes] probability in [0.5, 1] that a child inherits the elite's gene.
    """

    alpha: np.ndarray
    beta: np.ndarray
    elite_bias: np.ndarray

    def check(self, n_genes: int) -> None:
        """Raises SolverError unless every array has n_genes valid entries."""
        for name in ("alpha", "beta", "elite_bias"):
            array = np.asarray(getattr(self, name))
            if array.shape != (n_genes,):
                raise SolverError(
                    f"gene distributions: {name} has shape {array.shape}, expected ({n_genes},)"
                )
        if not (np.all(self.alpha > 0) and np.all(self.beta > 0)):
            raise SolverError("gene distributions: alpha and beta must be > 0 everywhere")
        bias = np.asarray(self.elite_bias)
        if not np.all((bias >= 0.5) & (bias <= 1.0)):
            raise SolverError("gene distributions: elite_bias must be in [0.5, 1] everywhere")


@dataclass(frozen=True, eq=False)
class FinalPopulation:
    """The last population of a BRKGA run, best first.

    Shapes:
        keys: [m, n_genes] chromosomes; excess: [m] int64; value: [m] float64.
    """

    keys: np.ndarray
    excess: np.ndarray
    value: np.ndarray

    @classmethod
    def ranked(
        cls, keys: np.ndarray, excess: np.ndarray, value: np.ndarray, size: int | None = None
    ) -> FinalPopulation:
        """The best `size` (default all) of the chromosomes, copied, sorted by (excess, value)."""
        rank = np.lexsort((value, excess))[:size]
        return cls(keys[rank].copy(), np.asarray(excess)[rank], np.asarray(value)[rank])

    def best(self, size: int) -> FinalPopulation:
        """The first `size` members (all of them when there are fewer)."""
        return FinalPopulation(self.keys[:size], self.excess[:size], self.value[:size])


class BRKGA(Solver):
    """Biased random-key genetic algorithm over `RandomKeyDecoder` chromosomes.

    Args:
        config: hyper-parameters, or the name of a preset, chosen for each problem's
            objective (`BRKGAConfig.preset`).
        genes: optional per-gene mutant distributions and elite biases; they override the
            config's scalar `mutant_alpha`, `mutant_beta` and `elite_bias`.
        name: the name recorded in solutions (presets and REGAL run under their own).
    """

    name = "brkga"

    def __init__(
        self,
        config: BRKGAConfig | str | None = None,
        genes: GeneDistributions | None = None,
        name: str = "brkga",
    ) -> None:
        if isinstance(config, str):
            BRKGAConfig.preset(config)
        self.config = config or BRKGAConfig()
        self.genes = genes
        self.name = name

    def options(self) -> dict[str, Any]:
        """Config fields (or the preset's name), plus whether per-gene distributions were given."""
        config = {"preset": self.config} if isinstance(self.config, str) else asdict(self.config)
        return {**config, "per_gene_distributions": self.genes is not None}

    def config_for(self, problem: Problem) -> BRKGAConfig:
        """The hyper-parameters this run uses: the preset for the problem's objective, if named."""
        if isinstance(self.config, str):
            return BRKGAConfig.preset(self.config, problem.objective.value)
        return self.config

    def run(self, problem: Problem, tracker: Tracker, rng: Rng, initial: Initial) -> None:
        """Evolves populations until the tracker's budget is spent."""
        self.evolve(problem, tracker, rng, initial)
        tracker.check()

    def evolve(
        self,
        problem: Problem,
        tracker: Tracker,
        rng: np.random.Generator,
        initial: Sequence[Solution] = (),
        resume: FinalPopulation | None = None,
    ) -> FinalPopulation:
        """Evolves until the budget is spent and returns the last population, ranked.

        REGAL's features aggregate a short run's last population (paper 001 A.1) and its
        search continues from it, which is why the population is returned, not only the best.

        Args:
            problem: what to optimize.
            tracker: counts evaluations; the run ends when it is exhausted.
            rng: every random choice.
            initial: known solutions placed in the first population (evaluated).
            resume: a scored population (e.g. a previous run's last) whose best members fill
                the first population after `initial`, without being evaluated again.
        """
        config = self.config_for(problem)
        decoder = RandomKeyDecoder(problem, config.symmetry_breaking)
        n_genes = decoder.n_genes
        sample_mutants = self._mutant_sampler(config, n_genes, rng)
        elite_bias = self.genes.elite_bias if self.genes is not None else config.elite_bias

        bias = np.broadcast_to(np.asarray(elite_bias, dtype=np.float64), (n_genes,))
        threshold = np.ascontiguousarray(np.round(bias * BIAS_LEVELS).astype(np.int32))
        # Two population buffers, swapped every generation: no [population, genes] allocation
        # per generation.
        decoder.check_population(config.population)
        population = np.empty((config.population, n_genes))
        spare = np.empty_like(population)
        excess, value, done = _first_population(
            decoder, tracker, initial, resume, sample_mutants, population
        )
        if done:
            return FinalPopulation.ranked(population[: len(value)], excess, value)
        n_elites, n_children = config.elites, config.children
        while True:
            rank = np.lexsort((value, excess))
            elites, others = rank[:n_elites], rank[n_elites:]
            spare[:n_elites] = population[elites]
            crossover(
                population,
                elites[rng.integers(n_elites, size=n_children)],
                others[rng.integers(others.shape[0], size=n_children)],
                rng.integers(0, BIAS_LEVELS, (n_children, n_genes), dtype=np.uint16),
                threshold,
                spare[n_elites:],
            )
            spare[n_elites + n_children :] = sample_mutants(config.mutants)
            offspring_excess, offspring_value, done = _evaluate(decoder, tracker, spare[n_elites:])
            if done:
                # A partly evaluated generation: its offspring join the previous generation
                # and the best `population` of both are the last population.
                n = len(offspring_value)
                return FinalPopulation.ranked(
                    np.concatenate([population, spare[n_elites : n_elites + n]]),
                    np.concatenate([excess, offspring_excess]),
                    np.concatenate([value, offspring_value]),
                    config.population,
                )
            excess = np.concatenate([excess[elites], offspring_excess])
            value = np.concatenate([value[elites], offspring_value])
            population, spare = spare, population

    def _mutant_sampler(
        self, config: BRKGAConfig, n_genes: int, rng: np.random.Generator
    ) -> Callable[[int], np.ndarray]:
        """A function m -> [m, n_genes] mutants from the configured distributions."""
        if self.genes is not None:
            self.genes.check(n_genes)
            return BetaSampler(self.genes.alpha, self.genes.beta, rng)
        a, b = config.mutant_alpha, config.mutant_beta
        if a == 1.0 and b == 1.0:
            return lambda m: rng.random((m, n_genes))
        # Inverse-CDF tables, as REGAL's genes: numpy's Beta draws cost ten times a uniform one.
        return BetaSampler(np.full(n_genes, a), np.full(n_genes, b), rng)


def tuned_brkga() -> BRKGA:
    """BRKGA with the shipped grid-searched preset for the objective (`graphopt.solvers.tuning`)."""
    return BRKGA("tuned", name="brkga-tuned")


BIAS_LEVELS = 1 << 16
"""Elite biases are applied with 16-bit resolution: a gene comes from the elite parent when a
uniform integer draw in [0, 2^16) is below round(rho * 2^16)."""


@numba.njit(cache=True, parallel=True)
def crossover(
    population: np.ndarray,
    elite_parent: np.ndarray,
    other_parent: np.ndarray,
    draws: np.ndarray,
    threshold: np.ndarray,
    out: np.ndarray,
) -> None:
    """Writes child i into out[i]: gene g from the elite parent when draws[i, g] < threshold[g].

    Genes are copied as their int64 bit patterns through a mask, without a branch per gene
    (the choice is random, so a branch would be mispredicted about a third of the time).

    Shapes:
        population: [P, n] float64; elite_parent, other_parent: [C] rows of population;
        draws: [C, n] uint16; threshold: [n] int32; out: [>= C, n] float64.
    """
    bits = population.view(np.int64)
    out_bits = out.view(np.int64)
    for i in numba.prange(elite_parent.shape[0]):
        elite = bits[elite_parent[i]]
        other = bits[other_parent[i]]
        draw = draws[i]
        child = out_bits[i]
        for g in range(child.shape[0]):
            take = -np.int64(draw[g] < threshold[g])
            child[g] = (elite[g] & take) | (other[g] & ~take)


def _first_population(
    decoder: RandomKeyDecoder,
    tracker: Tracker,
    initial: Sequence[Solution],
    resume: FinalPopulation | None,
    sample_mutants: Callable[[int], np.ndarray],
    population: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, bool]:
    """Fills `population` with the initial solutions' seeds, resumed members and mutants.

    Only the initial solutions and the mutants are evaluated. Returns the fitness of the
    first len(value) rows (all of them unless the budget ran out) and whether it did.
    """
    size = population.shape[0]
    seeds = [keys for solution in initial for keys in decoder.seeds(solution)][:size]
    n_seeds = len(seeds)
    if n_seeds:
        population[:n_seeds] = np.asarray(seeds)
    kept = 0 if resume is None else min(len(resume.value), size - n_seeds)
    if kept:
        population[n_seeds : n_seeds + kept] = decoder.check_keys(resume.keys[:kept])
    population[n_seeds + kept :] = sample_mutants(size - n_seeds - kept)
    excess, value = np.zeros(0, dtype=np.int64), np.zeros(0)
    if n_seeds:
        excess, value, done = _evaluate(decoder, tracker, population[:n_seeds])
        if done:
            return excess, value, True
        excess, value = excess.copy(), value.copy()
    if kept:
        excess = np.concatenate([excess, resume.excess[:kept]])
        value = np.concatenate([value, resume.value[:kept]])
    if n_seeds + kept == size:
        return excess, value, False
    mutant_excess, mutant_value, done = _evaluate(decoder, tracker, population[n_seeds + kept :])
    return np.concatenate([excess, mutant_excess]), np.concatenate([value, mutant_value]), done


def _evaluate(
    decoder: RandomKeyDecoder, tracker: Tracker, keys: np.ndarray
) -> tuple[np.ndarray, np.ndarray, bool]:
    """Decodes and scores as many of `keys` as the budget allows and offers them.

    Returns:
        excess and value of the evaluated keys (a prefix of `keys`), and whether the budget
        is now spent.
    """
    keys = keys[: tracker.remaining]
    decoded: DecodedPopulation = decoder.evaluate(keys, reuse=True)
    try:
        offer_decoded(tracker, decoded)
    except BudgetExhausted:
        return decoded.excess.copy(), decoded.value.copy(), True
    return decoded.excess, decoded.value, False
