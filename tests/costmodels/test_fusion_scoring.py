"""Fusion groups (docs/format.md section 13): the merged-graph scorer against the literal walk.

The fast scorer merges each group into one op and runs the unchanged kernel; the reference walks
groups as steps. They must agree on every legal grouping (scores) and every illegal one (the
first rule broken, with the same group, op or position), and each rule has a hand-made case.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from graphopt.costmodels._reference import reference_check, reference_memory_steps, reference_score
from graphopt.costmodels.machine import Machine
from graphopt.costmodels.score import Scorer, score
from graphopt.costmodels.validity import Violation, violation_message
from graphopt.errors import SolutionError
from graphopt.ir.graph import Graph
from graphopt.ir.solution import Solution, random_schedule
from strategies import fused_problems, random_graph, random_groups, with_fusion


def _same_score(graph: Graph, machine: Machine, solution: Solution) -> None:
    fast = Scorer(graph, machine).score(solution)
    reference = reference_score(graph, solution, machine)
    assert fast.peak_memory_per_device == reference.peak_memory_per_device
    assert fast.makespan == reference.makespan
    assert fast.speedup == reference.speedup


def _legal_groups_agree(problem: tuple[Graph, Machine, Solution]) -> None:
    graph, machine, solution = problem
    event(f"groups: {min(solution.n_groups, 3)}{'+' if solution.n_groups > 3 else ''}")
    _same_score(graph, machine, solution)


@settings(max_examples=1500, deadline=None)
@given(fused_problems())
def test_fast_equals_reference_on_legal_groups(problem) -> None:
    _legal_groups_agree(problem)


@pytest.mark.slow
@settings(max_examples=6000, deadline=None)
@given(fused_problems())
def test_fast_equals_reference_on_6000_legal_cases(problem) -> None:
    _legal_groups_agree(problem)


def _break(graph: Graph, solution: Solution, rng: np.random.Generator, how: str) -> Solution:
    """A fused solution with one random change that may break a group rule or the schedule."""
    fusion = solution.fusion.copy()
    placement = solution.placement.copy()
    order = solution.order.copy()
    n_groups = solution.n_groups
    if how == "join" and graph.n_ops:  # an op joins a random group (or a new one)
        fusion[rng.integers(graph.n_ops)] = rng.integers(-1, n_groups + 1)
    elif how == "merge" and n_groups >= 2:
        a, b = rng.choice(n_groups, 2, replace=False)
        fusion[fusion == b] = a
    elif how == "ids":  # arbitrary groups: every rule, convexity included
        fusion = rng.integers(-1, max(1, graph.n_ops // 3), graph.n_ops)
    elif how == "move" and graph.n_ops:
        placement[rng.integers(graph.n_ops)] = rng.integers(solution.n_devices)
    elif how == "swap" and order.shape[0] >= 2:
        i, j = rng.choice(order.shape[0], 2, replace=False)
        order[[i, j]] = order[[j, i]]
    elif how == "drop" and order.shape[0]:
        order = np.delete(order, rng.integers(order.shape[0]))
    elif how == "transfer" and graph.n_tensors:
        d = solution.n_devices
        code = graph.n_ops + int(rng.integers(graph.n_tensors)) * d + int(rng.integers(d))
        order = np.insert(order, rng.integers(order.shape[0] + 1), code)
    return replace(solution, placement=placement, order=order, fusion=fusion)


BREAKS = st.sampled_from(["join", "merge", "ids", "move", "swap", "drop", "transfer"])


@settings(max_examples=1500, deadline=None)
@given(fused_problems(), BREAKS, st.integers(0, 2**32 - 1))
def test_fast_and_reference_report_the_same_first_violation(problem, how, seed) -> None:
    _first_violations_agree(problem, how, seed)


@pytest.mark.slow
@settings(max_examples=6000, deadline=None)
@given(fused_problems(), BREAKS, st.integers(0, 2**32 - 1))
def test_the_same_first_violation_on_6000_broken_cases(problem, how, seed) -> None:
    _first_violations_agree(problem, how, seed)


def _first_violations_agree(problem: tuple[Graph, Machine, Solution], how: str, seed: int) -> None:
    graph, machine, solution = problem
    broken = _break(graph, solution, np.random.default_rng(seed), how)
    _, _, status = Scorer(graph, machine).evaluate(broken.placement, broken.order, broken.fusion)
    expected = reference_check(graph, broken)
    assert tuple(int(s) for s in status) == (int(expected[0]), expected[1], expected[2])
    if expected[0] is Violation.NONE:
        _same_score(graph, machine, broken)
    else:
        assert violation_message(graph, broken, *expected)


@settings(max_examples=200, deadline=None)
@given(fused_problems(max_ops=15), st.integers(1, 6), st.integers(0, 2**32 - 1))
def test_population_equals_one_at_a_time(problem, size, seed) -> None:
    graph, machine, _ = problem
    rng = np.random.default_rng(seed)
    d = machine.n_devices
    members = []
    for _ in range(size):
        member = random_schedule(graph, rng.integers(0, d, graph.n_ops), d, rng)
        members.append(random_groups(graph, member, rng))
    length = max(m.order.shape[0] for m in members)
    orders = np.full((size, length), -1, dtype=np.int64)
    for row, member in enumerate(members):
        orders[row, : member.order.shape[0]] = member.order
    peaks, makespans, status = Scorer(graph, machine).evaluate_population(
        np.stack([m.placement for m in members]),
        orders,
        [m.order.shape[0] for m in members],
        np.stack([m.fusion for m in members]),
    )
    for row, member in enumerate(members):
        single = reference_score(graph, member, machine)
        assert status[row, 0] == 0
        assert tuple(peaks[row]) == single.peak_memory_per_device
        assert makespans[row] == single.makespan


@settings(max_examples=300, deadline=None)
@given(fused_problems())
def test_no_groups_scores_as_without_fusion(problem) -> None:
    graph, machine, solution = problem
    alone = replace(solution, fusion=np.full(graph.n_ops, -1))
    plain = replace(solution, fusion=None)
    assert Scorer(graph, machine).score(alone) == Scorer(graph, machine).score(plain)
    assert reference_score(graph, alone, machine) == reference_score(graph, plain, machine)


def _chain() -> Graph:
    """x (input) -> a (matmul) -> b (relu) -> c (add with x) -> y; a kernel of 100 bytes/s."""
    graph = Graph.from_arrays(
        "chain",
        ["x", "a", "b", "c", "d"],
        [0.0, 4.0, 1.0, 1.0, 2.0],
        ["x:0", "a:0", "b:0", "c:0", "d:0"],
        [100, 400, 400, 200, 10],
        [0, 1, 2, 3, 4],
        [0, 2, 3, 4, 5, 5],
        [1, 3, 2, 3, 4],
        op_temp_memory=[0, 50, 0, 30, 0],
        tensor_persistent=[True, False, False, False, False],
    )
    classes = ["none", "contraction", "elementwise", "elementwise", "contraction"]
    return graph.with_op_attrs([{"fusion": c, "compute_time": 0.5} for c in classes]).with_attrs(
        kernel={"memory_bandwidth": 100.0, "launch_overhead": 0.25}
    )


def test_a_hand_made_group_follows_section_7() -> None:
    graph = _chain()
    order = np.arange(5)
    plain = score(graph, Solution(np.zeros(5), order, 1))
    fused = score(graph, Solution(np.zeros(5), order, 1, fusion=[-1, 0, 0, 0, -1]))
    assert plain.peak_memory == 100 + 400 + 400  # b runs while x, a:0 and b:0 are resident
    assert plain.makespan == 8.0
    # a:0 and b:0 are internal; the group reads x (100) and writes c:0 (200): 3 s of traffic
    # beats 1.5 s of compute, plus the launch; memory is x + c:0 + both temps.
    assert fused.peak_memory == 100 + 200 + 50 + 30
    assert fused.makespan == 3.0 + 0.25 + 2.0
    assert fused.speedup == 8.0 / 5.25
    steps = reference_memory_steps(graph, Solution(np.zeros(5), order, 1, fusion=[-1, 0, 0, 0, -1]))
    assert steps == [[100], [380], [310]]


@pytest.mark.parametrize(
    ("fusion", "placement", "order", "message"),
    [
        (
            [0, 0, -1, -1, -1],
            [0] * 5,
            [0, 1, 2, 3, 4],
            r"fusion\[0\] \('x', 'a'\): op 'x' has fusion class 'none'",
        ),
        ([-1, 0, 0, 0, 0], [0] * 5, [0, 1, 2, 3, 4], r"fusion\[0\] .*'d' is a second contraction"),
        ([-1, 0, 0, -1, -1], [0, 0, 1, 0, 0], None, r"op 'b' is on device 1 but 'a' on device 0"),
        ([-1, 0, -1, 0, -1], [0] * 5, [0, 1, 2, 3, 4], r"op 'c' is not connected"),
        ([-1, -1, 0, -1, 0], [0] * 5, [0, 1, 2, 3, 4], r"op 'd' is not connected"),
        (
            [-1, 0, -1, -1, -1],
            [0] * 5,
            [0, 1, 2, 3, 4],
            r"fusion\[0\] \('a'\): a group holds at least two ops",
        ),
        (
            [-1, 0, 0, -1, -1],
            [0] * 5,
            [0, 1, 3, 2, 4],
            r"schedule\[2\] \(op 'c' on device 0\): comes inside fusion\[0\]",
        ),
    ],
)
def test_each_rule_names_the_group(fusion, placement, order, message) -> None:
    graph = _chain()
    if order is None:
        order = [0, 1, 5 + 1 * 2 + 1, 2, 5 + 2 * 2 + 0, 3, 4]
    d = max(placement) + 1
    solution = Solution(placement, order, d, fusion=fusion)
    with pytest.raises(SolutionError, match=message):
        score(graph, solution, Machine(n_devices=d))
    with pytest.raises(SolutionError, match=message):
        reference_score(graph, solution, Machine(n_devices=d))


def test_a_group_that_is_not_convex_is_named_before_the_schedule() -> None:
    # a -> b -> c and a -> c: {a, c} is connected but the path a -> b -> c leaves it.
    graph = Graph.from_arrays(
        "diamond", ["a", "b", "c"], [1.0] * 3, ["a:0", "b:0"], [8, 8], [0, 1], [0, 2, 3], [1, 2, 2]
    )
    graph = graph.with_op_attrs([{"fusion": "elementwise"}] * 3).with_attrs(
        kernel={"memory_bandwidth": 1.0, "launch_overhead": 0.0}
    )
    solution = Solution([0, 0, 0], [0, 1, 2], 1, fusion=[0, -1, 0])
    with pytest.raises(SolutionError, match=r"op 'b', outside the group, is on a path that leaves"):
        score(graph, solution)


def test_too_many_ops_in_a_group() -> None:
    n = 66
    graph = Graph.from_arrays(
        "line", [f"o{i}" for i in range(n)], [1.0] * n, [f"t{i}" for i in range(n)], [1] * n,
        list(range(n)), [*range(n), n - 1], list(range(1, n)),
    )  # fmt: skip
    graph = graph.with_op_attrs([{"fusion": "elementwise"}] * n).with_attrs(
        kernel={"memory_bandwidth": 1.0, "launch_overhead": 0.0}
    )
    solution = Solution([0] * n, list(range(n)), 1, fusion=[0] * 65 + [-1])
    with pytest.raises(
        SolutionError, match=r"fusion\[0\] .* and 61 more\): 65 ops, more than the 64"
    ):
        score(graph, solution)
    assert score(graph, replace(solution, fusion=[0] * 64 + [-1, -1])).makespan == 64 / 1 + 2


def test_fusing_on_a_graph_without_a_kernel_is_refused_naming_the_field() -> None:
    rng = np.random.default_rng(3)
    plain = random_graph(rng, 12, 0.4)
    graph = with_fusion(plain, rng)
    bare = plain.with_op_attrs(graph.op_attrs)  # classes, but no kernel
    solution = random_schedule(bare, np.zeros(12), 1, rng)
    fused = random_groups(graph, solution, rng)
    assert fused.n_groups
    with pytest.raises(SolutionError, match="has no 'kernel' field"):
        score(bare, fused)
    score(bare, replace(fused, fusion=None))
