"""The gdp-table1 suite (GDP tables 1-2, GO fig. 5 shape) on small graphs with a toy policy."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from typer.testing import CliRunner

from graphopt.cli import app
from graphopt.costmodels.machine import Machine
from graphopt.errors import GraphoptError
from graphopt.ir.generators import generate
from graphopt.learning.placement.env import PlacementEnv
from graphopt.learning.placement.hint import partition_hint
from graphopt.learning.systems.gdp.solver import GDPAlone, GDPSolverConfig
from graphopt.papers.gdp import (
    METHODS,
    GDPBench,
    gains,
    geomean_gain,
    markdown,
    run_table1,
)
from graphopt.solvers.base import Budget, Problem
from refusing import refusing

runner = CliRunner()


@pytest.fixture(scope="module")
def rows(hinted_gdp_policy) -> list[dict]:
    graphs = [generate("layered", 50, seed=2), generate("sbm", 40, seed=3)]
    return run_table1(graphs, (2, 4), steps=2, finetune=1, samples=4, policy=hinted_gdp_policy)


def test_one_row_per_graph_device_count_and_method(rows) -> None:
    assert len(rows) == 2 * 2 * len(METHODS) - 2  # regal places onto 2 devices only
    assert {r["method"] for r in rows} == set(METHODS)
    for row in rows:
        assert row["reference"] == "agrees"  # every solution re-scored by both twins
        assert row["makespan"] >= row["lower_bound"] * (1 - 1e-9)
        assert row["capacity"] > 0


def test_one_device_is_over_the_capacity_and_the_hint_row_is_the_hint(rows) -> None:
    for row in rows:
        if row["method"] == "one-device":
            assert row["excess"] > 0
    row = next(r for r in rows if r["method"] == "hint" and r["devices"] == 4)
    graph = generate("layered", 50, seed=2)
    machine = Machine(n_devices=4, latency=1e-5, bandwidth=1e10, capacity=row["capacity"])
    env = PlacementEnv(graph, machine)
    assert env.step(partition_hint(env)).makespan[0] == row["makespan"]


def test_gains_compare_fitting_cells_only() -> None:
    base = {"graph": "g", "devices": 2, "lower_bound": 0.0, "seconds": 0.0, "seed": 0}
    table = [
        {**base, "method": "gdp-one", "makespan": 1.0, "excess": 0},
        {**base, "method": "expert", "makespan": 1.5, "excess": 0},
        {**base, "method": "metis", "makespan": 0.5, "excess": 7},
    ]
    assert gains(table, "gdp-one", "expert") == [("g", 2, 0.5)]
    assert gains(table, "gdp-one", "metis") == []
    assert math.isclose(geomean_gain([0.5, -1 / 3]), 0.0, abs_tol=1e-12)
    assert "| gdp-one | expert | 1 | +50.0% |" in markdown(table)


def test_gdp_one_trains_a_scratch_network_on_the_graph(hinted_gdp_policy) -> None:
    graph = generate("layered", 50, seed=6)
    problem = Problem(graph, Machine(n_devices=2, latency=1e-3, bandwidth=1e7), "makespan")
    config = GDPSolverConfig(hinted_gdp_policy, finetune=3, samples=4, scratch=True)
    first = GDPAlone(config).solve(problem, Budget(evaluations=10_000), seed=3)
    again = GDPAlone(config).solve(problem, Budget(evaluations=10_000), seed=3)
    assert first.evaluations == 1 + 1 + 3 * 8 + 1 + 4  # the hint; 8 samples per step
    assert np.array_equal(first.solution.placement, again.solution.placement)
    assert first.value == again.value


def test_bad_settings_are_one_line_errors() -> None:
    with pytest.raises(GraphoptError, match="unknown methods"):
        GDPBench(methods=("magic",))
    with pytest.raises(GraphoptError, match="device counts must be in 2..8"):
        GDPBench(devices=(1,))


def test_cli_runs_the_suite_on_one_zoo_graph(tmp_path, hinted_gdp_policy) -> None:
    args = ["bench", "gdp-table1", "--models", "wavenet-tiny", "--devices", "2", "--steps", "1"]
    args += ["--policies", "one-device,expert,hint,gdp-zero-shot", "--out", str(tmp_path)]
    result = runner.invoke(app, [*args, "--policy", hinted_gdp_policy])
    assert result.exit_code == 0, result.output
    summary = (tmp_path / "gdp-table1" / "summary.md").read_text()
    assert "wavenet-tiny.training | 2 |" in summary and "Command:" in summary
    assert (tmp_path / "gdp-table1" / "gdp.png").stat().st_size > 0
    bad = runner.invoke(app, [*args[:2], "--capacity", "1GiB", "--out", str(tmp_path)])
    assert bad.exit_code == 2 and "--capacity-fraction" in bad.output
    assert "Traceback" not in bad.output


def test_a_failing_method_is_recorded_and_the_table_goes_on(
    monkeypatch, tmp_path, hinted_gdp_policy
) -> None:
    from graphopt.papers import gdp

    graphs = [
        dataclasses.replace(generate(family, 30, seed=2), name=f"{family}.training")
        for family in ("layered", "sbm")
    ]
    monkeypatch.setattr(gdp, "zoo_training_graphs", lambda models: graphs)
    monkeypatch.setattr(gdp, "make_solver", refusing(gdp.make_solver, "heft", "sbm.training"))
    args = ["bench", "gdp-table1", "--models", "any", "--devices", "2", "--policy"]
    args += [hinted_gdp_policy, "--policies", "one-device,expert,heft", "--out", str(tmp_path)]
    result = runner.invoke(app, args)
    assert result.exit_code == 1, result.output
    line = "heft on sbm.training (2 devices, seed 0): refuses sbm.training"
    assert f"failed: {line}" in result.stderr
    assert "error: 1 of 8 runs failed; the others finished" in result.stderr  # machines too
    summary = (tmp_path / "gdp-table1" / "summary.md").read_text()
    assert f"- {line}\n" in summary
    rows = [row for row in summary.splitlines() if row.startswith("| sbm.training | 2 |")]
    assert len(rows) == 1 and rows[0].endswith(" | - |")  # heft's cell, the others ran
