"""Local search, annealing and random search: random orders, validity, pins, seeds, quality."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import graph, op, tensor
from graphopt.costmodels._reference import reference_check, reference_score
from graphopt.costmodels.machine import Machine
from graphopt.costmodels.validity import Violation
from graphopt.ir.generators import generate
from graphopt.ir.graph import Graph
from graphopt.ir.solution import topological_schedule
from graphopt.solvers.annealing import AnnealingConfig, SimulatedAnnealing
from graphopt.solvers.base import Budget, Objective, Problem, SolverError
from graphopt.solvers.incremental import random_placements
from graphopt.solvers.local_search import LocalSearch, LocalSearchConfig
from graphopt.solvers.random_search import RandomSearch, RandomSearchConfig, random_orders
from strategies import graphs, machines, random_pins

SOLVERS = [LocalSearch, SimulatedAnnealing, RandomSearch]


@settings(max_examples=60, deadline=None)
@given(graphs(max_ops=25), machines(max_devices=4), st.integers(0, 2**32 - 1))
def test_random_orders_are_valid(g: Graph, machine, seed: int) -> None:
    problem = Problem(g, machine)
    rng = np.random.default_rng(seed)
    placements = random_placements(problem, 4, rng)
    orders, lengths = random_orders(problem, placements, rng)
    _, _, status = problem.scorer.evaluate_population(placements, orders, lengths)
    assert (status[:, 0] == Violation.NONE).all()


def two_chains() -> Graph:
    """Two chains whose 1000-byte heads both stay resident when the chains interleave."""
    ops, tensors = [], []
    for chain in "ab":
        ops += [op(f"{chain}{i}") for i in range(3)]
        tensors += [
            tensor(f"{chain}0:0", 1000, f"{chain}0", f"{chain}1"),
            tensor(f"{chain}1:0", 10, f"{chain}1", f"{chain}2"),
            tensor(f"{chain}2:0", 10, f"{chain}2"),
        ]
    return graph(ops, tensors, name="two_chains")


def test_local_search_strictly_improves_its_start() -> None:
    g = two_chains()
    problem = Problem(g, Machine(1))
    start = topological_schedule(g, np.zeros(g.n_ops, dtype=np.int32), 1)
    assert problem.scorer.score(start).peak_memory == 2010  # a0, b0, a1: both heads and a1:0
    result = LocalSearch().solve(problem, Budget(evaluations=300), seed=0, initial=[start])
    assert result.trace.value[0] == 2010
    assert result.value == 1010  # one chain after the other


@pytest.mark.parametrize("objective", list(Objective))
def test_annealing_and_local_search_beat_random_search(objective: Objective) -> None:
    values = {solver.name: [] for solver in SOLVERS}
    for seed in range(3):
        problem = Problem(generate("layered", 60, seed=seed), Machine(2), objective)
        for solver in SOLVERS:
            result = solver().solve(problem, Budget(evaluations=1500), seed=seed)
            values[solver.name].append(result.value)
    random_search = np.mean(values["random-search"])
    assert np.mean(values["local-search"]) < random_search
    assert np.mean(values["annealing"]) < random_search


@pytest.mark.parametrize("objective", list(Objective))
@pytest.mark.parametrize("solver_type", SOLVERS)
def test_solutions_are_valid_exact_pinned_and_seeded(solver_type, objective) -> None:
    g = generate("erdos_renyi", 30, seed=5)
    machine = Machine(3, capacity=2_000_000, latency=0.01, bandwidth=1e7, mode="async")
    pinned = random_pins(np.random.default_rng(1), g.n_ops, 3)
    problem = Problem(g, machine, objective, pinned=pinned)
    result = solver_type().solve(problem, Budget(evaluations=400), seed=3)
    assert result.evaluations == 400
    assert reference_check(g, result.solution)[0] == Violation.NONE
    exact = reference_score(g, result.solution, machine)
    assert exact.peak_memory_per_device == result.score.peak_memory_per_device
    assert exact.makespan == result.score.makespan
    pinned_ops = pinned >= 0
    np.testing.assert_array_equal(result.solution.placement[pinned_ops], pinned[pinned_ops])
    json.dumps(result.solution.solver)
    again = solver_type().solve(problem, Budget(evaluations=400), seed=3)
    np.testing.assert_array_equal(again.solution.placement, result.solution.placement)
    np.testing.assert_array_equal(again.solution.order, result.solution.order)


@pytest.mark.parametrize("solver_type", SOLVERS)
def test_time_budget_and_tiny_graphs(solver_type) -> None:
    lonely = graph([op("x")], [tensor("x:0", 10, "x")])
    result = solver_type().solve(Problem(lonely, Machine(1)), Budget(evaluations=20), seed=0)
    assert result.value == 10
    problem = Problem(generate("layered", 30, seed=0), Machine(2))
    result = solver_type().solve(problem, Budget(seconds=0.2), seed=0)
    assert result.evaluations > 0 and result.seconds < 5


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: LocalSearchConfig(neighbourhood_size=0), "neighbourhood_size"),
        (lambda: LocalSearchConfig(device_move_probability=1.5), "device_move_probability"),
        (lambda: AnnealingConfig(initial_acceptance=0.001), "final_acceptance"),
        (lambda: AnnealingConfig(final_acceptance=1.0), "final_acceptance"),
        (lambda: RandomSearchConfig(batch_size=True), "batch_size"),
    ],
)
def test_invalid_options_are_rejected(make, message: str) -> None:
    with pytest.raises(SolverError, match=message):
        make()
