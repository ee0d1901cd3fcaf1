"""HDP's per-graph REINFORCE search: exact, reproducible, budgeted, and its reward rises."""

from __future__ import annotations

import numpy as np
import pytest

from graphopt.costmodels._reference import reference_score
from graphopt.costmodels.machine import Machine
from graphopt.ir.generators import generate
from graphopt.learning.systems.hdp.config import HDPConfig
from graphopt.learning.systems.hdp.solver import HDP
from graphopt.learning.systems.hdp.train import HDPTrainer
from graphopt.solvers.base import Budget, Problem, SolverError


def test_solutions_rescore_exactly_keep_pins_and_spend_the_whole_budget() -> None:
    graph = generate("layered", 30, seed=2)
    machine = Machine(n_devices=4, latency=1e-3, bandwidth=1e7)
    pins = np.full(graph.n_ops, -1)
    pins[[0, 7]] = 3
    problem = Problem(graph, machine, "makespan", pins)
    result = HDP().solve(problem, Budget(evaluations=200), seed=0)
    assert result.evaluations == 200  # 12 steps of 16 samples, then a last step of 8
    assert (result.solution.placement[[0, 7]] == 3).all()
    assert reference_score(graph, result.solution, machine).makespan == result.value
    assert result.solution.solver["name"] == "hdp"


def test_the_same_seed_gives_the_same_solution() -> None:
    problem = Problem(generate("sbm", 40, seed=3), Machine(2, latency=1e-3), "makespan")
    first, second = (HDP().solve(problem, Budget(evaluations=96), seed=5) for _ in range(2))
    assert first.value == second.value
    np.testing.assert_array_equal(first.solution.placement, second.solution.placement)
    np.testing.assert_array_equal(first.solution.order, second.solution.order)
    assert first.trace.value == second.trace.value


def test_a_time_budget_ends_the_search() -> None:
    problem = Problem(generate("layered", 30, seed=2), Machine(2, latency=1e-3), "makespan")
    result = HDP().solve(problem, Budget(seconds=0.3), seed=0)
    assert result.seconds < 5 and result.evaluations % 16 == 0 and result.evaluations > 0


def test_reinforce_raises_the_sampled_reward_on_a_toy_problem() -> None:
    """Transfers cost more than the ops they feed: random placements are far from the best."""
    graph = generate("layered", 40, seed=1)
    trainer = HDPTrainer(graph, Machine(2, latency=1.0, bandwidth=1e5), seed=0)
    rewards = [trainer.step().reward for _ in range(30)]
    assert np.mean(rewards[-5:]) > np.mean(rewards[:5]) + 0.2
    assert trainer.env.step(trainer.most_likely()).reward[0] > np.mean(rewards[:5]) + 0.2


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("groups", 0, "hdp groups must be an integer >= 1, got 0"),
        ("hidden", 2.5, "hdp hidden must be an integer >= 1, got 2.5"),
        ("samples", True, "hdp samples must be an integer >= 1, got True"),
        ("learning_rate", 0.0, r"hdp learning_rate must be a number > 0, got 0\.0"),
        ("baseline_decay", 1.0, r"hdp baseline_decay must be a number in \[0, 1\), got 1\.0"),
        ("entropy_weight", float("nan"), "hdp entropy_weight must be a number >= 0, got nan"),
    ],
)
def test_bad_settings_are_refused_in_one_line(field: str, value: object, message: str) -> None:
    with pytest.raises(SolverError, match=f"^{message}$"):
        HDPConfig(**{field: value})
