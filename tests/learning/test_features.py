import numpy as np
import pytest

from graphopt.costmodels.machine import Machine
from graphopt.ir.generators import generate
from graphopt.learning.features import EDGE_FEATURE_NAMES, node_feature_names, population_statistics
from graphopt.learning.systems.regal.env import compute_features
from graphopt.solvers.base import Budget, Problem, Tracker
from graphopt.solvers.bounds import op_step_memory
from graphopt.solvers.random_keys import RandomKeyDecoder


def _run(graph, devices=2, evaluations=400, budget=5000, seed=0):
    problem = Problem(graph, Machine(n_devices=devices))
    tracker = Tracker(problem, Budget(evaluations=budget))
    return (
        problem,
        tracker,
        compute_features(problem, tracker, np.random.default_rng(seed), evaluations),
    )


def test_feature_run_spends_exactly_its_evaluations() -> None:
    _, tracker, run = _run(generate("layered", 60, seed=1))
    assert tracker.evaluations == 400
    assert run.population.keys.shape[0] == 100  # a full population, best first
    assert np.all(np.diff(run.population.value) >= 0)
    assert tracker.best_key[1] == run.population.value[0]


def test_feature_run_never_exceeds_a_smaller_budget() -> None:
    _, tracker, run = _run(generate("layered", 40, seed=1), budget=150)
    assert tracker.evaluations == 150
    assert run.population.keys.shape[0] == 100


@pytest.mark.parametrize("devices", [2, 3])
def test_node_and_edge_features(devices) -> None:
    graph = generate("erdos_renyi", 50, seed=2)
    _, _, run = _run(graph, devices)
    f = run.features
    names = node_feature_names(devices)
    assert f.node.shape == (graph.n_ops, len(names)) and f.node.dtype == np.float32
    assert f.edge.shape == (graph.n_edges, len(EDGE_FEATURE_NAMES))
    np.testing.assert_array_equal(f.edge_index, graph.edge_index)
    memory = f.node[:, [names.index(n) for n in ("input_bytes", "output_bytes", "temp_memory")]]
    assert memory.max() == pytest.approx(1.0) and memory.min() >= 0
    devices_share = f.node[:, [names.index(f"expected_device_{b}") for b in range(devices)]]
    np.testing.assert_allclose(devices_share.sum(axis=1), 1.0, rtol=1e-6)
    position = f.node[:, names.index("expected_position")]
    assert 0 <= position.min() and position.max() <= 1
    pinned = f.node[:, names.index("pinned_to_device_0")]
    assert pinned.sum() == 1 and int(np.argmax(pinned)) == int(np.argmax(op_step_memory(graph)))
    assert devices_share[int(np.argmax(pinned)), 0] == 1.0
    assert sorted(f.topological_rank) == list(range(graph.n_ops))
    rank = f.topological_rank
    assert np.all(rank[graph.edge_index[0]] < rank[graph.edge_index[1]])


def test_population_statistics_by_hand() -> None:
    graph = generate("layered", 6, seed=0)
    problem = Problem(graph, Machine(n_devices=2), pinned=np.full(graph.n_ops, -1))
    decoder = RandomKeyDecoder(problem)
    solutions = [decoder.decode(k) for k in np.random.default_rng(0).random((5, decoder.n_genes))]
    keys = np.stack([decoder.encode(s) for s in solutions])
    device, position = population_statistics(decoder, keys)
    expected_device = np.zeros((graph.n_ops, 2))
    expected_position = np.zeros(graph.n_ops)
    for s in solutions:
        expected_device[np.arange(graph.n_ops), s.placement] += 1 / 5
        ops = [int(e) for e in s.order if e < graph.n_ops]
        for rank, op in enumerate(ops):
            expected_position[op] += rank / (graph.n_ops - 1) / 5
    np.testing.assert_allclose(device, expected_device)
    np.testing.assert_allclose(position, expected_position)
