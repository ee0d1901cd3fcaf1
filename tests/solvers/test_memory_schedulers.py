"""Compiler memory schedulers: known orders on hand-made graphs, validity and exact scores."""

from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from builders import graph, op, tensor
from graphopt.costmodels._reference import reference_score
from graphopt.costmodels.machine import Machine
from graphopt.costmodels.score import Scorer
from graphopt.ir.generators import generate
from graphopt.ir.graph import Graph
from graphopt.ir.solution import Solution
from graphopt.solvers.base import Budget, Objective, Problem, Result, SolverError
from graphopt.solvers.events import events_from_op_order
from graphopt.solvers.memory_schedulers import (
    COMPILER_SCHEDULERS,
    PORTFOLIO,
    CompilerScheduler,
    best_of_order,
    bfs_order,
    dfs_order,
    inductor_dfs_order,
    list_order,
    lpmf_order,
    post_order,
)
from graphopt.solvers.registry import make_solver
from strategies import graphs, machines, solvable

MEMBERS = tuple(name for name in COMPILER_SCHEDULERS if name != "compiler-best")
BUDGET = Budget(evaluations=1000)


def names(g: Graph, order: np.ndarray) -> list[str]:
    return [g.op_names[j] for j in order]


def peak(g: Graph, order: np.ndarray, placement: np.ndarray | None = None, d: int = 1) -> int:
    placement = np.zeros(g.n_ops, dtype=np.int32) if placement is None else placement
    events = events_from_op_order(g, placement, order, d)
    return int(reference_score(g, Solution(placement, events, d), Machine(n_devices=d)).peak_memory)


def assert_topological(g: Graph, order: np.ndarray) -> None:
    assert sorted(order.tolist()) == list(range(g.n_ops))
    position = np.empty(g.n_ops, dtype=np.int64)
    position[order] = np.arange(g.n_ops)
    src, dst = g.edge_index
    assert np.all(position[src] < position[dst])


def assert_exact(problem: Problem, result: Result) -> None:
    reference = reference_score(problem.graph, result.solution, problem.machine)
    assert reference.peak_memory_per_device == result.score.peak_memory_per_device
    assert reference.makespan == result.score.makespan


def two_chains() -> Graph:
    """Two independent chains a -> a2 -> a3 and b -> b2 -> b3 of 100-byte tensors."""
    return graph(
        [op("a"), op("b"), op("a2"), op("b2"), op("a3"), op("b3")],
        [
            tensor("a:0", 100, "a", "a2"),
            tensor("b:0", 100, "b", "b2"),
            tensor("a2:0", 100, "a2", "a3"),
            tensor("b2:0", 100, "b2", "b3"),
            tensor("a3:0", 1, "a3"),
            tensor("b3:0", 1, "b3"),
        ],
    )


def test_dfs_finishes_a_chain_before_the_next_and_beats_bfs() -> None:
    g = two_chains()
    assert names(g, dfs_order(g)) == ["a", "a2", "a3", "b", "b2", "b3"]
    assert names(g, post_order(g)) == ["a", "a2", "a3", "b", "b2", "b3"]
    # Inductor's BFS runs every source first, then by when the predecessors ran.
    assert names(g, bfs_order(g)) == ["a", "b", "a2", "b2", "a3", "b3"]
    assert peak(g, dfs_order(g)) == 200
    assert peak(g, bfs_order(g)) == 300
    assert peak(g, best_of_order(g)) == 200


def heavy_and_light() -> Graph:
    """`join` reads a light branch (operand 0) and a heavy branch (operand 1)."""
    return graph(
        [op("light"), op("heavy"), op("heavy2"), op("join")],
        [
            tensor("light:0", 10, "light", "join"),
            tensor("heavy:0", 1000, "heavy", "heavy2"),
            tensor("heavy2:0", 500, "heavy2", "join"),
            tensor("join:0", 1, "join"),
        ],
    )


def test_xla_dfs_visits_the_heavier_operand_first_post_order_keeps_operand_order() -> None:
    g = heavy_and_light()
    assert names(g, post_order(g)) == ["light", "heavy", "heavy2", "join"]
    assert names(g, dfs_order(g)) == ["heavy", "heavy2", "light", "join"]
    assert peak(g, dfs_order(g)) == 1500 < peak(g, post_order(g)) == 1510


def test_xla_dfs_visits_fan_out_before_bytes() -> None:
    # `shared` has two users (extra_users 1) and outweighs the heavier but unshared operand.
    g = graph(
        [op("heavy"), op("shared"), op("join"), op("other")],
        [
            tensor("heavy:0", 1000, "heavy", "join"),
            tensor("shared:0", 10, "shared", "join", "other"),
            tensor("join:0", 1, "join"),
            tensor("other:0", 1, "other"),
        ],
    )
    assert names(g, dfs_order(g)) == ["shared", "heavy", "join", "other"]


def test_inductor_dfs_visits_lighter_ops_first() -> None:
    g = heavy_and_light()
    # Weights (outputs + inputs): light 10, heavy 1000, heavy2 1500, join 511.
    assert names(g, inductor_dfs_order(g)) == ["light", "heavy", "heavy2", "join"]


def test_xla_list_prefers_freeing_and_breaks_ties_last_in_first_out() -> None:
    # a and b tie (each defines 100); XLA's multimap runs the one queued last (b), then y, which
    # frees b's 100 bytes, before a.
    g = graph(
        [op("a"), op("b"), op("x"), op("y"), op("z")],
        [
            tensor("a:0", 100, "a", "x"),
            tensor("b:0", 100, "b", "y"),
            tensor("x:0", 1, "x", "z"),
            tensor("y:0", 1, "y", "z"),
            tensor("z:0", 1, "z"),
        ],
    )
    assert names(g, list_order(g)) == ["b", "y", "a", "x", "z"]


def test_lpmf_runs_what_fits_under_the_peak_smallest_net_first() -> None:
    # After s and t the peak is 70 and 20 bytes are live. U (+30) and V (+40, frees t's 20)
    # both fit under the peak; LPMF runs V first (net +20 < +30) although it needs more bytes.
    g = graph(
        [op("s"), op("t"), op("U"), op("V"), op("end")],
        [
            tensor("s:0", 50, "s", "t"),
            tensor("t:0", 20, "t", "V"),
            tensor("t:1", 0, "t", "U"),
            tensor("U:0", 30, "U", "end"),
            tensor("V:0", 40, "V", "end"),
            tensor("end:0", 1, "end"),
        ],
    )
    assert names(g, lpmf_order(g)) == ["s", "t", "V", "U", "end"]
    assert peak(g, lpmf_order(g)) == 71


def test_persistent_tensors_weigh_nothing() -> None:
    g = graph(
        [op("weights"), op("x"), op("use")],
        [
            tensor("w", 10**6, "weights", "use", persistent=True),
            tensor("x:0", 5, "x", "use"),
            tensor("use:0", 5, "use"),
        ],
    )
    for schedule in PORTFOLIO:
        assert peak(g, schedule(g)) == 10**6 + 10


def test_a_graph_outputs_last_reader_frees_nothing() -> None:
    # After s (peak 140, 40 live) both U and V fit under the peak. U reads s:0, a graph output
    # held to the end, so it frees nothing: U keeps +30 and V +25, and both list scheduling and
    # LPMF run V first (counting s:0 as freed would put U at -10 and first).
    g = graph(
        [op("s", temp_memory=100), op("U"), op("V"), op("end")],
        [
            tensor("s:0", 40, "s", "U", output=True),
            tensor("s:1", 0, "s", "V"),
            tensor("U:0", 30, "U", "end"),
            tensor("V:0", 25, "V", "end"),
            tensor("end:0", 1, "end"),
        ],
    )
    assert names(g, list_order(g)) == ["s", "V", "U", "end"]
    assert names(g, lpmf_order(g)) == ["s", "V", "U", "end"]
    assert peak(g, lpmf_order(g)) == 140


def naive_lpmf(g: Graph, placement: np.ndarray, d: int) -> list[int]:
    """Inductor's loop as written: a scan of the ready set, memory kept per device.

    Graph outputs are held to the end: kept after their producer, freed by no reader.
    """
    size = [0 if g.tensor_persistent[t] else int(g.tensor_size[t]) for t in range(g.n_tensors)]
    freeable = [0 if g.tensor_output[t] else size[t] for t in range(g.n_tensors)]
    readers = [len(g.consumers(t)) for t in range(g.n_tensors)]
    during = [sum(size[t] for t in g.outputs(j)) + int(g.op_temp_memory[j]) for j in range(g.n_ops)]
    kept = [
        sum(size[t] for t in g.outputs(j) if readers[t] or g.tensor_output[t])
        for j in range(g.n_ops)
    ]
    waiting = [len(g.predecessors(j)) for j in range(g.n_ops)]
    ready = {j for j in range(g.n_ops) if waiting[j] == 0}
    live, high = [0] * d, [0] * d
    order: list[int] = []

    def key(j: int) -> tuple[int, int, int]:
        device = int(placement[j])
        freed = sum(freeable[t] for t in g.inputs(j) if readers[t] == 1)
        return max(live[device] + during[j], high[device]), kept[j] - freed, j

    while ready:
        j = min(ready, key=key)
        ready.remove(j)
        order.append(j)
        device = int(placement[j])
        high[device] = max(high[device], live[device] + during[j])
        live[device] += kept[j]
        for t in g.inputs(j):
            readers[t] -= 1
            if readers[t] == 0:
                live[int(placement[g.tensor_producer[t]])] -= freeable[t]
        for successor in g.successors(j):
            waiting[successor] -= 1
            if waiting[successor] == 0:
                ready.add(int(successor))
    return order


@settings(max_examples=200, deadline=None)
@given(graphs(max_ops=30), st.integers(1, 3), st.integers(0, 2**32 - 1))
def test_lpmf_equals_inductors_scan(g: Graph, d: int, seed: int) -> None:
    placement = np.random.default_rng(seed).integers(0, d, g.n_ops)
    assert lpmf_order(g, placement, d).tolist() == naive_lpmf(g, placement, d)


@settings(max_examples=150, deadline=None)
@given(graphs(max_ops=30), st.integers(1, 3), st.integers(0, 2**32 - 1))
def test_every_order_is_topological_deterministic_and_scores_exactly(
    g: Graph, d: int, seed: int
) -> None:
    placement = np.random.default_rng(seed).integers(0, d, g.n_ops).astype(np.int32)
    machine = Machine(n_devices=d)
    scorer = Scorer(g, machine)
    peaks = []
    for schedule in PORTFOLIO:
        order = schedule(g, placement, d)
        assert_topological(g, order)
        assert np.array_equal(order, schedule(g, placement, d))
        for transfers in ("lazy", "eager"):
            solution = Solution(
                placement, events_from_op_order(g, placement, order, d, transfers), d
            )
            fast = scorer.score(solution)
            assert fast == reference_score(g, solution, machine)
            if transfers == "lazy":
                peaks.append(fast.peak_memory)
    assert peak(g, best_of_order(g, placement, d), placement, d) == min(peaks)


@st.composite
def pinned_problems(draw: st.DrawFn) -> Problem:
    g = draw(graphs(max_ops=20))
    machine = draw(machines(max_devices=3))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    pinned = None
    if draw(st.booleans()):
        pinned = np.where(
            rng.random(g.n_ops) < 0.3, rng.integers(0, machine.n_devices, g.n_ops), -1
        )
    objective = draw(st.sampled_from(list(Objective)))
    return Problem(g, machine, objective, pinned)


@settings(max_examples=40, deadline=None)
@given(pinned_problems())
def test_solvers_honour_pins_score_exactly_and_best_is_never_worse(problem: Problem) -> None:
    assume(solvable(problem))
    expected = np.zeros(problem.graph.n_ops, dtype=np.int32)
    if problem.pinned is not None:
        expected = np.maximum(problem.pinned, 0)
    results = {}
    for name in (*MEMBERS, "compiler-best"):
        result = CompilerScheduler(name).solve(problem, BUDGET)
        assert_exact(problem, result)
        assert np.array_equal(result.solution.placement, expected)
        assert result.solution.solver["name"] == name
        score = result.score
        results[name] = problem.fitness(
            np.asarray(score.peak_memory_per_device)[None], np.asarray([score.makespan])
        )
    best = results.pop("compiler-best")
    for member in results.values():
        assert (best[0][0], best[1][0]) <= (member[0][0], member[1][0])


def test_solvers_are_deterministic_and_stop_at_the_budget() -> None:
    g = generate("layered", 200, seed=1)
    pinned = np.full(g.n_ops, -1)
    pinned[::7] = 1
    problem = Problem(g, Machine(n_devices=2, latency=0.1), Objective.PEAK_MEMORY, pinned)
    first = CompilerScheduler("compiler-best").solve(problem, BUDGET)
    again = CompilerScheduler("compiler-best").solve(problem, BUDGET)
    assert np.array_equal(first.solution.order, again.solution.order)
    assert first.evaluations <= 2 * len(PORTFOLIO)
    short = CompilerScheduler("compiler-best").solve(problem, Budget(evaluations=3))
    assert short.evaluations == 3


@pytest.mark.parametrize("schedule", PORTFOLIO, ids=lambda f: f.__name__)
def test_ten_thousand_ops_in_well_under_a_second(schedule) -> None:
    schedule(generate("layered", 50, seed=0))  # compile numba kernels outside the timing
    g = generate("layered", 10_000, seed=0)
    start = time.perf_counter()
    order = schedule(g)
    assert time.perf_counter() - start < 1.0
    assert_topological(g, order)


def test_every_compiler_scheduler_is_registered_by_its_name() -> None:
    for name in COMPILER_SCHEDULERS:
        assert make_solver(name).name == name
    with pytest.raises(SolverError, match="unknown compiler scheduler"):
        CompilerScheduler("xla-best")
