"""The numba scorer against the plain reference, on thousands of random graphs and solutions."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from graphopt.costmodels._reference import reference_check, reference_score
from graphopt.costmodels.score import Scorer
from graphopt.costmodels.validity import Violation
from graphopt.ir.solution import Solution, random_schedule
from strategies import problems


@settings(max_examples=1500, deadline=None)
@given(problems())
def test_fast_equals_reference_on_valid_solutions(problem) -> None:
    graph, machine, solution = problem
    fast = Scorer(graph, machine).score(solution)
    reference = reference_score(graph, solution, machine)
    assert fast.peak_memory_per_device == reference.peak_memory_per_device
    assert fast.makespan == reference.makespan
    assert fast.speedup == reference.speedup
    assert fast.feasible == reference.feasible


def _corrupt(solution: Solution, graph, rng: np.random.Generator, how: str) -> Solution:
    order = solution.order.copy()
    placement = solution.placement.copy()
    d = solution.n_devices
    n = order.shape[0]
    if how == "swap" and n >= 2:
        i, j = rng.choice(n, 2, replace=False)
        order[[i, j]] = order[[j, i]]
    elif how == "drop" and n >= 1:
        order = np.delete(order, rng.integers(n))
    elif how == "repeat" and n >= 1:
        order = np.insert(order, rng.integers(n + 1), order[rng.integers(n)])
    elif how == "foreign_transfer" and graph.n_tensors:
        code = graph.n_ops + int(rng.integers(graph.n_tensors)) * d + int(rng.integers(d))
        order = np.insert(order, rng.integers(n + 1), code)
    elif how == "unknown_code":
        order = np.insert(
            order, rng.integers(n + 1), rng.choice([-1, graph.n_ops + graph.n_tensors * d])
        )
    elif how == "placement":
        placement[rng.integers(graph.n_ops)] = rng.choice([-1, d, int(rng.integers(d))])
    return Solution(placement=placement, order=order, n_devices=d)


@settings(max_examples=1500, deadline=None)
@given(
    problems(),
    st.sampled_from(["swap", "drop", "repeat", "foreign_transfer", "unknown_code", "placement"]),
    st.integers(0, 2**32 - 1),
)
def test_fast_and_reference_report_the_same_first_violation(problem, how, seed) -> None:
    graph, machine, solution = problem
    broken = _corrupt(solution, graph, np.random.default_rng(seed), how)
    _, _, status = Scorer(graph, machine).evaluate(broken.placement, broken.order)
    expected = reference_check(graph, broken)
    assert tuple(int(s) for s in status) == (int(expected[0]), expected[1], expected[2])
    if expected[0] is Violation.NONE:
        assert reference_score(graph, broken, machine) == Scorer(graph, machine).score(broken)


@settings(max_examples=200, deadline=None)
@given(problems(max_ops=15), st.integers(1, 8), st.integers(0, 2**32 - 1))
def test_population_equals_one_at_a_time(problem, size, seed) -> None:
    graph, machine, _ = problem
    rng = np.random.default_rng(seed)
    d = machine.n_devices
    members = [random_schedule(graph, rng.integers(0, d, graph.n_ops), d, rng) for _ in range(size)]
    length = max(m.order.shape[0] for m in members)
    orders = np.full((size, length), -1, dtype=np.int64)
    for row, member in enumerate(members):
        orders[row, : member.order.shape[0]] = member.order
    peaks, makespans, status = Scorer(graph, machine).evaluate_population(
        np.stack([m.placement for m in members]), orders, [m.order.shape[0] for m in members]
    )
    for row, member in enumerate(members):
        single = reference_score(graph, member, machine)
        assert status[row, 0] == 0
        assert tuple(peaks[row]) == single.peak_memory_per_device
        assert makespans[row] == single.makespan
