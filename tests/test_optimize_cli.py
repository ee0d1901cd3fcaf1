"""`graphopt optimize`, `bench` and `solvers` end to end, and the `optimize` API."""

from __future__ import annotations

import dataclasses
import json

import pytest
from typer.testing import CliRunner

from builders import graph, op, tensor, tiny
from graphopt import optimize
from graphopt.cli import app
from graphopt.costmodels.machine import Machine
from graphopt.errors import GraphoptError
from graphopt.ir.generators import generate
from graphopt.ir.io import write_graph
from graphopt.optimize import OptimizeResult, capacity_proof
from graphopt.solvers.base import Result
from graphopt.solvers.bounds import makespan_lower_bound, peak_memory_lower_bound

runner = CliRunner()


@pytest.fixture
def graph_file(tmp_path):
    path = tmp_path / "g.json"
    write_graph(generate("layered", 40, seed=2), path)
    return path


def invoke(*args: str):
    return runner.invoke(app, list(args))


def test_optimize_writes_a_solution_that_score_reproduces(graph_file, tmp_path) -> None:
    out = tmp_path / "s.json"
    result = invoke(
        "optimize", str(graph_file), "--devices", "2", "--budget", "400", "-o", str(out), "--json"
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["lower_bound"] <= summary["value"] == summary["peak_memory"]
    if summary["status"] == "optimal":  # reached the lower bound: the search stops there
        assert summary["evaluations"] <= 400 and summary["value"] == summary["lower_bound"]
        assert summary["gap"] == 0.0
    else:
        assert summary["evaluations"] == 400 and summary["status"] == "feasible"
    scored = invoke("score", str(graph_file), str(out), "--json")
    assert scored.exit_code == 0, scored.output
    rescored = json.loads(scored.stdout)
    assert rescored["claims_agree"] is True
    assert rescored["peak_memory"] == summary["peak_memory"]
    assert rescored["makespan"] == summary["makespan"]
    document = json.loads(out.read_text())
    assert document["solver"]["name"] == "auto" and document["machine"]["devices"] == 2


def test_optimize_table_and_makespan(graph_file, tmp_path) -> None:
    result = invoke(
        "optimize",
        str(graph_file),
        "--objective",
        "makespan",
        "--devices",
        "3",
        "--solver",
        "heft",
        "-o",
        str(tmp_path / "s.json"),
    )
    assert result.exit_code == 0, result.output
    assert "makespan (s)" in result.output and "lower bound" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--solver", "magic"], "unknown solver 'magic'; valid solvers: auto, brkga"),
        (["--budget", "0"], "budget evaluations must be an integer >= 1"),
        (["--devices", "0"], "devices must be an integer >= 1"),
        (["--objective", "speed"], "unknown objective 'speed'"),
        (["--devices", "2", "--pin", "op0=5"], "op 'op0' is pinned to device 5"),
        (["--pin", "nothere=0"], "cannot pin op 'nothere'"),
        (["--pin", "op0"], "--pin must look like OP=DEVICE"),
        (["--pin", "op0=-1"], "--pin must look like OP=DEVICE with DEVICE an integer >= 0"),
        (["--pin", "op0=0", "--pin", "op0=1"], "op 'op0' is pinned to device 0 and to device 1"),
        (["--devices", "100000"], "devices must be at most 512"),
        (["--budget", "0"], "budget evaluations must be an integer >= 1"),
        (["--time", "nan"], "budget seconds must be a finite number > 0"),
    ],
)
def test_optimize_rejects_impossible_requests(graph_file, tmp_path, args, message) -> None:
    result = invoke("optimize", str(graph_file), "-o", str(tmp_path / "s.json"), *args)
    assert result.exit_code == 2
    assert message in result.stderr
    assert "Traceback" not in result.output


def test_capacity_below_the_bound_is_refused_at_once(graph_file, tmp_path) -> None:
    out = tmp_path / "s.json"
    args = ["--devices", "2", "--capacity", "1KiB", "--budget", "200", "-o", str(out)]
    result = invoke("optimize", str(graph_file), *args)
    assert result.exit_code == 3
    assert "capacity 1,024 bytes per device is below the lower bound of" in result.stderr
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
    assert not out.exists()


def test_capacity_no_solution_meets_reports_the_excess(tmp_path) -> None:
    # Two weights with one reader each, all pinned to device 0: the 2-device bound (one weight
    # and its reader's output) fits the capacity, but the pinned placement holds both weights.
    path, out = tmp_path / "g.json", tmp_path / "s.json"
    ops = [{"name": name, "runtime": 1.0} for name in ("w1", "w2", "m1", "m2")]
    tensors = [
        {"name": "w1:0", "size": 1000, "producer": "w1", "consumers": ["m1"], "persistent": True},
        {"name": "w2:0", "size": 1000, "producer": "w2", "consumers": ["m2"], "persistent": True},
        {"name": "m1:0", "size": 10, "producer": "m1", "consumers": []},
        {"name": "m2:0", "size": 10, "producer": "m2", "consumers": []},
    ]
    path.write_text(json.dumps({"format": "graphopt.graph/1", "ops": ops, "tensors": tensors}))
    pins = [arg for name in ("w1", "w2", "m1", "m2") for arg in ("--pin", f"{name}=0")]
    result = invoke(
        "optimize",
        str(path),
        "--devices",
        "2",
        "--capacity",
        "1010",
        "--budget",
        "200",
        *pins,
        "-o",
        str(out),
    )
    assert result.exit_code == 3
    assert "no solution found fits the capacity of 1,010 bytes" in result.stderr
    assert "bytes over capacity in total" in result.stderr and out.exists()
    assert json.loads(out.read_text())["solver"]["status"] == "over-capacity"
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1


def test_api_optimize_honours_pins() -> None:
    graph = tiny()
    result = optimize(graph, Machine(2), evaluations=200, pins={"b": 1, "c": 1})
    assert result.solution.placement.tolist()[1:] == [1, 1]
    with pytest.raises(GraphoptError, match="unknown objective"):
        optimize(graph, objective="fast")


@pytest.mark.parametrize("objective", ["peak-memory", "makespan"])
def test_api_optimize_reports_the_bound_and_gap(objective) -> None:
    g, machine = generate("layered", 30, seed=1), Machine(2)
    result = optimize(g, machine, objective, "random-search", evaluations=50)
    assert isinstance(result, OptimizeResult) and isinstance(result, Result)
    instance = (
        peak_memory_lower_bound(g, 2)
        if objective == "peak-memory"
        else makespan_lower_bound(g, machine)
    )
    assert result.bound == max(instance, result.lower_bound or 0) <= result.value
    assert result.gap == pytest.approx(result.value / result.bound - 1.0)
    assert (result.excess, result.proof) == (0, None)


def test_api_optimize_reports_the_excess_over_capacity() -> None:
    # Both weights pinned to device 0: 2,010 bytes there, 1,000 over a 1,010-byte capacity that
    # no single op's step exceeds.
    g = graph(
        [op("w1"), op("w2"), op("m1"), op("m2")],
        [
            tensor("w1:0", 1000, "w1", "m1", persistent=True),
            tensor("w2:0", 1000, "w2", "m2", persistent=True),
            tensor("m1:0", 10, "m1"),
            tensor("m2:0", 10, "m2"),
        ],
    )
    pins = dict.fromkeys(("w1", "w2", "m1", "m2"), 0)
    result = optimize(g, Machine(2, capacity=1010), evaluations=50, pins=pins)
    assert not result.feasible and result.score.peak_memory == 2010
    assert (result.excess, result.proof) == (1000, None)


def test_capacity_proof_names_an_op_that_alone_overflows() -> None:
    assert capacity_proof(tiny(), 599) == "op 'c' alone holds 600 bytes at its step"
    assert capacity_proof(tiny(), 600) is None
    assert capacity_proof(graph([], []), 0) is None


def test_bench_writes_the_papers_metrics(tmp_path) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    for seed in range(2):
        write_graph(generate("layered", 15, seed=seed), suite / f"g{seed}.json")
    out = tmp_path / "reports"
    result = invoke(
        "bench",
        str(suite),
        "--solvers",
        "compiler-best,random-search",
        "--budget",
        "200",
        "-o",
        str(out),
        "--json",
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)["summary"]
    rows = {row["solver"]: row for row in summary}
    assert set(rows) == {"compiler-best", "random-search", "brkga"}
    assert rows["brkga"]["improvement_over_brkga_pct"] == 0.0
    assert rows["brkga"]["ties"] == 2
    for name in ("summary.md", "summary.csv", "runs.csv", "convergence.png"):
        assert (out / "suite" / name).stat().st_size > 0
    assert "% improvement over BRKGA 200" in (out / "suite" / "summary.md").read_text()


def test_bench_and_solvers_list_names() -> None:
    assert "compiler-best" in invoke("solvers").output
    result = invoke("bench", "tiny-20", "--solvers", "nope")
    assert result.exit_code == 2 and "unknown solver 'nope'" in result.stderr
    result = invoke("bench", "no-such-suite")
    assert result.exit_code == 2 and "unknown suite 'no-such-suite'" in result.stderr


@pytest.mark.parametrize("policy", ["default", "xla-priority", "greedy", "anneal"])
def test_optimize_fusion_writes_fused_solutions_that_score_reproduces(tmp_path, policy) -> None:
    path, out = tmp_path / "g.json", tmp_path / "s.json"
    write_graph(generate("layered", 120, seed=4, fusion=True), path)
    result = invoke(
        "optimize", str(path), "--devices", "1", "--objective", "makespan", "--budget", "300",
        "--fusion", policy, "-o", str(out), "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["fusion_groups"] > 0 and summary["value"] >= summary["lower_bound"]
    scored = json.loads(invoke("score", str(path), str(out), "--json").stdout)
    assert scored["claims_agree"] and scored["fusion_groups"] == summary["fusion_groups"]
    assert any(note.startswith(f"fusion {policy}:") for note in summary["notes"])


def test_optimize_fusion_on_a_graph_without_classes_says_so_and_fuses_nothing(tmp_path) -> None:
    path, out = tmp_path / "g.json", tmp_path / "s.json"
    write_graph(generate("layered", 40, seed=4), path)
    result = invoke("optimize", str(path), "--budget", "100", "--fusion", "greedy", "-o", str(out))
    assert result.exit_code == 0, result.output
    assert "no op of graph 'layered_n40_s4' has a fusion class" in result.stderr
    assert "fusion" not in json.loads(out.read_text())


def test_optimize_fusion_refuses_an_unknown_policy_and_a_graph_without_kernel(tmp_path) -> None:
    path, out = tmp_path / "g.json", tmp_path / "s.json"
    fused = generate("layered", 40, seed=4, fusion=True)
    write_graph(fused, path)
    result = invoke("optimize", str(path), "--budget", "100", "--fusion", "all", "-o", str(out))
    assert result.exit_code == 2 and "unknown fusion policy 'all'" in result.stderr
    write_graph(_without_kernel(fused), path)
    result = invoke("optimize", str(path), "--budget", "100", "--fusion", "greedy", "-o", str(out))
    assert result.exit_code == 2 and "has no 'kernel' field" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def _without_kernel(graph):
    attrs = {key: value for key, value in graph.attrs.items() if key != "kernel"}
    return dataclasses.replace(graph, attrs=attrs)
