"""The GFlowNet scheduling MDP against a plain twin, the scorer and its refusals."""

from __future__ import annotations

import numpy as np
import pytest

from graphopt.costmodels.machine import Machine
from graphopt.costmodels.score import Scorer
from graphopt.ir.graph import Graph
from graphopt.learning.systems.gflownet.env import (
    ActionError,
    PartialSchedules,
    feature_names,
    log_reward,
)
from graphopt.solvers.list_scheduling import bottom_levels
from strategies import random_graph


class PlainSchedule:
    """One partial schedule, kept the plain way: the twin of a row of `PartialSchedules`."""

    def __init__(self, graph: Graph, machine: Machine) -> None:
        self.graph, self.machine = graph, machine
        self.device: dict[int, int] = {}
        self.start: dict[int, float] = {}
        self.finish: dict[int, float] = {}
        self.order: list[int] = []

    def producers(self, op: int) -> list[tuple[int, int]]:
        a = self.graph.arrays
        inputs = a.op_input_tensor[a.op_input_ptr[op] : a.op_input_ptr[op + 1]]
        return [(int(t), int(a.tensor_producer[t])) for t in inputs]

    def ready(self) -> set[int]:
        return {
            j
            for j in range(self.graph.n_ops)
            if j not in self.device and all(p in self.device for _, p in self.producers(j))
        }

    def removable(self) -> set[int]:
        read = {p for j in self.device for _, p in self.producers(j)}
        last = {}
        for j in self.order:
            last[self.device[j]] = j
        return {j for j in last.values() if j not in read}

    def start_on(self, op: int, device: int) -> float:
        m = self.machine
        begin = max((self.finish[j] for j in self.order if self.device[j] == device), default=0.0)
        for t, p in self.producers(op):
            duration = m.latency + self.graph.tensor_size[t] / m.bandwidth
            begin = max(begin, self.finish[p] + (duration if self.device[p] != device else 0.0))
        return begin

    def add(self, op: int, device: int) -> None:
        begin = self.start_on(op, device)
        self.device[op] = device
        self.start[op] = begin
        self.finish[op] = begin + float(self.graph.op_runtime[op])
        self.order.append(op)


MACHINES = {
    "free": Machine(n_devices=3),
    "async": Machine(n_devices=2, latency=0.3, bandwidth=2000.0, mode="async"),
    "sync": Machine(n_devices=4, latency=0.1, bandwidth=500.0, mode="sync"),
    "one": Machine(n_devices=1),
}


def random_trajectories(
    graph: Graph, machine: Machine, batch: int, rng: np.random.Generator
) -> tuple[PartialSchedules, list[PlainSchedule]]:
    """Steps B schedules to the end with uniformly random valid actions, checking each state
    against the twin (masks, times, order) on the way."""
    env = PartialSchedules(graph, machine, batch)
    plain = [PlainSchedule(graph, machine) for _ in range(batch)]
    while not env.done:
        forward, backward = env.forward_mask(), env.backward_mask()
        starts = env.earliest_starts()
        ops = np.empty(batch, dtype=np.int64)
        for b, twin in enumerate(plain):
            assert set(np.flatnonzero(forward[b]).tolist()) == twin.ready()
            assert set(np.flatnonzero(backward[b]).tolist()) == twin.removable()
            for j in range(graph.n_ops):
                for k in range(machine.n_devices):
                    expected = twin.start_on(j, k) if j in twin.ready() else 0.0
                    assert starts[b, j, k] == pytest.approx(expected, rel=1e-12, abs=1e-12)
            ops[b] = rng.choice(np.flatnonzero(forward[b]))
        devices = rng.integers(0, machine.n_devices, batch)
        env.step(ops, devices)
        for b, twin in enumerate(plain):
            twin.add(int(ops[b]), int(devices[b]))
            assert env.backward_mask()[b, ops[b]]  # the op just added can always go back
            for j in twin.order:
                assert env.start[b, j] == pytest.approx(twin.start[j], rel=1e-12, abs=1e-12)
                assert env.device[b, j] == twin.device[j]
            assert env.order[b, : env.steps].tolist() == twin.order
    return env, plain


@pytest.mark.parametrize("seed", range(24))
def test_steps_match_the_plain_twin_and_score_as_the_contract(seed: int) -> None:
    rng = np.random.default_rng(seed)
    graph = random_graph(rng, int(rng.integers(1, 20)), float(rng.choice([0.1, 0.3])))
    name = list(MACHINES)[seed % len(MACHINES)]
    machine = MACHINES[name]
    env, _ = random_trajectories(graph, machine, 5, rng)
    scorer = Scorer(graph, machine)
    placements, events = env.solutions()
    total = float(graph.op_runtime.sum())
    for b in range(env.batch):
        _, makespan, (violation, _, _) = scorer.evaluate(placements[b], events[b])
        assert violation == 0
        if name != "sync":  # receives occupy devices only in sync mode
            assert env.proxy_makespans()[b] == pytest.approx(makespan, rel=1e-9, abs=1e-12)
        expected = total / makespan if makespan > 0 else 1.0
        assert env.speedups(scorer)[b] == pytest.approx(expected)
    if name == "one":
        assert np.allclose(env.speedups(scorer), 1.0)


def test_features_follow_the_state() -> None:
    rng = np.random.default_rng(3)
    graph = random_graph(rng, 12, 0.3)
    machine = MACHINES["free"]
    env = PartialSchedules(graph, machine, 2)
    names = feature_names(machine.n_devices)
    before = env.features()
    assert before.shape == (2, graph.n_ops, len(names)) and before.dtype == np.float32
    assert np.all(before[:, :, names.index("start")] == -1.0)
    assert np.all(before[:, :, names.index("scheduled")] == 0.0)
    first = np.flatnonzero(env.forward_mask()[0])[0]
    env.step(np.array([first, first]), np.array([2, 0]))
    after = env.features()
    assert after[0, first, names.index("device_2")] == 1.0
    assert after[1, first, names.index("device_0")] == 1.0
    assert after[0, first, names.index("start")] == 0.0
    assert after[0, first, names.index("scheduled")] == 1.0
    assert np.array_equal(after[:, :, names.index("can_add")], env.forward_mask())
    assert np.array_equal(after[:, :, names.index("can_remove")], env.backward_mask())
    runtime = after[0, :, names.index("runtime")]
    assert runtime.mean() == pytest.approx(1.0, rel=1e-5)


def test_the_list_prior_prefers_critical_ops_that_can_start_first() -> None:
    rng = np.random.default_rng(5)
    graph = random_graph(rng, 14, 0.3)
    machine = MACHINES["async"]
    env = PartialSchedules(graph, machine, 3)
    unit = graph.total_runtime / graph.n_ops
    bottom = bottom_levels(graph) / unit
    while not env.done:
        prior, ready, starts = env.list_prior(), env.forward_mask(), env.earliest_starts()
        assert prior.shape == (3, graph.n_ops, machine.n_devices, 2) and prior.dtype == np.float32
        for b in range(3):
            first = starts[b][ready[b]].min()
            for j in range(graph.n_ops):
                if not ready[b, j]:
                    assert not prior[b, j].any()
                    continue
                assert np.allclose(prior[b, j, :, 0], bottom[j], rtol=1e-6)
                assert np.allclose(prior[b, j, :, 1], (first - starts[b, j]) / unit, rtol=1e-6)
            assert prior[b, ready[b], :, 1].max() == 0.0
        ops = np.array([rng.choice(np.flatnonzero(ready[b])) for b in range(3)])
        env.step(ops, rng.integers(0, machine.n_devices, 3))


def test_invalid_actions_are_refused_and_change_nothing() -> None:
    rng = np.random.default_rng(0)
    graph = random_graph(rng, 10, 0.4)
    env = PartialSchedules(graph, MACHINES["free"], 2)
    blocked = np.flatnonzero(~env.forward_mask()[0])
    ready = np.flatnonzero(env.forward_mask()[0])
    cases = [(np.array([ready[0], ready[0]]), np.array([0, 3]), "schedule 1: op")]
    if blocked.size:
        cases.append((np.array([blocked[0], ready[0]]), np.array([0, 0]), "schedule 0: op"))
    cases.append((np.array([-1, ready[0]]), np.array([0, 0]), "schedule 0: op -1"))
    for ops, devices, message in cases:
        with pytest.raises(ActionError, match=message):
            env.step(ops, devices)
        assert env.steps == 0 and not env.added.any()
    with pytest.raises(ActionError, match="two arrays of 2 entries"):
        env.step(np.array([ready[0]]), np.array([0]))
    env.step(np.array([ready[0], ready[0]]), np.array([0, 1]))
    with pytest.raises(ActionError, match="schedule 0: op"):
        env.step(np.array([ready[0], ready[0]]), np.array([0, 1]))  # already added
    with pytest.raises(ActionError, match="finish them first"):
        env.solutions()
    with pytest.raises(ActionError, match="batch must be >= 1"):
        PartialSchedules(graph, MACHINES["free"], 0)


def test_log_reward_is_the_papers_and_refuses_a_bad_temperature() -> None:
    speedups = np.array([1.0, 2.5, 4.0])
    assert np.allclose(log_reward(speedups, 4, 0.5), (speedups - 4) / 0.5)
    assert np.allclose(log_reward(speedups, 4, np.array([1.0, 0.1, 0.01])), [-3.0, -15.0, 0.0])
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ActionError, match="sigma must be > 0"):
            log_reward(speedups, 4, bad)
