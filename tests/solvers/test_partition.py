"""GP+DFS: Kernighan-Lin/FM and METIS partitions (known cuts, balance, pins, seeds) and solvers."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import graph, op, tensor
from graphopt.costmodels._reference import reference_score
from graphopt.costmodels.machine import Machine
from graphopt.ir.generators import generate
from graphopt.ir.graph import Graph
from graphopt.solvers.base import Budget, Objective, Problem, SolverError
from graphopt.solvers.partition import (
    GraphPartitionConfig,
    KernighanLinSolver,
    MetisSolver,
    device_loads,
    kernighan_lin_partition,
    load_limit,
    metis_partition,
    transfer_volume,
    vertex_weights,
)
from strategies import graphs

BALANCES = ["runtime", "memory"]


def partition(method: str, g: Graph, d: int, balance: str, seed: int = 0, pinned=None):
    if method == "kl":
        return kernighan_lin_partition(g, d, balance, np.random.default_rng(seed), pinned=pinned)
    return metis_partition(g, d, balance, seed, pinned=pinned)


def two_cliques() -> Graph:
    """Two dense 5-op DAG cliques of 1000-byte tensors, joined by one 1-byte tensor."""
    ops, tensors = [], []
    for side in "ab":
        for i in range(5):
            ops.append(op(f"{side}{i}"))
            later = [f"{side}{j}" for j in range(i + 1, 5)]
            if side == "a" and i == 4:
                tensors.append(tensor("a4:0", 1, "a4", "b0"))
            else:
                tensors.append(tensor(f"{side}{i}:0", 1000, f"{side}{i}", *later))
    return graph(ops, tensors, name="two_cliques")


@pytest.mark.parametrize("balance", BALANCES)
@pytest.mark.parametrize("method", ["kl", "metis"])
def test_two_cliques_are_cut_at_the_light_tensor(method: str, balance: str) -> None:
    g = two_cliques()
    placement = partition(method, g, 2, balance)
    assert transfer_volume(g, placement, 2) == 1
    assert len(set(placement[:5])) == 1 and len(set(placement[5:])) == 1
    assert placement[0] != placement[5]


def test_transfer_volume_counts_each_tensor_once_per_foreign_device() -> None:
    g = graph(
        [op("p"), op("x"), op("y"), op("z")],
        [tensor("p:0", 100, "p", "x", "y", "z"), tensor("x:0", 7, "x", "z")],
    )
    # p on 0; x and y on 1 (one transfer of p:0), z on 2 (p:0 and x:0 both cross).
    assert transfer_volume(g, np.array([0, 1, 1, 2]), 3) == 100 + 100 + 7
    assert transfer_volume(g, np.zeros(4, dtype=np.int32), 3) == 0


@pytest.mark.parametrize("method", ["kl", "metis"])
@pytest.mark.parametrize("d", [2, 3, 4])
@pytest.mark.parametrize("balance", BALANCES)
def test_balanced_and_far_better_than_random(method: str, d: int, balance: str) -> None:
    g = generate("layered", 400, seed=d)
    placement = partition(method, g, d, balance)
    weights = vertex_weights(g, balance)
    assert device_loads(g, placement, d, balance).max() <= load_limit(weights, d, 0.05)
    rng = np.random.default_rng(0)
    random_volume = np.mean([transfer_volume(g, rng.integers(0, d, g.n_ops), d) for _ in range(5)])
    assert transfer_volume(g, placement, d) < 0.5 * random_volume


@settings(max_examples=60, deadline=None)
@given(graphs(max_ops=30), st.integers(1, 4), st.sampled_from(BALANCES), st.integers(0, 99))
def test_unpinned_partitions_respect_the_load_limit(g: Graph, d: int, balance: str, seed: int):
    weights = vertex_weights(g, balance)
    for method in ("kl", "metis"):
        placement = partition(method, g, d, balance, seed)
        assert placement.shape == (g.n_ops,) and placement.dtype == np.int32
        assert np.all((placement >= 0) & (placement < d))
        loads = device_loads(g, placement, d, balance)
        assert loads.max() <= load_limit(weights, d, 0.05) * (1 + 1e-12)


@pytest.mark.parametrize("method", ["kl", "metis"])
@pytest.mark.parametrize("d", [2, 3, 5])
def test_pins_are_honoured(method: str, d: int) -> None:
    g = generate("layered", 300, seed=1)
    rng = np.random.default_rng(d)
    pinned = np.full(g.n_ops, -1)
    chosen = rng.choice(g.n_ops, 40, replace=False)
    pinned[chosen] = rng.integers(0, d, chosen.shape[0])
    placement = partition(method, g, d, "runtime", pinned=pinned)
    np.testing.assert_array_equal(placement[chosen], pinned[chosen])


@pytest.mark.parametrize("method", ["kl", "metis"])
def test_same_seed_same_partition(method: str) -> None:
    g = generate("erdos_renyi", 300, seed=2)
    first = partition(method, g, 3, "memory", seed=7)
    np.testing.assert_array_equal(first, partition(method, g, 3, "memory", seed=7))


@pytest.mark.parametrize("method", ["kl", "metis"])
def test_one_device_and_graphs_without_edges(method: str) -> None:
    g = generate("layered", 50, seed=0)
    assert not partition(method, g, 1, "runtime").any()
    lonely = graph(
        [op(f"o{i}", runtime=float(i + 1)) for i in range(6)],
        [tensor(f"o{i}:0", 10, f"o{i}") for i in range(6)],
    )
    placement = partition(method, lonely, 3, "runtime")
    assert transfer_volume(lonely, placement, 3) == 0
    weights = vertex_weights(lonely, "runtime")
    assert device_loads(lonely, placement, 3, "runtime").max() <= load_limit(weights, 3, 0.05)


def test_invalid_requests_are_rejected() -> None:
    g = generate("layered", 20, seed=0)
    with pytest.raises(SolverError, match="balance"):
        kernighan_lin_partition(g, 2, "bytes")  # type: ignore[arg-type]
    with pytest.raises(SolverError, match="pinned"):
        metis_partition(g, 2, pinned=np.full(g.n_ops, 2))
    with pytest.raises(SolverError, match="imbalance"):
        GraphPartitionConfig(imbalances=(-0.1,))
    with pytest.raises(SolverError, match="transfers"):
        GraphPartitionConfig(transfers=("early",))  # type: ignore[arg-type]


@pytest.mark.parametrize("objective", list(Objective))
@pytest.mark.parametrize("solver_type", [KernighanLinSolver, MetisSolver])
def test_solvers_offer_valid_exactly_scored_pinned_solutions(solver_type, objective) -> None:
    g = generate("layered", 60, seed=3)
    machine = Machine(3, latency=0.01, bandwidth=1e7)
    pinned = np.full(g.n_ops, -1)
    pinned[:5] = [0, 1, 2, 0, 1]
    problem = Problem(g, machine, objective, pinned=pinned)
    solver = solver_type(GraphPartitionConfig())  # paper 001's GP+DFS
    result = solver.solve(problem, Budget(evaluations=100), seed=0)
    assert result.evaluations == 4  # two balance modes, lazy and eager transfers
    np.testing.assert_array_equal(result.solution.placement[:5], pinned[:5])
    exact = reference_score(g, result.solution, machine)
    assert exact.peak_memory_per_device == result.score.peak_memory_per_device
    assert exact.makespan == result.score.makespan
    json.dumps(result.solution.solver)
    again = solver_type(GraphPartitionConfig()).solve(problem, Budget(evaluations=100), seed=0)
    np.testing.assert_array_equal(again.solution.order, result.solution.order)
