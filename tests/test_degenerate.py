"""Degenerate graphs through every solver, learned policy and command (issue 15 item 3).

Empty, one op, no edges, only persistent tensors, only zero-size tensors, zero runtimes, a chain
of two and many isolated ops are all valid graphs (docs/format.md section 1): every solver must
return a solution that re-scores to exactly what it claims, on every machine kind, and every
command must run on them. The learned solvers ship policies for 2 devices only; elsewhere their
answer is a clear SolverError. 100,000 isolated ops are in the slow tier, 2,000 in the fast one.
"""

from __future__ import annotations

import json
import math
import re
import time
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from degenerate_graphs import SMALL, isolated, only_persistent
from graphopt.cli import app
from graphopt.costmodels._reference import reference_score
from graphopt.costmodels.machine import Machine
from graphopt.evaluation.bench import BenchResult, Run, markdown_table, summarize, write_reports
from graphopt.evaluation.metrics import (
    gap_from_best,
    geometric_mean_gap,
    improvement_over,
    mean_with_ci,
)
from graphopt.ir.graph import Graph
from graphopt.ir.io import solution_from_json, solution_to_json, write_graph
from graphopt.optimize import optimize
from graphopt.solvers.base import InfeasibleError, Objective, Result, SolverError, Trace
from graphopt.solvers.registry import SOLVERS, make_solver

LEARNED = {"regal": 2, "gas": 2, "idrs": 2, "gflownet": None}
"""Solvers with shipped policies, and the only device count they ship one for (None: any)."""

MACHINES = {
    "1-device": Machine(1),
    "2-devices": Machine(2),
    "2-devices-capacity": Machine(2, capacity=1024),
    "async": Machine(2, latency=1e-3, bandwidth=1e6, mode="async"),
}
"""1024 bytes per device fit every graph; a capacity that none fits is tested apart."""

FAST = (*SMALL, "isolated-2000")
"""The small degenerate graphs and the fast analog of 100,000 isolated ops."""


def cases() -> list:
    """(solver, objective, graph, machine) of the matrix: every graph on every machine.

    The fast tier leaves to the slow one what repeats a path it already covers at the cost
    of the 400-evaluation feature run of the learned solvers (or of 2,000 ops): the capacity
    machine with isolated ops, and the learned solvers on it and on async with isolated ops.
    """
    params = []
    for solver in SOLVERS:
        for objective in Objective:
            for graph in FAST:
                for machine in MACHINES:
                    capacity = machine == "2-devices-capacity"
                    isolated_ops = graph.startswith("isolated")
                    slow = (isolated_ops and capacity) or (
                        solver in LEARNED and (capacity or (isolated_ops and machine == "async"))
                    )
                    marks = [pytest.mark.slow] if slow else []
                    params.append(pytest.param(solver, objective, graph, machine, marks=marks))
    return params


@cache
def graph_named(name: str) -> Graph:
    """The degenerate graph of a name (built once per session)."""
    if name.startswith("isolated-"):
        return isolated(int(name.removeprefix("isolated-")))
    return SMALL[name]()


def budget(solver: str) -> dict[str, float]:
    """Small budgets: CP-SAT half a second; REGAL's solvers just past their 400-evaluation
    feature run, so that the policy's inference runs; the GFlowNet 19 samples; the rest 100
    evaluations."""
    if solver == "cp-sat":
        return {"seconds": 0.5}
    if solver == "gflownet":  # HEFT's schedule and 19 samples
        return {"evaluations": 20}
    if solver in LEARNED:
        return {"evaluations": 420}
    return {"evaluations": 100}


def no_policy(solver: str, machine: Machine, objective: Objective) -> str | None:
    """The error a solver must give for an objective it does not optimize, or a learned solver
    on a machine it ships no policy for; else None."""
    if objective not in make_solver(solver).objectives:
        return rf"solver '{solver}' does not optimize {objective.value}"
    if solver not in LEARNED or LEARNED[solver] in (None, machine.n_devices):
        return None
    method = solver if solver in ("gas", "gflownet") else "regal"
    return rf"no shipped {method} policy for .* on {machine.n_devices} devices"


def check(graph: Graph, machine: Machine, objective: Objective, result: Result) -> None:
    """The result re-scores identically with the reference scorer, through its file form too,
    and meets what the graph's shape forces on every solution."""
    exact = reference_score(graph, result.solution, machine)
    assert exact == result.score
    value = exact.peak_memory if objective is Objective.PEAK_MEMORY else exact.makespan
    assert result.value == value
    assert result.feasible == exact.feasible
    assert result.score.disagreements(result.solution.objective) == []
    document = json.loads(json.dumps(solution_to_json(graph, result.solution)))
    assert reference_score(graph, solution_from_json(document, graph), machine) == exact
    if graph.n_ops == 0:
        assert exact.peak_memory == 0 and exact.makespan == 0 and result.status == "optimal"
    if not graph.tensor_size.any() and not graph.op_temp_memory.any():
        assert exact.peak_memory == 0
    if not graph.op_runtime.any() and machine.latency == 0:
        assert exact.makespan == 0
    if graph.n_ops == 1:
        assert exact.makespan == graph.total_runtime


# ---------------------------------------------------------------------------------- solvers
@pytest.mark.parametrize(("solver", "objective", "graph_name", "machine_name"), cases())
def test_every_solver_on_every_degenerate_graph(
    solver: str, objective: Objective, machine_name: str, graph_name: str
) -> None:
    graph, machine = graph_named(graph_name), MACHINES[machine_name]
    expected_error = no_policy(solver, machine, objective)
    if expected_error is not None:
        with pytest.raises(SolverError, match=expected_error):
            optimize(graph, machine, objective, solver, **budget(solver))
        return
    result = optimize(graph, machine, objective, solver, seed=0, **budget(solver))
    check(graph, machine, objective, result)


@pytest.mark.parametrize("solver", list(SOLVERS))
def test_a_capacity_no_solution_meets(solver: str) -> None:
    # The persistent 300-byte weight alone exceeds 100 bytes on whichever device holds it: the
    # lower bound proves it before any search, for every solver alike.
    graph, machine = only_persistent(), Machine(2, capacity=100)
    objective = min(make_solver(solver).objectives)  # cp-search optimizes makespan only
    with pytest.raises(InfeasibleError, match="capacity 100 bytes per device is below the lower"):
        optimize(graph, machine, objective, solver, **budget(solver))


@pytest.mark.slow
@pytest.mark.parametrize("solver", list(SOLVERS))
def test_every_solver_on_100000_isolated_ops(solver: str) -> None:
    # One objective and machine each, alternating; both have 2 devices, so the learned solvers
    # run their policies (450 evaluations: the feature run, inference, a short search).
    index = list(SOLVERS).index(solver)
    objective = (Objective.PEAK_MEMORY, Objective.MAKESPAN)[index % 2]
    objectives = make_solver(solver).objectives
    if objective not in objectives:  # a one-objective solver (cp-search, gdp, hdp) takes its own
        (objective,) = objectives
    machine = (MACHINES["2-devices"], MACHINES["async"])[index % 2]
    graph = graph_named("isolated-100000")
    if solver == "cp-sat":
        limit = {"seconds": 5.0}
    elif solver == "gflownet":  # HEFT's and one sampled schedule: 100,000 policy steps
        limit = {"evaluations": 2}
    else:
        limit = {"evaluations": 450 if solver in LEARNED else 200}
    start = time.perf_counter()
    result = optimize(graph, machine, objective, solver, seed=0, **limit)
    assert time.perf_counter() - start < 120, "seconds, not minutes"
    check(graph, machine, objective, result)


# ---------------------------------------------------------------------------------- metrics
def test_ratios_against_a_reference_of_zero_are_stated_not_divided() -> None:
    with np.errstate(all="raise"):
        assert improvement_over([0.0, 2.0, 3.0, 0.0], [0.0, 4.0, 0.0, 4.0]).tolist() == [
            0.0,
            50.0,
            -math.inf,
            100.0,
        ]
        assert gap_from_best([0.0, 6.0, 1.0], [0.0, 4.0, 0.0]).tolist() == [0.0, 50.0, math.inf]
        assert geometric_mean_gap(np.array([0.0, 0.0])) == 0.0
        assert geometric_mean_gap(np.array([0.0, math.inf])) == math.inf
        mean, low, high = mean_with_ci(np.array([10.0, -math.inf, 0.0]))
    assert mean == -math.inf and math.isnan(low) and math.isnan(high)


def _run(graph: str, solver: str, value: float) -> Run:
    trace = Trace([1], [0.0], [0], [value])
    return Run(graph, solver, 0, value, True, 1, 0.0, "feasible", trace)


def test_bench_reports_where_brkga_finds_zero(tmp_path: Path) -> None:
    # On g0 BRKGA's makespan is 0 and random-search's is not (it paid for a transfer).
    runs = [
        _run("g0", "brkga", 0.0),
        _run("g0", "random-search", 0.5),
        _run("g1", "brkga", 0.0),
        _run("g1", "random-search", 0.0),
        _run("g2", "brkga", 4.0),
        _run("g2", "random-search", 2.0),
    ]
    with np.errstate(all="raise"):
        summary = summarize(runs, ["brkga", "random-search"])
    rows = {row["solver"]: row for row in summary}
    assert rows["brkga"]["improvement_over_brkga_pct"] == 0.0
    assert math.isclose(rows["brkga"]["geomean_gap_from_best_pct"], 100 * (2 ** (1 / 3) - 1))
    mine = rows["random-search"]
    assert mine["improvement_over_brkga_pct"] == -math.inf
    assert mine["geomean_gap_from_best_pct"] == math.inf
    assert (mine["wins"], mine["ties"], mine["losses"]) == (1, 1, 1)
    table = markdown_table(summary, 100)
    assert "| random-search | -inf | inf | - | 1 / 1 / 1 |" in table  # no lower bound known
    written = write_reports(BenchResult(runs, summary, 100), tmp_path, "degenerate")
    assert all(path.exists() for path in written)


# -------------------------------------------------------------------------------- commands
runner = CliRunner()


def invoke_json(*args: str) -> dict:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def graph_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("degenerate")
    paths = {}
    for name in SMALL:
        paths[name] = folder / f"{name}.json"
        write_graph(graph_named(name), paths[name])
    return paths


@pytest.mark.parametrize("suffix", [".json", ".npz"])
@pytest.mark.parametrize("name", list(SMALL))
def test_info(name: str, suffix: str, tmp_path: Path) -> None:
    graph = graph_named(name)
    path = tmp_path / f"{name}{suffix}"
    write_graph(graph, path)
    info = invoke_json("info", str(path))
    assert (info["ops"], info["tensors"], info["edges"]) == (
        graph.n_ops,
        graph.n_tensors,
        graph.n_edges,
    )
    assert info["critical_path"] <= info["total_runtime"]
    assert math.isfinite(info["max_speedup"])


@pytest.mark.parametrize("solver", list(SOLVERS))
def test_optimize_then_score(solver: str, graph_files: dict[str, Path], tmp_path: Path) -> None:
    for name in ("empty", "no-edges"):
        output = tmp_path / f"{name}.solution.json"
        limit = ["--time", "0.5"] if solver == "cp-sat" else ["--budget", "420"]
        summary = invoke_json(
            "optimize",
            str(graph_files[name]),
            "-o",
            str(output),
            "--solver",
            solver,
            "--objective",
            "makespan",
            "--devices",
            str(LEARNED.get(solver) or 2),
            "--latency",
            "0.001",
            "--bandwidth",
            "1e6",
            *limit,
        )
        scored = invoke_json("score", str(graph_files[name]), str(output))
        assert scored["makespan"] == summary["makespan"], name
        assert scored["peak_memory"] == summary["peak_memory"], name
        assert summary["lower_bound"] <= summary["value"], name


def test_optimize_without_a_policy_for_the_machine(
    graph_files: dict[str, Path], tmp_path: Path
) -> None:
    output = tmp_path / "solution.json"
    result = runner.invoke(
        app,
        [
            "optimize", str(graph_files["empty"]), "-o", str(output), "--solver", "regal",
            "--devices", "1",
        ],
    )  # fmt: skip
    assert result.exit_code == 2
    last = result.stderr.splitlines()[-1]
    assert re.match(r"error: no shipped regal policy for peak-memory on 1 devices", last)
    assert not output.exists()


@pytest.mark.parametrize("objective", list(Objective))
def test_bench_on_a_folder_of_degenerate_graphs(
    objective: Objective, graph_files: dict[str, Path], tmp_path: Path
) -> None:
    folder = next(iter(graph_files.values())).parent
    solvers = "auto,compiler-best,gp-kl,regal,cp-sat"
    report = invoke_json(
        "bench",
        str(folder),
        "--solvers",
        solvers,
        "--objective",
        objective.value,
        "--budget",
        "500",
        "--exact-time",
        "1",
        "-o",
        str(tmp_path),
    )
    rows = {row["solver"]: row for row in report["summary"]}
    assert set(rows) == {*solvers.split(","), "brkga"}
    for row in rows.values():
        assert row["graphs"] == len(SMALL)
        assert math.isfinite(row["improvement_over_brkga_pct"])
        assert math.isfinite(row["geomean_gap_from_best_pct"])
    assert all(Path(path).exists() for path in report["files"])
