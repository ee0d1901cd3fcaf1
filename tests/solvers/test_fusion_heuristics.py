"""Fusion heuristics (solvers/fusion.py): always legal, exactly re-scored, and the hand cases.

Every heuristic's output must pass the scorer and score the same under the literal reference;
GO's numba decoder must group exactly as its plain twin, which checks cycles by contracting the
whole quotient graph rather than by ranks.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from graphopt.costmodels._reference import reference_score
from graphopt.costmodels.machine import Machine
from graphopt.costmodels.score import Scorer
from graphopt.errors import SolutionError
from graphopt.ir.graph import Graph
from graphopt.ir.solution import MAX_GROUP_OPS, Solution, topological_schedule
from graphopt.solvers._reference import acyclic_after_merge, reference_priority_fusion
from graphopt.solvers.fusion import (
    SPACING,
    anneal_fusion,
    default_fusion,
    fused_order,
    greedy_fusion,
    new_units,
    priority_fusion,
    try_merge,
)
from strategies import problems, random_graph, with_fusion

HEURISTICS = {
    "priority": lambda g, s, rng: priority_fusion(g, s, rng.random(g.n_ops)),
    "priority-ties": lambda g, s, rng: priority_fusion(g, s, rng.integers(0, 4, g.n_ops) / 3),
    "default": lambda g, s, rng: default_fusion(g, s),
    "xla-priority": lambda g, s, rng: default_fusion(g, s, priority=True),
    "greedy": lambda g, s, rng: greedy_fusion(g, s),
    "annealing": lambda g, s, rng: anneal_fusion(
        g, Machine(n_devices=s.n_devices), s, "makespan", 8
    ),
}


@settings(max_examples=1500, deadline=None)
@given(
    problems(spreads=("random", "one", "one", "one", "blocks")),
    st.sampled_from(sorted(HEURISTICS)),
    st.integers(0, 2**32 - 1),
)
def test_every_heuristic_is_legal_and_rescores_exactly(problem, name, seed) -> None:
    graph, machine, solution = problem
    rng = np.random.default_rng(seed)
    graph = with_fusion(graph, rng)
    fused = HEURISTICS[name](graph, solution, rng)
    event(f"{name}: {'groups' if fused.n_groups else 'none'}")
    assert np.array_equal(fused.placement, solution.placement)
    fast = Scorer(graph, machine).score(fused)
    assert fast == reference_score(graph, fused, machine)


@settings(max_examples=2000, deadline=None)
@given(
    problems(spreads=("random", "one", "one")),
    st.sampled_from(["uniform", "ties", "all-on"]),
    st.integers(0, 2**32 - 1),
)
def test_numba_decoder_equals_its_twin(problem, draw, seed) -> None:
    graph, _, solution = problem
    rng = np.random.default_rng(seed)
    graph = with_fusion(graph, rng)
    if draw == "uniform":
        priorities = rng.random(graph.n_ops)
    elif draw == "ties":
        priorities = rng.integers(0, 4, graph.n_ops) / 3
    else:
        priorities = np.ones(graph.n_ops)
    fused = priority_fusion(graph, solution, priorities)
    expected = reference_priority_fusion(graph, solution.placement, priorities, 0.5)
    event(f"groups: {min(fused.n_groups, 3)}")
    got = np.full(graph.n_ops, -1) if fused.fusion is None else fused.fusion
    assert got.tolist() == expected.tolist()


@settings(max_examples=300, deadline=None)
@given(problems())
def test_fused_order_keeps_a_valid_order_without_groups(problem) -> None:
    graph, _, solution = problem
    assert np.array_equal(fused_order(graph, solution, None), solution.order)
    alone = np.full(graph.n_ops, -1, dtype=np.int32)
    assert np.array_equal(fused_order(graph, solution, alone), solution.order)


@settings(max_examples=400, deadline=None)
@given(problems(spreads=("one",)), st.integers(0, 2**32 - 1), st.sampled_from([1, 3, SPACING]))
def test_merges_keep_the_units_in_a_topological_order(problem, seed, spacing) -> None:
    graph, _, solution = problem
    rng = np.random.default_rng(seed)
    graph = _annotated(graph, ["elementwise"] * graph.n_ops)
    f = graph.fusion_arrays
    rank_of = np.empty(graph.n_ops, dtype=np.int64)
    rank_of[solution.order[solution.order < graph.n_ops]] = np.arange(graph.n_ops)
    units = new_units(f, rank_of, graph.n_tensors, spacing)
    placement = np.ascontiguousarray(solution.placement, dtype=np.int32)
    edges = graph.edge_index.T[rng.permutation(graph.n_edges)]
    for p, c in edges.tolist():
        a, b = int(units.unit[p]), int(units.unit[c])
        expected = a != b and acyclic_after_merge(graph, units.unit.tolist(), a, b)
        assert try_merge(f, placement, units, p, c, MAX_GROUP_OPS) == expected
        for producer, consumer in graph.edge_index.T.tolist():
            x, y = units.unit[producer], units.unit[consumer]
            assert x == y or units.rank[x] < units.rank[y]
        reps = {int(r) for r in units.unit}
        first = next(r for r in reps if units.before[r] < 0)
        walk = [first]
        while units.after[walk[-1]] >= 0:
            walk.append(int(units.after[walk[-1]]))
        assert set(walk) == reps and len(walk) == len(reps)
        assert all(units.rank[v] < units.rank[w] for v, w in zip(walk, walk[1:], strict=False))


def _annotated(graph: Graph, classes: list[str]) -> Graph:
    """The graph with these classes, compute at a fifth of the runtime, a fast memory."""
    attrs = [
        {"fusion": c, "compute_time": 0.2 * r}
        for c, r in zip(classes, graph.op_runtime, strict=True)
    ]
    return graph.with_op_attrs(attrs).with_attrs(
        kernel={"memory_bandwidth": 1e4, "launch_overhead": 0.5}
    )


def _chain() -> Graph:
    """x, w1 -> mm1 -> add (+ bias b) -> relu -> mm2 (with w2) -> y."""
    ops = ["x", "w1", "mm1", "b", "add", "relu", "w2", "mm2"]
    producers = [0, 1, 2, 3, 4, 5, 6, 7]
    consumers = [[2], [2], [4], [4], [5], [7], [7], []]
    graph = Graph.from_arrays(
        "chain",
        ops,
        [0.0, 0.0, 4.0, 0.0, 1.0, 1.0, 0.0, 4.0],
        [f"{op}:0" for op in ops],
        [400, 800, 400, 4, 400, 400, 800, 400],
        producers,
        np.cumsum([0] + [len(c) for c in consumers]).tolist(),
        [c for cs in consumers for c in cs],
        tensor_persistent=[True, True, False, True, False, False, True, False],
    )
    classes = ["none", "none", "contraction", "none", "elementwise", "elementwise", "none"]
    return _annotated(graph, [*classes, "contraction"])


def test_default_fusion_fuses_the_elementwise_ops_of_a_chain() -> None:
    graph = _chain()
    solution = topological_schedule(graph, np.zeros(graph.n_ops), 1)
    fused = default_fusion(graph, solution)
    assert [[graph.op_names[op] for op in g] for g in fused.groups()] == [["add", "relu"]]
    # add and relu become one kernel: 0.4 s of compute (804 bytes move in 0.08 s) + 0.5 s launch.
    assert Scorer(graph, Machine()).score(fused).makespan == 10.0 - 2.0 + 0.9


def test_greedy_fusion_keeps_groups_within_64_ops() -> None:
    n = 150
    graph = Graph.from_arrays(
        "line", [f"o{i}" for i in range(n)], [1.0] * n, [f"t{i}" for i in range(n)], [100] * n,
        list(range(n)), [*range(n), n - 1], list(range(1, n)),
    )  # fmt: skip
    graph = _annotated(graph, ["elementwise"] * n)
    solution = topological_schedule(graph, np.zeros(n), 1)
    for fused in (
        greedy_fusion(graph, solution, rounds=20),
        priority_fusion(graph, solution, np.ones(n)),
        default_fusion(graph, solution),
    ):
        sizes = [len(g) for g in fused.groups()]
        assert max(sizes) == MAX_GROUP_OPS
        Scorer(graph, Machine()).score(fused)


def test_a_merge_that_would_make_a_cycle_is_refused() -> None:
    # a -> b -> c and a -> c, b cannot fuse: {a, c} would be left and re-entered through b.
    graph = Graph.from_arrays(
        "diamond", ["a", "b", "c"], [1.0] * 3, ["a:0", "b:0"], [8, 8], [0, 1], [0, 2, 3], [1, 2, 2]
    )
    graph = _annotated(graph, ["elementwise", "none", "elementwise"])
    solution = topological_schedule(graph, np.zeros(3), 1)
    units = new_units(graph.fusion_arrays, np.arange(3), graph.n_tensors)
    placement = np.zeros(3, dtype=np.int32)
    assert not try_merge(graph.fusion_arrays, placement, units, 0, 2, MAX_GROUP_OPS)
    for fused in (
        priority_fusion(graph, solution, np.ones(3)),
        default_fusion(graph, solution),
        default_fusion(graph, solution, priority=True),
        greedy_fusion(graph, solution),
    ):
        assert fused.fusion is None


def test_a_cycle_through_another_group_is_refused() -> None:
    # a -> x, y -> x, y -> c, a -> c: no op path from a to c but the direct one, yet once
    # {x, y} is a group, {a, c} would depend on it and it on {a, c}.
    graph = Graph.from_arrays(
        "through", ["a", "c", "x", "y"], [1.0] * 4, ["a:0", "y:0"], [8, 8], [0, 3],
        [0, 2, 4], [1, 2, 1, 2],
    )  # fmt: skip
    graph = _annotated(graph, ["elementwise"] * 4)
    f = graph.fusion_arrays
    placement = np.zeros(4, dtype=np.int32)
    units = new_units(f, np.array([0, 3, 2, 1]), graph.n_tensors)  # order a, y, x, c
    assert try_merge(f, placement, units, 3, 2, MAX_GROUP_OPS)
    assert not try_merge(f, placement, units, 0, 1, MAX_GROUP_OPS)
    assert try_merge(f, placement, units, 0, 2, MAX_GROUP_OPS)  # a joins {x, y}: no cycle
    assert try_merge(f, placement, units, 1, 3, MAX_GROUP_OPS)  # and then c too
    assert units.size[units.unit[0]] == 4
    solution = Solution(placement, [0, 3, 2, 1], 1)
    with pytest.raises(SolutionError, match="no order in which each is contiguous"):
        fused_order(graph, solution, np.array([0, 0, 1, 1]))
    for fused in (priority_fusion(graph, solution, np.ones(4)), greedy_fusion(graph, solution)):
        Scorer(graph, Machine()).score(fused)


def _fusable_problem(seed: int, n_ops: int = 30) -> tuple[Graph, Graph, Solution]:
    """A graph without fusion fields, the same with them, and a solution on two devices."""
    rng = np.random.default_rng(seed)
    plain = random_graph(rng, n_ops, 0.15)
    placement = (np.arange(n_ops) * 2) // n_ops
    return plain, with_fusion(plain, rng), topological_schedule(plain, placement, 2)


@pytest.mark.parametrize("objective", ["makespan", "peak_memory"])
def test_annealing_is_never_worse_than_no_fusion_and_is_seeded(objective: str) -> None:
    for seed in range(3):
        _, graph, solution = _fusable_problem(seed)
        machine = Machine(n_devices=2)
        best = anneal_fusion(graph, machine, solution, objective, 150, seed)
        again = anneal_fusion(graph, machine, solution, objective, 150, seed)
        assert np.array_equal(best.order, again.order)
        assert (best.fusion is None) == (again.fusion is None)
        if best.fusion is not None:
            assert np.array_equal(best.fusion, again.fusion)
        start = Scorer(graph, machine).score(solution)
        found = Scorer(graph, machine).score(best)
        key = "makespan" if objective == "makespan" else "peak_memory"
        assert getattr(found, key) <= getattr(start, key)


FUNCTIONS = {
    "priority": lambda g, s: priority_fusion(g, s, np.ones(g.n_ops)),
    "default": default_fusion,
    "xla-priority": lambda g, s: default_fusion(g, s, priority=True),
    "greedy": greedy_fusion,
    "annealing": lambda g, s: anneal_fusion(g, Machine(n_devices=2), s, "makespan", 5),
}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_no_kernel_is_refused_and_no_classes_leave_the_solution_unfused(name: str) -> None:
    plain, graph, solution = _fusable_problem(1)
    classes_only = plain.with_op_attrs(graph.op_attrs)
    with pytest.raises(SolutionError, match=r"graph 'random' has no 'kernel' field"):
        FUNCTIONS[name](classes_only, solution)
    unfused = FUNCTIONS[name](plain, solution)
    assert unfused.fusion is None
    assert np.array_equal(unfused.order, solution.order)
