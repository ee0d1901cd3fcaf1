"""The fusion-table3 suite (GO table 3 shape) on a small generated graph with fusion fields."""

from __future__ import annotations

import csv
import dataclasses
import math

import numpy as np
import pytest
from typer.testing import CliRunner

from graphopt.cli import app
from graphopt.costmodels._reference import reference_score
from graphopt.costmodels.machine import Machine
from graphopt.costmodels.score import Scorer
from graphopt.errors import GraphoptError
from graphopt.evaluation.fusion_bench import (
    POLICIES,
    FusionBench,
    base_solution,
    run_table3,
    summarize,
    write_report,
)
from graphopt.ir.generators import generate
from graphopt.solvers.base import SolverError
from graphopt.solvers.fusion import default_fusion, greedy_fusion
from strategies import with_fusion

runner = CliRunner()
DEVICES = (1, 2)
BUDGET = 30
BASE_EVALUATIONS = 100


@pytest.fixture(scope="module")
def graph():
    plain = dataclasses.replace(generate("layered", 60, seed=3), name="layered-fused")
    return with_fusion(plain, np.random.default_rng(0))


@pytest.fixture(scope="module")
def rows(graph):
    return run_table3(
        [graph], DEVICES, tuple(POLICIES), BUDGET, seeds=2, base_evaluations=BASE_EVALUATIONS
    )


def test_one_row_per_policy_and_seed(rows) -> None:
    seeded = [name for name, policy in POLICIES.items() if policy.seeded]
    per_device = len(POLICIES) + len(seeded)  # seeded policies run both seeds, the others one
    assert len(rows) == len(DEVICES) * per_device
    for name in seeded:
        assert {(r["policy"], r["seed"]) for r in rows if r["policy"] == name} == {
            (name, 0),
            (name, 1),
        }
    for row in rows:
        assert row["reference"] == "agrees"
        if row["policy"] == "none":
            assert row["speedup"] == 1.0 and row["memory_ratio"] == 1.0 and row["groups"] == 0
    assert any(r["groups"] > 0 for r in rows)


@pytest.mark.parametrize("n_devices", DEVICES)
def test_every_policy_is_legal_rescores_identically_and_ratios_are_as_stated(
    graph, rows, n_devices
) -> None:
    machine = Machine(n_devices=n_devices)
    base = base_solution(graph, machine, BASE_EVALUATIONS)
    scorer = Scorer(graph, machine)
    unfused = scorer.score(base)
    for name, policy in POLICIES.items():
        fused = policy.run(graph, machine, base, BUDGET, 0)
        assert np.array_equal(fused.placement, base.placement)
        score = scorer.score(fused)
        truth = reference_score(graph, fused, machine)
        assert truth.peak_memory_per_device == score.peak_memory_per_device
        assert math.isclose(truth.makespan, score.makespan, rel_tol=1e-9)
        row = next(
            r for r in rows if (r["devices"], r["policy"], r["seed"]) == (n_devices, name, 0)
        )
        assert row["groups"] == fused.n_groups
        assert row["speedup"] == pytest.approx(unfused.makespan / score.makespan, rel=1e-12)
        assert row["memory_ratio"] == pytest.approx(
            score.peak_memory / unfused.peak_memory, rel=1e-12
        )
    by_hand = scorer.score(default_fusion(graph, base))
    row = next(r for r in rows if (r["devices"], r["policy"]) == (n_devices, "default"))
    assert row["speedup"] == unfused.makespan / by_hand.makespan


def test_mean_rows_carry_a_ci_over_seeds_only_where_seeds_vary(rows) -> None:
    summary = summarize(rows)
    means = {(r["devices"], r["policy"]): r for r in summary if r["graph"] == "mean"}
    assert len(means) == len(DEVICES) * len(POLICIES)
    for (devices, policy), row in means.items():
        values = [r["speedup"] for r in rows if (r["devices"], r["policy"]) == (devices, policy)]
        assert row["speedup"] == pytest.approx(np.mean(values))
        assert math.isnan(row["speedup_ci"]) == (not POLICIES[policy].seeded)


def test_reports_are_written(rows, tmp_path) -> None:
    report = write_report(rows, tmp_path, "fusion", "graphopt bench fusion-table3 --budget 30")
    written = report.files
    assert sorted(p.name for p in written) == sorted(
        ["runs.csv", "summary.csv", "summary.md", "summary.json", "fusion.png"]
    )
    assert all(path.stat().st_size > 0 for path in written)
    with (tmp_path / "runs.csv").open() as stream:
        assert len(list(csv.DictReader(stream))) == len(rows)
    text = (tmp_path / "summary.md").read_text()
    assert "`graphopt bench fusion-table3 --budget 30`" in text
    assert "| **mean** |" in text and "greedy (Inductor)" in text


def test_bad_settings_are_one_line_errors() -> None:
    with pytest.raises(GraphoptError, match="unknown fusion policy 'magic'"):
        FusionBench(policies=("magic",))
    with pytest.raises(GraphoptError, match="device counts"):
        FusionBench(devices=(0,))


def test_cli_runs_the_suite_on_one_zoo_graph(tmp_path) -> None:
    args = ["bench", "fusion-table3", "--models", "gpt2-tiny", "--devices", "2"]
    result = runner.invoke(app, [*args, "--budget", "20", "--seeds", "2", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    folder = tmp_path / "fusion-table3"
    assert (folder / "summary.md").exists() and (folder / "fusion.png").exists()
    assert "gpt2-tiny.training" in result.output
    result = runner.invoke(app, [*args, "--policies", "magic", "--out", str(tmp_path)])
    assert result.exit_code == 2 and "unknown fusion policy" in result.output


def test_a_failing_policy_is_recorded_and_the_table_goes_on(graph, monkeypatch, tmp_path) -> None:
    from graphopt.evaluation import fusion_bench

    other = dataclasses.replace(graph, name="other-fused")
    monkeypatch.setattr(fusion_bench, "zoo_training_graphs", lambda models: [graph, other])

    def greedy(graph, machine, solution, budget, seed):
        if graph.name == "other-fused":
            raise SolverError("greedy refuses other-fused")
        return greedy_fusion(graph, solution)

    monkeypatch.setitem(POLICIES, "greedy", fusion_bench.FusionPolicy("greedy (Inductor)", greedy))
    args = ["bench", "fusion-table3", "--models", "any", "--devices", "2", "--budget", "20"]
    result = runner.invoke(app, [*args, "--seeds", "1", "--out", str(tmp_path)])
    assert result.exit_code == 1, result.output
    line = "greedy on other-fused (2 devices, seed 0): greedy refuses other-fused"
    assert f"failed: {line}" in result.stderr
    assert "error: 1 of 14 runs failed; the others finished" in result.stderr  # bases too
    folder = tmp_path / "fusion-table3"
    with (folder / "runs.csv").open() as stream:
        ran = [(row["graph"], row["policy"]) for row in csv.DictReader(stream)]
    assert len(ran) == 2 * 6 - 1 and ("layered-fused", "greedy") in ran  # 6 policies a graph
    text = (folder / "summary.md").read_text()
    assert f"1 of 14 runs failed, left out of the metrics:\n\n- {line}\n" in text
    assert (folder / "fusion.png").stat().st_size > 0
