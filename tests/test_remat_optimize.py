"""`optimize --remat`: recomputation after the search, re-scored, bounded and refused cleanly."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from graphopt import optimize
from graphopt.cli import app
from graphopt.costmodels._reference import reference_score
from graphopt.costmodels.machine import Machine
from graphopt.errors import GraphoptError
from graphopt.ir.io import write_graph
from graphopt.solvers.base import InfeasibleError
from graphopt.solvers.bounds import peak_memory_lower_bound
from solvers.test_remat_baselines import training_chain

runner = CliRunner()


def test_remat_lowers_the_peak_within_the_overhead_and_quotes_a_bound_that_holds() -> None:
    graph = training_chain(32)
    plain = optimize(graph, Machine(1), "peak-memory", evaluations=3000)
    result = optimize(graph, Machine(1), "peak-memory", evaluations=3000, remat=True)
    assert result.solution.remat
    assert result.score == reference_score(graph, result.solution, Machine(1))
    assert result.value < plain.value
    assert result.score.makespan <= 1.2 * graph.total_runtime * (1 + 1e-9)
    assert result.bound == peak_memory_lower_bound(graph, 1, recompute=True) <= result.value
    assert any("ops run or copies transferred again" in n for n in result.solution.solver["notes"])
    tight = optimize(
        graph, Machine(1), "peak-memory", evaluations=3000, remat=True, max_overhead=0.05
    )
    assert tight.score.makespan <= 1.05 * graph.total_runtime * (1 + 1e-9)
    assert result.value <= tight.value


def test_remat_for_makespan_fits_the_capacity_with_the_seconds_it_needs() -> None:
    graph = training_chain(32)
    capacity = 2500
    assert capacity < peak_memory_lower_bound(graph, 1)  # no schedule fits without recomputing
    with pytest.raises(InfeasibleError, match="below the lower bound"):
        optimize(graph, Machine(1, capacity=capacity), "makespan", evaluations=3000)
    fits = optimize(graph, Machine(1, capacity=capacity), "makespan", evaluations=3000, remat=True)
    assert fits.feasible and fits.score.peak_memory <= capacity
    assert graph.total_runtime < fits.value < 2 * graph.total_runtime
    roomy = optimize(graph, Machine(1), "makespan", evaluations=300, remat=True)
    assert not roomy.solution.remat
    assert "recomputing only adds seconds" in roomy.solution.solver["notes"][-1]


def test_remat_on_two_devices_with_costly_transfers() -> None:
    """Ops run again on their own device and copies are transferred again; every solution the
    search found is re-scored by both scorers, and the makespan stays within the limit."""
    graph = training_chain(24)
    machine = Machine(2, latency=0.5, bandwidth=1000.0)
    plain = optimize(graph, machine, "peak-memory", evaluations=2000)
    result = optimize(graph, machine, "peak-memory", evaluations=2000, remat=True, max_overhead=0.5)
    assert result.solution.remat and result.value < plain.value
    assert result.score == reference_score(graph, result.solution, machine)
    assert result.score.makespan <= plain.score.makespan * 1.5 * (1 + 1e-9)


@pytest.mark.parametrize(
    ("machine", "options", "message"),
    [
        (Machine(1), {"remat": True, "fusion": "default"}, "does not combine with fusion"),
        (Machine(1), {"max_overhead": 0.1}, "add remat"),
        (Machine(1), {"remat": True, "max_overhead": -0.1}, "must be a fraction >= 0"),
    ],
)
def test_what_remat_does_not_run_yet_is_refused(machine, options, message) -> None:
    with pytest.raises(GraphoptError, match=message):
        optimize(training_chain(4), machine, "peak-memory", evaluations=10, **options)


def test_the_cli_writes_a_recomputing_solution_that_score_reproduces(tmp_path) -> None:
    path, out = tmp_path / "g.json", tmp_path / "s.json"
    write_graph(training_chain(24), path)
    result = runner.invoke(
        app,
        ["optimize", str(path), "-o", str(out), "--devices", "1", "--remat",
         "--max-overhead", "30", "--budget", "2000", "--json"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["remat"] is True
    assert runner.invoke(app, ["score", str(path), str(out)]).exit_code == 0
    refused = runner.invoke(app, ["optimize", str(path), "-o", str(out), "--max-overhead", "5"])
    assert refused.exit_code == 2
    assert "add remat" in refused.output and "Traceback" not in refused.output
