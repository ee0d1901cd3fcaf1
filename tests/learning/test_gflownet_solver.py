"""The GFlowNet solver: sampling from a checkpoint, refusals and top-K candidates."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from graphopt.costmodels.machine import Machine
from graphopt.costmodels.targets import TargetModel
from graphopt.evaluation.candidates import candidate_report, top_candidates
from graphopt.ir.generators import generate
from graphopt.learning.gflownet import GFlowNet, GFlowNetSamplerConfig, gflownet
from graphopt.solvers.base import Budget, Objective, Problem, SolverError
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
    assert full.solve(problem(), Budget(evaluations=1000)).solution.solver["evaluations"] == 30


def test_checkpoints_that_do_not_fit_are_refused(checkpoint) -> None:
    with pytest.raises(SolverError, match="no shipped GFlowNet policy yet"):
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
