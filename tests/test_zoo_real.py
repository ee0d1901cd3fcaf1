"""The zoo-real benchmark's runs, comparisons and reports, on small synthetic graphs."""

from __future__ import annotations

import csv
import dataclasses
import json

import pytest
from typer.testing import CliRunner

from graphopt.cli import app
from graphopt.evaluation.zoo_real import (
    BASELINES,
    ZOO_REAL,
    comparisons,
    run_zoo_real,
    summary_lines,
    write_zoo_real,
)
from graphopt.ir.generators import generate
from graphopt.solvers.base import Objective
from refusing import refusing

runner = CliRunner()


@pytest.fixture(scope="module")
def runs():
    graphs = [
        dataclasses.replace(generate(family, 40, seed=1), name=family)
        for family in ("layered", "sbm")
    ]
    return run_zoo_real(graphs, devices=(2, 3), auto_seconds=0.3)


def test_every_solver_runs_and_auto_is_never_above_its_reference(runs) -> None:
    cells = {(run.graph, run.devices, run.objective) for run in runs}
    assert len(cells) == 2 * 2 * 2
    for graph, devices, objective in cells:
        here = [r for r in runs if (r.graph, r.devices, r.objective) == (graph, devices, objective)]
        solvers = {r.solver for r in here}
        expected = {*BASELINES[Objective(objective)], "auto"}
        assert expected <= solvers and solvers <= {*expected, "regal"}
        assert ("regal" in solvers) == (devices == 2)
        for run in here:
            assert run.value >= run.lower_bound * (1 - 1e-9) and run.gap >= -1e-9
    for row in comparisons(runs):
        assert row["auto vs reference"] <= 1e-12


def test_reports_name_the_command_and_hold_every_run(runs, tmp_path) -> None:
    written = write_zoo_real(runs, tmp_path, "graphopt bench zoo-real --devices 2")
    assert sorted(p.name for p in written) == ["runs.csv", "summary.csv", "summary.md"]
    with (tmp_path / "runs.csv").open() as stream:
        assert len(list(csv.DictReader(stream))) == len(runs)
    text = (tmp_path / "summary.md").read_text()
    assert "`graphopt bench zoo-real --devices 2`" in text
    assert "## peak-memory, 3 devices: % above the lower bound" in text
    lines = summary_lines(comparisons(runs))
    assert len(lines) == 4 and all(line in text for line in lines)
    assert any("vs best partition baseline" in line for line in lines)
    assert any("vs HEFT" in line for line in lines)


def test_the_suite_is_real_models_of_a_few_hundred_ops() -> None:
    assert len(ZOO_REAL) == 17 and sum(z.training for z in ZOO_REAL) == 7


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["zoo-real", "--time", "0"], "--time must be finite seconds > 0"),
        (["zoo-real", "--devices", "0"], "devices must be an integer >= 1"),
        (["tiny-20", "--time", "5"], "--time applies to the zoo-real suite"),
    ],
)
def test_bench_zoo_real_refuses_bad_options(args, message) -> None:
    result = runner.invoke(app, ["bench", *args])
    assert result.exit_code == 2 and message in result.stderr


def test_a_failing_run_is_recorded_and_the_others_finish(monkeypatch, tmp_path) -> None:
    from graphopt.evaluation import zoo_real

    graphs = [
        dataclasses.replace(generate(family, 30, seed=1), name=family)
        for family in ("layered", "sbm")
    ]
    monkeypatch.setattr(zoo_real, "zoo_graphs", lambda: graphs)
    monkeypatch.setattr(zoo_real, "make_solver", refusing(zoo_real.make_solver, "heft", "sbm"))
    args = ["bench", "zoo-real", "--objective", "makespan", "--devices", "2", "--time", "0.2"]
    result = runner.invoke(app, [*args, "-o", str(tmp_path), "--json"])
    assert result.exit_code == 1, result.output
    assert "failed: heft on sbm (2 devices, makespan): refuses sbm" in result.stderr
    assert "runs failed; the others finished" in result.stderr
    assert json.loads(result.stdout)["failed"] == ["heft on sbm (2 devices, makespan): refuses sbm"]
    with (tmp_path / "zoo-real" / "runs.csv").open() as stream:
        ran = {(row["graph"], row["solver"]) for row in csv.DictReader(stream)}
    assert ("layered", "heft") in ran and ("sbm", "heft") not in ran and ("sbm", "auto") in ran
    text = (tmp_path / "zoo-real" / "summary.md").read_text()
    assert "runs failed, left out of the metrics:\n\n- heft on sbm" in text
