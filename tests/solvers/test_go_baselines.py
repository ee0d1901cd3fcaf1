"""GO's decoder and its two baselines: the compiler default and annealing over GO's decisions.

The decoder turns per-op devices, scheduling levels and fusion levels into solutions whose
claimed scores must match the plain reference; the compiler default is HEFT's placement, GO's
critical-path ready queues and XLA-like default fusion; annealing starts there, never ends
worse, honours pins and the problem's fusion switch, and spends its budget exactly, seeded.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from degenerate_graphs import SMALL
from graphopt.costmodels._reference import reference_score
from graphopt.costmodels.machine import Machine
from graphopt.ir.generators import generate
from graphopt.ir.graph import Graph
from graphopt.ir.solution import Solution
from graphopt.solvers.base import Budget, Objective, Problem, Result, SolverError
from graphopt.solvers.expert import expert_placement
from graphopt.solvers.fusion import default_fusion
from graphopt.solvers.go_baselines import (
    CompilerDefault,
    CompilerDefaultConfig,
    GOAnnealing,
    GOAnnealingConfig,
)
from graphopt.solvers.go_decoder import decode
from graphopt.solvers.list_scheduling import heft_timeline
from graphopt.solvers.ready_queue import ready_queue_orders
from strategies import graphs, machines, random_pins, with_fusion

MACHINE = Machine(2, latency=0.01, bandwidth=1e6)


@pytest.fixture(scope="module")
def graph() -> Graph:
    return generate("layered", 40, seed=1, fusion=True)


def assert_rescores(graph: Graph, machine: Machine, result: Result) -> None:
    """The plain reference agrees with what the solver reports."""
    exact = reference_score(graph, result.solution, machine)
    assert exact == result.score
    expected = exact.makespan if result.objective is Objective.MAKESPAN else exact.peak_memory
    assert result.value == expected


@settings(max_examples=20, deadline=None)
@given(
    graph=graphs(max_ops=20),
    machine=machines(max_devices=3),
    seed=st.integers(0, 2**32 - 1),
    n_levels=st.integers(2, 8),
    fusion=st.sampled_from(["levels", "default", "none"]),
)
def test_every_decoded_row_rescores_identically(graph, machine, seed, n_levels, fusion) -> None:
    rng = np.random.default_rng(seed)
    graph = with_fusion(graph, rng)
    shape = (4, graph.n_ops)
    placements = rng.integers(0, machine.n_devices, shape)
    schedule = rng.integers(0, n_levels, shape) if rng.random() < 0.8 else None
    levels = rng.integers(0, n_levels, shape) if fusion == "levels" else None
    compiler = "default" if fusion == "default" else "none"
    decoded = decode(graph, machine, placements, schedule, levels, n_levels, compiler)
    np.testing.assert_array_equal(decoded.placements, placements)
    for b in range(shape[0]):
        exact = reference_score(graph, decoded.solution(b, machine.n_devices), machine)
        assert exact.peak_memory_per_device == tuple(decoded.peaks[b])
        assert exact.makespan == pytest.approx(decoded.makespans[b], rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("objective", list(Objective))
@pytest.mark.parametrize("fusion", [False, True])
def test_both_solvers_rescore_exactly(graph, objective, fusion) -> None:
    machine = Machine(2, latency=0.01, bandwidth=1e6, capacity=2_000_000)
    problem = Problem(graph, machine, objective, fusion=fusion)
    for solver in (CompilerDefault(), GOAnnealing()):
        result = solver.solve(problem, Budget(evaluations=60), seed=0)
        assert_rescores(graph, machine, result)
        assert result.solution.solver["name"] == solver.name


def test_compiler_default_is_heft_ready_queues_then_default_fusion(graph) -> None:
    plain = CompilerDefault().solve(Problem(graph, MACHINE, "makespan"), Budget(evaluations=1))
    placement = heft_timeline(graph, MACHINE).placement
    orders, lengths = ready_queue_orders(graph, MACHINE, placement[None])
    np.testing.assert_array_equal(plain.solution.placement, placement)
    np.testing.assert_array_equal(plain.solution.order, orders[0, : lengths[0]])
    assert plain.solution.fusion is None
    fused = CompilerDefault().solve(
        Problem(graph, MACHINE, "makespan", fusion=True), Budget(evaluations=1)
    )
    expected = default_fusion(graph, Solution(placement, orders[0, : lengths[0]], 2))
    assert expected.fusion is not None and fused.solution.n_groups > 0
    np.testing.assert_array_equal(fused.solution.placement, expected.placement)
    np.testing.assert_array_equal(fused.solution.order, expected.order)
    np.testing.assert_array_equal(fused.solution.fusion, expected.fusion)


def test_compiler_default_expert_placement_under_pins(graph) -> None:
    pinned = random_pins(np.random.default_rng(0), graph.n_ops, 2)
    problem = Problem(graph, MACHINE, "makespan", pinned=pinned)
    result = CompilerDefault(CompilerDefaultConfig("expert")).solve(problem, Budget(evaluations=1))
    expected = np.where(pinned >= 0, pinned, expert_placement(graph, 2))
    np.testing.assert_array_equal(result.solution.placement, expected)
    assert result.solution.solver["placement"] == "expert"


@pytest.mark.parametrize(
    ("name", "n_devices"), [("empty", 2), ("one-op", 2), ("no-edges", 2), ("layered", 1)]
)
def test_one_device_or_no_op_still_solves(graph, name, n_devices) -> None:
    g = graph if name == "layered" else SMALL[name]()
    machine = Machine(n_devices)
    problem = Problem(g, machine, "makespan", fusion=g is graph)
    for solver in (CompilerDefault(CompilerDefaultConfig("expert")), GOAnnealing()):
        result = solver.solve(problem, Budget(evaluations=20), seed=0)
        if n_devices == 1 or g.n_ops == 0:
            assert not result.solution.placement.any()
        assert_rescores(g, machine, result)


@pytest.mark.parametrize("fusion", [False, True])
def test_annealing_never_ends_worse_than_its_start_and_improves(graph, fusion) -> None:
    problem = Problem(graph, MACHINE, "makespan", fusion=fusion)
    result = GOAnnealing().solve(problem, Budget(evaluations=300), seed=0)
    default = CompilerDefault().solve(problem, Budget(evaluations=1))
    placement = heft_timeline(graph, MACHINE).placement[None]
    levels = np.zeros_like(placement)
    start = decode(graph, MACHINE, placement, levels, levels + 7 if fusion else None)
    assert result.value <= start.makespans[0]
    if not fusion:  # the start is the compiler default
        assert start.makespans[0] == default.value
    assert result.value < default.value
    assert_rescores(graph, MACHINE, result)


def test_annealing_respects_pins_and_the_fusion_switch(graph) -> None:
    pinned = random_pins(np.random.default_rng(1), graph.n_ops, 2)
    for fusion in (False, True):
        problem = Problem(graph, MACHINE, "makespan", pinned=pinned, fusion=fusion)
        result = GOAnnealing().solve(problem, Budget(evaluations=150), seed=2)
        free = pinned < 0
        np.testing.assert_array_equal(result.solution.placement[~free], pinned[~free])
        assert (result.solution.n_groups > 0) == fusion


def test_annealing_is_seeded_and_spends_its_budget_exactly(graph) -> None:
    problem = Problem(graph, MACHINE, "makespan", fusion=True)
    budget = Budget(evaluations=37)  # not a multiple of the batch
    first = GOAnnealing().solve(problem, budget, seed=3)
    again = GOAnnealing().solve(problem, budget, seed=3)
    assert first.evaluations == again.evaluations == 37
    assert first.value == again.value
    for a, b in (
        (first.solution.placement, again.solution.placement),
        (first.solution.order, again.solution.order),
        (first.solution.fusion, again.solution.fusion),
    ):
        np.testing.assert_array_equal(a, b)
    # A peak memory search stops early once it reaches the lower bound, proven optimal.
    small = generate("layered", 30, seed=2)
    bounded = GOAnnealing().solve(Problem(small, MACHINE, "peak-memory"), Budget(evaluations=50))
    assert bounded.evaluations < 50 and bounded.status == "optimal"


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: CompilerDefaultConfig("metis"), "placement must be one of heft, expert"),
        (lambda: GOAnnealingConfig(n_levels=1), "n_levels must be an integer >= 2"),
        (lambda: GOAnnealingConfig(hot=0.001, cold=0.01), "0 < cold <= hot"),
        (lambda: GOAnnealingConfig(cold=0.0), "0 < cold <= hot"),
        (lambda: GOAnnealingConfig(batch=0), "batch must be an integer >= 1"),
        (lambda: GOAnnealingConfig(capacity_penalty=-1.0), "capacity_penalty must be >= 0"),
    ],
)
def test_bad_options_are_one_clear_error(make, match) -> None:
    with pytest.raises(SolverError, match=match):
        make()
