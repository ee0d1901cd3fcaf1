"""The PPO baseline: its clipped objective, replaying trajectories, that it learns, exact resume,
its config checks, and that its policies are sampled at the temperature they were trained at."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator

import numpy as np
import pytest
import torch
from test_train_gflownet import rows, tiny, weights

from graphopt.costmodels.machine import Machine
from graphopt.costmodels.score import Scorer
from graphopt.ir.generators import generate
from graphopt.learning.encoders.topoformer import relation_masks
from graphopt.learning.objectives.ppo import PPOConfig, ppo_loss, trajectory_advantages
from graphopt.learning.run_dir import TrainingError
from graphopt.learning.runs import RunState
from graphopt.learning.systems.gflownet.config import GFlowNetConfig, TrainConfig
from graphopt.learning.systems.gflownet.env import PartialSchedules
from graphopt.learning.systems.gflownet.network import GFlowNetPolicy
from graphopt.learning.systems.gflownet.sampling import replay_trajectories, sample_trajectories
from graphopt.learning.systems.gflownet.solver import GFlowNet, GFlowNetSamplerConfig
from graphopt.learning.systems.gflownet.train import SYSTEM, _ppo_step
from graphopt.learning.training import train
from graphopt.solvers.base import Objective, Problem

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


def test_ppo_steps_raise_the_sampled_speedup() -> None:
    """40 steps of the trainer's PPO step (default settings: 4 epochs of 4 minibatches) on one
    8-op graph: the schedules sampled at sigma = 0.25 get faster (1.34 -> 1.83 when written)."""
    config = TrainConfig.from_dict(
        {
            "loss": "ppo",
            "policy": {"n_devices": 2, "hidden": 32, "layers": 2, "heads": 4, "condition": 16},
            "sampling": {"trajectories": 16},
            "optimizer": {"learning_rate": 3e-3},
            "run": {"steps": 40},
        }
    )
    g = generate("layered", 8, seed=1)
    machine = Machine(n_devices=2)
    scorer, masks = Scorer(g, machine), relation_masks(g)
    torch.manual_seed(0)
    policy = GFlowNetPolicy(config.policy)
    optimizer = config.optimizer.optimizer(policy.parameters())
    speedups = []
    for step in range(40):
        rng = np.random.default_rng([0, step])
        row = _ppo_step(config, policy, optimizer, g, scorer, masks, rng, step)
        speedups.append(row["speedup"])
    first, last = np.mean(speedups[:5]), np.mean(speedups[-5:])
    assert last > first + 0.25, (first, last)
    assert row["clip_fraction"] < 0.5 and row["entropy"] < 1.0


def test_a_ppo_run_resumed_after_a_kill_continues_exactly(toy_dataset, tmp_path) -> None:
    """The decays depend on run.steps, so the split run is killed at step 4 of 6 rather than
    trained for 4 steps first."""
    ppo = {"epochs": 2, "minibatches": 2, "entropy_weight_end": 0.001, "learning_rate_end": 0.3}
    config = dataclasses.replace(tiny(toy_dataset, 6, ppo=ppo), loss="ppo")
    straight, split = tmp_path / "straight", tmp_path / "split"
    train("gflownet", config, straight)
    log = rows(straight)
    assert [int(r["step"]) for r in log] == list(range(7))
    assert all(float(r["sigma"]) == 0.25 and r["clip_fraction"] for r in log[1:])

    class Killed(Exception):
        pass

    def kill_at_4(row: dict[str, float]) -> None:
        if row["step"] == 4:
            raise Killed

    with pytest.raises(Killed):
        train("gflownet", config, split, progress=kill_at_4)
    train("gflownet", config, split, resume=True)
    assert rows(split) == log
    for key, value in weights(straight / "last.pt").items():
        assert torch.equal(value, weights(split / "last.pt")[key]), key
    adam = torch.load(straight / "last.pt", weights_only=True)["optimizer_state"]
    assert float(adam["state"][0]["step"]) == 6 * 4  # every update of every step


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"clip": 1.5}, r"ppo\.clip must be in \(0, 1\), got 1.5"),
        ({"epochs": 0}, r"ppo\.epochs must be in \[1, 1000\], got 0"),
        ({"sigma": 0}, r"ppo\.sigma must be > 0"),
        ({"entropy_weight_end": -0.1}, r"ppo\.entropy_weight_end must be >= 0"),
        ({"learning_rate_end": 0.0}, r"ppo\.learning_rate_end must be in \(0, 1\]"),
        ({"normalize_advantages": 1}, r"ppo\.normalize_advantages must be true or false"),
        ({"minibatches": 9}, r"ppo\.minibatches must be at most sampling\.trajectories \(8\)"),
        ({"epoch": 2}, r"unknown GFlowNet training config field\(s\): ppo\.epoch;"),
    ],
)
def test_bad_ppo_fields_are_refused_in_one_line_naming_them(tmp_path, values, message) -> None:
    data = {**dataclasses.asdict(tiny(tmp_path, 2)), "loss": "ppo"}
    data["ppo"] = {**data["ppo"], **values}
    with pytest.raises(TrainingError, match=message) as error:
        TrainConfig.from_dict(data)
    assert "\n" not in str(error.value)


def test_the_solver_samples_a_ppo_policy_at_its_training_temperature(tmp_path) -> None:
    problem = Problem(generate("layered", 10, seed=0), Machine(2), Objective.MAKESPAN)
    for loss, expected in (("ppo", 0.3), ("variance", 0.005)):
        config = TrainConfig(loss=loss, policy=SMALL, ppo=PPOConfig(sigma=0.3))
        path = tmp_path / f"{loss}.pt"
        SYSTEM.save(path, GFlowNetPolicy(SMALL), None, config, RunState())
        assert GFlowNet(GFlowNetSamplerConfig(str(path))).policy(problem)[1] == expected
        chosen = GFlowNet(GFlowNetSamplerConfig(str(path), sigma=0.7)).policy(problem)[1]
        assert chosen == 0.7
    assert TrainConfig(loss="ppo").inference_sigma == 0.25


def test_the_shipped_ppo_config_is_the_gflownet_setting_with_ppo() -> None:
    ppo, gflownet = TrainConfig.load("gflownet-ppo"), TrainConfig.load("gflownet")
    assert ppo.loss == "ppo" and ppo.ppo == PPOConfig() and ppo.inference_sigma == 0.25
    same = ("dataset", "policy", "proxy", "optimizer", "run")
    assert all(getattr(ppo, name) == getattr(gflownet, name) for name in same)
    assert ppo.sampling.trajectories == gflownet.sampling.trajectories == 100
