"""GO's multi-task policy: network, environment, modes, PPO training and the `go` solver."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from tests.learned import killed_and_resumed, without_seconds

from graphopt.costmodels._reference import reference_score
from graphopt.costmodels.machine import Machine
from graphopt.ir.generators import generate
from graphopt.ir.io import write_graph
from graphopt.ir.solution import Solution
from graphopt.learning.batching import make_batch
from graphopt.learning.objectives.ppo import PPOConfig
from graphopt.learning.optim import AdamConfig
from graphopt.learning.placement.features import placement_features
from graphopt.learning.run_dir import TrainingError
from graphopt.learning.runs import RunConfig
from graphopt.learning.systems.gdp.config import GDPConfig, MachineConfig
from graphopt.learning.systems.go import env as envs_go
from graphopt.learning.systems.go.config import MODES, TASKS, GOConfig, GOTrainConfig
from graphopt.learning.systems.go.env import (
    GOEnv,
    GOGraphs,
    act,
    most_likely_actions,
    sample_actions,
    stage_behaviour,
)
from graphopt.learning.systems.go.network import GOPolicy
from graphopt.learning.systems.go.solver import GO, GOAlone, GOSolverConfig
from graphopt.learning.systems.go.train import CentredGOTrainer, GOTrainer
from graphopt.learning.training import train
from graphopt.optimize import optimize
from graphopt.solvers.base import Budget, Objective, Problem, SolverError
from refusing import refusing

PLACER = GDPConfig(hidden=16, sage_layers=1, placer_layers=1, heads=2, segment=16, max_devices=4)
MACHINE = Machine(2, latency=0.05, bandwidth=3e5)


def toy_config(mode: str = "pl+sch+fu", steps: int = 4, **priors: float | None) -> GOTrainConfig:
    return GOTrainConfig(
        policy=GOConfig(mode=mode, placer=PLACER, **priors),
        machine=MachineConfig(devices=2, latency=0.05, bandwidth=3e5),
        samples=8,
        graphs_per_step=1,
        optimizer=AdamConfig(learning_rate=1e-2),
        run=RunConfig(steps=steps, validate_every=2, checkpoint_every=2, workers=0),
    )


def toy_graph():
    return generate("layered", 40, seed=1, fusion=True)


def task_of(graph, hints: bool = False):
    graphs = GOGraphs({"train": [graph]}, MACHINE, hints, 8, "default")
    return graphs.get("train", 0)


@pytest.mark.parametrize("mode", MODES)
def test_log_probabilities_of_sampled_actions_are_recomputed_exactly(mode) -> None:
    torch.manual_seed(0)
    policy = GOPolicy(GOConfig(mode=mode, placer=PLACER))
    graph = toy_graph()
    batch = make_batch([placement_features(graph)])
    behaviour = dict.fromkeys(policy.go.tasks, "sample")
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        acted = policy.act(batch, 2, None, behaviour, 6, generator)
    again = policy.act(batch, 2, None, behaviour, actions=acted.actions)
    assert torch.allclose(again.log_p, acted.log_p, atol=1e-5)
    for slot, task in enumerate(TASKS):
        decided = acted.actions[:, slot]
        assert bool((decided >= 0).all()) == (task in policy.go.tasks)
    assert int(acted.actions[:, 0].max()) < 2  # devices >= d are masked


def test_the_untrained_priors_are_the_compilers_defaults() -> None:
    """Scheduling levels at the middle (critical path), fusion levels in the fusing half."""
    torch.manual_seed(0)
    policy = GOPolicy(GOConfig(placer=PLACER, schedule_prior=20.0, fusion_prior=20.0))
    task = task_of(toy_graph())
    actions = most_likely_actions(policy, task)
    assert (actions[1] == 4).all()
    assert (actions[2] >= 4).all()


def test_residual_action_connections_feed_placements_to_the_scheduling_head() -> None:
    torch.manual_seed(0)
    graph = toy_graph()
    batch = make_batch([placement_features(graph)])
    for mode, connected in (("pl+sch", True), ("pl|sch", False)):
        policy = GOPolicy(GOConfig(mode=mode, placer=PLACER))
        for embedding in policy.action_embeddings.values():
            torch.nn.init.normal_(embedding.weight)
        actions = torch.full((2, 3, graph.n_ops), -1, dtype=torch.long)
        actions[:, 1] = 3
        actions[0, 0], actions[1, 0] = 0, 1
        acted = policy.act(batch, 2, None, {"placement": "greedy", "scheduling": "sample"},
                           actions=actions)  # fmt: skip
        differs = not torch.allclose(acted.log_p[0], acted.log_p[1])
        assert differs == connected, mode


def test_a_head_the_mode_lacks_is_refused() -> None:
    policy = GOPolicy(GOConfig(mode="pl+sch", placer=PLACER))
    batch = make_batch([placement_features(toy_graph())])
    with pytest.raises(ValueError, match="no \\['fusion'\\] head"):
        policy.act(batch, 2, None, {"fusion": "greedy"})


def test_decoded_actions_rescore_identically_and_undecided_tasks_take_defaults() -> None:
    graph = toy_graph()
    env = GOEnv(graph, MACHINE)
    rng = np.random.default_rng(0)
    n = graph.n_ops
    actions = np.stack([rng.integers(0, 2, (5, n)), rng.integers(0, 8, (5, n)),
                        rng.integers(0, 8, (5, n))], axis=1)  # fmt: skip
    outcome = env.score(actions)
    for b in range(5):
        solution = env.actions_solution(actions[b])
        exact = reference_score(graph, solution, MACHINE)
        assert exact.makespan == pytest.approx(outcome.makespan[b], rel=1e-9)
    assert env.actions_solution(actions[0]).n_groups > 0
    undecided = np.full((3, n), -1)
    solution = env.actions_solution(undecided)
    assert (solution.placement == env.fixed_placement).all()  # the expert placement
    half = actions[0].copy()
    half[1, :3] = -1
    with pytest.raises(SolverError, match="scheduling task is decided for some ops only"):
        env.score(half)
    unfused = GOEnv(graph, MACHINE, compiler_fusion="none", fusion_levels=False)
    assert unfused.actions_solution(actions[0]).n_groups == 0
    assert not unfused.fusable.any()


def test_separate_modes_train_one_stage_after_another_knowing_only_the_earlier() -> None:
    config = GOConfig(mode="pl|sch|fu", placer=PLACER)
    stages = [stage_behaviour(config, step, 9) for step in range(9)]
    assert stages[0] == {"placement": "sample"}  # order and fusion: the compiler's
    assert stages[4] == {"placement": "greedy", "scheduling": "sample"}
    assert stages[8] == {"placement": "greedy", "scheduling": "greedy", "fusion": "sample"}
    joint = GOConfig(placer=PLACER)
    assert set(stage_behaviour(joint, 5, 9).values()) == {"sample"}
    fused = {mode: GOConfig(mode=mode, placer=PLACER).places_fused for mode in MODES}
    assert fused == {"pl": False, "pl|sch": False, "pl+sch": False, "sch+fu": True,
                     "pl|sch|fu": False, "pl+sch+fu": True}  # fmt: skip


def test_a_mode_that_places_before_fusing_ranks_hint_candidates_as_the_compiler_fuses() -> None:
    graph = toy_graph()
    placements = np.random.default_rng(0).integers(0, 2, (6, graph.n_ops))
    fused, compiler = GOEnv(graph, MACHINE), GOEnv(graph, MACHINE, hint_fusion=False)
    actions = fused.default_actions(placements)
    assert np.array_equal(fused.step(placements).makespan, fused.score(actions).makespan)
    actions[:, 2] = -1
    assert np.array_equal(compiler.step(placements).makespan, fused.score(actions).makespan)
    assert not np.array_equal(compiler.step(placements).makespan, fused.step(placements).makespan)
    graphs = GOGraphs({"train": [graph]}, MACHINE, True, 8, "default", hint_fusion=False)
    assert not graphs.get("train", 0).env.hint_fusion


def test_ppo_raises_the_reward_of_all_three_tasks_on_a_toy_graph() -> None:
    """From priors off (every level equally likely), sampled decisions get better."""
    config = replace(
        toy_config(steps=24, schedule_prior=None, fusion_prior=None),
        policy=GOConfig(placer=replace(PLACER, pipeline_prior=1.0), schedule_prior=None,
                        fusion_prior=None),
        samples=16,
        ppo=PPOConfig(epochs=2, minibatches=1),
    )  # fmt: skip
    torch.manual_seed(0)
    graphs = GOGraphs({"train": [toy_graph()]}, MACHINE, False, 8, "default")
    trainer = GOTrainer(GOPolicy(config.policy), graphs, np.arange(1), config)
    rewards = [trainer.step(step)["reward"] for step in range(config.run.steps)]
    assert np.mean(rewards[-5:]) > np.mean(rewards[:5]) + 0.05


def test_a_centre_moves_the_priors_and_explore_sets_how_far_samples_stray() -> None:
    torch.manual_seed(0)
    placer = replace(PLACER, pipeline_prior=None, partition_prior=4.0)  # GO's shipped priors
    policy = GOPolicy(GOConfig(placer=placer))
    task = task_of(toy_graph(), hints=True)
    fusable = task.env.fusable
    n = fusable.size
    rng = np.random.default_rng(0)
    centre = np.stack([rng.integers(0, 2, n), rng.integers(0, 8, n), rng.integers(0, 8, n)])
    policy.explore(2, n, int(fusable.sum()), 1.0)
    generator = torch.Generator().manual_seed(0)
    sampled, log_p = sample_actions(policy, task, 400, generator, centre=centre)
    strays = sampled != centre[None]
    per_task = [strays[:, 0].sum(-1), strays[:, 1].sum(-1), (strays[:, 2] & fusable).sum(-1)]
    for count in per_task:  # about one change per task and sample, as asked
        assert 0.5 < count.mean() < 2.0, [c.mean() for c in per_task]
    behaviour = dict.fromkeys(TASKS, "sample")
    again = act(policy, task, behaviour, actions=torch.from_numpy(sampled), centre=centre)
    assert torch.allclose(again.log_p, log_p, atol=1e-5)
    greedy = act(policy, task, dict.fromkeys(TASKS, "greedy"), centre=centre).actions[0].numpy()
    assert (greedy == centre).all()
    centre[2] = -1  # a row of -1 keeps the task's default pull: the fusing half
    greedy = act(policy, task, dict.fromkeys(TASKS, "greedy"), centre=centre).actions[0].numpy()
    assert (greedy[:2] == centre[:2]).all() and (greedy[2] >= 4).all()


def test_the_centred_search_keeps_its_best_and_the_frozen_control_stays_untrained() -> None:
    config = toy_config(steps=6)
    graphs = GOGraphs({"train": [toy_graph()]}, MACHINE, True, 8, "default")
    task = graphs.get("train", 0)
    env = task.env
    start = env.default_actions(task.hint.numpy()[None])[0]
    reward = float(env.score(start).reward[0])
    for learn in (True, False):
        torch.manual_seed(0)
        policy = GOPolicy(replace(config.policy, placer=replace(PLACER, partition_prior=4.0)))
        trainer = CentredGOTrainer(
            policy, graphs, np.arange(1), config, centre=start, reward=reward, explore=2.0,
            learn=learn,
        )  # fmt: skip
        before = [p.detach().clone() for p in policy.parameters()]
        best = [reward]
        for step in range(config.run.steps):
            trainer.step(step)
            sampled = max(float(o.reward.max()) for _, _, o in trainer.sampled)
            assert trainer.reward == max(best[-1], sampled)
            assert float(env.score(trainer.centre).reward[0]) == trainer.reward
            best.append(trainer.reward)
        assert best[-1] > best[0]  # the search moved off its start
        same = all(torch.equal(a, b) for a, b in zip(before, policy.parameters(), strict=True))
        assert same != learn
    two = GOGraphs({"train": [toy_graph(), toy_graph()]}, MACHINE, True, 8, "default")
    with pytest.raises(TrainingError, match="one graph"):
        CentredGOTrainer(policy, two, np.arange(2), config, centre=start, reward=reward,
                         explore=2.0)  # fmt: skip


def test_a_run_resumes_exactly_and_refuses_another_mode(tmp_path) -> None:
    path = tmp_path / "toy.json"
    write_graph(toy_graph(), path)
    config = replace(toy_config(steps=4), dataset=f"graph:{path}")
    whole = train("go", config, tmp_path / "whole")
    resumed = killed_and_resumed("go", config, tmp_path / "split", 2)
    assert resumed == without_seconds(whole.history)
    other = replace(config, policy=replace(config.policy, mode="pl|sch|fu"))
    with pytest.raises(TrainingError, match="mode"):
        train("go", other, tmp_path / "whole", resume=True)


@pytest.fixture(scope="module")
def go_policy(tmp_path_factory) -> str:
    folder = tmp_path_factory.mktemp("go")
    write_graph(toy_graph(), folder / "toy.json")
    config = replace(
        toy_config(steps=2),
        dataset=f"graph:{folder / 'toy.json'}",
        policy=GOConfig(placer=replace(PLACER, pipeline_prior=None, partition_prior=4.0)),
    )
    train("go", config, folder / "run")
    return str(folder / "run" / "best.pt")


@pytest.mark.parametrize("n_devices", [1, 2, 4])
@pytest.mark.parametrize("fusion", ["none", "search"])
def test_the_solver_rescores_exactly_and_never_loses_to_its_start(go_policy, n_devices, fusion):
    graph = toy_graph()
    machine = Machine(n_devices, latency=0.05, bandwidth=3e5)
    result = optimize(
        graph, machine, "makespan", solver="go", policy=go_policy, fusion=fusion, evaluations=300
    )
    exact = reference_score(graph, result.solution, machine)
    assert exact.makespan == pytest.approx(result.value, rel=1e-9)
    alone = optimize(graph, machine, "makespan", "go-policy", policy=go_policy, fusion=fusion)
    assert (alone.solution.n_groups > 0) == (fusion == "search")
    assert reference_score(graph, alone.solution, machine).makespan == pytest.approx(alone.value)
    default = optimize(graph, machine, "makespan", solver="compiler-default", fusion=fusion)
    if n_devices == 1:
        assert result.value <= default.value * (1 + 1e-9)


@pytest.mark.parametrize("explore", [None, 2.0])
def test_the_solver_fine_tunes_keeps_pins_and_spends_its_budget(
    go_policy, explore, monkeypatch
) -> None:
    graph = toy_graph()
    pins = np.full(graph.n_ops, -1)
    pins[:5] = 1
    problem = Problem(graph, MACHINE, Objective.MAKESPAN, pinned=pins, fusion=True)
    scored: list[np.ndarray] = []
    decode = envs_go.decode

    def spy(graph, machine, placements, *rest):
        scored.append(np.array(placements))
        return decode(graph, machine, placements, *rest)

    monkeypatch.setattr(envs_go, "decode", spy)
    solver = GOAlone(GOSolverConfig(policy=go_policy, finetune=2, samples=4, explore=explore))
    result = solver.solve(problem, Budget(evaluations=1000), seed=0)
    assert (result.solution.placement[:5] == 1).all()
    # PPO's rewards and the search's incumbent are of solutions the problem allows
    assert sum(map(len, scored)) > result.evaluations
    assert all((placements[:, :5] == 1).all() for placements in scored)
    assert result.evaluations == 3 + 2 * 8 + 1 + 4  # start x2, argmax, 2 steps, argmax, samples
    again = solver.solve(problem, Budget(evaluations=1000), seed=0)
    assert again.value == result.value
    control = GOSolverConfig(go_policy, 2, 4, explore=explore, learn=False)
    frozen = GOAlone(control).solve(problem, Budget(evaluations=1000), seed=0)
    assert frozen.evaluations == result.evaluations
    with pytest.raises(SolverError, match="explore must be in"):
        GOSolverConfig(explore=0.0)


def test_a_separate_mode_solves_each_task_knowing_only_the_decisions_before_it(
    tmp_path, monkeypatch
) -> None:
    """pl|sch|fu's search places with the compiler's order and fusion, then orders, then fuses."""
    path = tmp_path / "toy.json"
    write_graph(toy_graph(), path)
    train(
        "go", replace(toy_config("pl|sch|fu", steps=1), dataset=f"graph:{path}"), tmp_path / "run"
    )
    decided: list[tuple[bool, bool]] = []
    decode = envs_go.decode

    def spy(graph, machine, placements, scheduling, fusion, *rest):
        decided.append((scheduling is not None, fusion is not None))
        return decode(graph, machine, placements, scheduling, fusion, *rest)

    monkeypatch.setattr(envs_go, "decode", spy)
    config = GOSolverConfig(str(tmp_path / "run" / "best.pt"), finetune=3, samples=4, explore=2.0)
    problem = Problem(toy_graph(), MACHINE, Objective.MAKESPAN, fusion=True)
    result = GOAlone(config).solve(problem, Budget(evaluations=1000), seed=0)
    stages = [pattern for k, pattern in enumerate(decided) if k == 0 or pattern != decided[k - 1]]
    # offers: the start (fused), the compiler's, the most likely; then the search, stage by stage
    assert stages == [(True, True), (False, False), (True, True), (False, False), (True, False),
                      (True, True)]  # fmt: skip
    assert result.solution.n_groups > 0


def test_mismatched_requests_are_refused_naming_both(go_policy, tmp_path) -> None:
    graph = toy_graph()
    problem = Problem(graph, MACHINE, Objective.MAKESPAN, fusion=True)
    with pytest.raises(SolverError, match="'pl\\+sch\\+fu' policy; the request asks for mode 'pl'"):
        GO(GOSolverConfig(policy=go_policy, mode="pl")).solve(problem, Budget(evaluations=10))
    path = tmp_path / "toy.json"
    write_graph(graph, path)
    config = replace(toy_config("pl+sch", steps=1), dataset=f"graph:{path}")
    train("go", config, tmp_path / "plsch")
    with pytest.raises(SolverError, match="'pl\\+sch' policy without a fusion head"):
        GO(GOSolverConfig(policy=str(tmp_path / "plsch" / "best.pt"))).solve(
            problem, Budget(evaluations=10)
        )


def test_a_graph_without_fusion_classes_says_fusion_was_skipped(go_policy) -> None:
    graph = generate("layered", 30, seed=2)
    result = optimize(
        graph, MACHINE, "makespan", solver="go", policy=go_policy, fusion="search", evaluations=300
    )
    notes = " ".join(result.solution.solver.get("notes", []))
    assert "fusion" in notes and result.solution.n_groups == 0
    assert Path(go_policy).is_file()


def test_the_go_suites_rescore_every_row_and_summarize_the_bars(tmp_path) -> None:
    from graphopt.evaluation.fusion_bench import zoo_training_graphs
    from graphopt.papers.go import (
        DEFAULT,
        ZERO_SHOT,
        fig6_summary,
        run_fig6,
        run_table3,
        sa_evaluations,
        table3_summary,
    )

    graphs = zoo_training_graphs(["lstm-lm-tiny"])
    modes = ("pl", "pl+sch+fu")
    rows = run_fig6(graphs, (2,), modes, 1, 1, tmp_path, lambda *_: None)
    assert len(rows) == 1 and all(rows[0][c] > 0 for c in (DEFAULT, ZERO_SHOT, *modes))
    lines = fig6_summary(rows, modes)
    assert any("against pl, per row:" in line for line in lines)
    assert any("held-out lstm-lm-tiny" in line for line in lines)
    assert any("fused lower bound" in line for line in lines)
    assert 0 < rows[0]["bound"] <= rows[0]["pl+sch+fu"]
    rows = run_table3(graphs, (2,), 1, 1, tmp_path, lambda *_: None)
    assert (
        rows[0]["go-one"] >= 1.0 and rows[0]["sa evaluations"] == 20 * rows[0]["go-one evaluations"]
    )
    assert "GO-one against SA, per row: " in " ".join(table3_summary(rows))
    assert "[no CI] over 1;" in " ".join(table3_summary(rows))
    graph, base = graphs[0], Solution(np.zeros(graphs[0].n_ops), graphs[0].topological_order, 2)
    assert sa_evaluations(graph, 2, base, 100, None, 0) == 100
    assert sa_evaluations(graph, 2, base, 100, 2.0, 0) > 100  # SA scores far more than 50 per s


def test_a_failing_run_of_the_go_suites_is_recorded_and_the_others_go_on(
    monkeypatch, tmp_path
) -> None:
    from graphopt.evaluation.suite import Failures
    from graphopt.papers import go as go_bench

    graphs = [toy_graph(), replace(toy_graph(), name="other")]
    refused = refusing(go_bench.make_solver, go_bench.DEFAULT, "other")
    monkeypatch.setattr(go_bench, "make_solver", refused)
    failures = Failures()
    modes = ("pl+sch+fu",)
    rows = go_bench.run_fig6(graphs, (2,), modes, 1, 1, tmp_path, lambda *_: None, False, failures)
    assert failures.lines == ["compiler-default on other (2 devices, seed 0): refuses other"]
    assert np.isnan(rows[1][go_bench.DEFAULT]) and rows[0][go_bench.DEFAULT] > 0
    assert rows[1]["pl+sch+fu"] > 0 and rows[1]["go-anneal"] > 0  # the rest of the row ran
    assert any("against compiler-default" in line for line in go_bench.fig6_summary(rows, modes))
    solve = go_bench.solve

    def refusing_other(graph, *args, **kwargs):
        if graph.name == "other":
            raise SolverError("refuses other")
        return solve(graph, *args, **kwargs)

    monkeypatch.setattr(go_bench, "solve", refusing_other)
    failures = Failures()
    rows = go_bench.run_table3(graphs, (2,), 1, 1, tmp_path, lambda *_: None, False, failures)
    assert failures.lines == ["go-one on other (2 devices, seed 0): refuses other"]
    assert [row["model"] for row in rows] == [graphs[0].name]


def test_the_train_and_optimize_commands(go_policy, tmp_path) -> None:
    import json
    from dataclasses import asdict

    from typer.testing import CliRunner

    from graphopt.cli import app
    from graphopt.ir.io import read_solution

    graph = toy_graph()
    write_graph(graph, tmp_path / "g.json")
    config = replace(toy_config(steps=1), dataset=f"graph:{tmp_path / 'g.json'}")
    path = tmp_path / "config.json"
    path.write_text(json.dumps(asdict(config)))
    result = CliRunner().invoke(app, ["train", "go", str(path), "-o", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    assert "trained 1 step in" in result.stdout
    data = asdict(config)
    data["policy"]["mode"] = "pl+fu"
    path.write_text(json.dumps(data))
    bad = CliRunner().invoke(app, ["train", "go", str(path), "-o", str(tmp_path / "other")])
    assert bad.exit_code == 2 and "mode must be one of" in bad.output
    out = tmp_path / "s.json"
    command = [
        "optimize",
        str(tmp_path / "g.json"),
        "--objective",
        "makespan",
        "--devices",
        "2",
        "--solver",
        "go",
        "--policy",
        go_policy,
        "--fusion",
        "search",
        "-o",
        str(out),
    ]
    result = CliRunner().invoke(app, command)  # fmt: skip
    assert result.exit_code == 0, result.output
    solution = read_solution(out, graph)
    assert solution.n_groups > 0
    assert reference_score(graph, solution, Machine(2)).makespan > 0
    data["policy"]["mode"] = "pl+sch"
    path.write_text(json.dumps(data))
    CliRunner().invoke(app, ["train", "go", str(path), "-o", str(tmp_path / "plsch")])
    plsch = str(tmp_path / "plsch" / "best.pt")
    bad = CliRunner().invoke(app, [*command[:-6], "--policy", plsch, "--fusion", "search", "-o",
                                   str(out)])  # fmt: skip
    assert bad.exit_code == 2 and "without a fusion head" in bad.output


def test_sa_time_gives_the_annealing_baseline_20x_go_ones_wall_time(tmp_path, monkeypatch):
    from graphopt.papers import go as go_bench
    from graphopt.solvers.registry import make_solver

    rate = go_bench.search_rate(toy_graph(), 2, make_solver("go-anneal"), 0)
    assert 100 < rate < 1e7  # evaluations per second, timed over a whole schedule
    probed: list[str] = []

    def fixed_rate(graph, devices, solver, seed) -> float:
        probed.append(graph.name)
        return 200.0

    monkeypatch.setattr(go_bench, "search_rate", fixed_rate)
    graphs = go_bench.zoo_training_graphs(["lstm-lm-tiny"])
    modes = ("pl+sch+fu",)
    row = go_bench.run_fig6(graphs, (2,), modes, 1, 1, tmp_path, lambda *_: None, True)[0]
    timed = int(200.0 * (go_bench.SA_FACTOR * row["pl+sch+fu s"]))  # the budget's own rounding
    assert probed == [graphs[0].name]
    assert row["go-anneal evaluations"] == max(timed, go_bench.SA_FACTOR * row["evaluations"])
    assert row["brkga evaluations"] == row["evaluations"]  # BRKGA stays at equal evaluations
    assert "annealing at 20x its wall time" in go_bench.GOFig6Bench(sa_time=True).title()


def test_sa_time_is_refused_outside_the_go_suites(tmp_path) -> None:
    from typer.testing import CliRunner

    from graphopt.cli import app

    result = CliRunner().invoke(app, ["bench", "tiny-20", "--sa-time", "-o", str(tmp_path)])
    assert result.exit_code == 2
    assert "--sa-time applies to the go-fig6 and go-table3 suites" in result.output


def test_the_benchmarks_centred_search_starts_at_the_fused_hint_and_keeps_its_best() -> None:
    from graphopt.papers.go import centred_trainer

    trainer = centred_trainer(toy_graph(), 2, seed=0, steps=2, explore=1.0)
    env = trainer.graphs.env("train", 0)
    start = trainer.centre.copy()
    assert (start[1] == 4).all() and (start[2][env.fusable] == 7).all()
    assert float(env.score(start).reward[0]) == trainer.reward
    for step in range(2):
        trainer.step(step)
    assert float(env.score(trainer.centre).reward[0]) == trainer.reward


@pytest.mark.parametrize("fusion", [False, True])
def test_go_searches_the_rest_of_its_budget_and_never_loses_to_its_policy(go_policy, fusion):
    """`go` = the policy's offers, then `auto`'s search (fusion included) seeded with them."""
    graph = toy_graph()
    problem = Problem(graph, MACHINE, Objective.MAKESPAN, fusion=fusion)
    alone = GOAlone(GOSolverConfig(go_policy, samples=8)).solve(problem, Budget(400), seed=2)
    searched = GO(GOSolverConfig(go_policy, samples=8)).solve(problem, Budget(400), seed=2)
    assert alone.evaluations < 400 and searched.evaluations == 400
    assert searched.value <= alone.value
    exact = reference_score(graph, searched.solution, MACHINE)
    assert exact.makespan == pytest.approx(searched.value, rel=1e-9)
    assert searched.solution.solver["name"] == "go" and alone.solution.solver["name"] == "go-policy"
