"""GDP's placement environment: exact makespans, GDP's reward, capacity, bad placements."""

from __future__ import annotations

import numpy as np
import pytest

from graphopt.costmodels._reference import reference_score
from graphopt.costmodels.machine import Machine
from graphopt.ir.generators import generate
from graphopt.ir.solution import Solution
from graphopt.learning.placement.env import INFEASIBLE_REWARD, PlacementEnv
from graphopt.solvers.base import SolverError
from graphopt.solvers.list_scheduling import TimedSchedule, heft_timeline


def test_rewards_are_gdps_of_exact_makespans() -> None:
    graph = generate("layered", 80, seed=2)
    machine = Machine(n_devices=3, latency=0.05, bandwidth=1e6)
    env = PlacementEnv(graph, machine)
    placements = np.random.default_rng(1).integers(0, 3, (6, graph.n_ops))
    outcome = env.step(placements)
    assert outcome.reward.shape == (6,) and not outcome.excess.any()
    for b in range(6):
        solution = env.solution(placements[b])
        expected = reference_score(graph, solution, machine)
        assert outcome.makespan[b] == expected.makespan
        assert tuple(outcome.peaks[b]) == expected.peak_memory_per_device
        assert outcome.reward[b] == pytest.approx(-np.sqrt(expected.makespan / env.reference))
    heft = heft_timeline(graph, machine)
    heft_makespan = reference_score(graph, heft_solution(heft, 3), machine).makespan
    assert env.reference == min(heft_makespan, graph.total_runtime)
    # Random placements are worse than HEFT's schedule on this graph: rewards below -1.
    assert (outcome.reward < -1.0).all()


def heft_solution(timed: TimedSchedule, n_devices: int) -> Solution:
    return Solution(timed.placement, timed.events, n_devices)


def test_a_placement_over_capacity_gets_the_infeasible_reward() -> None:
    graph = generate("layered", 60, seed=4)
    roomy = PlacementEnv(graph, Machine(n_devices=2))
    spread = np.arange(graph.n_ops) % 2
    together = np.zeros(graph.n_ops, dtype=np.int64)
    peaks = roomy.step(np.stack([spread, together])).peaks
    capacity = int(peaks[0].max())  # the spread placement fits, all on one device does not
    assert peaks[1].max() > capacity
    env = PlacementEnv(graph, Machine(n_devices=2, capacity=capacity), reference=roomy.reference)
    outcome = env.step(np.stack([spread, together]))
    assert outcome.excess[0] == 0 and outcome.reward[0] > INFEASIBLE_REWARD
    assert outcome.excess[1] == peaks[1].max() - capacity
    assert outcome.reward[1] == INFEASIBLE_REWARD


def test_bad_placements_and_priorities_are_refused_naming_the_item() -> None:
    graph = generate("layered", 20, seed=1)
    env = PlacementEnv(graph, Machine(n_devices=2))
    placement = np.zeros(graph.n_ops, dtype=np.int64)
    placement[5] = 2
    with pytest.raises(
        SolverError,
        match=rf"placements\[0\]: op '{graph.op_names[5]}' is on "
        r"device 2, outside 0\.\.1",
    ):
        env.step(placement)
    with pytest.raises(SolverError, match=r"expected shape \[B, 20\]"):
        env.step(np.zeros((2, 19), dtype=np.int64))
    with pytest.raises(SolverError, match="expected 20 values"):
        PlacementEnv(graph, Machine(n_devices=2), priorities=np.ones(3))
    with pytest.raises(SolverError, match=r"pinned: expected 20 devices \(one per op\)"):
        PlacementEnv(graph, Machine(n_devices=2), pinned=np.ones(3))


def test_pinned_ops_keep_their_pins_in_every_placement_scored() -> None:
    graph = generate("layered", 30, seed=2)
    machine = Machine(n_devices=3, latency=1e-3, bandwidth=1e7)
    pins = np.full(graph.n_ops, -1)
    pins[[0, 7, 12]] = [2, 0, 1]
    pinned = PlacementEnv(graph, machine, pinned=pins)
    free = PlacementEnv(graph, machine, reference=pinned.reference)
    placements = np.random.default_rng(0).integers(0, 3, (6, graph.n_ops))
    kept = np.where(pins >= 0, pins, placements)
    assert (pinned.check(placements) == kept).all()
    assert (pinned.step(placements).reward == free.step(kept).reward).all()
    assert (pinned.solution(placements[0]).placement == kept[0]).all()


@pytest.mark.parametrize("seed", range(8))
def test_with_timelines_each_placement_keeps_its_better_schedule(seed) -> None:
    rng = np.random.default_rng(seed)
    graph = generate(("layered", "sbm", "erdos_renyi", "barabasi_albert")[seed % 4], 60, seed=seed)
    free = Machine(n_devices=2 + seed % 3, latency=1e-3 * (seed % 2), bandwidth=1e7)
    placements = rng.integers(0, free.n_devices, (5, graph.n_ops))
    peaks = PlacementEnv(graph, free).step(placements).peaks
    capacity = int(np.median(peaks.max(axis=1)))  # some placements fit, some do not
    machine = Machine(
        n_devices=free.n_devices, latency=free.latency, bandwidth=free.bandwidth, capacity=capacity
    )
    alone = {
        name: PlacementEnv(graph, machine, schedulers=(name,)).step(placements)
        for name in ("ready-queue", "timeline")
    }
    env = PlacementEnv(graph, machine, schedulers=("ready-queue", "timeline"))
    both = env.step(placements)
    for b in range(5):
        options = [(o.excess[b], o.makespan[b]) for o in alone.values()]
        assert (both.excess[b], both.makespan[b]) == min(options)
        expected = reference_score(graph, env.solution(placements[b]), machine)
        assert expected.makespan == both.makespan[b]
        assert tuple(both.peaks[b]) == expected.peak_memory_per_device


def test_unknown_schedulers_are_refused() -> None:
    graph = generate("layered", 20, seed=1)
    with pytest.raises(SolverError, match="schedulers: need one or more of ready-queue, timeline"):
        PlacementEnv(graph, Machine(n_devices=2), schedulers=("fifo",))
    with pytest.raises(SolverError, match=r"got \[\]"):
        PlacementEnv(graph, Machine(n_devices=2), schedulers=())
