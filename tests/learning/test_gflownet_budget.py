"""The GFlowNet solver under a budget: every sample scored, --time honoured, top-K explained."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import graphopt.learning.systems.gflownet.solver as gflownet_module
from graphopt.cli import app
from graphopt.costmodels.machine import Machine
from graphopt.ir.generators import generate
from graphopt.ir.io import write_graph
from graphopt.learning.systems.gflownet.solver import (
    GROWTH,
    BatchTimes,
    GFlowNet,
    GFlowNetSamplerConfig,
)
from graphopt.optimize import optimize
from graphopt.solvers.base import Budget, Objective, Problem
from learned import save_untrained_gflownet


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("gflownet") / "best.pt"
    save_untrained_gflownet(path, n_devices=2)
    return path


@pytest.fixture
def drawn(monkeypatch) -> list[int]:
    """The size of every batch the solver samples."""
    sizes: list[int] = []
    sample = gflownet_module.sample_trajectories

    def counted(policy, graph, machine, batch, *args, **kwargs):
        sizes.append(batch)
        return sample(policy, graph, machine, batch, *args, **kwargs)

    monkeypatch.setattr(gflownet_module, "sample_trajectories", counted)
    return sizes


def makespan_problem(n_ops: int) -> Problem:
    return Problem(generate("layered", n_ops, seed=5), Machine(2), Objective.MAKESPAN)


def test_every_schedule_sampled_before_the_time_ends_is_scored(checkpoint, drawn) -> None:
    solver = GFlowNet(GFlowNetSamplerConfig(str(checkpoint), samples=100_000))
    solver.solve(makespan_problem(12), Budget(evaluations=2))  # loads and compiles, untimed
    drawn.clear()
    result = solver.solve(makespan_problem(12), Budget(seconds=0.5), seed=0)
    # every sample, and HEFT's schedules
    assert sum(drawn) == result.evaluations - len(solver.heft) == len(solver.sampled) > 1
    # each batch at most GROWTH times the largest before it: predictions stay near measurements
    assert drawn[0] == 1 and len(drawn) > 2
    assert GROWTH == 4 and all(size <= 4 * max(drawn[:i]) for i, size in enumerate(drawn) if i)
    note = result.solution.solver["notes"][-1]
    assert note.startswith(f"sampled {len(solver.sampled):,} of the 100,000 schedules asked in ")
    assert "s: the time budget allowed no more" in note
    assert result.solution.solver["stopped"] == "budget"  # not "finished": the time ran out


def test_the_time_budget_is_honoured_when_one_full_batch_would_overrun_it(checkpoint) -> None:
    # 125 schedules of a 60-op graph (one full batch) take longer than the budget
    solver = GFlowNet(GFlowNetSamplerConfig(str(checkpoint), samples=1000))
    start = time.perf_counter()
    result = solver.solve(makespan_problem(60), Budget(seconds=1.0), seed=0)
    seconds = time.perf_counter() - start
    assert seconds <= 1.1 * 1.0 + 0.4  # 10%, and room for a busy machine
    assert result.evaluations == len(solver.sampled) + len(solver.heft)  # HEFT's and samples
    assert len(solver.sampled) >= 1


def test_batch_times_fit_the_steps_and_each_schedule() -> None:
    times = BatchTimes()
    assert times.predict(10) == 0.0
    times.record(1, 0.5)
    # one size timed: no batch is predicted faster than it, nor a larger one per schedule
    assert times.predict(1) == times.predict(0) == 0.5 and times.predict(4) == 2.0
    assert times.largest(50, 1.9) == 3 and times.largest(50, 0.4) == 0
    times.record(11, 1.5)  # the first batch (warming up) leaves the fit
    assert not times.fitted and times.predict(22) == 3.0 and times.predict(5) == 1.5
    times.record(6, 1.0)  # a = 0.4 s for the steps, b = 0.1 s per schedule
    assert times.fitted and times.predict(21) == pytest.approx(2.5)
    assert times.largest(125, 2.05) == 16 and times.largest(10, 2.05) == 10
    assert times.predict(2) == times.predict(6) == pytest.approx(1.0)  # not extrapolated below
    assert times.per_schedule() == pytest.approx(1.5 / 11)
    noisy = BatchTimes()
    for size, seconds in ((1, 5.0), (4, 1.0), (8, 0.9)):  # b < 0: the bound, from the last
        noisy.record(size, seconds)
    assert not noisy.fitted and noisy.predict(16) == pytest.approx(1.8)


def test_an_evaluation_budget_draws_the_same_batches_every_run(checkpoint, drawn) -> None:
    solver = GFlowNet(GFlowNetSamplerConfig(str(checkpoint), samples=300))
    first = solver.solve(makespan_problem(12), Budget(evaluations=134), seed=3)
    assert drawn == [125, 5] and first.evaluations == 134  # and HEFT's four schedules
    again = solver.solve(makespan_problem(12), Budget(evaluations=134), seed=3)
    assert again.value == first.value and drawn[2:] == [125, 5]


def test_top_k_says_why_it_writes_fewer_than_k(checkpoint, tmp_path) -> None:
    graph = generate("layered", 14, seed=2)
    few = optimize(
        graph, Machine(2), "makespan", "gflownet", 4, policy=str(checkpoint), candidates=10
    )
    assert len(few.candidates) <= 4
    assert few.solution.solver["notes"][-1].startswith(
        f"top-K: {len(few.candidates)} of the K = 10 candidates asked: only 4 sampled within "
        "the budget"
    )
    many = optimize(
        graph, Machine(2), "makespan", "gflownet", 60, policy=str(checkpoint), candidates=10
    )
    keys = {c.placement.tobytes() + c.order.tobytes() for c in many.candidates}
    assert len(many.candidates) == len(keys) == 10
    assert not any(n.startswith("top-K") for n in many.solution.solver.get("notes", []))
    # every op on device 0 of a 3-op graph: few distinct schedules, the rest repeat
    tiny = generate("layered", 3, seed=0)
    pins = {name: 0 for name in tiny.op_names}
    repeats = optimize(
        tiny,
        Machine(2),
        "makespan",
        "gflownet",
        20,
        pins=pins,
        policy=str(checkpoint),
        candidates=10,
    )
    assert len(repeats.candidates) < 10
    assert repeats.solution.solver["notes"][-1].endswith(
        f"{20 - len(repeats.candidates)} of the 20 sampled repeat another"
    )
    write_graph(graph, tmp_path / "g.json")
    args = ["optimize", str(tmp_path / "g.json"), "-o", str(tmp_path / "s.json"), "--devices", "2"]
    args += ["--objective", "makespan", "--solver", "gflownet", "--policy", str(checkpoint)]
    args += ["--budget", "4", "--candidates", str(tmp_path / "top"), "--top-k", "10"]
    run = CliRunner().invoke(app, [*args, "--json"])
    assert run.exit_code == 0, run.output
    summary = json.loads(run.stdout)
    assert summary["candidates"]["asked"] == 10 and summary["candidates"]["k"] <= 4
    assert any(note.startswith("top-K: ") for note in summary["notes"])
    printed = CliRunner().invoke(app, args)
    assert printed.exit_code == 0 and "note: top-K: " in printed.output


@pytest.mark.slow
def test_the_default_run_on_200_ops_fits_its_time_and_writes_ten_candidates() -> None:
    graph = generate("layered", 200, seed=0)
    for seconds in (5.0, 10.0):
        start = time.perf_counter()
        result = optimize(graph, Machine(4), "makespan", "gflownet", seconds=seconds, candidates=10)
        assert time.perf_counter() - start <= 1.1 * seconds
        keys = {c.placement.tobytes() + c.order.tobytes() for c in result.candidates}
        assert len(keys) == len(result.candidates) == min(10, result.evaluations)
        assert np.isfinite(result.value)


def test_the_default_budget_gives_the_sampler_its_own_default_seconds(checkpoint) -> None:
    """optimize's default budget (10 s, a stall rule) would let a sampler, which no stall ends,
    sample for 10 s: the solver takes its `DEFAULT_SECONDS` instead; --time is honoured."""
    graph, machine = generate("layered", 300, seed=2), Machine(2)
    optimize(graph, machine, "makespan", "gflownet", 2, policy=str(checkpoint))  # warm
    start = time.perf_counter()
    result = optimize(graph, machine, "makespan", "gflownet", policy=str(checkpoint))
    seconds = gflownet_module.DEFAULT_SECONDS
    assert time.perf_counter() - start < seconds + 1.5
    note = result.solution.solver["notes"][-1]
    assert f"the default {seconds:g} s (--time or --budget for more)" in note
    # an explicit --time, even of the default's length, is the user's: not "the default"
    for given in (2.0, seconds):
        timed = optimize(
            graph, machine, "makespan", "gflownet", seconds=given, policy=str(checkpoint)
        )
        assert "s: the time budget allowed no more" in timed.solution.solver["notes"][-1]
