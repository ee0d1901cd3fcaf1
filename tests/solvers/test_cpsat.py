"""CP-SAT: proven optima equal brute force on tiny problems; bounds, hints, pins and capacity."""

from __future__ import annotations

import itertools
import math
import os
import signal
import threading
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st
from ortools.sat.python import cp_model

from brute_force import TooMany, all_scores, optimum
from builders import graph, op, tensor, tiny, with_outputs
from degenerate_graphs import isolated
from graphopt.costmodels._reference import reference_score
from graphopt.costmodels.machine import Machine
from graphopt.ir.generators import generate
from graphopt.ir.solution import Solution, random_schedule
from graphopt.solvers.base import Budget, Objective, Problem, SolverError
from graphopt.solvers.cpsat import CPSATConfig, CPSATSolver
from graphopt.solvers.cpsat.model import Model
from strategies import random_graph

ONE = Budget(evaluations=1)
SOLVER = CPSATSolver(CPSATConfig(default_seconds=60.0))
MAKESPAN_TOLERANCE = 1e-7
"""Relative: makespans are scaled to 1e9 ticks, rounding is at most half a tick per event."""


def checked(problem: Problem, result) -> float:
    """Asserts the result is valid under the reference scorer, exactly claimed, pins kept."""
    reference = reference_score(problem.graph, result.solution, problem.machine)
    assert reference == result.score
    value = (
        reference.peak_memory if problem.objective is Objective.PEAK_MEMORY else reference.makespan
    )
    assert result.value == value
    assert result.feasible
    if problem.pinned is not None:
        pinned = problem.pinned >= 0
        assert np.array_equal(result.solution.placement[pinned], problem.pinned[pinned])
    if result.lower_bound is not None:
        assert result.lower_bound <= result.value
    return value


def rounding(problem: Problem) -> float:
    """Seconds a makespan the model proves may be off by: a tick per op and per possible
    transfer (half for rounding durations to ticks, half for the slack the reported bound
    subtracts for it), a tick being 1e-9 of the model's horizon (all runtimes plus every
    transfer), which can be far longer than the makespan when transfers are slow."""
    graph, d = problem.graph, problem.machine.n_devices
    transfers = d * sum(problem.machine.transfer_duration(int(s)) for s in graph.tensor_size)
    ticks = graph.n_ops + graph.n_tensors * d
    return ticks * (graph.total_runtime + transfers) / 1e9 + 1e-12


def assert_optimal(problem: Problem, result, expected: float) -> None:
    value = checked(problem, result)
    assert result.status == "optimal"
    if problem.objective is Objective.PEAK_MEMORY:
        assert value == expected
        assert result.lower_bound == expected
    else:
        assert abs(value - expected) <= rounding(problem)
        assert expected - rounding(problem) <= result.lower_bound <= expected


# ----------------------------------------------------------------------- against brute force
@st.composite
def tiny_cases(draw: st.DrawFn):
    devices = draw(st.integers(1, 2))
    n_ops = draw(st.integers(1, 5 if devices == 2 else 6))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    g = random_graph(rng, n_ops, draw(st.sampled_from([0.15, 0.3, 0.6])))
    machine = {
        "n_devices": devices,
        "mode": draw(st.sampled_from(["sync", "async"])),
        "latency": draw(st.sampled_from([0.0, 0.5, 2.0])),
        "bandwidth": draw(st.sampled_from([math.inf, 100.0, 1000.0])),
    }
    pinned = None
    if devices == 2 and draw(st.booleans()):
        pinned = np.where(rng.random(n_ops) < 0.4, rng.integers(0, 2, n_ops), -1)
    capacity = draw(st.sampled_from(["none", "least", "middle", "below"]))
    return g, machine, pinned, capacity


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow],
)
@given(tiny_cases())
def test_proven_optimum_equals_brute_force(case) -> None:
    g, machine, pinned, capacity_kind = case
    try:
        scored = all_scores(g, Machine(**machine), pinned, limit=4000)
    except TooMany:
        reject()
    peaks = sorted({s.peak for s in scored})
    capacity = {
        "none": None,
        "least": peaks[0],
        "middle": peaks[len(peaks) // 2],
        "below": peaks[0] - 1 if peaks[0] > 0 else None,
    }[capacity_kind]
    for objective in Objective:
        problem = Problem(g, Machine(**machine, capacity=capacity), objective, pinned)
        best = optimum(scored, objective.value, capacity)
        if best is None:
            with pytest.raises(SolverError, match="capacity"):
                SOLVER.solve(problem, ONE)
            continue
        expected = best.peak if objective is Objective.PEAK_MEMORY else best.makespan
        assert_optimal(problem, SOLVER.solve(problem, ONE), expected)


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("objective", list(Objective))
def test_contract_example(mode: str, objective: Objective) -> None:
    machine = Machine(2, latency=0.5, bandwidth=400.0, mode=mode)
    best = optimum(all_scores(tiny(), machine), objective.value)
    problem = Problem(tiny(), machine, objective)
    expected = best.peak if objective is Objective.PEAK_MEMORY else best.makespan
    assert_optimal(problem, SOLVER.solve(problem, ONE), expected)


def test_makespan_under_a_binding_capacity_keeps_step_and_time_orders_together() -> None:
    # A graph found by brute force where the least memory forces a slower schedule.
    g = random_graph(np.random.default_rng(65), 5, 0.4)
    scored = all_scores(g, Machine(2))
    fastest = optimum(scored, "makespan")
    least = optimum(scored, "peak-memory").peak
    assert optimum(scored, "makespan", least).makespan > 1.2 * fastest.makespan
    for capacity in (None, fastest.peak, (fastest.peak + least) // 2, least):
        problem = Problem(g, Machine(2, capacity=capacity), Objective.MAKESPAN)
        best = optimum(scored, "makespan", capacity)
        assert_optimal(problem, SOLVER.solve(problem, ONE), best.makespan)


# ----------------------------------------------------------------------- reporting
@pytest.mark.parametrize("objective", list(Objective))
def test_status_bound_and_record(objective: Objective) -> None:
    problem = Problem(generate("layered", 10, seed=1), Machine(2), objective)
    result = SOLVER.solve(problem, ONE, seed=3)
    checked(problem, result)
    assert result.status == "optimal"
    assert result.solution.solver["name"] == "cp-sat"
    assert result.solution.solver["status"] == "optimal"
    assert result.solution.solver["lower_bound"] == result.lower_bound
    assert result.solution.solver["workers"] == 2
    assert result.evaluations == 1 and len(result.trace.value) == 1
    if objective is Objective.PEAK_MEMORY:
        assert result.lower_bound == result.value
    else:
        assert result.value - rounding(problem) <= result.lower_bound <= result.value


def test_time_limited_search_returns_a_valid_solution_and_a_bound() -> None:
    problem = Problem(generate("erdos_renyi", 80, seed=0), Machine(2), Objective.PEAK_MEMORY)
    start = time.perf_counter()
    result = CPSATSolver().solve(problem, Budget(seconds=3.0))
    assert time.perf_counter() - start < 10
    checked(problem, result)
    assert result.status in ("feasible", "optimal")
    assert 0 < result.lower_bound <= result.value


@pytest.mark.parametrize("objective", list(Objective))
def test_single_device_and_empty_graph(objective: Objective) -> None:
    problem = Problem(generate("erdos_renyi", 12, seed=2), Machine(1), objective)
    result = SOLVER.solve(problem, ONE)
    checked(problem, result)
    assert result.status == "optimal"
    if objective is Objective.MAKESPAN:
        assert math.isclose(result.value, problem.graph.total_runtime, rel_tol=1e-12)
    empty = graph([], [])
    result = SOLVER.solve(Problem(empty, Machine(2), objective), ONE)
    assert result.value == 0 and result.status == "optimal"


# ----------------------------------------------------------------------- hints and pins
def _order_and_placement(problem: Problem, seed: int) -> Solution:
    rng = np.random.default_rng(seed)
    placement = rng.integers(0, problem.machine.n_devices, problem.graph.n_ops)
    return random_schedule(problem.graph, placement, problem.machine.n_devices, rng)


@pytest.mark.parametrize("capacity", [False, True])
@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("objective", list(Objective))
def test_hints_are_accepted_and_consistent(mode: str, objective: Objective, capacity: bool) -> None:
    machine = {"n_devices": 2, "latency": 0.05, "bandwidth": 1e7, "mode": mode}
    g = generate("erdos_renyi", 12, seed=5)
    problem = Problem(g, Machine(**machine), objective)
    hints = [_order_and_placement(problem, seed) for seed in range(3)]
    if capacity:
        # Binding enough to need the step model, loose enough for every hint.
        most = max(problem.scorer.score(hint).peak_memory for hint in hints)
        assert most < g.total_tensor_size
        problem = Problem(g, Machine(**machine, capacity=most), objective)
    plain = SOLVER.solve(problem, ONE)
    hinted = SOLVER.solve(problem, ONE, initial=hints)
    assert hinted.status == "optimal"
    assert math.isclose(checked(problem, hinted), plain.value, rel_tol=MAKESPAN_TOLERANCE)
    # Fixing every hinted variable must leave a feasible model whose value is the hint's,
    # also when the hint's devices are numbered against the symmetry cut.
    for hint in hints:
        score = problem.scorer.score(hint)
        model = Model(problem, CPSATConfig().liveness_cuts)
        model.add_hint(hint.placement, hint.order, np.array(score.peak_memory_per_device))
        solver = cp_model.CpSolver()
        solver.parameters.fix_variables_to_their_hinted_value = True
        solver.parameters.num_workers = 1
        assert solver.solve(model.model) == cp_model.OPTIMAL
        placement, order = model.decode(solver)
        peaks, makespan, status = problem.scorer.evaluate(placement, order)
        assert status[0] == 0
        if objective is Objective.PEAK_MEMORY:
            assert solver.objective_value == score.peak_memory
        else:
            seconds = solver.objective_value / model.times.scale
            assert math.isclose(seconds, score.makespan, rel_tol=MAKESPAN_TOLERANCE)
            assert math.isclose(makespan, score.makespan, rel_tol=MAKESPAN_TOLERANCE)


def test_invalid_hint_is_refused() -> None:
    problem = Problem(tiny(), Machine(2))
    bad = Solution(np.array([0, 1, 0]), np.array([0, 1, 2]), 2)
    with pytest.raises(SolverError, match="initial solution 0 is invalid"):
        SOLVER.solve(problem, ONE, initial=[bad])


@pytest.mark.parametrize("objective", list(Objective))
def test_pinned_ops_are_honoured(objective: Objective) -> None:
    g = generate("layered", 12, seed=4)
    free = SOLVER.solve(Problem(g, Machine(2), objective), ONE)
    pinned = np.full(g.n_ops, -1)
    pinned[: g.n_ops // 2] = 1 - free.solution.placement[: g.n_ops // 2]
    pinned[-1] = 1
    problem = Problem(g, Machine(2), objective, pinned)
    result = SOLVER.solve(problem, ONE)
    checked(problem, result)
    assert result.status == "optimal"
    assert result.value >= free.value * (1 - MAKESPAN_TOLERANCE)


# ----------------------------------------------------------------------- capacity and options
@pytest.mark.parametrize("objective", list(Objective))
def test_capacity_nobody_meets_raises_a_clear_error(objective: Objective) -> None:
    g = generate("erdos_renyi", 10, seed=1)
    least = SOLVER.solve(Problem(g, Machine(2), Objective.PEAK_MEMORY), ONE).value
    tight = Problem(g, Machine(2, capacity=int(least)), objective)
    assert SOLVER.solve(tight, ONE).score.peak_memory <= least
    impossible = Problem(g, Machine(2, capacity=int(least) - 1), objective)
    # CP-SAT proves it, or the lower bound already does before any search.
    below = int(least) - 1
    with pytest.raises(SolverError, match=rf"capacity (of {below}|{below:,}) bytes"):
        SOLVER.solve(impossible, ONE)


def test_persistent_tensors_larger_than_the_capacity_are_infeasible() -> None:
    g = graph(
        [op("w"), op("x"), op("y")],
        [tensor("w:0", 100, "w", "y", persistent=True), tensor("x:0", 1, "x", "y")],
    )
    with pytest.raises(SolverError, match="capacity"):
        SOLVER.solve(Problem(g, Machine(2, capacity=99)), ONE)
    result = SOLVER.solve(Problem(g, Machine(2, capacity=101)), ONE)
    assert result.value == 101


@pytest.mark.parametrize("cuts", [0, CPSATConfig.liveness_cuts])
@pytest.mark.parametrize("d", [1, 2])
def test_graph_outputs_stay_to_the_last_step(cuts: int, d: int) -> None:
    # a:0 and x:0 are graph outputs: on one device x runs last, when a:0 is still resident
    # (100 + 50), not first, when a:0, b:0 and c:0 join x:0 (161).
    g = with_outputs()
    problem = Problem(g, Machine(d))
    best = optimum(all_scores(g, Machine(d)), "peak-memory").peak
    assert d > 1 or best == 150
    solver = CPSATSolver(CPSATConfig(default_seconds=60.0, liveness_cuts=cuts))
    assert_optimal(problem, solver.solve(problem, ONE), best)


@pytest.mark.parametrize(
    "options",
    [
        {"default_seconds": 0},
        {"default_seconds": math.inf},
        {"workers": 0},
        {"workers": True},
        {"log": 1},
        {"makespan_gap": -1e-3},
        {"liveness_cuts": -1},
    ],
)
def test_bad_options_are_refused(options) -> None:
    with pytest.raises(SolverError, match="cp-sat"):
        CPSATConfig(**options)


def test_partition_bound_is_the_best_split_of_runtimes() -> None:
    rng = np.random.default_rng(0)
    for trial in range(20):
        g = generate("erdos_renyi", int(rng.integers(1, 11)), seed=trial)
        pinned = np.where(rng.random(g.n_ops) < 0.3, rng.integers(0, 2, g.n_ops), -1)
        problem = Problem(g, Machine(2), Objective.MAKESPAN, pinned if trial % 2 else None)
        times = Model(problem, 0).times
        best = min(
            max(
                sum(r for r, b in zip(times.runtime, split, strict=True) if b == side)
                for side in (0, 1)
            )
            for split in itertools.product((0, 1), repeat=g.n_ops)
            if problem.pinned is None
            or all(p < 0 or p == b for p, b in zip(problem.pinned, split, strict=True))
        )
        assert times._partition_bound() == best
        loads = [
            sum(r for r, b in zip(times.runtime, times.split, strict=True) if b == side)
            for side in (0, 1)
        ]
        assert max(loads) == best


# ----------------------------------------------------------------------- 20-op graphs
@pytest.mark.slow
@pytest.mark.parametrize("objective", list(Objective))
@pytest.mark.parametrize("family", ["layered", "erdos_renyi"])
def test_twenty_op_graphs_are_solved_to_proven_optimality_in_seconds(
    family: str, objective: Objective
) -> None:
    for seed in range(5):
        problem = Problem(generate(family, 20, seed=seed), Machine(2), objective)
        result = SOLVER.solve(problem, Budget(seconds=60.0))
        checked(problem, result)
        assert result.status == "optimal", (family, seed)
        assert result.seconds < 20, (family, seed, result.seconds)


# ----------------------------------------------------------------------- large models
@pytest.mark.parametrize("capacity_share", [0.0, 0.5, 1.0])
def test_without_step_time_links_the_model_is_a_relaxation(capacity_share: float) -> None:
    # The graph of the linked test above; time_links=0 leaves the links out: the result is
    # still valid and within the capacity, its bound still a bound, and it claims optimality
    # only when it reaches the optimum.
    g = random_graph(np.random.default_rng(65), 5, 0.4)
    scored = all_scores(g, Machine(2))
    fastest, least = optimum(scored, "makespan"), optimum(scored, "peak-memory").peak
    capacity = round(least + capacity_share * (fastest.peak - least))
    problem = Problem(g, Machine(2, capacity=capacity), Objective.MAKESPAN)
    best = optimum(scored, "makespan", capacity).makespan
    solver = CPSATSolver(CPSATConfig(default_seconds=60.0, time_links=0))
    result = solver.solve(problem, ONE)
    assert checked(problem, result) >= best - rounding(problem)
    assert result.lower_bound <= best + rounding(problem)
    if result.status == "optimal":
        assert math.isclose(result.value, best, rel_tol=MAKESPAN_TOLERANCE)


def test_the_time_limit_covers_building_the_model() -> None:
    # 20,000 ops take seconds to model; with a tenth of a second the result is the start the
    # model would have been hinted with, said in the record, and on time.
    problem = Problem(isolated(20_000), Machine(2), Objective.PEAK_MEMORY)
    start = time.perf_counter()
    result = CPSATSolver().solve(problem, Budget(seconds=0.1, stop_at_bound=False))
    assert time.perf_counter() - start < 3
    checked(problem, result)
    assert result.status == "feasible" and result.lower_bound is None
    assert "building the model took over" in result.solution.solver["notes"][0]


def test_pairwise_links_do_not_grow_with_the_square_of_the_ops() -> None:
    # Makespan under a capacity that could bind on 500 ops: 250,000 step-time pairs, which
    # took 10 s to build before they were capped; the search must start well within 3 s.
    problem = Problem(isolated(500), Machine(2, capacity=1024), Objective.MAKESPAN)
    start = time.perf_counter()
    model = Model(problem, CPSATConfig().liveness_cuts, CPSATConfig().time_links)
    assert time.perf_counter() - start < 3 and not model.linked
    result = CPSATSolver().solve(problem, Budget(seconds=2.0))
    checked(problem, result)


def test_ctrl_c_during_the_search_keeps_the_best_and_says_interrupted(monkeypatch) -> None:
    """CP-SAT catches Ctrl-C itself and returns early: that is an interruption, not a result."""
    solve = cp_model.CpSolver.solve

    def interrupted_solve(self, model, *args):
        threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
        return solve(self, model, *args)

    monkeypatch.setattr(cp_model.CpSolver, "solve", interrupted_solve)
    graph = generate("layered", 80, seed=2)
    problem = Problem(graph, Machine(3, latency=0.01, bandwidth=1e8), "makespan")
    start = time.perf_counter()
    result = CPSATSolver().solve(problem, Budget(seconds=60))
    assert time.perf_counter() - start < 30
    assert result.status == "interrupted"
    assert reference_score(graph, result.solution, problem.machine).makespan == result.value
