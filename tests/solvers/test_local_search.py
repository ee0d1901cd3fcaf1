"""Local search, annealing and random search: incremental scores, validity, pins, seeds, quality."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import graph, op, tensor
from degenerate_graphs import SMALL, isolated
from graphopt.costmodels._reference import reference_check, reference_score
from graphopt.costmodels.machine import Machine
from graphopt.costmodels.validity import Violation
from graphopt.ir.generators import generate
from graphopt.ir.graph import Graph
from graphopt.ir.solution import Solution, random_schedule, topological_schedule
from graphopt.solvers.base import Budget, Objective, Problem, SolverError
from graphopt.solvers.local_search import (
    DEVICE_MOVE,
    ORDER_MOVE,
    AnnealingConfig,
    IncrementalEvaluator,
    LocalSearch,
    LocalSearchConfig,
    RandomSearch,
    RandomSearchConfig,
    SimulatedAnnealing,
    random_orders,
    random_placements,
)
from strategies import graphs, machines

SOLVERS = [LocalSearch, SimulatedAnnealing, RandomSearch]


def random_pins(rng: np.random.Generator, n_ops: int, n_devices: int) -> np.ndarray:
    pinned = np.full(n_ops, -1)
    chosen = rng.random(n_ops) < 0.3
    pinned[chosen] = rng.integers(0, n_devices, int(chosen.sum()))
    return pinned


@settings(max_examples=120, deadline=None)
@given(graphs(max_ops=20), machines(max_devices=4), st.integers(0, 2**32 - 1), st.booleans())
def test_incremental_evaluation_equals_full_rescoring(g: Graph, machine, seed: int, pin: bool):
    rng = np.random.default_rng(seed)
    d = machine.n_devices
    problem = Problem(g, machine, pinned=random_pins(rng, g.n_ops, d) if pin else None)
    placement = random_placements(problem, 1, rng)[0]
    if rng.random() < 0.5:
        start = random_schedule(g, placement, d, rng)
    else:
        start = topological_schedule(g, placement, d)
    evaluator = IncrementalEvaluator(problem)
    peaks, makespan = evaluator.reset(start.placement, start.order)
    full_peaks, full_makespan, _ = problem.scorer.evaluate(start.placement, start.order)
    np.testing.assert_array_equal(peaks, full_peaks)
    assert makespan == full_makespan
    for _ in range(3):
        moves = evaluator.sample_moves(rng, 12, 0.5)
        peaks, makespans = evaluator.evaluate(moves)
        memory_only, no_makespans = evaluator.evaluate(moves, with_makespan=False)
        np.testing.assert_array_equal(memory_only, peaks)
        assert np.isnan(no_makespans).all()
        for move, move_peaks, move_makespan in zip(moves, peaks, makespans, strict=True):
            placement, order = evaluator.neighbour(move)
            if problem.pinned is not None:
                free = problem.pinned < 0
                np.testing.assert_array_equal(placement[~free], problem.pinned[~free])
            full_peaks, full_makespan, status = problem.scorer.evaluate(placement, order)
            assert status[0] == 0
            np.testing.assert_array_equal(move_peaks, full_peaks)
            assert move_makespan == full_makespan
        if moves.shape[0]:
            placement, order = evaluator.neighbour(moves[-1])
            assert reference_check(g, Solution(placement, order, d))[0] == Violation.NONE
            evaluator.reset(placement, order)


def test_moves_change_what_they_say() -> None:
    g = generate("layered", 40, seed=1)
    problem = Problem(g, Machine(3))
    rng = np.random.default_rng(0)
    placement = random_placements(problem, 1, rng)[0]
    evaluator = IncrementalEvaluator(problem)
    evaluator.reset(placement, topological_schedule(g, placement, 3).order)
    moves = evaluator.sample_moves(rng, 200, 0.5)
    assert {DEVICE_MOVE, ORDER_MOVE} == set(moves[:, 0].tolist())
    for kind, j, target in moves[:20]:
        new_placement, order = evaluator.neighbour(np.array([kind, j, target]))
        changed = np.flatnonzero(new_placement != evaluator.placement)
        if kind == DEVICE_MOVE:
            assert changed.tolist() == [j] and new_placement[j] == target
        else:
            assert changed.size == 0
            assert np.flatnonzero(order == j)[0] != np.flatnonzero(evaluator.order == j)[0]


def test_evaluator_needs_a_current_solution() -> None:
    evaluator = IncrementalEvaluator(Problem(generate("layered", 5, seed=0), Machine(2)))
    with pytest.raises(SolverError, match="reset"):
        evaluator.sample_moves(np.random.default_rng(0), 4, 0.5)


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


@pytest.mark.parametrize("name", [*SMALL, "isolated-50"])
@pytest.mark.parametrize(
    "machine", [Machine(1), Machine(2), Machine(3, latency=0.5, bandwidth=100.0, mode="async")]
)
def test_incremental_evaluation_on_degenerate_graphs(name: str, machine: Machine) -> None:
    # No ops, no tensors or no edges: the kernels index by op and tensor without bounds
    # checks, so a move drawn on an empty graph used to read past its arrays (a segfault).
    g = isolated(50) if name == "isolated-50" else SMALL[name]()
    problem = Problem(g, machine)
    rng = np.random.default_rng(0)
    start = topological_schedule(g, random_placements(problem, 1, rng)[0], machine.n_devices)
    evaluator = IncrementalEvaluator(problem)
    evaluator.reset(start.placement, start.order)
    moves = evaluator.sample_moves(rng, 16, 0.5)
    if g.n_ops == 0 or (g.n_ops == 1 and machine.n_devices == 1):
        assert moves.shape == (0, 3)
    peaks, makespans = evaluator.evaluate(moves)
    for move, move_peaks, move_makespan in zip(moves, peaks, makespans, strict=True):
        placement, order = evaluator.neighbour(move)
        full_peaks, full_makespan, status = problem.scorer.evaluate(placement, order)
        assert status[0] == 0
        np.testing.assert_array_equal(move_peaks, full_peaks)
        assert move_makespan == full_makespan
