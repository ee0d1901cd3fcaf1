"""Strong partition baselines, per-device orders, pipeline splits, bounds and auto built on them."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brute_force import TooMany, all_scores
from builders import graph as build_graph
from builders import op, tensor
from graphopt.costmodels.machine import Machine
from graphopt.ir.generators import generate
from graphopt.ir.graph import Graph
from graphopt.ir.solution import Solution
from graphopt.solvers._reference import reference_forced_live_bytes
from graphopt.solvers.base import Budget, InfeasibleError, Objective, Problem
from graphopt.solvers.bounds import forced_live_bytes, op_step_memory, peak_memory_lower_bound
from graphopt.solvers.cpsat import CPSATSolver
from graphopt.solvers.device_orders import device_order_candidates, merge_device_orders
from graphopt.solvers.partition import (
    GraphPartitionConfig,
    MetisSolver,
    hypergraph_partition,
    load_limit,
    memory_weights,
)
from graphopt.solvers.pipeline import split_placement, stage_cuts
from graphopt.solvers.registry import make_solver
from strategies import graphs as graphs_strategy

FAMILIES = ("layered", "erdos_renyi", "sbm", "watts_strogatz", "barabasi_albert")


def with_weights(graph: Graph, seed: int) -> Graph:
    """`graph` with about a third of its source ops' outputs made persistent (model weights)."""
    rng = np.random.default_rng(seed)
    sources = np.flatnonzero(np.diff(graph.op_input_ptr) == 0)
    persistent = np.isin(graph.tensor_producer, sources) & (rng.random(graph.n_tensors) < 0.6)
    size = np.where(persistent, graph.tensor_size * 20, graph.tensor_size)
    return Graph.from_arrays(
        name=graph.name,
        op_names=graph.op_names,
        op_runtime=graph.op_runtime,
        op_temp_memory=graph.op_temp_memory,
        tensor_names=graph.tensor_names,
        tensor_size=size,
        tensor_producer=graph.tensor_producer,
        consumer_ptr=graph.consumer_ptr,
        consumer_op=graph.consumer_op,
        tensor_persistent=persistent,
    )


def graphs(count: int, n_ops: int) -> list[Graph]:
    return [
        with_weights(generate(FAMILIES[i % len(FAMILIES)], n_ops, seed=i), i) for i in range(count)
    ]


def is_topological(graph: Graph, order: np.ndarray) -> bool:
    position = np.empty(graph.n_ops, dtype=np.int64)
    position[order] = np.arange(graph.n_ops)
    src, dst = graph.edge_index
    return sorted(order.tolist()) == list(range(graph.n_ops)) and bool(
        np.all(position[src] < position[dst])
    )


@pytest.mark.parametrize("seed", range(12))
def test_merge_is_topological_and_keeps_compatible_device_orders(seed: int) -> None:
    rng = np.random.default_rng(seed)
    graph = generate(FAMILIES[seed % len(FAMILIES)], 60, seed=seed)
    n_devices = 1 + seed % 4
    placement = rng.integers(0, n_devices, graph.n_ops).astype(np.int32)
    # Arbitrary per-device preferences: the merge must still be valid.
    merged = merge_device_orders(graph, placement, rng.random(graph.n_ops), n_devices)
    assert is_topological(graph, merged)
    # Preferences from one topological order are compatible: each device keeps its order.
    reference = np.array(graph.topological_order, dtype=np.int64)
    rank = np.empty(graph.n_ops)
    rank[reference] = np.arange(graph.n_ops)
    merged = merge_device_orders(graph, placement, rank, n_devices)
    assert is_topological(graph, merged)
    for device in range(n_devices):
        assert (
            merged[placement[merged] == device].tolist()
            == reference[placement[reference] == device].tolist()
        )


def test_device_order_candidates_are_valid_orders() -> None:
    for graph in graphs(5, 80):
        problem = Problem(graph, Machine(n_devices=3))
        placement = np.random.default_rng(0).integers(0, 3, graph.n_ops).astype(np.int32)
        candidates = list(device_order_candidates(problem, placement))
        assert len(candidates) >= 7
        assert all(is_topological(graph, order) for order in candidates)


def test_memory_weights_count_persistent_bytes_in_full() -> None:
    graph = graphs(1, 50)[0]
    full = memory_weights(graph, 1.0)
    persistent_only = memory_weights(graph, 0.0)
    assert np.isclose(full.sum(), graph.tensor_size.sum())
    assert np.isclose(persistent_only.sum(), graph.tensor_size[graph.tensor_persistent].sum())
    assert np.all(persistent_only <= full)


def test_hypergraph_partition_is_balanced_pinned_and_repeatable() -> None:
    for graph in graphs(5, 120):
        weights = memory_weights(graph, 0.1)
        pins = np.full(graph.n_ops, -1)
        pins[:3] = [2, 0, 1]
        first = hypergraph_partition(graph, 3, weights, seed=4, pinned=pins, imbalance=0.05)
        again = hypergraph_partition(graph, 3, weights, seed=4, pinned=pins, imbalance=0.05)
        assert np.array_equal(first, again)
        assert first[:3].tolist() == [2, 0, 1]
        loads = np.bincount(first, weights=weights, minlength=3)
        assert loads.max() <= load_limit(weights, 3, 0.05) + 1e-6


def test_stage_cuts_split_the_weight_evenly_into_contiguous_stages() -> None:
    rng = np.random.default_rng(0)
    for n_devices in (2, 3, 5, 8):
        weights = rng.random(200) ** 4
        cuts = stage_cuts(weights, n_devices)
        assert cuts.shape == (n_devices - 1,) and np.all(np.diff(cuts) >= 0)
        loads = np.add.reduceat(weights, np.concatenate([[0], cuts]))
        assert np.all(np.abs(loads - weights.sum() / n_devices) <= weights.max() + 1e-9)
        order = rng.permutation(200)
        placement = split_placement(order, cuts, np.full(200, -1))
        assert np.all(np.diff(placement[order]) >= 0)
    assert stage_cuts(np.zeros(10), 2).tolist() == [5]


@pytest.mark.parametrize("name", ["gp-metis", "gp-hypergraph", "gp-pipeline"])
@pytest.mark.parametrize("objective", list(Objective))
def test_partition_baselines_rescore_and_honour_pins(name: str, objective: Objective) -> None:
    for graph in graphs(3, 60):
        pins = np.full(graph.n_ops, -1)
        pins[[0, graph.n_ops - 1]] = [1, 0]
        problem = Problem(graph, Machine(n_devices=3), objective, pins)
        result = make_solver(name).solve(problem, Budget(evaluations=100_000), 0)
        assert result.solution.placement[[0, graph.n_ops - 1]].tolist() == [1, 0]
        score = problem.scorer.score(result.solution)
        expected = score.peak_memory if objective is Objective.PEAK_MEMORY else score.makespan
        assert result.value == pytest.approx(expected, rel=1e-12)
        assert result.value >= problem.lower_bound * (1 - 1e-12)


def test_strong_metis_beats_the_papers_gp_on_weight_heavy_graphs() -> None:
    wins = 0
    for graph in graphs(5, 150):
        problem = Problem(graph, Machine(n_devices=2))
        strong = MetisSolver().solve(problem, Budget(evaluations=100_000), 0).value
        paper = MetisSolver(GraphPartitionConfig()).solve(problem, Budget(evaluations=100_000), 0)
        assert strong <= paper.value
        wins += strong < paper.value
    assert wins >= 3


def test_peak_memory_bound_is_below_exact_optima() -> None:
    """CP-SAT's proven optima on tiny graphs never fall below the bound, and some meet it."""
    met = 0
    for index, graph in enumerate(graphs(8, 7)):
        for n_devices in (1, 2):
            problem = Problem(graph, Machine(n_devices=n_devices))
            result = CPSATSolver().solve(problem, Budget(seconds=20), 0)
            assert result.status == "optimal", (index, n_devices)
            bound = peak_memory_lower_bound(graph, n_devices)
            assert bound <= result.value
            assert bound >= op_step_memory(graph).max()
            met += bound == result.value
    assert met >= 2


@settings(max_examples=150, deadline=None)
@given(graphs_strategy(max_ops=40))
def test_forced_live_bytes_match_their_plain_twin(graph: Graph) -> None:
    assert forced_live_bytes(graph).tolist() == reference_forced_live_bytes(graph).tolist()


@settings(max_examples=60, deadline=None)
@given(graphs_strategy(max_ops=5), st.integers(1, 3))
def test_peak_memory_bound_is_below_every_solution_of_tiny_graphs(graph: Graph, d: int) -> None:
    """Every placement and valid order of a tiny graph, reference-scored, stays above the bound."""
    try:
        scored = all_scores(graph, Machine(n_devices=d), limit=5_000)
    except TooMany:
        return
    assert peak_memory_lower_bound(graph, d) <= min(s.peak for s in scored)


def test_forced_live_bytes_hold_a_training_steps_saved_activations() -> None:
    """x -> a -> b -> loss, with a's output also read by its gradient after the loss: at the
    loss's step a:0 is resident whatever the placement and order."""
    g = build_graph(
        [op("x"), op("a"), op("b"), op("loss"), op("grad")],
        [
            tensor("x:0", 10, "x", "a"),
            tensor("a:0", 100, "a", "b", "grad"),
            tensor("b:0", 10, "b", "loss"),
            tensor("loss:0", 1, "loss", "grad"),
        ],
    )
    assert forced_live_bytes(g).tolist() == [0, 0, 0, 100, 0]
    assert peak_memory_lower_bound(g, 1) == 100 + 10 + 1
    # On two devices a:0 may wait on the gradient's device, but b's step holds a:0 and b:0.
    assert peak_memory_lower_bound(g, 2) == 100 + 10


def test_bounds_hold_graph_outputs_to_the_end() -> None:
    """a:0 is a graph output read only by b: at c's step it is still resident. Two unrelated
    outputs of 100 bytes are both resident at the last step."""
    g = build_graph(
        [op("x"), op("a"), op("b"), op("c")],
        [
            tensor("x:0", 10, "x", "a"),
            tensor("a:0", 100, "a", "b", output=True),
            tensor("b:0", 10, "b", "c"),
            tensor("c:0", 1, "c", output=True),
        ],
    )
    assert forced_live_bytes(g).tolist() == [0, 0, 0, 100]
    assert reference_forced_live_bytes(g).tolist() == [0, 0, 0, 100]
    assert peak_memory_lower_bound(g, 1) == 100 + 10 + 1
    apart = build_graph(
        [op("u"), op("v")],
        [tensor("u:0", 100, "u", output=True), tensor("v:0", 100, "v", output=True)],
    )
    assert peak_memory_lower_bound(apart, 1) == 200
    assert peak_memory_lower_bound(apart, 2) == 100


def test_one_device_bound_counts_every_persistent_byte() -> None:
    graph = graphs(1, 40)[0]
    persistent = int(graph.tensor_size[graph.tensor_persistent].sum())
    assert peak_memory_lower_bound(graph, 1) >= persistent
    assert peak_memory_lower_bound(graph, 4) <= peak_memory_lower_bound(graph, 2)


def test_a_capacity_below_the_bound_is_infeasible_without_search() -> None:
    graph = graphs(1, 40)[0]
    bound = peak_memory_lower_bound(graph, 2)
    problem = Problem(graph, Machine(n_devices=2, capacity=bound - 1))
    with pytest.raises(InfeasibleError, match=f"lower bound of {bound:,} bytes"):
        make_solver("auto").solve(problem, Budget(evaluations=1000), 0)


def test_auto_stops_at_the_bound_and_proves_optimality() -> None:
    graph = generate("layered", 30, seed=1)
    problem = Problem(graph, Machine(n_devices=1))
    result = make_solver("auto").solve(problem, Budget(evaluations=100_000), 0)
    if result.value == problem.lower_bound:
        assert result.status == "optimal" and result.evaluations < 100_000
    else:
        assert result.evaluations == 100_000


@pytest.mark.parametrize("objective", list(Objective))
def test_auto_is_never_worse_than_the_baselines_it_runs(objective: Objective) -> None:
    baselines = (
        ("compiler-best", "gp-pipeline", "gp-metis", "gp-hypergraph")
        if objective is Objective.PEAK_MEMORY
        else ("heft", "critical-path", "gp-metis")
    )
    for graph in graphs(4, 80):
        problem = Problem(graph, Machine(n_devices=2), objective)
        auto = make_solver("auto").solve(problem, Budget(evaluations=3000), 0)
        best = min(
            make_solver(name).solve(problem, Budget(evaluations=100_000), 0).value
            for name in baselines
        )
        assert auto.value <= best
        assert auto.solution.objective is not None
        rescored = problem.scorer.score(Solution(auto.solution.placement, auto.solution.order, 2))
        value = rescored.peak_memory if objective is Objective.PEAK_MEMORY else rescored.makespan
        assert auto.value == pytest.approx(value, rel=1e-12)
