"""REGAL and its learned baselines as solvers: a trained policy steering a search, zero-shot.

Paper 001 section 3 and appendix A.1: with K evaluations, 400 go to a uniform BRKGA run whose
last population gives the policy its aggregate features, the policy reads the graph once and
predicts per-op Beta distributions (and optionally elite biases), and the remaining K - 400
evaluations go to BRKGA sampling its mutants from them. BRKGA continues from the best members
of the feature run's last population (all of them by default), so those 400 evaluations also
count as search; the rest of its first population is drawn from the predicted distributions.
How many members it keeps and which BRKGA hyper-parameters it runs with (`InnerSearch`) are
part of what a policy is trained for, so its checkpoint records them. Variants:

- `regal`: the message-passing policy shipped for the objective and device count;
- `gas`: the graph-as-sequence (LSTM) policy (paper 001 section 4.2);
- `idrs`: REGAL's distributions used for pure random sampling instead of BRKGA (paper 000).

Shipped policies live in `graphopt/policies/` as `<method>-<objective>-d<devices>.pt`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

from graphopt.learning.features import build_features
from graphopt.learning.formats import CheckpointError, shipped_policy_path
from graphopt.learning.systems.regal.env import (
    RANDOM_BATCH,
    SEARCHES,
    Search,
    feature_population,
    steered_search,
)
from graphopt.learning.systems.regal.numpy_policy import NumpyPolicy
from graphopt.learning.systems.regal.numpy_policy import load as load_numpy_policy
from graphopt.learning.systems.regal.numpy_policy import predict_genes as predict_numpy_genes
from graphopt.solvers.base import (
    Budget,
    Initial,
    Problem,
    Result,
    Rng,
    Solver,
    SolverError,
    Tracker,
)
from graphopt.solvers.random_keys import RandomKeyDecoder

if TYPE_CHECKING:  # torch: imported only when a policy needs it (seconds)
    from graphopt.learning.systems.regal.checkpoints import TrainedPolicy

PHASES = ("policy", "feature_run", "features", "inference", "search")
"""What a learned solver's run spends its time on, in order (`timed_solve`): finding and loading
the policy (imports included), the uniform feature run, building the features from its
population, the policy's inference (distributions included), and the search that follows."""


@dataclass(frozen=True)
class RegalConfig:
    """How a trained policy is used.

    Attributes:
        method: which shipped policy to use when `policy` is None ('regal' or 'gas').
        policy: path of a policy checkpoint, or None for the shipped one.
        search: 'brkga' (REGAL, GAS) or 'random' (IDRS: sample chromosomes from the
            predicted distributions, no evolution).
        greedy: use each op's most likely action (True) or sample the actions.
        population_size: chromosomes per batch of the random search.
    """

    method: str = "regal"
    policy: str | None = None
    search: Search = "brkga"
    greedy: bool = True
    population_size: int = RANDOM_BATCH

    def __post_init__(self) -> None:
        if self.search not in SEARCHES:
            raise SolverError(f"search must be one of {', '.join(SEARCHES)}, got {self.search!r}")


NUMPY_INFERENCE = True
"""Run shipped policies' greedy inference in numpy, without importing torch (`Regal.run`); False
always runs the torch policy (the reference path; results are the same either way)."""


@cache
def _load_numpy(path: str, objective: str, n_devices: int) -> NumpyPolicy | None:
    """A shipped policy read for numpy inference once per process, or None (torch loads it)."""
    return load_numpy_policy(path, objective, n_devices)


@cache
def _load(path: str, objective: str, n_devices: int) -> TrainedPolicy:
    """A policy loaded once per process and reused by every solve (a compiler's setting)."""
    from graphopt.learning.systems.regal.checkpoints import load_policy

    return load_policy(path, objective, n_devices)


class PhaseClock:
    """Seconds spent in each phase of a run, lap by lap (a no-op unless `timed_solve` set one)."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.seconds: dict[str, float] = {}
        self._last = time.perf_counter()

    def lap(self, phase: str) -> None:
        """Charges the time since the previous lap (or the start) to `phase`."""
        if self.enabled:
            now = time.perf_counter()
            self.seconds[phase] = self.seconds.get(phase, 0.0) + now - self._last
            self._last = now


class Regal(Solver):
    """A trained policy's distributions driving BRKGA (or random sampling).

    Args:
        config: which policy and search.
        name: the name recorded in solutions.
    """

    name = "regal"
    clock = PhaseClock(enabled=False)
    """Where `run` records its phases' seconds (`timed_solve` sets one per solve)."""

    def __init__(self, config: RegalConfig | None = None, name: str | None = None) -> None:
        self.config = config or RegalConfig()
        self.name = name or self.config.method

    def options(self) -> dict[str, Any]:
        """The config fields."""
        return dict(vars(self.config))

    def policy(self, problem: Problem) -> TrainedPolicy:
        """The TrainedPolicy for this problem's objective and device count.

        Raises:
            SolverError: no shipped policy fits, or the checkpoint is for another problem.
        """
        objective, d = problem.objective.value, problem.machine.n_devices
        path = self.config.policy
        if path is None:
            path = shipped_policy_path(self.config.method, objective, d)
            if path is None:
                raise SolverError(
                    f"no shipped {self.config.method} policy for {objective} on {d} devices "
                    f"(shipped: {', '.join(shipped_policies()) or 'none'}); train one with "
                    "`graphopt train regal CONFIG` and pass it with --policy"
                )
        try:
            return _load(path, objective, d)
        except CheckpointError as error:
            raise SolverError(str(error)) from None

    def numpy_policy(self, problem: Problem) -> NumpyPolicy | None:
        """The shipped policy for numpy inference (`numpy_policy`), or None.

        None unless `NUMPY_INFERENCE` is set, the policy is the shipped one (a user's file is
        loaded by torch's `weights_only` loader, with every check) and actions are greedy
        (sampling them takes torch's generator); None also where numpy cannot read or run it.
        """
        if not NUMPY_INFERENCE or self.config.policy is not None or not self.config.greedy:
            return None
        objective, d = problem.objective.value, problem.machine.n_devices
        path = shipped_policy_path(self.config.method, objective, d)
        return None if path is None else _load_numpy(path, objective, d)

    def run(self, problem: Problem, tracker: Tracker, rng: Rng, initial: Initial) -> None:
        """Feature run, one policy inference, then the search on the rest of the budget.

        With a shipped policy and greedy actions, inference runs in numpy and torch is never
        imported (1.2 to 1.6 s), unless numpy cannot tell an op's action for certain: then the
        torch policy decides, so the actions, and every result, are the torch policy's.
        """
        clock = self.clock
        fast = self.numpy_policy(problem)
        # The torch policy is loaded before the feature run: a refusal takes no evaluations.
        policy = self.policy(problem) if fast is None else None
        settings = fast if fast is not None else policy
        clock.lap("policy")
        population = feature_population(problem, tracker, rng, settings.feature_evaluations)
        clock.lap("feature_run")
        feature_run = build_features(problem, population)
        clock.lap("features")
        tracker.check()
        decoder = RandomKeyDecoder(problem)
        genes = None
        if fast is not None:
            genes = predict_numpy_genes(fast, feature_run.features, decoder)
        if genes is None:
            from graphopt.learning.systems.regal.inference import predict_genes

            policy = policy or self.policy(problem)
            genes = predict_genes(policy, feature_run.features, decoder, self.config.greedy, rng)
        clock.lap("inference")
        steered_search(
            self.config.search,
            settings.inner,
            decoder,
            tracker,
            rng,
            genes,
            feature_run.population,
            initial,
            self.config.population_size,
        )
        clock.lap("search")
        tracker.check()


def timed_solve(
    solver: Regal, problem: Problem, budget: Budget, seed: int = 0
) -> tuple[Result, dict[str, float]]:
    """`solver.solve(problem, budget, seed)` and the seconds of each of its `PHASES`.

    A phase the run did not reach (the budget ran out first) counts 0 seconds.
    """
    solver.clock = PhaseClock()
    try:
        result = solver.solve(problem, budget, seed)
        seconds = {phase: solver.clock.seconds.get(phase, 0.0) for phase in PHASES}
    finally:
        del solver.clock
    return result, seconds


def shipped_policies() -> list[str]:
    """Names of the packaged policy checkpoints."""
    folder = resources.files("graphopt.policies")
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".pt"))


def regal(policy: str | None = None) -> Regal:
    """REGAL with its shipped message-passing policy, or the checkpoint at `policy`."""
    return Regal(RegalConfig(method="regal", policy=policy))


def gas(policy: str | None = None) -> Regal:
    """GAS: the shipped graph-as-sequence (LSTM) policy (or `policy`) steering BRKGA."""
    return Regal(RegalConfig(method="gas", policy=policy))


def idrs(policy: str | None = None) -> Regal:
    """IDRS: REGAL's distributions (or `policy`'s), sampled at random instead of evolved."""
    return Regal(RegalConfig(method="regal", policy=policy, search="random"), name="idrs")
