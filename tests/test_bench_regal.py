"""Paper 001's evaluation in `graphopt bench`: dataset and held-out zoo suites, confidence
intervals, the budget curve (fig. 5), the improvement histogram (fig. 4) and `--exact-max-ops`."""

from __future__ import annotations

import csv
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from graphopt.cli import app
from graphopt.costmodels.machine import Machine
from graphopt.datasets import Dataset, DatasetConfig, build_dataset
from graphopt.evaluation.bench import budget_curve, run_bench, write_reports
from graphopt.evaluation.metrics import gain_line, mean_with_ci
from graphopt.evaluation.suites import ZOO_HELD_OUT, load_suite, report_name
from graphopt.ir.generators import generate
from graphopt.solvers.base import Objective, SolverError

runner = CliRunner()
REGAL_CONFIG = Path(__file__).parents[1] / "src/graphopt/datasets/configs/regal.json"


@pytest.fixture(scope="module")
def dataset_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dataset")
    config = DatasetConfig.from_dict(
        {
            "name": "t",
            "seed": 1,
            "copies": 1,
            "synthetic": [{"family": "layered", "sizes": [20], "count": 5}],
        }
    )
    build_dataset(config, out, progress=False)
    return out


@pytest.fixture(scope="module")
def curve_result():
    graphs = [generate("layered", 12, seed=s) for s in range(3)]
    calls = []
    result = run_bench(
        graphs,
        Machine(2),
        Objective.PEAK_MEMORY,
        ["brkga", "random-search"],
        evaluations=500,
        budgets=(200, 500),
        progress=lambda done, total, label: calls.append((done, total)),
    )
    return result, calls


# ------------------------------------------------------------------------------------ suites
def test_dataset_suite_is_a_split_or_n_evenly_spread_graphs(dataset_dir) -> None:
    names = Dataset.open(dataset_dir, "train").names
    assert len(names) == 6
    assert [g.name for g in load_suite(f"dataset:{dataset_dir}:train")] == list(names)
    assert [g.name for g in load_suite(f"dataset:{dataset_dir}:train:3")] == list(names[::2])
    assert [g.name for g in load_suite(f"dataset:{dataset_dir}:train:1")] == [names[0]]
    assert len(load_suite(f"dataset:{dataset_dir}:train:99")) == 6
    assert report_name(f"dataset:{dataset_dir}:test:50") == f"{dataset_dir.name}-test-50"
    assert report_name("zoo-held-out") == "zoo-held-out"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("dataset:{d}", "must look like dataset:DIR:SPLIT"),
        ("dataset:{d}:test:2:3", "must look like dataset:DIR:SPLIT"),
        ("dataset:{d}/missing:test", "no such dataset directory"),
        ("dataset:{d}:tset", "unknown split 'tset'; valid: train, valid, test"),
        ("dataset:{d}:test:0", "N must be a positive integer, got '0'"),
        ("dataset:{d}:test:x", "N must be a positive integer, got 'x'"),
        ("dataset:{d}:test:-2", "N must be a positive integer, got '-2'"),
        ("dataset:{e}:test", "no such dataset archive"),
    ],
)
def test_bad_dataset_specs_name_the_problem(dataset_dir, tmp_path, spec, message) -> None:
    spec = spec.format(d=dataset_dir, e=tmp_path)
    with pytest.raises(SolverError, match=message) as error:
        load_suite(spec)
    assert str(error.value).startswith(f"suite {spec!r}: ")


def test_held_out_zoo_models_are_not_regal_training_models() -> None:
    training = {entry["name"] for entry in json.loads(REGAL_CONFIG.read_text())["zoo"]}
    assert training and not training & {source.name for source in ZOO_HELD_OUT}
    assert 8 <= len(ZOO_HELD_OUT) <= 10


@pytest.mark.slow
def test_zoo_held_out_suite_exports_named_like_the_dataset() -> None:
    graphs = load_suite("zoo-held-out")
    assert [g.name for g in graphs] == [source.label for source in ZOO_HELD_OUT]
    assert "resnet18.training" in {g.name for g in graphs}
    assert all(100 <= g.n_ops <= 3500 for g in graphs)


# ----------------------------------------------------------------------------------- metrics
def test_mean_with_ci_uses_t_below_30_values_and_normal_from_30() -> None:
    mean, low, high = mean_with_ci([1.0, 2.0, 3.0, 4.0, 5.0])
    half = 2.776 * math.sqrt(2.5) / math.sqrt(5)
    assert mean == 3.0 and low == pytest.approx(3.0 - half) and high == pytest.approx(3.0 + half)
    mean, low, high = mean_with_ci(np.arange(30.0))
    half = 1.96 * np.std(np.arange(30.0), ddof=1) / math.sqrt(30)
    assert mean == 14.5 and (low, high) == pytest.approx((14.5 - half, 14.5 + half))
    assert mean_with_ci([2.0, 2.0]) == (2.0, 2.0, 2.0)
    mean, low, high = mean_with_ci([7.0])
    assert mean == 7.0 and math.isnan(low) and math.isnan(high)
    assert all(math.isnan(x) for x in mean_with_ci([]))


def test_gain_line_prints_the_mean_its_ci_and_the_items_on_each_side() -> None:
    half = 2.776 * math.sqrt(2.5) / math.sqrt(5)
    assert gain_line([-1.0, 0.0, 1.0, 2.0, 3.0]) == (
        f"+1.00 % [{1 - half:+.2f}, {1 + half:+.2f}] over 5; better 3, equal 1, worse 1"
    )
    assert gain_line([0.5, 0.5], digits=1, unit="", tie=0.6) == (
        "+0.5 [+0.5, +0.5] over 2; better 0, equal 2, worse 0"
    )
    assert gain_line([4.0], digits=1) == "+4.0 % [no CI] over 1; better 1, equal 0, worse 0"


# ----------------------------------------------------------------------------- budget curve
def test_budget_curve_reuses_the_main_budget_and_reports_every_limit(
    curve_result, tmp_path
) -> None:
    result, calls = curve_result
    assert result.budgets == (200, 500) and set(result.curve_runs) == {200}
    assert len(result.runs) == len(result.curve_runs[200]) == 6
    assert calls[-1] == (12, 12) and len(calls) == 12
    for run in result.curve_runs[200]:  # a run that reaches the lower bound stops there
        assert run.evaluations == 200 or (run.evaluations < 200 and run.status == "optimal")
    rows = {(row["solver"], row["evaluations"]): row for row in budget_curve(result)}
    assert set(rows) == {(s, b) for s in ("brkga", "random-search") for b in (200, 500)}
    assert rows["brkga", 500]["improvement_over_brkga_pct"] == 0.0
    assert rows["brkga", 200]["improvement_over_brkga_pct"] <= 0.0
    summary = {row["solver"]: row for row in result.summary}
    low = summary["random-search"]["improvement_ci_low_pct"]
    high = summary["random-search"]["improvement_ci_high_pct"]
    assert low <= summary["random-search"]["improvement_over_brkga_pct"] <= high

    written = write_reports(result, tmp_path, "curve", command="graphopt bench x --budgets 200")
    for name in ("budget_curve.png", "budget_curve.csv", "improvement_histogram.png"):
        assert tmp_path / name in written and (tmp_path / name).stat().st_size > 0
    with (tmp_path / "budget_curve.csv").open() as file:
        assert len(list(csv.DictReader(file))) == 4
    with (tmp_path / "runs.csv").open() as file:
        limits = [row["evaluation_limit"] for row in csv.DictReader(file)]
    assert limits.count("500") == 6 and limits.count("200") == 6
    text = (tmp_path / "summary.md").read_text()
    assert "% improvement over BRKGA 500 [95% CI]" in text and "seconds per graph" in text
    assert "by evaluation limit (paper 001 fig. 5)" in text
    assert "Command: `graphopt bench x --budgets 200`" in text


def test_histogram_of_a_chosen_solver_and_bad_choices(curve_result, tmp_path) -> None:
    result, _ = curve_result
    written = write_reports(result, tmp_path, "one", histogram="random-search")
    assert tmp_path / "improvement_histogram.png" in written
    for bad in ("brkga", "gp-kl"):
        with pytest.raises(SolverError, match=f"histogram solver '{bad}' must be one the bench"):
            write_reports(result, tmp_path, "bad", histogram=bad)


def test_no_budgets_writes_no_curve(tmp_path) -> None:
    graphs = [generate("layered", 10, seed=s) for s in range(2)]
    result = run_bench(graphs, Machine(2), Objective.PEAK_MEMORY, ["brkga"], evaluations=100)
    written = write_reports(result, tmp_path, "plain")
    assert {p.name for p in written} == {
        "summary.md",
        "summary.csv",
        "runs.csv",
        "convergence.png",
        "solutions.png",
    }
    assert result.curve_runs == {} and budget_curve(result) == []
    assert "![memory per step" in (tmp_path / "summary.md").read_text()
    assert set(result.showcase[2]) == {"brkga"} and result.showcase[0] is graphs[0]


# --------------------------------------------------------------------------- exact-max-ops
def test_exact_max_ops_leaves_cp_sat_out_on_larger_graphs() -> None:
    small, large = generate("layered", 8, seed=0), generate("layered", 30, seed=1)
    result = run_bench(
        [small, large],
        Machine(2),
        Objective.PEAK_MEMORY,
        ["cp-sat"],
        evaluations=200,
        exact_seconds=5.0,
        budgets=(100,),
        exact_max_ops=10,
    )
    exact = [run for run in result.runs if run.solver == "cp-sat"]
    assert [run.graph for run in exact] == [small.name]
    assert all(run.solver != "cp-sat" for run in result.curve_runs[100])
    rows = {row["solver"]: row for row in result.summary}
    assert rows["cp-sat"]["graphs"] == 1 and rows["brkga"]["graphs"] == 2
    assert math.isfinite(rows["cp-sat"]["geomean_gap_from_best_pct"])
    with pytest.raises(SolverError, match="exact-max-ops must be a positive number of ops"):
        run_bench([small], Machine(2), Objective.PEAK_MEMORY, ["cp-sat"], exact_max_ops=0)
    with pytest.raises(SolverError, match="budget evaluations must be an integer >= 1, got 0"):
        run_bench([small], Machine(2), Objective.PEAK_MEMORY, ["brkga"], budgets=(0,))


# ------------------------------------------------------------------------------------- CLI
def test_bench_cli_writes_fig_4_and_5_and_records_the_command(
    dataset_dir, tmp_path, monkeypatch
) -> None:
    out = tmp_path / "reports"
    args = [
        "bench",
        f"dataset:{dataset_dir}:test",
        "--solvers",
        "brkga",
        "--histogram",
        "random-search",
        "--budget",
        "300",
        "--budgets",
        "100,300",
        "--exact-max-ops",
        "10",
        "-o",
        str(out),
        "--json",
    ]
    monkeypatch.setattr(sys, "argv", ["/somewhere/bin/graphopt", *args])
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert {row["solver"] for row in document["summary"]} == {"brkga", "random-search"}
    folder = out / f"{dataset_dir.name}-test"
    for name in ("budget_curve.png", "budget_curve.csv", "improvement_histogram.png"):
        assert (folder / name).stat().st_size > 0
    text = (folder / "summary.md").read_text()
    assert f"Command: `graphopt bench dataset:{dataset_dir}:test --solvers brkga" in text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--budgets", "1000,x"], "--budgets must be comma-separated positive evaluation counts"),
        (["--budgets", "0"], "--budgets must be comma-separated positive evaluation counts"),
        (["--histogram", "brkga"], "--histogram shows a solver against brkga"),
        (["--histogram", "nope"], "unknown solver 'nope'"),
        (["--exact-max-ops", "0"], "--exact-max-ops must be a positive number of ops, got 0"),
    ],
)
def test_bench_cli_rejects_bad_options_in_one_line(args, message) -> None:
    result = runner.invoke(app, ["bench", "tiny-20", *args])
    assert result.exit_code == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_bench_cli_rejects_a_bad_dataset_spec(tmp_path) -> None:
    result = runner.invoke(app, ["bench", f"dataset:{tmp_path}/none:test"])
    assert result.exit_code == 2 and "no such dataset directory" in result.stderr
