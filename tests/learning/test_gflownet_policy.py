"""The GFlowNet policy (Topoformer, FiLM, heads), its sampler and losses, and that it learns."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from builders import graph, op, tensor
from graphopt.costmodels.machine import Machine
from graphopt.costmodels.score import Scorer
from graphopt.ir.generators import generate
from graphopt.learning.encoders.topoformer import RELATIONS, relation_masks
from graphopt.learning.objectives.log_partition_variance import log_partition_variance_loss
from graphopt.learning.objectives.trajectory_balance import trajectory_balance_loss
from graphopt.learning.systems.gflownet.config import GFlowNetConfig
from graphopt.learning.systems.gflownet.env import PartialSchedules, feature_names, log_reward
from graphopt.learning.systems.gflownet.network import GFlowNetPolicy
from graphopt.learning.systems.gflownet.sampling import replay_trajectories, sample_trajectories
from graphopt.solvers.base import Budget, Objective, Problem
from graphopt.solvers.registry import make_solver

SMALL = GFlowNetConfig(n_devices=2, hidden=16, layers=2, heads=4, condition=8)


def chain_and_loner():
    """a -> b -> c, and d on its own."""
    return graph(
        [op("a"), op("b"), op("c"), op("d")],
        [
            tensor("a:0", 4, "a", "b"),
            tensor("b:0", 4, "b", "c"),
            tensor("c:0", 4, "c"),
            tensor("d:0", 4, "d"),
        ],
    )


def test_relation_masks_follow_the_topology() -> None:
    masks = relation_masks(chain_and_loner()).numpy()
    by = dict(zip(RELATIONS, masks, strict=True))
    a, b, c, d = range(4)
    assert by["ancestors"][c].tolist() == [True, True, True, False]
    assert by["descendants"][a].tolist() == [True, True, True, False]
    assert by["parents"][c].tolist() == [False, True, True, False]
    assert by["children"][a].tolist() == [True, True, False, False]
    assert by["unrelated"][d].tolist() == [True, True, True, True]
    assert by["unrelated"][b].tolist() == [False, True, False, True]
    assert all(m[i, i] for m in masks for i in range(4))


def test_a_head_sees_only_its_relation() -> None:
    """With one head (ancestors), a source op's encoding ignores every other op's features."""
    g = chain_and_loner()
    torch.manual_seed(0)
    policy = GFlowNetPolicy(GFlowNetConfig(n_devices=2, hidden=8, layers=2, heads=1, condition=4))
    masks = relation_masks(g)
    x = torch.randn(1, 4, len(feature_names(2)))
    changed = x.clone()
    changed[0, 1:] += 5.0  # every op but the source a
    log_sigma = torch.zeros(1)
    with torch.no_grad():
        h, h_changed = policy(x, masks, log_sigma)[2], policy(changed, masks, log_sigma)[2]
    assert torch.allclose(h[0, 0], h_changed[0, 0])
    assert not torch.allclose(h[0, 2], h_changed[0, 2])  # c has ancestors a and b


def test_an_untrained_policy_ignores_the_temperature() -> None:
    """FiLM starts at scale 1 and shift 0, so sigma matters only once trained."""
    g = generate("layered", 10, seed=0)
    torch.manual_seed(0)
    policy = GFlowNetPolicy(SMALL)
    x = torch.randn(2, g.n_ops, len(feature_names(2)))
    masks = relation_masks(g)
    with torch.no_grad():
        cold, _, _ = policy(x, masks, torch.log(torch.tensor([0.01, 0.01])))
        hot, _, _ = policy(x, masks, torch.log(torch.tensor([1.0, 1.0])))
    assert torch.allclose(cold, hot)


def test_sampled_trajectories_are_valid_seeded_and_carry_log_probabilities() -> None:
    g = generate("layered", 12, seed=2)
    machine = Machine(n_devices=2)
    torch.manual_seed(0)
    policy = GFlowNetPolicy(SMALL)
    runs = []
    for _ in range(2):
        with torch.no_grad():
            runs.append(
                sample_trajectories(policy, g, machine, 6, 0.5, torch.Generator().manual_seed(7))
            )
    first, second = runs
    assert np.array_equal(first.schedules.order, second.schedules.order)
    assert np.array_equal(first.schedules.device, second.schedules.device)
    assert torch.all(first.log_pf <= 0) and torch.all(first.log_pb <= 0)
    assert torch.all(torch.isfinite(first.log_pf)) and torch.all(torch.isfinite(first.log_pb))
    scorer = Scorer(g, machine)
    placements, events = first.schedules.solutions()
    for b in range(6):
        assert scorer.evaluate(placements[b], events[b])[2][0] == 0
    with pytest.raises(ValueError, match="places on 2 devices, the machine has 3"):
        sample_trajectories(policy, g, Machine(n_devices=3), 2, 0.5, torch.Generator())
    with pytest.raises(ValueError, match="sigma must be > 0"):
        sample_trajectories(policy, g, machine, 2, 0.0, torch.Generator())


def test_losses_are_the_papers() -> None:
    log_r = torch.tensor([1.0, 2.0, 0.5])
    log_pf = torch.tensor([-3.0, -1.0, -2.0])
    log_pb = torch.tensor([-1.0, -0.5, -2.5])
    zeta = log_r + log_pb - log_pf
    expected = ((zeta - zeta.mean()) ** 2).mean()
    assert torch.isclose(log_partition_variance_loss(log_r, log_pf, log_pb), expected)
    constant = log_partition_variance_loss(log_r, log_pf, log_pb - zeta + 3.0)
    assert float(constant) == pytest.approx(0.0, abs=1e-12)
    log_z = torch.tensor(0.7)
    tb = trajectory_balance_loss(log_z, log_r, log_pf, log_pb)
    assert torch.isclose(tb, ((log_z - zeta) ** 2).mean())


def train(loss_name: str, steps: int) -> tuple[float, float]:
    """Mean sampled speedup of a small policy before and after `steps` seeded updates."""
    g = generate("layered", 8, seed=1)
    machine = Machine(n_devices=2)
    scorer = Scorer(g, machine)
    masks = relation_masks(g)
    sigma = 0.1
    torch.manual_seed(0)
    policy = GFlowNetPolicy(GFlowNetConfig(n_devices=2, hidden=32, layers=2, heads=4, condition=16))
    optimizer = torch.optim.Adam(policy.parameters(), 3e-3)

    def mean_speedup() -> float:
        with torch.no_grad():
            sampled = sample_trajectories(
                policy, g, machine, 128, sigma, torch.Generator().manual_seed(123), masks
            )
        return float(sampled.schedules.speedups(scorer).mean())

    before = mean_speedup()
    for step in range(steps):
        sampled = sample_trajectories(
            policy, g, machine, 16, sigma, torch.Generator().manual_seed(step), masks
        )
        speedups = sampled.schedules.speedups(scorer)
        log_r = torch.from_numpy(log_reward(speedups, machine.n_devices, sigma)).float()
        if loss_name == "variance":
            loss = log_partition_variance_loss(log_r, sampled.log_pf, sampled.log_pb)
        else:
            empty = torch.from_numpy(type(sampled.schedules)(g, machine, 1).features())
            log_z = policy.log_partition(empty, masks, sampled.log_sigma[:1])
            loss = trajectory_balance_loss(log_z, log_r, sampled.log_pf, sampled.log_pb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return before, mean_speedup()


def test_the_log_partition_variance_loss_raises_the_sampled_speedup() -> None:
    before, after = train("variance", 40)
    assert after > before + 0.05, (before, after)


def test_trajectory_balance_trains_its_log_partition_head() -> None:
    before, after = train("balance", 40)
    assert after > before, (before, after)


def test_asking_for_some_rows_gives_those_rows_of_the_full_encoding() -> None:
    """Sampling computes only the ready and removable ops in the last layer; the others stay
    keys and values, so those rows equal the full network's."""
    g = generate("erdos_renyi", 15, seed=3)
    machine = Machine(n_devices=2)
    torch.manual_seed(0)
    policy = GFlowNetPolicy(SMALL).eval()
    schedules = PartialSchedules(g, machine, 3)
    rng = np.random.default_rng(0)
    for _ in range(5):
        ready = schedules.forward_mask()
        schedules.step(np.array([rng.choice(np.flatnonzero(r)) for r in ready]), np.zeros(3))
    masks = relation_masks(g)
    features = torch.from_numpy(schedules.features())
    log_sigma = torch.log(torch.tensor([0.1, 0.5, 1.0]))
    rows = torch.tensor([[0, 4, 7], [1, 1, 2], [14, 3, 0]])
    with torch.no_grad():
        full_forward, full_backward, _ = policy(features, masks, log_sigma)
        forward, backward, _ = policy(features, masks, log_sigma, rows)
    picked = torch.arange(3)[:, None]
    assert torch.allclose(forward, full_forward[picked, rows], atol=1e-5)
    assert torch.allclose(backward, full_backward[picked, rows], atol=1e-5)


def test_the_list_prior_starts_the_policy_as_a_randomized_list_scheduler() -> None:
    g = generate("erdos_renyi", 30, seed=4)
    machine = Machine(n_devices=4)
    problem = Problem(g, machine, Objective.MAKESPAN)
    listed = make_solver("critical-path").solve(problem, Budget(evaluations=1), seed=0)
    list_speedup = g.total_runtime / listed.solution.objective["makespan"]
    scorer = Scorer(g, machine)
    means = {}
    for prior in ("none", "list"):
        torch.manual_seed(0)
        policy = GFlowNetPolicy(GFlowNetConfig(n_devices=4, hidden=16, heads=4, prior=prior))
        with torch.no_grad():
            sampled = sample_trajectories(
                policy, g, machine, 32, 0.005, torch.Generator().manual_seed(1)
            )
            replay = replay_trajectories(policy, g, machine, sampled.actions, 0.005)
        assert torch.allclose(replay.log_pf.sum(dim=1), sampled.log_pf, atol=1e-3)
        speedups = sampled.schedules.speedups(scorer)
        means[prior] = speedups.mean()
        if prior == "list":
            assert speedups.max() >= 0.9 * list_speedup, (speedups.max(), list_speedup)
            assert len({tuple(o) for o in sampled.schedules.order.tolist()}) > 16  # still random
            x = torch.from_numpy(PartialSchedules(g, machine, 1).features())
            with pytest.raises(ValueError, match="needs the states' list_prior"):
                policy(x, relation_masks(g), torch.zeros(1))
    assert means["list"] > means["none"] + 0.5, means
