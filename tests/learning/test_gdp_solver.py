"""The gdp solver: a trained placement policy, zero-shot or fine-tuned, re-scored exactly."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from graphopt.cli import app
from graphopt.costmodels._reference import reference_score
from graphopt.costmodels.machine import Machine
from graphopt.ir.generators import generate
from graphopt.ir.io import read_solution, write_graph
from graphopt.ir.solution import Solution
from graphopt.learning.placement.env import PlacementEnv
from graphopt.learning.placement.hint import partition_hint
from graphopt.learning.seeding import Elite
from graphopt.learning.systems.gdp.solver import (
    GDP,
    SEARCH_SAMPLES,
    GDPAlone,
    GDPSolverConfig,
    offer_scheduled,
)
from graphopt.solvers.base import Budget, Problem, SolverError, Tracker
from graphopt.solvers.portfolio import Portfolio
from graphopt.solvers.registry import make_solver


@pytest.fixture(scope="module")
def policy(gdp_policy) -> str:
    """The toy GDP policy (a small network, 2 devices, pipeline prior)."""
    return gdp_policy


@pytest.mark.parametrize("n_devices", [2, 4])
def test_zero_shot_placements_on_any_device_count_are_valid_and_exact(policy, n_devices) -> None:
    graph = generate("sbm", 60, seed=3)  # never trained on
    machine = Machine(n_devices=n_devices, latency=1e-3, bandwidth=1e7)
    problem = Problem(graph, machine, "makespan")
    result = make_solver("gdp-policy", policy).solve(problem, Budget(evaluations=100), seed=0)
    assert result.evaluations == 1 + 64  # the most likely placement, then 64 samples
    assert reference_score(graph, result.solution, machine).makespan == result.value
    again = make_solver("gdp-policy", policy).solve(problem, Budget(evaluations=100), seed=0)
    assert again.value == result.value


def test_fine_tuning_spends_its_samples_and_keeps_pins(policy, monkeypatch) -> None:
    graph = generate("layered", 50, seed=7)
    machine = Machine(n_devices=2, latency=0.05, bandwidth=3e5)
    pins = np.full(graph.n_ops, -1)
    pins[[0, 5]] = 1
    problem = Problem(graph, machine, "makespan", pins)
    scored: list[np.ndarray] = []
    schedules = PlacementEnv.schedules

    def spy(env, placements):
        scored.append(np.array(placements))
        return schedules(env, placements)

    monkeypatch.setattr(PlacementEnv, "schedules", spy)
    solver = GDPAlone(GDPSolverConfig(policy=policy, finetune=3, samples=10))
    result = solver.solve(problem, Budget(evaluations=1000), seed=1)
    # PPO's rewards are of placements the problem allows, not only the offers
    assert sum(map(len, scored)) > result.evaluations
    assert all((placements[:, [0, 5]] == 1).all() for placements in scored)
    # zero-shot 1, 3 steps of 8 samples (the checkpoint's), then the most likely and 10 samples
    assert result.evaluations == 1 + 3 * 8 + 1 + 10
    assert (result.solution.placement[[0, 5]] == 1).all()
    assert reference_score(graph, result.solution, machine).makespan == result.value
    short = solver.solve(problem, Budget(evaluations=5), seed=1)
    assert short.evaluations == 5 and short.solution is not None  # the zero-shot one was offered


def test_bad_requests_are_refused_in_one_line(policy) -> None:
    graph = generate("layered", 20, seed=1)
    with pytest.raises(SolverError, match=r"places onto 2\.\.4 devices, the machine has 5"):
        make_solver("gdp", policy).solve(Problem(graph, Machine(5), "makespan"), Budget(10))
    finetuners = "gdp, gdp-policy, go, go-policy"
    with pytest.raises(SolverError, match=f"--finetune applies to {finetuners}, not 'heft'"):
        make_solver("heft", finetune=2)
    with pytest.raises(SolverError, match="finetune must be in"):
        GDPSolverConfig(finetune=-1)


def test_the_optimize_command_fine_tunes_and_writes_a_rescorable_solution(policy, tmp_path) -> None:
    graph = generate("layered", 30, seed=2)
    write_graph(graph, tmp_path / "g.json")
    out = tmp_path / "s.json"
    result = CliRunner().invoke(
        app,
        [
            "optimize", str(tmp_path / "g.json"), "--objective", "makespan", "--devices", "2",
            "--solver", "gdp", "--policy", policy, "--finetune", "2", "--budget", "200",
            "-o", str(out),
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    solution = read_solution(out, graph)
    assert reference_score(graph, solution, Machine(2)).makespan > 0
    bad = CliRunner().invoke(
        app, ["optimize", str(tmp_path / "g.json"), "--solver", "heft", "--finetune", "2",
              "-o", str(tmp_path / "x.json")],
    )  # fmt: skip
    assert bad.exit_code == 2 and "--finetune applies to gdp" in bad.output


def test_a_policy_for_another_system_is_refused_naming_both(policy, tmp_path) -> None:
    from graphopt.learning.formats import shipped_policy_path

    regal = shipped_policy_path("regal", "makespan", 2)
    assert regal is not None
    problem = Problem(generate("layered", 20, seed=1), Machine(2), "makespan")
    with pytest.raises(SolverError, match="GDP policy"):
        make_solver("gdp", regal).solve(problem, Budget(10))


def test_offers_are_scheduled_as_the_policys_environment_schedules() -> None:
    graph = generate("layered", 60, seed=3)
    machine = Machine(n_devices=3, latency=1e-3, bandwidth=1e7)
    problem = Problem(graph, machine, "makespan")
    placements = np.random.default_rng(0).integers(0, 3, (6, graph.n_ops))
    for schedulers in (("ready-queue",), ("timeline",), ("ready-queue", "timeline")):
        env = PlacementEnv(graph, machine, schedulers=schedulers)
        tracker = Tracker(problem, Budget(evaluations=10))
        offer_scheduled(tracker, env, None, placements)
        assert tracker.evaluations == 6
        best = int(np.argmin(env.step(placements).makespan))
        assert tracker.best_key == (0, env.step(placements[best]).makespan[0])
        solution = Solution(tracker.best_placement, tracker.best_order, 3)
        assert reference_score(graph, solution, machine).makespan == tracker.best_key[1]


def test_a_hinted_policy_offers_its_hint_first_and_never_returns_worse(hinted_gdp_policy) -> None:
    graph = generate("layered", 60, seed=9)
    machine = Machine(n_devices=3, latency=1e-3, bandwidth=1e7)
    problem = Problem(graph, machine, "makespan")
    solver = GDPAlone(GDPSolverConfig(hinted_gdp_policy, samples=4))
    result = solver.solve(problem, Budget(evaluations=100), seed=0)
    assert result.evaluations == 1 + 1 + 4  # the hint, the most likely placement, the samples
    env = PlacementEnv(graph, machine)
    hint = env.step(partition_hint(env)).makespan[0]
    assert result.value <= hint
    assert solver.solve(problem, Budget(evaluations=1), seed=0).value == hint


@pytest.mark.parametrize("bad", ["missing.pt", "graph.json"])
def test_a_bad_policy_is_refused_on_one_device_too(tmp_path, bad) -> None:
    """Found by the CLI fuzz tier at 10,000: one device has one placement, so the policy was
    never opened and a wrong --policy passed silently."""
    graph = generate("layered", 12, seed=0)
    write_graph(graph, tmp_path / "graph.json")
    problem = Problem(graph, Machine(1), "makespan")
    solver = GDPAlone(GDPSolverConfig(policy=str(tmp_path / bad)))
    for budget in (Budget(evaluations=5), Budget(seconds=1e-3)):  # spent by the first offer
        with pytest.raises(SolverError, match="policy checkpoint"):
            solver.solve(problem, budget)


def test_gdp_searches_the_rest_of_its_budget_from_its_best_placements(policy, monkeypatch) -> None:
    """`gdp` = the policy's offers, then `auto`'s search seeded with its best distinct ones."""
    graph = generate("sbm", 60, seed=3)
    machine = Machine(n_devices=4, latency=1e-3, bandwidth=1e7)
    problem = Problem(graph, machine, "makespan")
    config = GDPSolverConfig(policy, samples=SEARCH_SAMPLES)
    alone = GDPAlone(config).solve(problem, Budget(evaluations=300), seed=0)
    seeds: list[list[Solution]] = []
    run = Portfolio.run

    def spy(self, problem, tracker, rng, initial):
        seeds.append(list(initial))
        return run(self, problem, tracker, rng, initial)

    monkeypatch.setattr(Portfolio, "run", spy)
    searched = make_solver("gdp", policy).solve(problem, Budget(evaluations=300), seed=0)
    assert alone.evaluations == 1 + SEARCH_SAMPLES and searched.evaluations == 300
    assert searched.value <= alone.value
    assert reference_score(graph, searched.solution, machine).makespan == searched.value
    (initial,) = seeds
    assert 1 < len(initial) <= GDPSolverConfig().seeds
    values = [reference_score(graph, seed, machine).makespan for seed in initial]
    assert values == sorted(values) and values[0] == alone.value  # the policy's best first
    assert len({(s.placement.tobytes(), s.order.tobytes()) for s in initial}) == len(initial)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 6),
    st.lists(st.integers(1, 7), min_size=1, max_size=4),
    st.integers(0, 2**31),
    st.sampled_from([None, 3]),
)
def test_the_elite_keeps_the_best_distinct_candidates(size, batches, seed, capacity) -> None:
    """`Elite` against a sort of every candidate offered, repeats dropped."""
    rng = np.random.default_rng(seed)
    graph = generate("layered", 6, seed=0)
    problem = Problem(graph, Machine(2, capacity=capacity), "makespan")
    elite = Elite(problem, size)
    every: list[tuple[int, float, bytes]] = []
    pool = rng.integers(0, 2, (5, 6)), [rng.permutation(3) for _ in range(5)]
    for rows in batches:  # drawn from a small pool, so that candidates repeat
        drawn = rng.integers(0, 5, rows)
        placements, orders = pool[0][drawn], [pool[1][i] for i in drawn]
        # a candidate's score follows from it (ties are common), as the scorer's does
        peaks = np.stack([np.bincount(p, minlength=2) for p in placements])
        makespans = 1.0 + (placements @ np.arange(6) + [o[0] for o in orders]) % 3
        elite.add(placements, orders, peaks, makespans)
        excess, value = problem.fitness(peaks, makespans)
        for b in range(rows):
            key = placements[b].astype(np.int32).tobytes() + orders[b].astype(np.int64).tobytes()
            if key not in {k for *_, k in every}:
                every.append((int(excess[b]), float(value[b]), key))
    expected = sorted(every, key=lambda kept: kept[:2])[:size]
    kept = elite.solutions()
    assert [s.placement.tobytes() + s.order.tobytes() for s in kept] == [k for *_, k in expected]


def test_fine_tuning_asked_for_is_not_cut_by_the_policys_share(policy, monkeypatch) -> None:
    """`policy_share` bounds the offers of a zero-shot policy, not the fine-tuning a user asked."""
    graph = generate("layered", 50, seed=7)
    problem = Problem(graph, Machine(n_devices=2, latency=0.05, bandwidth=3e5), "makespan")
    started: list[int] = []
    run = Portfolio.run

    def spy(self, problem, tracker, rng, initial):
        started.append(tracker.evaluations)
        return run(self, problem, tracker, rng, initial)

    monkeypatch.setattr(Portfolio, "run", spy)
    config = GDPSolverConfig(policy, finetune=3, samples=4)
    result = GDP(config).solve(problem, Budget(evaluations=100), seed=1)  # a quarter: 25
    assert started == [1 + 3 * 8 + 1 + 4] and result.evaluations == 100
