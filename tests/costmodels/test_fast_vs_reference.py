"""The numba scorer against the plain reference, on thousands of random graphs and solutions."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphopt.costmodels._reference import reference_check, reference_score
from graphopt.costmodels.machine import Machine
from graphopt.costmodels.score import Scorer
from graphopt.costmodels.validity import Violation
from graphopt.errors import GraphError, MachineError
from graphopt.ir.graph import Graph
from graphopt.ir.solution import random_schedule
from graphopt.limits import MAX_TOTAL_BYTES
from strategies import CORRUPTIONS, corrupt, problems, random_graph


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


@settings(max_examples=1500, deadline=None)
@given(
    problems(),
    st.sampled_from(CORRUPTIONS),
    st.integers(0, 2**32 - 1),
)
def test_fast_and_reference_report_the_same_first_violation(problem, how, seed) -> None:
    graph, machine, solution = problem
    broken = corrupt(solution, graph, np.random.default_rng(seed), how)
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


@settings(max_examples=300, deadline=None)
@given(problems(), st.sampled_from([1.0, 0.999, 0.5]))
def test_fast_equals_reference_at_the_byte_limit(problem, fill) -> None:
    """Sizes scaled so that all bytes together reach 2**53: int64 peaks cannot wrap."""
    graph, machine, solution = problem
    budget = int(fill * MAX_TOTAL_BYTES) - int(graph.op_temp_memory.sum())
    total = int(graph.tensor_size.sum())
    if total == 0:
        return
    sizes = [size * budget // total for size in graph.tensor_size.tolist()]
    big = graph.with_tensor_sizes(sizes)
    capacity = None if machine.capacity is None else MAX_TOTAL_BYTES // 2
    machine = Machine(machine.n_devices, capacity, machine.latency, machine.bandwidth, machine.mode)
    fast = Scorer(big, machine).score(solution)
    reference = reference_score(big, solution, machine)
    assert fast.peak_memory_per_device == reference.peak_memory_per_device
    assert fast.makespan == reference.makespan
    assert fast.feasible == reference.feasible


@settings(max_examples=200, deadline=None)
@given(problems(), st.sampled_from([1e-300, 1e-30, 1.0]), st.sampled_from([0.0, 1e300]))
def test_extreme_transfer_costs_are_exact_or_refused(problem, bandwidth, latency) -> None:
    """Transfers that could push a makespan to infinity are refused up front; others agree."""
    graph, machine, solution = problem
    machine = Machine(machine.n_devices, None, latency, bandwidth, machine.mode)
    try:
        fast = Scorer(graph, machine).score(solution)
    except MachineError as error:
        assert "overflow" in str(error)
        return
    reference = reference_score(graph, solution, machine)
    assert math.isfinite(fast.makespan) and fast.makespan == reference.makespan
    assert fast.peak_memory_per_device == reference.peak_memory_per_device


def test_bytes_beyond_the_limit_are_refused() -> None:
    graph = random_graph(np.random.default_rng(0), 10, 0.3)
    sizes = np.zeros(graph.n_tensors, dtype=np.int64)
    sizes[0] = MAX_TOTAL_BYTES - int(graph.op_temp_memory.sum())
    graph.with_tensor_sizes(sizes)  # exactly at the limit: accepted
    sizes[1] = 1
    with pytest.raises(GraphError, match="add up to 9,007,199,254,740,993 bytes"):
        graph.with_tensor_sizes(sizes)
    sizes[0], sizes[1] = MAX_TOTAL_BYTES + 1, 0
    with pytest.raises(GraphError, match=r"size must be at most 2\*\*53"):
        graph.with_tensor_sizes(sizes)
    with pytest.raises(GraphError, match="is not an integer that fits int64"):
        graph.with_tensor_sizes(np.full(graph.n_tensors, 2**63, dtype=np.uint64))


def test_too_many_copies_or_devices_are_refused_quickly() -> None:
    graph = random_graph(np.random.default_rng(0), 5, 0.3)
    with pytest.raises(MachineError, match="at most 512"):
        Machine(n_devices=2**40)
    wide = Graph.from_arrays(
        "wide", ["a"], [1.0], [f"t{i}" for i in range(2**18)], 1, 0, np.zeros(2**18 + 1), []
    )
    with pytest.raises(MachineError, match="possible copies, more than the limit of 2\\*\\*26"):
        Scorer(wide, Machine(n_devices=512))
    Scorer(graph, Machine(n_devices=512))
