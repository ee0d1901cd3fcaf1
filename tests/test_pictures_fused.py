"""Fused solutions in the profile and the pictures (issue 43, defect 2).

A fusion group runs as one kernel: the scorer measures its memory once and times it as one
launch, so the profile has one step for it, `plot` draws it as one bar labelled with its op
count, and `compare` overlays fused and unfused solutions of one graph.
"""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from builders import graph, op, tensor
from graphopt.cli import app
from graphopt.costmodels._reference import reference_event_times, reference_score, reference_steps
from graphopt.costmodels.machine import Machine
from graphopt.costmodels.profile import memory_profile
from graphopt.costmodels.score import Scorer
from graphopt.errors import SolutionError
from graphopt.ir.graph import Graph
from graphopt.ir.solution import Solution
from graphopt.pictures import _draw_gantt, _pyplot
from graphopt.solvers.fusion import FUSION_POLICIES, apply_fusion, priority_fusion
from strategies import fused_problems, problems, with_fusion

runner = CliRunner()

POLICIES = (*(p for p in FUSION_POLICIES if p != "none"), "search")
"""Every way `optimize --fusion` makes groups; `search` decodes random fusion priorities, as the
chromosome's fusion genes are decoded."""


def _chain() -> tuple[Graph, Solution, Machine]:
    """x -> a -> b -> c on device 0, with a, b, c one group; c's output goes to d on device 1."""
    ops = [
        op("x", 1.0, fusion="none"),
        op("a", 4.0, fusion="contraction", compute_time=0.5, temp_memory=50),
        op("b", 1.0, fusion="elementwise", compute_time=0.5),
        op("c", 1.0, fusion="elementwise", compute_time=0.5, temp_memory=30),
        op("d", 2.0, fusion="none"),
    ]
    tensors = [
        tensor("X", 100, "x", "a", persistent=True),
        tensor("A", 400, "a", "b"),
        tensor("B", 400, "b", "c"),
        tensor("C", 200, "c", "d"),
        tensor("D", 10, "d", output=True),
    ]
    g = graph(ops, tensors, name="chain").with_attrs(
        kernel={"memory_bandwidth": 100.0, "launch_overhead": 0.25}
    )
    transfer = g.n_ops + 3 * 2 + 1  # C to device 1
    s = Solution([0, 0, 0, 0, 1], [0, 1, 2, 3, transfer, 4], 2, fusion=[-1, 0, 0, 0, -1])
    return g, s, Machine(n_devices=2, latency=0.5, bandwidth=1000.0)


def test_a_group_is_one_step_of_the_profile() -> None:
    g, s, machine = _chain()
    profile = memory_profile(g, s, machine)
    assert profile.n_steps == 4 and profile.n_events == 6
    assert profile.events.tolist() == s.order.tolist()
    assert profile.order.tolist() == [0, 1, s.order[4], 4]
    assert profile.ops.tolist() == [1, 3, 0, 1]
    # A and B stay inside the group; it holds X, its output C and both temps at once.
    assert profile.memory.tolist() == [[100, 0], [380, 0], [300, 200], [100, 210]]
    # 300 bytes of traffic at 100 B/s beat 1.5 s of compute, plus the launch.
    assert profile.start.tolist() == pytest.approx([0.0, 1.0, 4.25, 4.95])
    assert profile.finish.tolist() == pytest.approx([1.0, 4.25, 4.95, 6.95])
    assert profile.device.tolist() == [0, 0, 1, 1]
    assert profile.source.tolist() == [0, 0, 0, 1]
    scored = Scorer(g, machine).score(s)
    assert profile.peak_memory_per_device == scored.peak_memory_per_device == (380, 210)
    assert profile.makespan == scored.makespan


def test_groups_on_a_graph_without_a_kernel_are_refused_as_the_scorer_refuses_them() -> None:
    g, s, machine = _chain()
    bare = replace(g, attrs={})
    with pytest.raises(SolutionError, match="has no 'kernel' field"):
        memory_profile(bare, s, machine)


def _agrees_with_the_scorer(g: Graph, machine: Machine, s: Solution) -> None:
    """Per-device peaks and makespan equal both scorers'; one row per step of the rules."""
    profile = memory_profile(g, s, machine)
    scored = Scorer(g, machine).score(s)
    reference = reference_score(g, s, machine)
    assert profile.peak_memory_per_device == scored.peak_memory_per_device
    assert profile.peak_memory_per_device == reference.peak_memory_per_device
    assert profile.makespan == scored.makespan == reference.makespan
    steps = reference_steps(g, s)
    n = len(steps)
    assert profile.n_steps == n and profile.n_events == s.order.shape[0]
    assert profile.memory.shape == (n, machine.n_devices)
    for values in (profile.order, profile.start, profile.finish, profile.device, profile.source):
        assert values.shape == (n,)
    assert profile.occupies.shape == (n,)
    assert profile.ops.tolist() == [len(step) if step[0] < g.n_ops else 0 for step in steps]
    assert int(profile.ops.sum()) == g.n_ops
    times = reference_event_times(g, s, machine)
    assert list(zip(profile.start, profile.finish, strict=True)) == times
    for device in range(machine.n_devices):
        mine = np.flatnonzero(profile.occupies & (profile.device == device))
        assert (profile.start[mine[1:]] >= profile.finish[mine[:-1]]).all()


@pytest.mark.parametrize("policy", POLICIES)
@settings(max_examples=20, deadline=None)
@given(problems(15, ("random", "one", "blocks")), st.integers(0, 2**32 - 1))
def test_the_profile_of_every_fusion_policy_is_the_scorers(policy, problem, seed) -> None:
    g, machine, s = problem
    rng = np.random.default_rng(seed)
    g = with_fusion(g, rng)
    if policy == "search":
        fused = priority_fusion(g, s, rng.uniform(0.3, 1.0, g.n_ops))
    elif policy == "anneal":  # on a kernel where fusing pays, so that annealing keeps groups
        g = g.with_attrs(kernel={"memory_bandwidth": 1e6, "launch_overhead": 0.0})
        fused = apply_fusion(policy, g, machine, s, "makespan", evaluations=30, seed=seed)
    else:
        fused = apply_fusion(policy, g, machine, s, "makespan")
    event(f"groups: {min(fused.n_groups, 3)}")
    _agrees_with_the_scorer(g, machine, replace(fused, objective={}))


@settings(max_examples=30, deadline=None)
@given(fused_problems(max_ops=15))
def test_the_profile_of_random_legal_groups_is_the_scorers(problem) -> None:
    _agrees_with_the_scorer(*problem)


def test_the_gantt_chart_draws_a_group_as_one_bar_labelled_with_its_op_count() -> None:
    g, s, machine = _chain()
    profile = memory_profile(g, s, machine)
    plt = _pyplot()
    figure, axes = plt.subplots()
    try:
        _draw_gantt(axes, g, profile, lane_points=36.0)
        bars = sum(len(c.get_paths()) for c in axes.collections)
        texts = [t.get_text() for t in axes.texts]
    finally:
        plt.close(figure)
    assert bars == 4  # x, the group, C's transfer, d: not one bar per op
    assert "3 fused ops" in texts
    assert not {"a", "b", "c"} & set(texts)


def invoke(*args: object) -> tuple[int, str, str]:
    result = runner.invoke(app, [str(a) for a in args])
    return result.exit_code, result.stdout, result.stderr


def test_plot_and_compare_draw_fused_solutions(tmp_path) -> None:
    graph_path, fused, plain = (tmp_path / name for name in ("g.json", "fused.json", "plain.json"))
    code, _, _ = invoke("generate", "layered", "-n", 40, "-p", "fusion=true", "-o", graph_path)
    assert code == 0
    options = ("--solver", "heft", "--devices", 1, "--objective", "makespan")
    code, _, _ = invoke("optimize", graph_path, *options, "--fusion", "default", "-o", fused)
    assert code == 0
    document = json.loads(fused.read_text())
    assert document["fusion"]
    # The same order without its groups: a valid unfused solution with more steps.
    unfused = {k: v for k, v in document.items() if k not in ("fusion", "objective")}
    plain.write_text(json.dumps(unfused))
    code, stdout, stderr = invoke("score", graph_path, fused, "--json")
    assert code == 0, stderr
    scored = json.loads(stdout)
    picture = tmp_path / "fused.png"
    code, stdout, stderr = invoke("plot", graph_path, fused, "-o", picture, "--json")
    assert code == 0, stderr
    plotted = json.loads(stdout)
    assert plotted["peak_memory_per_device"] == scored["peak_memory_per_device"]
    assert plotted["makespan"] == scored["makespan"]
    assert picture.stat().st_size > 0
    both = tmp_path / "both.svg"
    code, stdout, stderr = invoke("compare", graph_path, fused, plain, "-o", both, "--json")
    assert code == 0, stderr
    makespans = [s["makespan"] for s in json.loads(stdout)["solutions"]]
    assert makespans[0] == scored["makespan"] != makespans[1]
    assert both.stat().st_size > 0
