"""Critical-path list scheduling and HEFT: hand-made cases, bounds, pins and exact scores."""

from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from builders import graph, op, tensor
from graphopt.costmodels._reference import reference_score
from graphopt.costmodels.machine import Machine
from graphopt.ir.generators import generate
from graphopt.ir.graph import Graph
from graphopt.solvers.base import Budget, Objective, Problem, Result
from graphopt.solvers.events import events_from_op_order
from graphopt.solvers.list_scheduling import (
    HEFT_VARIANTS,
    CriticalPathScheduler,
    HeftScheduler,
    bottom_levels,
    critical_path_schedule,
    heft_schedule,
    heft_timeline,
    heft_timelines,
    upward_ranks,
)
from strategies import graphs, machines, solvable

BUDGET = Budget(evaluations=100)


def names(g: Graph, order: np.ndarray) -> list[str]:
    return [g.op_names[j] for j in order]


def solve(solver: type, problem: Problem) -> Result:
    """Solves and checks the result against the reference scorer."""
    result = solver().solve(problem, BUDGET)
    reference = reference_score(problem.graph, result.solution, problem.machine)
    assert reference.peak_memory_per_device == result.score.peak_memory_per_device
    assert reference.makespan == result.score.makespan
    return result


def fork() -> Graph:
    """s feeds a short op and a long two-op branch."""
    return graph(
        [op("s", 1.0), op("short", 1.0), op("long", 5.0), op("long2", 5.0)],
        [
            tensor("s:0", 10, "s", "short", "long"),
            tensor("long:0", 10, "long", "long2"),
            tensor("short:0", 10, "short"),
            tensor("long2:0", 10, "long2"),
        ],
    )


def test_critical_path_runs_the_long_branch_first() -> None:
    g = fork()
    assert bottom_levels(g).tolist() == [11.0, 1.0, 10.0, 5.0]
    placement, order = critical_path_schedule(g, n_devices=2)
    assert names(g, order) == ["s", "long", "long2", "short"]
    # s on device 0; long to device 1 (free first); long2 to device 0 (free at 1, waits for
    # long until 6); short to device 1 (free at 6).
    assert placement.tolist() == [0, 1, 1, 0]
    result = solve(CriticalPathScheduler, Problem(g, Machine(n_devices=2), Objective.MAKESPAN))
    assert result.value == g.critical_path_length == 11.0


def chain() -> Graph:
    return graph(
        [op("a"), op("b"), op("c")],
        [tensor("a:0", 100, "a", "b"), tensor("b:0", 100, "b", "c"), tensor("c:0", 1, "c")],
    )


def test_heft_keeps_a_chain_on_one_device_when_transfers_are_slow() -> None:
    g = chain()
    machine = Machine(n_devices=2, latency=10.0)
    assert upward_ranks(g, machine).tolist() == [23.0, 12.0, 1.0]
    placement, _ = heft_schedule(g, machine)
    assert placement.tolist() == [0, 0, 0]
    heft = solve(HeftScheduler, Problem(g, machine, Objective.MAKESPAN))
    assert heft.value == 3.0
    # Critical-path list scheduling ignores transfers and moves b to the idle device.
    placement, _ = critical_path_schedule(g, n_devices=2)
    assert placement.tolist() == [0, 1, 0]
    assert solve(CriticalPathScheduler, Problem(g, machine, Objective.MAKESPAN)).value > 3.0


def test_heft_spreads_independent_ops_over_devices() -> None:
    g = graph([op("x", 2.0), op("y", 3.0), op("z", 1.0)], [])
    placement, order = heft_schedule(g, Machine(n_devices=3))
    assert names(g, order) == ["y", "x", "z"]
    assert placement.tolist() == [1, 0, 2]
    assert solve(HeftScheduler, Problem(g, Machine(n_devices=3), Objective.MAKESPAN)).value == 3.0


def test_sync_receive_occupies_the_destination_device() -> None:
    # u and v run in parallel; w joins u (the later input) and reads v's output across
    # devices: in sync mode a 2 s receive on w's device after u, in async mode it overlaps u.
    g = graph(
        [op("u", 4.0), op("v", 1.0), op("w", 1.0)],
        [tensor("u:0", 1, "u", "w"), tensor("v:0", 1, "v", "w"), tensor("w:0", 1, "w")],
    )
    for mode, makespan in (("sync", 7.0), ("async", 5.0)):
        machine = Machine(n_devices=2, latency=2.0, mode=mode)
        placement, order = heft_schedule(g, machine)
        assert placement.tolist() == [0, 1, 0]
        events = events_from_op_order(g, placement, order, 2, "lazy")
        assert Problem(g, machine).scorer.evaluate(placement, events)[1] == makespan
        # The heft solver also tries the lookahead, which sees that the receive costs w's
        # device more than running v there: all on one device, 6 s.
        heft = solve(HeftScheduler, Problem(g, machine, Objective.MAKESPAN)).value
        assert heft == min(makespan, 6.0)


@settings(max_examples=150, deadline=None)
@given(graphs(max_ops=25), machines(max_devices=4))
def test_bounds_single_device_and_exact_scores(g: Graph, machine: Machine) -> None:
    problem = Problem(g, machine, Objective.MAKESPAN)
    assume(solvable(problem))
    heft = solve(HeftScheduler, problem)
    listed = solve(CriticalPathScheduler, problem)
    for result in (heft, listed):
        assert result.score.makespan >= g.critical_path_length - 1e-9
    if machine.n_devices == 1:
        assert heft.score.makespan == listed.score.makespan == pytest.approx(g.total_runtime)
        assert not heft.solution.placement.any() and not listed.solution.placement.any()


@st.composite
def pinned_problems(draw: st.DrawFn) -> Problem:
    g = draw(graphs(max_ops=20))
    machine = draw(machines(max_devices=3))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    share = draw(st.sampled_from([0.3, 1.0]))
    devices = rng.integers(0, machine.n_devices, g.n_ops)
    pinned = np.where(rng.random(g.n_ops) < share, devices, -1)
    return Problem(g, machine, draw(st.sampled_from(list(Objective))), pinned)


@settings(max_examples=100, deadline=None)
@given(pinned_problems())
def test_pins_are_honoured_and_runs_are_deterministic(problem: Problem) -> None:
    assume(solvable(problem))
    pinned = problem.pinned
    assert pinned is not None
    for solver in (CriticalPathScheduler, HeftScheduler):
        result = solve(solver, problem)
        placement = result.solution.placement
        assert np.array_equal(placement[pinned >= 0], pinned[pinned >= 0])
        again = solver().solve(problem, BUDGET)
        assert np.array_equal(again.solution.order, result.solution.order)


@settings(max_examples=60, deadline=None)
@given(pinned_problems())
def test_every_timeline_variant_at_once_equals_each_alone(problem: Problem) -> None:
    """`heft_timelines` (ranks, order and children once) against `heft_timeline` per variant."""
    g, machine, pinned = problem.graph, problem.machine, problem.pinned
    together = heft_timelines(g, machine, pinned)
    assert list(together) == list(HEFT_VARIANTS)
    for variant, (insertion, lookahead) in HEFT_VARIANTS.items():
        alone = heft_timeline(g, machine, pinned, insertion=insertion, lookahead=lookahead)
        assert np.array_equal(together[variant].placement, alone.placement)
        assert np.array_equal(together[variant].events, alone.events)


@pytest.mark.parametrize("schedule", [critical_path_schedule, heft_schedule])
def test_ten_thousand_ops_in_well_under_a_second(schedule) -> None:
    g = generate("layered", 10_000, seed=0)
    argument = 4 if schedule is critical_path_schedule else Machine(n_devices=4)
    start = time.perf_counter()
    placement, order = schedule(g, argument)
    assert time.perf_counter() - start < 1.0
    assert sorted(order.tolist()) == list(range(g.n_ops))
    assert set(placement.tolist()) == {0, 1, 2, 3}
