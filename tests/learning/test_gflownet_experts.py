"""Search trajectories for the GFlowNet losses (`learning.systems.gflownet.experts`)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from graphopt.costmodels.machine import Machine
from graphopt.costmodels.score import Scorer
from graphopt.ir.generators import generate
from graphopt.learning.objectives.log_partition_variance import log_partition_variance_loss
from graphopt.learning.run_dir import TrainingError
from graphopt.learning.systems.gflownet.config import ExpertConfig, GFlowNetConfig, TrainConfig
from graphopt.learning.systems.gflownet.env import ActionError, PartialSchedules, log_reward
from graphopt.learning.systems.gflownet.experts import (
    expert_trajectories,
    interleavings,
    randomized_heft,
)
from graphopt.learning.systems.gflownet.network import build_policy
from graphopt.learning.systems.gflownet.sampling import (
    replay_trajectories,
    sample_trajectories,
    score_trajectories,
)
from graphopt.solvers.events import events_from_op_order
from graphopt.solvers.list_scheduling import heft_schedule

FAMILIES = ("layered", "erdos_renyi", "sbm", "watts_strogatz", "barabasi_albert")
MACHINES = {
    "free": Machine(3),
    "sync": Machine(3, latency=1e-6, bandwidth=1e9),
    "async": Machine(4, latency=1e-6, bandwidth=1e9, mode="async"),
}
CONFIG = GFlowNetConfig(
    hidden=16, layers=2, heads=2, condition=8, prior="list", encoding="per-graph", window=64
)


def device_orders(placement: np.ndarray, order: np.ndarray, d: int) -> list[list[int]]:
    return [[int(op) for op in order if placement[op] == k] for k in range(d)]


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("machine", list(MACHINES))
def test_interleavings_rebuild_each_schedule_as_the_scorer_times_it(family, machine) -> None:
    graph, machine = generate(family, 40, seed=7), MACHINES[machine]
    rng = np.random.default_rng(0)
    found = randomized_heft(graph, machine, 6, 0.3, rng)
    assert [a.tolist() for a in found[0]] == [a.tolist() for a in heft_schedule(graph, machine)]
    built, actions, reached = interleavings(graph, machine, found, 64)
    assert reached.all() and built.done
    scorer, d = Scorer(graph, machine), machine.n_devices
    for b, (placement, order) in enumerate(found):
        assert (built.device[b] == placement).all()
        assert device_orders(built.device[b], built.order[b], d) == device_orders(
            placement, order, d
        )
        assert (actions[b].numpy() // d == built.order[b]).all()
        events = events_from_op_order(graph, placement, order, d, "lazy")
        _, makespan, violations = scorer.evaluate(placement, events)
        assert violations[0] == 0
        assert graph.total_runtime / built.speedups(scorer)[b] == pytest.approx(makespan)


def test_a_schedule_the_window_cannot_reach_is_left_out() -> None:
    graph, machine = generate("layered", 40, seed=2), MACHINES["free"]
    rng = np.random.default_rng(1)
    found = randomized_heft(graph, machine, 12, 1.0, rng)
    _, _, wide = interleavings(graph, machine, found, 64)
    built, _, narrow = interleavings(graph, machine, found, 1)
    assert wide.all() and not narrow.all()
    d = machine.n_devices
    for b, (placement, order) in enumerate(found):  # a row not reached builds something else
        rebuilt = device_orders(built.device[b], built.order[b], d)
        assert (rebuilt == device_orders(placement, order, d)) == bool(narrow[b])
    config = ExpertConfig(trajectories=12, candidates=12, noise=1.0)
    kept, speedups = expert_trajectories(
        graph, machine, Scorer(graph, machine), config, 1, np.random.default_rng(1)
    )
    assert 0 < len(kept) < 12
    policy = build_policy(GFlowNetConfig(**{**CONFIG.__dict__, "window": 1}))
    score_trajectories(policy, graph, machine, kept, 0.1)  # every action is a candidate
    with pytest.raises(ActionError, match="is not a valid action"):
        score_trajectories(policy, graph, machine, kept.flip(1), 0.1)


def test_the_search_keeps_its_best_distinct_schedules_best_first() -> None:
    graph, machine = generate("sbm", 60, seed=3), MACHINES["sync"]
    scorer = Scorer(graph, machine)
    config = ExpertConfig(trajectories=5, candidates=20, noise=0.3)
    actions, speedups = expert_trajectories(
        graph, machine, scorer, config, 64, np.random.default_rng(4)
    )
    assert len(actions) == 5 and list(speedups) == sorted(speedups, reverse=True)
    placement, order = heft_schedule(graph, machine)
    events = events_from_op_order(graph, placement, order, 3, "lazy")
    _, heft, _ = scorer.evaluate(placement, events)
    assert speedups[0] >= graph.total_runtime / heft - 1e-12  # HEFT is the first candidate
    d = machine.n_devices
    keys = {
        (tuple((row % d).tolist()), tuple(map(tuple, device_orders(row % d, row // d, d))))
        for row in [a.numpy() for a in actions]
    }
    assert len(keys) == 5


def test_scored_trajectories_carry_the_sampled_log_probabilities() -> None:
    torch.manual_seed(0)
    policy = build_policy(CONFIG)
    graph, machine = generate("erdos_renyi", 25, seed=5), MACHINES["sync"]
    with torch.no_grad():
        sampled = sample_trajectories(
            policy, graph, machine, 4, 0.2, torch.Generator().manual_seed(2), uniform_backward=True
        )
    scored = score_trajectories(policy, graph, machine, sampled.actions, 0.2, None, True)
    torch.testing.assert_close(scored.log_pf, sampled.log_pf, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(scored.log_pb, sampled.log_pb)
    replay = replay_trajectories(policy, graph, machine, sampled.actions, 0.2)
    torch.testing.assert_close(scored.log_pf, replay.log_pf.sum(dim=1), rtol=1e-5, atol=1e-5)
    # the uniform P_B, plainly: one over the removable ops after each step
    d, n = machine.n_devices, graph.n_ops
    for b in range(4):
        s, expected = PartialSchedules(graph, machine, 1), 0.0
        for action in sampled.actions[b].tolist():
            s.step(np.array([action // d]), np.array([action % d]))
            expected -= math.log(int(s.backward_mask()[0].sum()))
        assert float(scored.log_pb[b]) == pytest.approx(expected, rel=1e-5)
    assert scored.step_log_pf.shape == (4, n)
    scored.log_pf.sum().backward()
    assert all(p.grad is not None for p in policy.forward_head.parameters())


def test_search_trajectories_teach_the_policy_to_sample_the_search_s_schedules() -> None:
    """12 seeded variance-loss updates on one 20-op graph on 3 devices, from the same untrained
    policy, with and without the search's 4 best schedules per step: with them, the policy
    gives those schedules' trajectories a higher log P_F than training on samples alone."""
    graph, machine = generate("layered", 20, seed=1), MACHINES["free"]
    scorer, sigma = Scorer(graph, machine), 0.01
    config = ExpertConfig(trajectories=4, candidates=16, noise=0.3)
    window = GFlowNetConfig(**{**CONFIG.__dict__, "window": 16})
    shown, _ = expert_trajectories(graph, machine, scorer, config, 16, np.random.default_rng(9))

    def trained(experts: bool) -> tuple[float, float]:
        torch.manual_seed(0)
        policy = build_policy(window)
        optimizer = torch.optim.Adam(policy.parameters(), 3e-3)
        context = policy.context(graph, machine)
        rng = np.random.default_rng(0)

        def likelihood() -> float:
            with torch.no_grad():
                return float(score_trajectories(policy, graph, machine, shown, sigma).log_pf.mean())

        before = likelihood()
        for step in range(12):
            drawn = sample_trajectories(
                policy, graph, machine, 8, sigma, torch.Generator().manual_seed(step), context
            )
            speedups = drawn.schedules.speedups(scorer)
            log_pf, log_pb = drawn.log_pf, drawn.log_pb
            if experts:
                actions, best = expert_trajectories(graph, machine, scorer, config, 16, rng)
                scored = score_trajectories(policy, graph, machine, actions, sigma, context)
                speedups = np.concatenate([speedups, best])
                log_pf = torch.cat([log_pf, scored.log_pf])
                log_pb = torch.cat([log_pb, scored.log_pb])
            log_r = torch.from_numpy(log_reward(speedups, 3, sigma)).float()
            loss = log_partition_variance_loss(log_r, log_pf, log_pb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        return before, likelihood()

    (start, alone), (again, taught) = trained(False), trained(True)
    assert start == again
    assert taught > start + 1.0 and taught > alone + 1.0, (start, alone, taught)


def test_search_trajectories_need_a_gflownet_loss_and_a_per_graph_policy() -> None:
    per_graph = {"encoding": "per-graph"}
    expert = {"trajectories": 4}
    for bad in (
        {"expert": expert},
        {"expert": expert, "policy": per_graph, "loss": "ppo"},
        {
            "expert": expert,
            "policy": per_graph,
            "backward": "uniform",
            "replay": {"epochs": 2},
        },
    ):
        with pytest.raises(TrainingError, match="expert needs a GFlowNet loss"):
            TrainConfig.from_dict(bad)
    with pytest.raises(TrainingError, match="candidates must be >= trajectories"):
        TrainConfig.from_dict({"expert": {"trajectories": 9, "candidates": 8}})
    config = TrainConfig.from_dict({"expert": expert, "policy": per_graph})
    assert config.expert == ExpertConfig(trajectories=4)
