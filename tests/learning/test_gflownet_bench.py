"""Paper 004's benchmark suites: candidate sets, target scaling, reports, and the CLI."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from graphopt.cli import app
from graphopt.costmodels.machine import Machine
from graphopt.ir.generators import generate
from graphopt.papers.gflownet import (
    FAMILIES,
    GFlowNetBench,
    brkga_schedules,
    generalization,
    list_scheduling_schedules,
    summarize,
    target_models,
)
from graphopt.solvers.base import Objective, Problem, SolverError
from learned import save_untrained_gflownet


@pytest.fixture(scope="module")
def policy(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("bench") / "best.pt"
    save_untrained_gflownet(path, n_devices=4)
    return str(path)


def test_targets_are_scaled_to_the_graph() -> None:
    graph = generate("erdos_renyi", 30, seed=1)
    noisy, bandwidth, latency = target_models(graph)
    runtime = graph.total_runtime / graph.n_ops
    sizes = graph.tensor_size[graph.tensor_size > 0]
    assert (noisy.kind, noisy.value) == ("noisy", 0.5)
    assert latency.kind == "latency" and latency.value == pytest.approx(runtime)
    assert bandwidth.kind == "bandwidth"
    assert sizes.mean() / bandwidth.value == pytest.approx(runtime)


def test_brkga_candidates_are_its_final_population_best_first() -> None:
    problem = Problem(generate("layered", 20, seed=2), Machine(4), Objective.MAKESPAN)
    schedules = brkga_schedules(problem, 600, seed=0)
    assert len(schedules) == 100
    spans = [problem.scorer.evaluate(p, e)[1] for p, e in schedules]
    assert spans[0] == min(spans) and spans == sorted(spans)
    again = brkga_schedules(problem, 600, seed=0)
    assert all((a[1] == b[1]).all() for a, b in zip(schedules, again, strict=True))
    (only,) = list_scheduling_schedules(problem)
    assert problem.scorer.evaluate(*only)[1] > 0


def test_generalization_rows_rescore_and_summarize(policy) -> None:
    rows = generalization({"gflownet": policy}, 1, 12, 24, 300, lambda _: None)
    assert [r["family"] for r in rows[::4]] == list(FAMILIES)
    assert {r["method"] for r in rows} == {"list-scheduling", "heft", "brkga", "gflownet"}
    for row in rows:
        assert row["proxy_best"] >= row["proxy_mean"] > 0
        if row["method"] in ("list-scheduling", "heft"):
            assert row["k"] == 1 and row["ged"] == row["d_sen"] == 0
        else:
            assert row["k"] > 1 and row["d_sen"] >= row["d_inv"]
    summary = summarize(rows)
    gflownet = next(s for s in summary if s["method"] == "gflownet")
    values = [r["proxy_mean"] for r in rows if r["method"] == "gflownet"]
    assert gflownet["n"] == 5 and gflownet["proxy_mean"] == pytest.approx(np.mean(values))
    assert gflownet["proxy_mean_ci"] > 0


def test_the_cli_runs_the_temperature_sweep_and_the_loss_curves(
    policy, toy_dataset, tmp_path
) -> None:
    out = tmp_path / "out"
    args = ["bench", "gflownet-temperature", "--policy", policy, "--samples", "6", "-o", str(out)]
    run = CliRunner().invoke(app, [*args, "--json"])
    assert run.exit_code == 0, run.output
    with (out / "gflownet-temperature" / "temperatures.csv").open() as file:
        sweep = list(csv.DictReader(file))
    assert [float(r["sigma"]) for r in sweep] == [1.0, 0.1, 0.05, 0.01, 0.005, 0.002]
    assert (out / "gflownet-temperature" / "temperatures.png").stat().st_size > 0
    config = tmp_path / "tiny.json"
    config.write_text(
        json.dumps(
            {
                "dataset": str(toy_dataset),
                "policy": {"n_devices": 4, "hidden": 16, "layers": 1, "heads": 4},
                "sampling": {"trajectories": 4, "subgraph_ops": 12, "validation_samples": 2},
                "run": {"validation_graphs": 1},
            }
        )
    )
    bench = GFlowNetBench(seeds=2, steps=3, samples=4, config=str(config))
    report = bench.run("gflownet-losses", tmp_path / "losses", "cmd", lambda _: None)
    lines, files = report.summary, report.files
    summary = json.loads((tmp_path / "losses" / "summary.json").read_text())
    assert [row["loss"] for row in summary] == ["variance", "balance"]
    assert all(len(row["per_seed"]) == 2 for row in summary)
    assert all(Path(f).exists() for f in files) and len(lines) == 3
    bad = CliRunner().invoke(app, ["bench", "gflownet-nothing", "-o", str(out)])
    assert bad.exit_code == 2


def test_the_real_world_suite_trains_on_zoo_graphs_and_tests_on_unseen_ones(
    monkeypatch, tmp_path
) -> None:
    from graphopt.datasets import ZooSource
    from graphopt.papers import gflownet

    monkeypatch.setattr(gflownet, "REAL_TRAIN", (ZooSource("wavenet-tiny"),))
    monkeypatch.setattr(gflownet, "REAL_TEST", (ZooSource("vit-tiny"),))
    config = tmp_path / "tiny.json"
    config.write_text(
        json.dumps(
            {
                "policy": {"n_devices": 4, "hidden": 16, "layers": 1, "heads": 4},
                "sampling": {"trajectories": 4, "subgraph_ops": 30, "validation_samples": 2},
                "ppo": {"epochs": 1, "minibatches": 2},
                "run": {"validation_graphs": 1},
            }
        )
    )
    bench = GFlowNetBench(steps=2, ppo_steps=1, samples=4, evaluations=300, config=str(config))
    lines = bench.run("gflownet-real", tmp_path / "real", "cmd", lambda _: None).summary
    rows = list(csv.DictReader((tmp_path / "real" / "runs.csv").open()))
    methods = ["list-scheduling", "heft", "brkga", "gflownet", "ppo", "gflownet-synthetic"]
    assert [r["method"] for r in rows] == methods
    assert {r["graph"] for r in rows} == {"vit-tiny.inference"} and lines[0].startswith("Table 3")
    for method in ("gflownet", "ppo"):
        logged = list(csv.DictReader((tmp_path / "real" / "runs" / method / "log.csv").open()))
        sizes = {float(r["ops"]) for r in logged if r["ops"]}
        assert sizes and max(sizes) <= 45  # sub-graphs of the 69-op graph, never the test graph


def test_a_failing_method_is_recorded_and_the_suite_goes_on(policy, monkeypatch, tmp_path) -> None:
    from graphopt.papers import gflownet

    brkga = gflownet.brkga_schedules

    def refusing(problem, evaluations, seed):
        if problem.graph.name.startswith("sbm"):
            raise SolverError("brkga refuses sbm")
        return brkga(problem, evaluations, seed)

    monkeypatch.setattr(gflownet, "brkga_schedules", refusing)
    bench = GFlowNetBench(samples=4, evaluations=300, per_family=1, policy=policy)
    report = bench.run("gflownet-generalization", tmp_path, "cmd", lambda _: None)
    (line,) = report.failed
    assert line.startswith("brkga on sbm_") and line.endswith(": brkga refuses sbm")
    assert report.runs == 5 * 4
    rows = list(csv.DictReader((tmp_path / "runs.csv").open()))
    assert len(rows) == 5 * 4 - 1 and {r["family"] for r in rows} == set(FAMILIES)
    assert f"- {line}\n" in (tmp_path / "summary.md").read_text()


def test_the_zero_shot_suite_compares_the_policy_with_heft_on_unseen_zoo_graphs(
    policy, monkeypatch, tmp_path
) -> None:
    from graphopt.datasets import ZooSource
    from graphopt.papers import gflownet

    monkeypatch.setattr(gflownet, "ZERO_SHOT_TEST", (ZooSource("vit-tiny"),))
    bench = GFlowNetBench(samples=6, evaluations=300, policy=policy)
    lines = bench.run("gflownet-zero-shot", tmp_path, "cmd", lambda _: None).summary
    assert lines[0].startswith("Zero-shot: the shipped policy on 1 unseen real zoo graphs")
    rows = list(csv.DictReader((tmp_path / "runs.csv").open()))
    assert [r["method"] for r in rows] == ["list-scheduling", "heft", "brkga", "gflownet"]
    graph = gflownet.zoo_graphs((ZooSource("vit-tiny"),))[0]
    problem = Problem(graph, Machine(gflownet.DEVICES), Objective.MAKESPAN)
    ((placement, events),) = gflownet.heft_schedules(problem)
    _, heft, violations = problem.scorer.evaluate(placement, events)
    assert violations[0] == 0
    assert float(rows[1]["proxy_best"]) == pytest.approx(graph.total_runtime / heft)
    assert int(rows[3]["k"]) == 6 and float(rows[3]["d_sen"]) >= 0
