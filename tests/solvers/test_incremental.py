"""The incremental evaluator: its scores equal full re-scoring, moves do what they say."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import with_outputs
from degenerate_graphs import SMALL, isolated
from graphopt.costmodels._reference import reference_check
from graphopt.costmodels.machine import Machine
from graphopt.costmodels.validity import Violation
from graphopt.ir.generators import generate
from graphopt.ir.graph import Graph
from graphopt.ir.solution import Solution, random_schedule, topological_schedule
from graphopt.solvers.base import Problem, SolverError
from graphopt.solvers.incremental import (
    DEVICE_MOVE,
    ORDER_MOVE,
    IncrementalEvaluator,
    random_placements,
)
from strategies import graphs, machines, random_pins


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


def test_a_graph_outputs_home_copy_stays_to_the_last_step() -> None:
    # a:0 and x:0 are graph outputs: once made they stay on their producer's device to the
    # end, read (a:0 by b) or not (x:0). Moving a to device 1 leaves a:0 there after the
    # window; moving x later keeps a:0 resident at x's new step.
    g = with_outputs()
    problem = Problem(g, Machine(2))
    placement = np.zeros(g.n_ops, dtype=np.int32)
    ops = {name: j for j, name in enumerate(g.op_names)}
    order = np.array([ops[name] for name in ("x", "w", "a", "b", "c")], dtype=np.int64)
    evaluator = IncrementalEvaluator(problem)
    peaks, _ = evaluator.reset(placement, order)
    assert peaks.tolist() == [50 + 100 + 10 + 1, 0]
    moves = np.array(
        [
            [DEVICE_MOVE, ops["a"], 1],
            [DEVICE_MOVE, ops["c"], 1],
            [ORDER_MOVE, ops["x"], len(order)],
            [ORDER_MOVE, ops["x"], 3],
        ]
    )
    peaks, makespans = evaluator.evaluate(moves)
    assert peaks.tolist() == [[160, 105], [160, 11], [150, 0], [161, 0]]
    for move, move_peaks, move_makespan in zip(moves, peaks, makespans, strict=True):
        placement, order = evaluator.neighbour(move)
        full_peaks, full_makespan, status = problem.scorer.evaluate(placement, order)
        assert status[0] == 0
        np.testing.assert_array_equal(move_peaks, full_peaks)
        assert move_makespan == full_makespan
