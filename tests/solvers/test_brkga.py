"""BRKGA: budget, determinism, seeding, per-gene distributions, learning signal, validation."""

from __future__ import annotations

import numpy as np
import pytest

from builders import tiny
from graphopt.costmodels._reference import reference_score
from graphopt.costmodels.machine import Machine
from graphopt.ir.generators import generate
from graphopt.ir.solution import topological_schedule
from graphopt.solvers.base import Budget, Objective, Problem, SolverError, Tracker
from graphopt.solvers.brkga import BIAS_LEVELS, BRKGA, BRKGAConfig, GeneDistributions, crossover
from graphopt.solvers.random_keys import RandomKeyDecoder


@pytest.fixture(scope="module")
def problem() -> Problem:
    return Problem(generate("layered", 60, seed=3), Machine(2))


def test_spends_exactly_the_budget_and_rescores(problem: Problem) -> None:
    result = BRKGA().solve(problem, Budget(777, stop_at_bound=False), seed=1)
    assert result.evaluations == 777
    exact = reference_score(problem.graph, result.solution, problem.machine)
    assert exact.peak_memory == result.value == result.score.peak_memory
    assert result.solution.solver["name"] == "brkga"
    assert result.solution.objective["peak_memory"] == exact.peak_memory
    assert result.trace.evaluations[-1] <= 777
    assert all(np.diff(result.trace.value) < 0)  # a trace point per strict improvement


def test_same_seed_same_result_other_seed_other_search(problem: Problem) -> None:
    budget = Budget(evaluations=600)
    a, b = (BRKGA().solve(problem, budget, seed=5) for _ in range(2))
    np.testing.assert_array_equal(a.solution.order, b.solution.order)
    assert a.trace.value == b.trace.value
    c = BRKGA().solve(problem, budget, seed=6)
    assert a.trace.value != c.trace.value


def test_more_evaluations_find_better_solutions() -> None:
    """The search learns: on average over seeds, 3,000 evaluations beat 200."""
    problem = Problem(generate("erdos_renyi", 80, seed=0), Machine(2))
    short = [BRKGA().solve(problem, Budget(evaluations=200), seed=s).value for s in range(4)]
    long = [BRKGA().solve(problem, Budget(evaluations=3000), seed=s).value for s in range(4)]
    assert np.mean(long) < 0.97 * np.mean(short)


def test_seeded_population_never_loses_the_seed(problem: Problem) -> None:
    seed_solution = topological_schedule(problem.graph, np.zeros(problem.graph.n_ops, int), 2)
    seed_value = reference_score(problem.graph, seed_solution, problem.machine).peak_memory
    result = BRKGA().solve(problem, Budget(evaluations=150), seed=0, initial=[seed_solution])
    assert result.value <= seed_value


def test_makespan_objective_and_capacity_ranking() -> None:
    graph = generate("layered", 40, seed=1)
    problem = Problem(graph, Machine(2, capacity=10**12), Objective.MAKESPAN)
    result = BRKGA().solve(problem, Budget(evaluations=500), seed=0)
    assert result.value == result.score.makespan
    assert result.feasible
    bound = Problem(graph, Machine(2)).lower_bound
    tight = Problem(graph, Machine(2, capacity=int(bound)), Objective.PEAK_MEMORY)
    infeasible = BRKGA().solve(tight, Budget(evaluations=200), seed=0)
    assert infeasible.score.peak_memory >= bound
    assert infeasible.feasible == (infeasible.score.peak_memory <= bound)


def test_per_gene_distributions_steer_mutants() -> None:
    """Mutants drawn near 1 for device-1 affinities put every free op on device 1."""
    problem = Problem(tiny(), Machine(2))
    n_genes = RandomKeyDecoder(problem).n_genes
    alpha = np.ones(n_genes)
    beta = np.ones(n_genes)
    alpha[1:6:2], beta[0:6:2] = 50.0, 50.0  # device 1 affinities high, device 0 low
    genes = GeneDistributions(alpha, beta, np.full(n_genes, 1.0))
    config = BRKGAConfig(population=10, elites=1, children=0, symmetry_breaking=False)
    result = BRKGA(config, genes).solve(problem, Budget(evaluations=10), seed=0)
    assert result.solution.placement.tolist() == [1, 1, 1]
    with pytest.raises(SolverError, match="alpha has shape"):
        BRKGA(config, GeneDistributions(alpha[:3], beta, beta)).solve(problem, Budget(10))


def test_crossover_takes_elite_genes_with_the_bias() -> None:
    rng = np.random.default_rng(0)
    population = np.stack([np.zeros(20000), np.ones(20000)])
    out = np.empty((1, 20000))
    draws = rng.integers(0, BIAS_LEVELS, (1, 20000), dtype=np.uint16)
    threshold = np.full(20000, round(0.7 * BIAS_LEVELS), dtype=np.int32)
    crossover(population, np.array([1]), np.array([0]), draws, threshold, out)
    assert abs(out.mean() - 0.7) < 0.02


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"population": 1}, "population must be >= 2"),
        ({"elites": 0}, "elites must be in"),
        ({"children": 95}, "children must be in"),
        ({"elite_bias": 0.4}, "elite_bias must be in"),
        ({"mutant_alpha": 0.0}, "Beta parameters must be > 0"),
    ],
)
def test_config_rejects_impossible_settings(fields: dict, message: str) -> None:
    with pytest.raises(SolverError, match=message):
        BRKGAConfig(**fields)


def test_budget_and_preset_errors() -> None:
    with pytest.raises(SolverError, match="evaluations must be an integer >= 1"):
        Budget(evaluations=0)
    with pytest.raises(SolverError, match="no BRKGA preset named 'nope'"):
        BRKGAConfig.preset("nope")


def test_tuning_grid_search_picks_the_best_setting() -> None:
    from graphopt.solvers.tuning import grid_configs, tune_brkga

    grid = {"elite_bias": [0.7, 0.9], "population": [20], "elites": [2], "mutants": [2, 19]}
    configs = grid_configs(grid)
    assert [(c.elite_bias, c.children) for c in configs] == [(0.7, 16), (0.9, 16)]
    graphs = [generate("layered", 20, seed=s) for s in range(2)]
    result = tune_brkga(graphs, Machine(2), grid=grid, evaluations=200)
    assert len(result.table) == 2
    assert result.best_ratio == min(row["mean_ratio_to_default"] for row in result.table)
    with pytest.raises(SolverError, match="unknown BRKGA grid keys"):
        grid_configs({"speed": [1]})


def test_presets_are_chosen_by_objective() -> None:
    peak, makespan = (
        BRKGAConfig.preset("tuned", "peak-memory"),
        BRKGAConfig.preset("tuned", "makespan"),
    )
    assert peak == BRKGAConfig.preset("tuned") and makespan != peak
    graph = generate("layered", 30, seed=0)
    for objective in ("peak-memory", "makespan"):
        problem = Problem(graph, Machine(2), objective)
        assert BRKGA("tuned").config_for(problem) == BRKGAConfig.preset("tuned", objective)
    assert BRKGA("tuned").options()["preset"] == "tuned"
    with pytest.raises(SolverError, match="no BRKGA preset named 'nope'"):
        BRKGA("nope")


def test_shipped_tuned_preset_loads() -> None:
    config = BRKGAConfig.preset("tuned")
    assert config.population >= config.elites + config.children
    problem = Problem(generate("layered", 30, seed=0), Machine(2))
    from graphopt.solvers.brkga import tuned_brkga

    result = tuned_brkga().solve(problem, Budget(evaluations=300))
    assert result.solution.solver["name"] == "brkga-tuned"


def test_ctrl_c_returns_the_best_so_far(problem: Problem) -> None:
    """KeyboardInterrupt mid-search (here from the progress callback) keeps the best solution."""
    improvements = []

    def interrupt(evaluations: int, value: float, excess: int) -> None:
        improvements.append(value)
        if len(improvements) == 3:
            raise KeyboardInterrupt

    result = BRKGA().solve(problem, Budget(evaluations=5000), seed=0, progress=interrupt)
    assert result.status == "interrupted" and result.solution.solver["status"] == "interrupted"
    assert result.evaluations < 5000
    assert (
        result.value == reference_score(problem.graph, result.solution, problem.machine).peak_memory
    )


def test_resumed_population_costs_no_evaluations() -> None:
    problem = Problem(generate("layered", 40, seed=2), Machine(n_devices=2))
    first = Tracker(problem, Budget(250, stop_at_bound=False))
    population = BRKGA().evolve(problem, first, np.random.default_rng(0))
    assert population.keys.shape[0] == 100 and first.evaluations == 250
    second = Tracker(problem, Budget(90, stop_at_bound=False))
    final = BRKGA().evolve(problem, second, np.random.default_rng(1), resume=population)
    assert second.evaluations == 90  # one generation of offspring, the resumed ones not re-scored
    assert final.value[0] <= population.value[0]
    assert np.all(np.diff(final.value) >= 0)


@pytest.mark.parametrize(("a", "b"), [(1.0, 0.5), (2.0, 5.0), (0.5, 0.5)])
def test_beta_mutants_follow_the_configured_distribution(a, b) -> None:
    """Configured Beta mutants (drawn through quantile tables) match numpy's Beta draws."""
    config = BRKGAConfig(mutant_alpha=a, mutant_beta=b)
    sample = BRKGA(config)._mutant_sampler(config, 400, np.random.default_rng(0))
    drawn = np.sort(sample(100).reshape(-1))
    expected = np.sort(np.random.default_rng(1).beta(a, b, drawn.size))
    assert drawn.min() >= 0.0 and drawn.max() <= 1.0
    # Two-sample Kolmogorov-Smirnov statistic (largest CDF gap) of 40,000 draws each: a gap
    # above 0.015 rejects one shared distribution at p < 0.001 (critical value 0.0138).
    grid = np.linspace(0, 1, 1001)
    gap = np.abs(np.searchsorted(drawn, grid) - np.searchsorted(expected, grid)).max()
    assert gap / drawn.size < 0.015
    assert abs(drawn.mean() - a / (a + b)) < 0.01
