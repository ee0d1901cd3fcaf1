"""REINFORCE learns: on a seeded toy bandit, its expected reward rises to the best arm's."""

import pytest
import torch

from graphopt.learning.objectives.reinforce import reinforce_loss
from graphopt.learning.systems.regal.network import antithetic_actions

ARM_REWARDS = torch.tensor([0.0, 0.2, 0.5, 1.0])


def _train(advantage: str, steps: int = 300, samples: int = 4) -> tuple[float, float]:
    """Expected reward of a softmax policy over 4 arms before and after training."""
    generator = torch.Generator().manual_seed(0)
    logits = torch.zeros(4, requires_grad=True)
    baseline = torch.zeros(1, requires_grad=True)
    optimizer = torch.optim.Adam([logits, baseline], lr=0.05)
    before = float(torch.softmax(logits, 0) @ ARM_REWARDS)
    for _ in range(steps):
        probabilities = torch.softmax(logits, 0)
        arms = torch.multinomial(probabilities.detach(), samples, True, generator=generator)
        log_p = torch.log_softmax(logits, 0)[arms].reshape(samples, 1)
        entropy = -(probabilities * torch.log_softmax(logits, 0)).sum().reshape(1)
        loss = reinforce_loss(
            log_p, ARM_REWARDS[arms].reshape(samples, 1), baseline, entropy, advantage, 1.0
        )
        optimizer.zero_grad()
        loss.total.backward()
        optimizer.step()
    return before, float(torch.softmax(logits, 0) @ ARM_REWARDS)


@pytest.mark.parametrize("advantage", ["baseline", "sample-mean"])
def test_reinforce_raises_the_expected_reward_of_a_toy_bandit(advantage) -> None:
    before, after = _train(advantage)
    assert before == pytest.approx(0.425)
    assert after > 0.9


def test_the_baseline_term_fits_the_mean_reward() -> None:
    baseline = torch.zeros(1, requires_grad=True)
    optimizer = torch.optim.SGD([baseline], lr=0.5)
    reward = torch.tensor([[1.0], [3.0]])
    for _ in range(50):
        loss = reinforce_loss(torch.zeros(2, 1), reward, baseline, torch.zeros(1), "baseline", 1.0)
        optimizer.zero_grad()
        loss.total.backward()
        optimizer.step()
    assert float(baseline) == pytest.approx(2.0, abs=1e-4)


def test_antithetic_leave_one_out_leaves_the_partner_out_and_normalize_scales() -> None:
    reward = torch.tensor([[1.0], [2.0], [4.0], [8.0]])  # pairs (0, 2) and (1, 3)
    log_p = torch.zeros(4, 1, requires_grad=True)
    zero = torch.zeros(1)
    loss = reinforce_loss(log_p, reward, zero, zero, "sample-mean", antithetic=True)
    loss.policy.backward()
    # Each baseline is the other pair's mean: samples 0 and 2 against 1 and 3 (mean 5), and
    # 1 and 3 against 0 and 2 (mean 2.5).
    expected = -torch.tensor([[1 - 5.0], [2 - 2.5], [4 - 5.0], [8 - 2.5]]) / 4
    assert torch.allclose(log_p.grad, expected)
    log_p.grad = None
    loss = reinforce_loss(log_p, reward, zero, zero, "sample-mean", normalize=True)
    loss.policy.backward()
    plain = reward - (reward.sum() - reward) / 3
    assert torch.allclose(log_p.grad, -plain / reward.std() / 4)


def test_antithetic_bandit_learns_too() -> None:
    generator = torch.Generator().manual_seed(0)
    logits = torch.zeros(4, requires_grad=True)
    optimizer = torch.optim.Adam([logits], lr=0.05)
    for _ in range(300):
        arms = antithetic_actions(logits.detach().reshape(1, 1, 4), generator, 4).reshape(4)
        log_p = torch.log_softmax(logits, 0)[arms].reshape(4, 1)
        zero = torch.zeros(1)
        loss = reinforce_loss(
            log_p, ARM_REWARDS[arms].reshape(4, 1), zero, zero, "sample-mean", antithetic=True
        )
        optimizer.zero_grad()
        loss.total.backward()
        optimizer.step()
    assert float(torch.softmax(logits, 0) @ ARM_REWARDS) > 0.9
