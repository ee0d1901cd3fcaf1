"""REGAL's environment: the search a policy steers, after the feature run (paper 001 A.1).

A policy is trained for one `InnerSearch`, so its checkpoint records it; the solver
(`graphopt.learning.regal`) and the training rollouts (`graphopt.learning.rollouts`) both run
the search through it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from graphopt.ir.solution import Solution
from graphopt.solvers.base import Problem, SolverError, Tracker
from graphopt.solvers.brkga import BRKGA, BRKGAConfig, FinalPopulation, GeneDistributions

SEARCHES = ("brkga", "random")
"""How the distributions are used: evolved by BRKGA (REGAL, GAS) or sampled at random (IDRS)."""


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
