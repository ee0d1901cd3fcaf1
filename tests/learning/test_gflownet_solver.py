"""The GFlowNet solver: sampling from a checkpoint, refusals and top-K candidates."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import graphopt.learning.systems.gflownet.solver as gflownet_module
from graphopt.cli import app
from graphopt.costmodels.machine import Machine
from graphopt.costmodels.score import Scorer
from graphopt.costmodels.targets import TargetModel
from graphopt.evaluation.candidates import candidate_report
from graphopt.ir.generators import generate
from graphopt.ir.io import read_solution, write_graph
from graphopt.learning.saving import read_checkpoint
from graphopt.learning.systems.gflownet.config import (
    GFLOWNET_FORMAT,
    PLAIN,
    Decoding,
    GFlowNetConfig,
    TrainConfig,
)
from graphopt.learning.systems.gflownet.solver import (
    CHUNK,
    CHUNK_SCORES,
    GFlowNet,
    GFlowNetSamplerConfig,
    chunk_size,
    gflownet,
)
from graphopt.optimize import optimize
from graphopt.papers.gflownet import temperature_sweep
from graphopt.solvers.base import Budget, Objective, Problem, SolverError
from graphopt.solvers.candidates import top_candidates
from graphopt.solvers.list_scheduling import HEFT_VARIANTS
from graphopt.solvers.registry import make_solver
from learned import save_untrained_gflownet

SHIPPED = Path(__file__).parents[2] / "src" / "graphopt" / "policies"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("gflownet") / "best.pt"
    save_untrained_gflownet(path, n_devices=2)
    return path


def problem(n_ops: int = 12, devices: int = 2) -> Problem:
    return Problem(generate("layered", n_ops, seed=5), Machine(devices), Objective.MAKESPAN)


def test_samples_are_offered_until_the_budget_ends(checkpoint) -> None:
    result = gflownet(str(checkpoint)).solve(problem(), Budget(evaluations=40), seed=1)
    assert result.solution.solver["evaluations"] == 40
    again = gflownet(str(checkpoint)).solve(problem(), Budget(evaluations=40), seed=1)
    assert again.value == result.value
    full = GFlowNet(GFlowNetSamplerConfig(str(checkpoint), samples=30))
    # 30 samples and HEFT's four schedules (plain and the timeline variants)
    assert full.solve(problem(), Budget(evaluations=1000)).solution.solver["evaluations"] == 34
    assert len(full.heft) == 1 + len(HEFT_VARIANTS) == 4


def test_checkpoints_that_do_not_fit_are_refused(checkpoint, monkeypatch) -> None:
    paper = str(SHIPPED / "gflownet-paper-makespan-d4.pt")  # the paper's policy: 4 devices
    with pytest.raises(SolverError, match="policy for 4 devices, the machine has 2"):
        gflownet(paper).solve(problem(), Budget(evaluations=10))
    assert gflownet(paper).solve(problem(devices=4), Budget(evaluations=6)).evaluations == 6
    with monkeypatch.context() as patch:
        patch.setattr(gflownet_module, "shipped_policy_path", lambda *_: None)
        with pytest.raises(SolverError, match="no shipped gflownet policy for makespan on 2 dev"):
            gflownet().solve(problem(), Budget(evaluations=10))
    with pytest.raises(SolverError, match="policy for 2 devices, the machine has 3"):
        gflownet(str(checkpoint)).solve(problem(devices=3), Budget(evaluations=10))
    with pytest.raises(SolverError, match="graphopt.gflownet-policy/1"):
        gflownet(str(SHIPPED / "regal-makespan-d2.pt")).solve(problem(), Budget(evaluations=10))
    with pytest.raises(SolverError, match="does not optimize peak-memory"):
        peak = Problem(generate("layered", 8, seed=0), Machine(2), Objective.PEAK_MEMORY)
        gflownet(str(checkpoint)).solve(peak, Budget(evaluations=10))
    for bad, message in ((dict(samples=0), "samples must be >= 1"), (dict(sigma=0.0), "sigma")):
        with pytest.raises(SolverError, match=message):
            GFlowNetSamplerConfig(str(checkpoint), **bad)


def test_top_candidates_are_the_best_distinct_schedules(checkpoint) -> None:
    p = problem()
    solver = GFlowNet(GFlowNetSamplerConfig(str(checkpoint), samples=40))
    schedules = [s for batch in solver.batches(p, np.random.default_rng(0)) for s in batch]
    best = top_candidates(p, schedules, 5)
    makespans = [p.scorer.score(s).makespan for s in best]
    assert makespans == sorted(makespans) and len(best) == 5
    everything = [p.scorer.evaluate(pl, ev)[1] for pl, ev in schedules]
    assert makespans[0] == min(everything)
    keys = {s.placement.tobytes() + s.order.tobytes() for s in best}
    assert len(keys) == 5
    with pytest.raises(SolverError, match="K >= 1"):
        top_candidates(p, schedules, 0)
    with pytest.raises(SolverError, match="at least K = 41 samples"):
        top_candidates(p, schedules, 41)


def test_the_candidate_report_scores_the_top_k_on_each_target(checkpoint) -> None:
    p = problem()
    solver = GFlowNet(GFlowNetSamplerConfig(str(checkpoint), samples=30))
    schedules = [s for batch in solver.batches(p, np.random.default_rng(1)) for s in batch]
    targets = [TargetModel.parse(t) for t in ("noisy:0.1", "bandwidth:1e3", "latency:0.5")]
    report = candidate_report(p, schedules, 8, targets, seed=2)
    kept = top_candidates(p, schedules, 8)
    speedups = [p.scorer.score(s).speedup for s in kept]
    assert report.k == 8 and report.proxy == (max(speedups), pytest.approx(np.mean(speedups)))
    assert list(report.targets) == ["noisy:0.1", "bandwidth:1000", "latency:0.5"]
    for best, mean in report.targets.values():
        assert best >= mean > 0
    slow = report.targets["latency:0.5"][0]
    assert slow <= report.proxy[0]  # latency only delays readers on other devices
    assert report.diversity.ged >= 0 and report.diversity.d_sen >= report.diversity.d_inv


def test_pinned_ops_stay_on_their_device(checkpoint) -> None:
    graph = generate("layered", 12, seed=5)
    pinned = np.full(graph.n_ops, -1)
    pinned[[0, 3, 7]] = [1, 0, 1]
    p = Problem(graph, Machine(2), Objective.MAKESPAN, pinned)
    solver = GFlowNet(GFlowNetSamplerConfig(str(checkpoint), samples=20))
    result = solver.solve(p, Budget(evaluations=20), seed=0)
    assert list(result.solution.placement[[0, 3, 7]]) == [1, 0, 1]
    for placement, _ in solver.sampled:
        assert list(placement[[0, 3, 7]]) == [1, 0, 1]
    assert len({placement.tobytes() for placement, _ in solver.sampled}) > 1


def test_chunks_bound_the_attention_and_the_budget_cuts_sampling(checkpoint) -> None:
    paper = GFlowNetConfig(heads=4)
    assert chunk_size(100, paper) == CHUNK and chunk_size(1000, paper) == 1
    assert chunk_size(0, paper) == CHUNK
    assert chunk_size(200, paper) * 4 * 200 * 200 <= CHUNK_SCORES
    assert CHUNK_SCORES < (chunk_size(200, paper) + 1) * 160000
    solver = GFlowNet(GFlowNetSamplerConfig(str(checkpoint), samples=1000))
    result = solver.solve(problem(), Budget(evaluations=7), seed=0)
    assert result.evaluations == 7 and len(solver.sampled) == 3  # and HEFT's four
    assert len(solver.top_candidates(problem(), 100)) <= 7


def test_optimize_returns_and_the_cli_writes_the_top_k(checkpoint, tmp_path) -> None:
    graph = generate("erdos_renyi", 14, seed=2)
    result = optimize(
        graph, Machine(2), "makespan", "gflownet", 60, policy=str(checkpoint), candidates=10
    )
    assert 1 <= len(result.candidates) <= 10
    assert result.candidates[0].objective["makespan"] == result.value
    spans = [c.objective["makespan"] for c in result.candidates]
    assert spans == sorted(spans) and [c.solver["candidate"] for c in result.candidates] == list(
        range(1, len(spans) + 1)
    )
    with pytest.raises(SolverError, match=r"top-K needs K <= the 1000 schedules gflownet"):
        optimize(
            graph, Machine(2), "makespan", "gflownet", 60, policy=str(checkpoint), candidates=1001
        )
    with pytest.raises(SolverError, match="solver 'heft' keeps one solution"):
        optimize(graph, Machine(2), "makespan", "heft", 60, candidates=10)
    write_graph(graph, tmp_path / "g.json")
    args = ["optimize", str(tmp_path / "g.json"), "-o", str(tmp_path / "s.json")]
    args += ["--objective", "makespan", "--solver", "gflownet", "--policy", str(checkpoint)]
    args += ["--budget", "60", "--candidates", str(tmp_path / "top"), "--top-k", "10"]
    run = CliRunner().invoke(app, [*args, "--target", "latency:0.5", "--json"])
    assert run.exit_code == 0, run.output
    report = json.loads((tmp_path / "top" / "report.json").read_text())
    assert report["k"] == len(result.candidates)
    assert report["proxy"]["best"] == pytest.approx(result.score.speedup)
    assert report["targets"]["latency:0.5"]["best"] <= report["proxy"]["best"]
    files = sorted((tmp_path / "top").glob("candidate-*.json"))
    assert len(files) == report["k"]
    first = read_solution(files[0], graph)
    assert Scorer(graph, Machine(2)).score(first).makespan == result.value
    lone = CliRunner().invoke(app, [*args[:-4], "--target", "noisy:0.1"])
    assert lone.exit_code == 2 and "give --candidates DIR too" in lone.output


@pytest.mark.parametrize(
    ("name", "config"),
    [
        ("gflownet-makespan.pt", "gflownet-graph"),
        ("gflownet-paper-makespan-d4.pt", "gflownet"),
        ("gflownet-ppo-makespan.pt", "gflownet-graph-ppo"),
    ],
)
def test_the_shipped_policies_are_the_shipped_configs_runs(name, config) -> None:
    record = read_checkpoint(SHIPPED / name, GFLOWNET_FORMAT)
    assert TrainConfig.from_dict(json.loads(record["train_config"])) == TrainConfig.load(config)


@pytest.mark.parametrize("devices", [2, 3, 4, 8])
def test_the_default_policy_serves_every_device_count(devices) -> None:
    task = problem(devices=devices)
    result = gflownet().solve(task, Budget(evaluations=16), seed=0)
    assert result.evaluations == 16 and result.solution.solver["name"] == "gflownet"
    assert Scorer(task.graph, task.machine).score(result.solution).makespan == result.value


def test_the_checkpoint_s_decoding_is_sampled_with_unless_given(monkeypatch) -> None:
    task = problem(devices=3)
    assert gflownet().sampler(task).decoding == Decoding(0.25, 2.0)  # the shipped policy's
    given = GFlowNetSamplerConfig(logit_temperature=1.0)
    assert GFlowNet(given).sampler(task).decoding == Decoding(1.0, 2.0)
    with pytest.raises(SolverError, match="logit temperature must be > 0, got 0"):
        GFlowNetSamplerConfig(logit_temperature=0.0)
    with pytest.raises(SolverError, match="locality must be >= 0, got -2"):
        GFlowNetSamplerConfig(locality=-2.0)
    paper = str(SHIPPED / "gflownet-paper-makespan-d4.pt")
    with pytest.raises(SolverError, match="locality decoding needs a per-graph policy"):
        GFlowNet(GFlowNetSamplerConfig(paper, locality=1.0)).sampler(problem(devices=4))
    seen = []
    sample = gflownet_module.sample_trajectories

    def spy(*args, **kwargs):
        seen.append(kwargs["decoding"])
        return sample(*args, **kwargs)

    monkeypatch.setattr(gflownet_module, "sample_trajectories", spy)
    gflownet().solve(task, Budget(evaluations=5), seed=0)
    speedups = temperature_sweep(None, [0.01], 3, 12)  # fig. 3: the GFlowNet's own sigmas
    assert seen == [Decoding(0.25, 2.0), PLAIN] and speedups[0.01].shape == (3,)


@pytest.mark.parametrize("family", ["layered", "erdos_renyi", "sbm"])
def test_never_worse_than_the_heft_solver(checkpoint, family) -> None:
    """HEFT's timeline variants are candidates too: whatever the samples, the result is at
    least the `heft` solver's (which offers the same four schedules)."""
    graph = generate(family, 40, seed=11)
    task = Problem(graph, Machine(2, latency=2e-6, bandwidth=1e9), Objective.MAKESPAN)
    heft = make_solver("heft").solve(task, Budget(evaluations=100), seed=0)
    solver = gflownet(str(checkpoint))
    result = solver.solve(task, Budget(evaluations=8), seed=0)
    assert result.value <= heft.value * (1 + 1e-12)
    assert solver.heft_makespan == pytest.approx(heft.value, rel=1e-12)
    assert Scorer(graph, task.machine).score(result.solution).makespan == result.value


def test_the_shipped_ppo_policy_samples_at_its_training_temperature() -> None:
    """The per-graph PPO baseline (`gflownet-ppo-makespan.pt`), for --policy: any device count,
    its one temperature, its own distribution."""
    path = str(SHIPPED / "gflownet-ppo-makespan.pt")
    task = problem(devices=3)
    sampler = GFlowNet(GFlowNetSamplerConfig(path)).sampler(task)
    assert sampler.sigma == 0.25 and sampler.decoding == PLAIN
    result = GFlowNet(GFlowNetSamplerConfig(path)).solve(task, Budget(evaluations=12), seed=0)
    assert Scorer(task.graph, task.machine).score(result.solution).makespan == result.value
