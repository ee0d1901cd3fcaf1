"""The CP-SAT recomputation model against exhaustive enumeration of tiny schedules."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from costmodels.test_remat_scoring import _big_activation
from graphopt.costmodels.machine import Machine
from graphopt.costmodels.score import Scorer
from graphopt.ir.graph import Graph
from graphopt.solvers.cpsat.remat import TIME_UNITS, exact_recompute
from strategies import random_graph


def _arrangements(counts: Counter) -> Iterator[list[int]]:
    """Every distinct order of a multiset of ops."""
    if not +counts:
        yield []
        return
    for op in sorted(op for op, c in counts.items() if c):
        counts[op] -= 1
        for rest in _arrangements(counts):
            yield [op, *rest]
        counts[op] += 1


def _every_schedule(graph: Graph) -> list[tuple[int, int]]:
    """(peak, recomputed time units) of every valid schedule running an op at most twice."""
    scorer = Scorer(graph, Machine(n_devices=1))
    units = [
        round(TIME_UNITS * float(r) / graph.total_runtime) if graph.total_runtime > 0 else 0
        for r in graph.op_runtime
    ]
    found = []
    again_choices = [[0, 1] if graph.op_recomputable[v] else [0] for v in range(graph.n_ops)]
    for extra in np.array(np.meshgrid(*again_choices)).reshape(graph.n_ops, -1).T:
        counts = Counter({v: 1 + int(extra[v]) for v in range(graph.n_ops)})
        for order in _arrangements(counts):
            peak, _, (violation, _, _) = scorer.evaluate(
                np.zeros(graph.n_ops, np.int32), np.array(order), remat=True
            )
            if not violation:
                found.append((int(peak[0]), int(np.dot(extra, units))))
    return found


@settings(max_examples=120, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 4), st.sampled_from([0.0, 0.3, math.inf]))
@example(6088, 2, math.inf)  # CP-SAT reported the optimum as 246000122.99999997
def test_the_model_finds_the_exhaustive_optimum(seed, n_ops, overhead) -> None:
    graph = random_graph(np.random.default_rng(seed), n_ops, 0.6)
    every = _every_schedule(graph)
    budget = math.inf if math.isinf(overhead) else math.floor(overhead * TIME_UNITS)
    lowest = min(peak for peak, extra in every if extra <= budget)
    exact = exact_recompute(graph, overhead, copies=2, seconds=20)
    assert exact.optimal and exact.peak == lowest == exact.bound
    score = Scorer(graph, Machine(n_devices=1)).score(exact.solution)
    assert score.peak_memory == lowest
    fewest = min(extra for peak, extra in every if peak <= lowest)
    fit = exact_recompute(graph, capacity=lowest, copies=2, seconds=20)
    assert fit.optimal and fit.bound == fewest
    assert Scorer(graph, Machine(n_devices=1)).score(fit.solution).peak_memory <= lowest


def test_the_worked_example_of_section_15() -> None:
    graph = _big_activation()
    kept = exact_recompute(graph, max_overhead=0.0)
    again = exact_recompute(graph, max_overhead=0.25)
    assert (kept.peak, again.peak) == (3020, 2021) and kept.optimal and again.optimal
    assert again.solution.order.tolist() == [0, 1, 2, 3, 1, 4]
    assert not exact_recompute(graph, capacity=2000).solution
