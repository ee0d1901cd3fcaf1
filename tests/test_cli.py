"""Every CLI command end to end, through the installed entry point's typer app."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

import graphopt
from builders import solution, tiny
from graphopt import warmup
from graphopt.cli import app, run
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


def test_score_reads_fusion_groups_and_names_a_broken_rule(tmp_path) -> None:
    g = tiny().with_attrs(kernel={"memory_bandwidth": 100.0, "launch_overhead": 0.5})
    g = g.with_op_attrs([{**a, "fusion": "elementwise"} for a in g.op_attrs])
    graph_path = tmp_path / "tiny.json"
    write_graph(g, graph_path)
    document = solution_to_json(g, solution(g, {"a": 0, "b": 0, "c": 0}, ["a", "b", "c"]))
    document["fusion"] = [["b", "c"]]
    path = tmp_path / "fused.json"
    path.write_text(json.dumps(document))
    result = run_json("score", str(graph_path), str(path))
    # b:0 is internal; the group reads a:0 (400) and writes c:0 (100): 5 s of traffic + launch.
    assert result["fusion_groups"] == 1 and result["makespan"] == 2.0 + 5.5
    assert result["peak_memory"] == 400 + 100
    document["fusion"] = [["a", "c"]]  # a -> b -> c leaves the group and comes back
    path.write_text(json.dumps(document))
    failed = runner.invoke(app, ["score", str(graph_path), str(path)])
    assert failed.exit_code == 2 and len(failed.stderr.strip().splitlines()) == 1
    assert "fusion[0] ('a', 'c'): op 'b', outside the group, is on a path" in failed.stderr
    write_graph(tiny(), graph_path)  # no kernel, no classes
    document["fusion"] = [["b", "c"]]
    path.write_text(json.dumps(document))
    failed = runner.invoke(app, ["score", str(graph_path), str(path)])
    assert failed.exit_code == 2 and "has no 'kernel' field" in failed.stderr


def test_installed_script_runs(files) -> None:
    graph_path, _, _ = files
    completed = subprocess.run(
        [sys.executable, "-m", "graphopt", "info", str(graph_path), "--json"],
        capture_output=True,
        text=True,
    )
    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout)["ops"] == 3


ROOT = Path(__file__).parents[1]
HEAVY = ("numpy", "numba", "torch", "graphopt.api", "graphopt.solvers", "graphopt.costmodels.score")
"""Modules that `--help` and `--version` must not import (with their submodules)."""
LIGHT = {"graphopt.solvers", "graphopt.solvers.registry"}
"""The solver names and what each takes, which `optimize --help` lists: no numpy."""


def test_version_option() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0, result.output
    assert result.stdout == f"graphopt {graphopt.__version__}\n"


def test_version_has_one_source() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"]
    assert "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "graphopt.__version__"}
    # The installed metadata was built from it (make reinstalls when __init__.py changes).
    assert importlib.metadata.version("graphopt") == graphopt.__version__


def imported_modules(*args: str) -> set[str]:
    """Every module `python -m graphopt ARGS` imports, from `-X importtime`'s report."""
    completed = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "graphopt", *args],
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    lines = [line for line in completed.stderr.splitlines() if line.startswith("import time:")]
    return {line.rsplit("|", 1)[1].strip() for line in lines[1:]}


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["--version"],
        ["optimize", "--help"],
        ["warmup", "--help"],
        ["plot", "--help"],
        ["measure", "--help"],
    ],
)
def test_help_and_version_import_nothing_heavy(args: list[str]) -> None:
    modules = imported_modules(*args)
    assert "graphopt.cli" in modules
    heavy = {m for m in modules if any(m == h or m.startswith(f"{h}.") for h in HEAVY)}
    assert not heavy - LIGHT


def test_package_resolves_the_api_on_first_use() -> None:
    # In a fresh interpreter: this one imported graphopt.api long ago.
    code = """
import sys
import graphopt
assert not {"numpy", "numba", "graphopt.api"} & set(sys.modules), "import graphopt is not lazy"
import graphopt.optimize  # the submodule that shares the API function's name, imported first
from graphopt import api, errors
assert graphopt.optimize is api.optimize
namespace = {}
exec("from graphopt import *", namespace)
errors_ = ["GraphError", "GraphoptError", "MachineError", "SolutionError"]
assert sorted(graphopt.__all__) == sorted([*api.__all__, *errors_])
assert all(namespace[name] is getattr(api, name) for name in api.__all__)
assert all(namespace[name] is getattr(errors, name) for name in errors_)
"""
    completed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert completed.returncode == 0, completed.stderr


def test_warmup_command(monkeypatch: pytest.MonkeyPatch) -> None:
    # The command's plumbing on four cheap solvers, in this process; the real warm-up, in a
    # fresh cache, is test_warmup_coverage.py's test_no_command_compiles_after_a_warmup (slow).
    monkeypatch.setattr(warmup, "SHARED", ("critical-path",))
    monkeypatch.setattr(
        warmup, "STAGES", ({"one": ("xla-list",), "other": ("heft",)}, {"last": ("xla-dfs",)})
    )
    result = runner.invoke(app, ["warmup", "--workers", "1"])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("warmup: ") and "solves" in result.stdout
    assert len(result.stderr.splitlines()) == 4  # one progress line per part


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["optimize"], "Missing argument 'GRAPH'"),
        (["optimize", "g.json", "-o", "s.json", "--seed", "-1"], "'--seed'"),
        (["optimize", "g.json", "-o", "s.json", "--seed", "x"], "'--seed'"),
        (["bench", "tiny-20", "--seeds", "0"], "'--seeds'"),
        (["frobnicate"], "No such command 'frobnicate'"),
        (["info", "--frob", "g.json"], "No such option: --frob"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(capsys, args, message) -> None:
    assert run(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and message in err


def test_internal_errors_are_one_line_exit_70_and_traceback_under_debug(
    files, capsys, monkeypatch
) -> None:
    graph_path, _, _ = files

    def broken(path):
        raise RuntimeError("line one\nline two")

    monkeypatch.setattr("graphopt.ir.io.read_graph", broken)
    assert run(["info", str(graph_path)]) == 70
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("error: internal error, a bug in graphopt: RuntimeError: line one\\nline")
    assert "--debug" in err
    with pytest.raises(RuntimeError, match="line one"):
        run(["--debug", "info", str(graph_path)])


def test_names_with_line_breaks_stay_on_one_line(tmp_path, capsys) -> None:
    path = tmp_path / "g.json"
    document = {
        "format": "graphopt.graph/1",
        "ops": [{"name": "a\nb"}, {"name": "a\nb"}],
        "tensors": [],
    }
    path.write_text(json.dumps(document))
    assert run(["info", str(path)]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {path}: op 'a\\nb': name is not unique\n"


def test_a_search_without_any_solution_exits_4(files, tmp_path, capsys, monkeypatch) -> None:
    graph_path, _, _ = files
    monkeypatch.setattr(
        "graphopt.solvers.list_scheduling.HeftScheduler.run", lambda *args, **kwargs: None
    )
    output = tmp_path / "s.json"
    args = ["optimize", str(graph_path), "-o", str(output), "--solver", "heft"]
    assert run([*args, "--objective", "makespan"]) == 4
    assert capsys.readouterr().err == "error: solver 'heft' found no solution within its budget\n"
    assert not output.exists()
