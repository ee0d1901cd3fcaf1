import numpy as np
import pytest
import torch

from graphopt.costmodels.machine import Machine
from graphopt.ir.generators import generate
from graphopt.learning.saving import save_checkpoint
from graphopt.learning.systems.regal import checkpoints
from graphopt.learning.systems.regal.actions import ActionConfig
from graphopt.learning.systems.regal.checkpoints import policy_record
from graphopt.learning.systems.regal.config import PolicyConfig
from graphopt.learning.systems.regal.env import InnerSearch
from graphopt.learning.systems.regal.network import RegalPolicy
from graphopt.learning.systems.regal.solver import Regal, RegalConfig, shipped_policies
from graphopt.optimize import optimize
from graphopt.solvers.base import Budget, Problem, SolverError
from graphopt.solvers.registry import make_solver


@pytest.fixture(scope="module")
def policy_file(tmp_path_factory):
    """An untrained policy with random heads (so that ops get different distributions)."""
    torch.manual_seed(1)
    network = RegalPolicy(PolicyConfig(rounds=2, actions=ActionConfig(elite_bias=True)))
    for head in [*network.beta_heads, network.bias_head]:
        torch.nn.init.normal_(head[-1].weight)
    path = tmp_path_factory.mktemp("policy") / "peak.pt"
    save_checkpoint(path, policy_record(network, "peak-memory", "brkga", 400))
    return str(path)


@pytest.mark.parametrize("search", ["brkga", "random"])
def test_budget_is_exact_and_result_rescored(policy_file, search) -> None:
    graph = generate("layered", 60, seed=3)
    problem = Problem(graph, Machine(n_devices=2))
    solver = Regal(RegalConfig(policy=policy_file, search=search))
    result = solver.solve(problem, Budget(1500, stop_at_bound=False), seed=2)
    assert result.evaluations == 1500
    assert result.value == problem.scorer.score(result.solution).peak_memory
    again = Regal(RegalConfig(policy=policy_file, search=search)).solve(
        problem, Budget(1500, stop_at_bound=False), seed=2
    )
    assert again.value == result.value
    np.testing.assert_array_equal(again.solution.order, result.solution.order)


def test_sampled_actions(policy_file) -> None:
    problem = Problem(generate("erdos_renyi", 40, seed=3), Machine(n_devices=2))
    result = Regal(RegalConfig(policy=policy_file, greedy=False)).solve(
        problem, Budget(800, stop_at_bound=False), seed=1
    )
    assert result.evaluations == 800


def test_budget_smaller_than_the_feature_run(policy_file) -> None:
    problem = Problem(generate("layered", 30, seed=3), Machine(n_devices=2))
    result = Regal(RegalConfig(policy=policy_file)).solve(problem, Budget(150, stop_at_bound=False))
    assert result.evaluations == 150


def test_starts_from_the_feature_run_so_never_worse_than_it(policy_file) -> None:
    problem = Problem(generate("erdos_renyi", 80, seed=5), Machine(n_devices=2))
    full = Regal(RegalConfig(policy=policy_file)).solve(problem, Budget(evaluations=2000), seed=0)
    features_only = Regal(RegalConfig(policy=policy_file)).solve(
        problem, Budget(evaluations=400), seed=0
    )
    assert full.value <= features_only.value


@pytest.mark.parametrize("inner", [InnerSearch(kept=1), InnerSearch(brkga="tuned", kept=10)])
def test_the_recorded_inner_search_is_used(tmp_path, inner) -> None:
    torch.manual_seed(1)
    network = RegalPolicy(PolicyConfig(rounds=2))
    problem = Problem(generate("layered", 60, seed=3), Machine(n_devices=2), "makespan")
    results = []
    for name, search in (("inner", inner), ("default", None)):
        path = tmp_path / f"{name}.pt"
        save_checkpoint(path, policy_record(network, "makespan", "brkga", 400, search))
        solver = Regal(RegalConfig(policy=str(path)))
        results.append(solver.solve(problem, Budget(1500, stop_at_bound=False), seed=2))
    assert results[0].evaluations == 1500
    assert results[0].value == problem.scorer.score(results[0].solution).makespan
    assert not np.array_equal(results[0].solution.order, results[1].solution.order)


def test_inner_search_errors() -> None:
    with pytest.raises(SolverError, match="kept must be >= 1"):
        InnerSearch(kept=0)
    with pytest.raises(SolverError, match="no BRKGA preset named 'nope'"):
        InnerSearch(brkga="nope")


def test_refuses_a_policy_for_another_problem(policy_file) -> None:
    graph = generate("layered", 30, seed=3)
    with pytest.raises(SolverError, match="trained for 2 devices; the machine has 3"):
        Regal(RegalConfig(policy=policy_file)).solve(
            Problem(graph, Machine(n_devices=3)), Budget(evaluations=500)
        )
    with pytest.raises(SolverError, match="not makespan"):
        Regal(RegalConfig(policy=policy_file)).solve(
            Problem(graph, Machine(n_devices=2), "makespan"), Budget(evaluations=500)
        )


def test_no_shipped_policy_for_three_devices() -> None:
    with pytest.raises(SolverError, match="no shipped regal policy for peak-memory on 3 devices"):
        optimize(generate("layered", 20, seed=0), Machine(n_devices=3), solver="regal")


def test_policy_option_needs_a_learned_solver(policy_file) -> None:
    with pytest.raises(SolverError, match="learned solvers"):
        make_solver("brkga", policy_file)
    result = optimize(
        generate("layered", 20, seed=0),
        Machine(n_devices=2),
        solver="idrs",
        policy=policy_file,
        evaluations=600,
    )
    assert result.solution.solver["name"] == "idrs"
    assert result.solution.solver["search"] == "random"


def test_a_graph_ten_times_larger_than_training_graphs_runs(policy_file) -> None:
    problem = Problem(generate("layered", 3000, seed=1), Machine(n_devices=2))
    result = Regal(RegalConfig(policy=policy_file)).solve(problem, Budget(evaluations=600))
    assert result.evaluations == 600
    assert result.value == problem.scorer.score(result.solution).peak_memory


@pytest.mark.parametrize("solver", ["regal", "gas", "idrs"])
@pytest.mark.parametrize("objective", ["peak-memory", "makespan"])
def test_shipped_policies_run_zero_shot(solver, objective) -> None:
    assert {"regal-peak-memory-d2.pt", "regal-makespan-d2.pt"} <= set(shipped_policies())
    graph = generate("sbm", 120, seed=11)
    result = optimize(graph, Machine(n_devices=2), objective, solver=solver, evaluations=1000)
    assert result.evaluations == 1000 and result.solution.solver["name"] == solver
    score = Problem(graph, Machine(n_devices=2)).scorer.score(result.solution)
    assert result.value == (score.peak_memory if objective == "peak-memory" else score.makespan)


def test_a_policy_whose_outputs_overflow_is_refused(policy_file, monkeypatch) -> None:
    forward = RegalPolicy.forward

    def overflowing(self, batch):
        return forward(self, batch) * float("inf")

    monkeypatch.setattr(RegalPolicy, "forward", overflowing)
    # Loading probes the outputs on a 3-op graph; weights can still overflow on larger graphs.
    monkeypatch.setattr(checkpoints, "_check_outputs", lambda *args: None)
    problem = Problem(generate("layered", 30, seed=3), Machine(n_devices=2))
    with pytest.raises(SolverError, match="non-finite logits"):
        Regal(RegalConfig(policy=policy_file)).solve(problem, Budget(evaluations=800))
