"""The PPO baseline: its clipped objective, and replaying trajectories under the policy."""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import pytest
import torch

from graphopt.costmodels.machine import Machine
from graphopt.ir.generators import generate
from graphopt.learning.encoders.topoformer import relation_masks
from graphopt.learning.envs.gflownet import PartialSchedules
from graphopt.learning.networks.gflownet import (
    GFlowNetPolicy,
    replay_trajectories,
    sample_trajectories,
)
from graphopt.learning.networks.gflownet_config import GFlowNetConfig
from graphopt.learning.objectives.ppo import PPOConfig, ppo_loss, trajectory_advantages

SMALL = GFlowNetConfig(n_devices=2, hidden=16, layers=2, heads=4, condition=8)


@pytest.fixture(autouse=True)
def one_thread() -> Iterator[None]:
    """These networks are tiny: on 2 cores shared with another job, a second torch thread made
    these tests 5-20x slower, the threads waiting on each other at every small op."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_the_clipped_ratio_gives_no_gradient_past_the_clip_range() -> None:
    """Rows: advantage +1 and -1; columns: ratio 1.5 (above 1 + eps), 0.5 (below 1 - eps), 1.1."""
    ratios = torch.tensor([[1.5, 0.5, 1.1], [1.5, 0.5, 1.1]])
    new = ratios.log().requires_grad_()
    old = torch.zeros(2, 3)
    advantages = torch.tensor([1.0, -1.0])
    loss = ppo_loss(new, old, advantages, torch.zeros(2, 3), clip=0.2)
    loss.total.backward()
    # +A keeps min(1.5, 1.2) = 1.2 (clipped) and 0.5; -A keeps -1.5 and min(-0.5, -0.8) = -0.8
    assert float(loss.total.detach()) == pytest.approx(-(1.2 + 0.5 + 1.1 - 1.5 - 0.8 - 1.1) / 6)
    # d/d log ratio of -ratio * A / 6 where unclipped; zero where the clipped term is the min
    expected = torch.tensor([[0.0, -0.5 / 6, -1.1 / 6], [1.5 / 6, 0.0, 1.1 / 6]])
    assert torch.allclose(new.grad, expected)
    assert float(loss.clip_fraction) == pytest.approx(4 / 6)
    assert float(loss.approx_kl) > 0


def test_padding_steps_and_the_entropy_bonus() -> None:
    new = torch.tensor([[-1.0, -2.0], [-0.5, -9.0]], requires_grad=True)
    entropy = torch.tensor([[1.0, 2.0], [3.0, 100.0]], requires_grad=True)
    mask = torch.tensor([[True, True], [True, False]])
    advantages = torch.tensor([2.0, -1.0])
    loss = ppo_loss(new, new.detach(), advantages, entropy, 0.2, entropy_weight=0.5, mask=mask)
    loss.total.backward()
    assert float(loss.policy) == pytest.approx(-(2 + 2 - 1) / 3)
    assert float(loss.entropy) == pytest.approx((1 + 2 + 3) / 3)
    assert float(loss.total.detach()) == pytest.approx(-1 - 0.5 * 2)
    assert float(new.grad[1, 1]) == 0.0 and float(entropy.grad[1, 1]) == 0.0
    assert float(loss.clip_fraction) == 0.0 and float(loss.approx_kl) == 0.0


def test_advantages_are_the_rewards_against_their_batch() -> None:
    reward = torch.tensor([1.0, 2.0, 6.0])
    assert torch.allclose(trajectory_advantages(reward, normalize=False), reward - 3.0)
    normalized = trajectory_advantages(reward)
    assert float(normalized.mean()) == pytest.approx(0.0, abs=1e-6)
    assert float(normalized.std(unbiased=False)) == pytest.approx(1.0, abs=1e-6)
    assert torch.equal(trajectory_advantages(torch.full((4,), 2.5)), torch.zeros(4))


def test_the_decays_run_from_start_to_end() -> None:
    ppo = PPOConfig(entropy_weight_start=0.02, entropy_weight_end=0.0, learning_rate_end=0.1)
    assert ppo.entropy_weight_at(0.0) == 0.02 and ppo.entropy_weight_at(1.0) == 0.0
    assert ppo.learning_rate_factor(0.0) == 1.0
    assert ppo.learning_rate_factor(0.5) == pytest.approx(0.55)
    assert ppo.updates == 16


def test_replaying_sampled_actions_gives_the_sampled_trajectories() -> None:
    g = generate("erdos_renyi", 14, seed=3)
    machine = Machine(n_devices=2)
    torch.manual_seed(0)
    policy = GFlowNetPolicy(SMALL)
    masks = relation_masks(g)
    sigma = torch.tensor([0.05, 0.25, 1.0, 0.25, 0.5])
    with torch.no_grad():
        sampled = sample_trajectories(policy, g, machine, 5, sigma, torch.Generator(), masks)
    order, devices = sampled.schedules.order, sampled.schedules.device
    assert np.array_equal(sampled.actions.numpy() // 2, order)
    assert np.array_equal(sampled.actions.numpy() % 2, np.take_along_axis(devices, order, 1))
    assert torch.allclose(sampled.step_log_pf.sum(dim=1), sampled.log_pf, atol=1e-5)
    replay = replay_trajectories(policy, g, machine, sampled.actions, sigma, masks)
    assert torch.allclose(replay.log_pf.sum(dim=1), sampled.log_pf, atol=1e-5)
    assert torch.allclose(replay.log_pf, sampled.step_log_pf, atol=1e-5)
    for name in ("order", "device", "start", "finish"):
        assert np.array_equal(getattr(replay.schedules, name), getattr(sampled.schedules, name))
    # the first state is the empty schedule: its entropy is that of P_F over the sources
    empty = PartialSchedules(g, machine, 1)
    with torch.no_grad():
        logits = policy(torch.from_numpy(empty.features()), masks, sigma[:1].log())[0][0]
    ready = torch.from_numpy(empty.forward_mask()[0])
    first = torch.distributions.Categorical(logits=logits[ready].flatten()).entropy()
    entropy = replay.entropy.detach()
    assert float(entropy[0, 0]) == pytest.approx(float(first), abs=1e-5)
    assert bool((entropy >= 0).all())
    assert float(entropy[:, -1].max()) < 1e-5 + math.log(2)  # one op left, on 2 devices
    (replay.log_pf.sum() + replay.entropy.sum()).backward()
    assert all(p.grad is not None for p in policy.forward_head.parameters())
