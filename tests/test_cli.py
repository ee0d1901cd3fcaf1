"""Every CLI command end to end, through the installed entry point's typer app."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from builders import solution, tiny
from graphopt.cli import app, parse_bytes
from graphopt.errors import MachineError
from graphopt.ir.io import solution_to_json, write_graph

runner = CliRunner()


@pytest.fixture
def files(tmp_path):
    g = tiny()
    graph_path = tmp_path / "tiny.json"
    write_graph(g, graph_path)
    s = solution(g, {"a": 0, "b": 1, "c": 0}, ["a", "a:0>1", "b", "b:0>0", "c"], devices=2)
    document = solution_to_json(g, s)
    document["objective"] = {"peak_memory": 600, "makespan": 4.0}
    solution_path = tmp_path / "solution.json"
    solution_path.write_text(json.dumps(document))
    return graph_path, solution_path, document


def run_json(*args: str) -> dict:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_generate_then_info(tmp_path) -> None:
    path = tmp_path / "g.npz"
    generated = run_json("generate", "layered", "-n", "40", "--seed", "3", "-o", str(path))
    assert generated["ops"] == 40 and path.exists()
    info = run_json("info", str(path))
    assert info["ops"] == 40 and info["edges"] == generated["edges"]
    assert info["critical_path"] <= info["total_runtime"]
    again = tmp_path / "again.npz"
    assert (
        run_json("generate", "layered", "-n", "40", "--seed", "3", "-o", str(again))["edges"]
        == info["edges"]
    )


def test_generate_takes_family_parameters(tmp_path) -> None:
    path = tmp_path / "ws.json"
    result = run_json(
        "generate", "watts_strogatz", "-n", "30", "-p", "k=4", "-p", "beta=0.0", "-o", str(path)
    )
    assert result["edges"] == 60


def test_info_tables_and_json(files) -> None:
    graph_path, _, _ = files
    info = run_json("info", str(graph_path))
    assert info == info | {
        "ops": 3,
        "tensors": 3,
        "edges": 3,
        "total_runtime": 4.0,
        "critical_path": 4.0,
        "total_tensor_size": 600,
        "op_types": {"MatMul": 1, "Relu": 1, "Add": 1},
    }
    result = runner.invoke(app, ["info", str(graph_path)])
    assert result.exit_code == 0 and "critical path" in result.stdout


def test_score_json_matches_the_contract(files) -> None:
    graph_path, solution_path, _ = files
    result = run_json("score", str(graph_path), str(solution_path))
    assert result["peak_memory"] == 600 and result["makespan"] == 4.0
    assert result["peak_memory_per_device"] == [600, 500]
    assert result["claims_agree"] and result["valid"] and result["feasible"]
    assert (
        run_json("score", str(graph_path), str(solution_path), "--reference")["peak_memory"] == 600
    )


def test_score_machine_options(files) -> None:
    graph_path, solution_path, _ = files
    result = run_json(
        "score",
        str(graph_path),
        str(solution_path),
        "--capacity",
        "599",
        "--latency",
        "1",
        "--bandwidth",
        "100",
        "--mode",
        "async",
        "--devices",
        "3",
    )
    assert not result["feasible"] and result["devices"] == 3 and result["claims_agree"] is None
    assert (
        result["makespan"] == 2.0 + (1 + 4.0) + 1.0 + (1 + 1.0) + 1.0
    )  # a, a:0 transfer, b, b:0, c
    table = runner.invoke(app, ["score", str(graph_path), str(solution_path), "--capacity", "1KiB"])
    assert table.exit_code == 0 and "fits capacity" in table.stdout


def test_score_exits_1_when_claims_disagree(files, tmp_path) -> None:
    graph_path, _, document = files
    document["objective"]["peak_memory"] = 599
    path = tmp_path / "wrong.json"
    path.write_text(json.dumps(document))
    result = runner.invoke(app, ["score", str(graph_path), str(path)])
    assert result.exit_code == 1
    assert "claim disagrees: peak_memory: claimed 599, computed 600" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["info", "missing.json"], "error: missing.json: no such file"),
        (["generate", "grid", "-o", "x.json"], "unknown graph family 'grid'"),
        (["generate", "erdos_renyi", "-n", "0", "-o", "x.json"], "n must be an integer >= 1"),
        (
            ["generate", "erdos_renyi", "-p", "nope", "-o", "x.json"],
            "--param must look like KEY=VALUE",
        ),
        (["score", "GRAPH", "SOLUTION", "--mode", "eager"], "mode must be 'sync' or 'async'"),
        (["score", "GRAPH", "SOLUTION", "--capacity", "lots"], "capacity must be a byte count"),
        (
            ["score", "GRAPH", "SOLUTION", "--devices", "1"],
            r"op 'b': device must be an integer in [0, 1)",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(files, tmp_path, monkeypatch, args, message) -> None:
    graph_path, solution_path, _ = files
    monkeypatch.chdir(tmp_path)
    args = [
        str(graph_path) if a == "GRAPH" else str(solution_path) if a == "SOLUTION" else a
        for a in args
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.output


def test_invalid_schedule_names_the_event(files, tmp_path) -> None:
    graph_path, _, document = files
    document["schedule"] = [document["schedule"][i] for i in (0, 2, 1, 3, 4)]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(document))
    result = runner.invoke(app, ["score", str(graph_path), str(path)])
    assert result.exit_code == 2
    assert "schedule[1] (op 'b' on device 1): input 'a:0' is not available" in result.stderr


def test_installed_script_runs(files) -> None:
    graph_path, _, _ = files
    completed = subprocess.run(
        [sys.executable, "-m", "graphopt", "info", str(graph_path), "--json"],
        capture_output=True,
        text=True,
    )
    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout)["ops"] == 3


def test_parse_bytes() -> None:
    assert parse_bytes("16GiB") == 16 * 2**30
    assert parse_bytes("1e9") == 10**9
    assert parse_bytes("512 MB") == 512 * 10**6
    with pytest.raises(MachineError):
        parse_bytes("1.5B")
