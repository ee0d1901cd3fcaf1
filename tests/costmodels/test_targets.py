"""Target models: parsing, what each does to graph and machine, and `graphopt score --target`."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from typer.testing import CliRunner

from builders import solution, tiny
from graphopt.cli import app
from graphopt.costmodels.machine import Machine
from graphopt.costmodels.score import Scorer
from graphopt.costmodels.targets import TargetError, TargetModel
from graphopt.ir.generators import generate
from graphopt.ir.io import solution_to_json, write_graph


def test_targets_parse_and_print() -> None:
    assert TargetModel.parse("noisy:0.1") == TargetModel("noisy", 0.1)
    assert str(TargetModel.parse("bandwidth:1e9")) == "bandwidth:1e+09"
    assert TargetModel.parse("latency:0").value == 0.0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("noisy", "must look like KIND:VALUE"),
        ("fast:1", "kind must be one of noisy, bandwidth, latency"),
        ("noisy:x", "value must be a number, got 'x'"),
        ("noisy:-0.1", "value must be a finite number >= 0"),
        ("bandwidth:0", "value must be a finite number > 0"),
        ("latency:inf", "value must be a finite number >= 0"),
        ("latency:nan", "value must be a finite number >= 0"),
    ],
)
def test_bad_targets_are_refused_in_one_line(text: str, message: str) -> None:
    with pytest.raises(TargetError, match=message):
        TargetModel.parse(text)


def tiny_schedule():
    g = tiny()
    s = solution(g, {"a": 0, "b": 1, "c": 0}, ["a", "a:0>1", "b", "b:0>0", "c"], devices=2)
    return g, s


@pytest.mark.parametrize(
    ("target", "makespan"),
    [("noisy:0", 4.0), ("latency:1", 6.0), ("bandwidth:100", 9.0)],
)
def test_each_target_scores_by_the_contract(target: str, makespan: float) -> None:
    """a (2 s) on device 0 sends 400 bytes to b (1 s) on device 1, which sends 100 back to c."""
    g, s = tiny_schedule()
    graph, machine = TargetModel.parse(target).apply(g, Machine(n_devices=2), seed=0)
    assert Scorer(graph, machine).score(s).makespan == pytest.approx(makespan)


def test_noisy_runtimes_are_seeded_and_keep_the_median_scale() -> None:
    g = generate("layered", 400, seed=0)
    machine = Machine(n_devices=2)
    model = TargetModel.parse("noisy:0.1")
    first, _ = model.apply(g, machine, seed=3)
    again, _ = model.apply(g, machine, seed=3)
    other, _ = model.apply(g, machine, seed=4)
    assert np.array_equal(first.op_runtime, again.op_runtime)
    assert not np.array_equal(first.op_runtime, other.op_runtime)
    ratio = np.log(first.op_runtime[g.op_runtime > 0] / g.op_runtime[g.op_runtime > 0])
    assert abs(float(np.median(ratio))) < 0.02 and 0.08 < float(ratio.std()) < 0.12
    _, same = model.apply(g, machine, seed=3)
    assert same == machine


def test_score_reports_each_target(tmp_path) -> None:
    g, s = tiny_schedule()
    graph_path, solution_path = tmp_path / "g.json", tmp_path / "s.json"
    write_graph(g, graph_path)
    solution_path.write_text(json.dumps(solution_to_json(g, s)))
    runner = CliRunner()
    args = ["score", str(graph_path), str(solution_path), "--target", "latency:1"]
    result = runner.invoke(app, [*args, "--target", "bandwidth:100", "--json"])
    assert result.exit_code == 0, result.output
    targets = json.loads(result.stdout)["targets"]
    assert [t["target"] for t in targets] == ["latency:1", "bandwidth:100"]
    assert [t["makespan"] for t in targets] == [6.0, 9.0]
    assert math.isclose(targets[0]["speedup"], 4.0 / 6.0)
    table = runner.invoke(app, args)
    assert table.exit_code == 0 and "on target latency:1" in table.stdout
    bad = runner.invoke(app, [*args[:3], "--target", "latency"])
    assert bad.exit_code == 2 and "KIND:VALUE" in bad.output
