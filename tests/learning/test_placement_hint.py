"""The partition hint GDP's policy starts from: the fastest classical candidate, stage-numbered."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphopt.costmodels.machine import Machine
from graphopt.ir.generators import generate
from graphopt.learning.batching import make_batch
from graphopt.learning.placement.env import PlacementEnv
from graphopt.learning.placement.features import placement_features
from graphopt.learning.placement.hint import partition_hint
from graphopt.learning.systems.gdp.config import GDPConfig
from graphopt.learning.systems.gdp.env import PlacementTask, most_likely
from graphopt.learning.systems.gdp.network import GDPPolicy
from graphopt.solvers.list_scheduling import HEFT_VARIANTS, heft_timeline
from graphopt.solvers.partition import metis_partition
from graphopt.solvers.placement_hints import HINT_BALANCES, HINT_IMBALANCES, stage_numbered


def candidates(env: PlacementEnv) -> list[np.ndarray]:
    """Every candidate the hint chooses from, in the plain way."""
    graph, d = env.graph, env.n_devices
    found = [np.zeros(graph.n_ops, dtype=np.int32)]
    found += [
        metis_partition(graph, d, balance, 0, imbalance=imbalance)
        for balance in HINT_BALANCES
        for imbalance in HINT_IMBALANCES
    ]
    heft = [
        heft_timeline(graph, env.machine, insertion=insertion, lookahead=lookahead).placement
        for insertion, lookahead in HEFT_VARIANTS.values()
    ]
    return [*found, *heft]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("n_devices", [2, 4])
def test_the_hint_is_the_fastest_candidate_with_devices_in_pipeline_order(seed, n_devices) -> None:
    graph = generate(("layered", "sbm", "erdos_renyi")[seed % 3], 80, seed=seed)
    schedulers = ("ready-queue", "timeline")[: 1 + seed % 2]
    machine = Machine(n_devices=n_devices, latency=1e-4, bandwidth=1e8)
    env = PlacementEnv(graph, machine, schedulers=schedulers)
    hint = partition_hint(env)
    assert hint.shape == (graph.n_ops,) and hint.dtype == np.int32
    assert 0 <= hint.min() and hint.max() < n_devices
    fastest = min(env.step(np.stack(candidates(env))).makespan)
    assert env.step(hint).makespan[0] == fastest  # relabelling devices keeps the makespan
    position = np.empty(graph.n_ops)
    position[graph.topological_order] = np.arange(graph.n_ops)
    used = np.unique(hint)
    means = [position[hint == k].mean() for k in used]
    assert list(used) == list(range(len(used))) and means == sorted(means)


def test_slow_links_make_one_device_the_hint() -> None:
    graph = generate("layered", 60, seed=2)
    env = PlacementEnv(graph, Machine(n_devices=4, latency=10.0, bandwidth=1.0))
    assert (partition_hint(env) == 0).all()


def test_under_a_capacity_a_fitting_candidate_beats_a_faster_one() -> None:
    graph = generate("layered", 60, seed=4)
    free = PlacementEnv(graph, Machine(n_devices=2, latency=10.0, bandwidth=1.0))
    one_device_peak = int(free.step(np.zeros(graph.n_ops, np.int32)).peaks[0, 0])
    machine = Machine(n_devices=2, latency=10.0, bandwidth=1.0, capacity=one_device_peak - 1)
    env = PlacementEnv(graph, machine)
    hint = partition_hint(env)
    assert env.step(hint).excess[0] == 0 < env.step(np.zeros(graph.n_ops, np.int32)).excess[0]


def test_stage_numbering_orders_devices_by_mean_position_and_empty_ones_last() -> None:
    order = np.arange(6)
    parts = np.array([2, 2, 0, 0, 0, 2])  # device 1 empty
    assert stage_numbered(order, parts, 3).tolist() == [0, 0, 1, 1, 1, 0]


def test_a_strong_partition_prior_places_every_op_on_its_hinted_device() -> None:
    graph = generate("sbm", 70, seed=5)
    env = PlacementEnv(graph, Machine(n_devices=4, latency=1e-4, bandwidth=1e8))
    hint = torch.from_numpy(partition_hint(env))
    torch.manual_seed(0)
    policy = GDPPolicy(GDPConfig(hidden=16, pipeline_prior=None, partition_prior=100.0))
    task = PlacementTask(env, make_batch([placement_features(graph)]), hint)
    assert (most_likely(policy, task) == hint.numpy()).all()
    with pytest.raises(ValueError, match="takes a partition hint"):
        policy(task.batch, 4)
    plain = GDPPolicy(GDPConfig(hidden=16))
    with pytest.raises(ValueError, match="takes no hint"):
        plain(task.batch, 4, hint)
