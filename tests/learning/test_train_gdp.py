"""GDP's placement network and its PPO trainer: shapes, device counts, seeds, and learning."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from functools import partial

import numpy as np
import pytest
import torch
from tests.learned import killed_and_resumed, without_seconds
from typer.testing import CliRunner

from graphopt.cli import app
from graphopt.ir.generators import generate
from graphopt.ir.io import write_graph
from graphopt.learning.batching import make_batch
from graphopt.learning.optim import AdamConfig
from graphopt.learning.placement.features import PLACEMENT_FEATURE_NAMES, placement_features
from graphopt.learning.run_dir import TrainingError
from graphopt.learning.runs import RunConfig
from graphopt.learning.systems.gdp.config import GDPConfig, MachineConfig, TrainConfig
from graphopt.learning.systems.gdp.env import Graphs, most_likely
from graphopt.learning.systems.gdp.network import GDPPolicy
from graphopt.learning.systems.gdp.train import GDPTrainer
from graphopt.learning.training import train

SMALL = GDPConfig(hidden=32, sage_layers=2, placer_layers=1, segment=32)


def test_one_network_places_onto_every_device_count_and_segments_cover_every_op() -> None:
    torch.manual_seed(0)
    graph = generate("layered", 150, seed=2)
    features = placement_features(graph)
    assert features.node.shape == (150, len(PLACEMENT_FEATURE_NAMES))
    assert np.isfinite(features.node).all()
    policy = GDPPolicy(SMALL)
    batch = make_batch([features, placement_features(generate("sbm", 70, seed=1))])
    for d in (2, 4, 8):
        logits = policy(batch, d)
        assert logits.shape == (220, 8)
        assert torch.isfinite(logits[:, :d]).all() and torch.isinf(logits[:, d:]).all()
    with pytest.raises(ValueError, match=r"places onto 2\.\.8 devices, got 9"):
        policy(batch, 9)


def toy_config(steps: int, **run: int) -> TrainConfig:
    """The toy problem: transfers cost more than the ops they feed, 2 devices."""
    return TrainConfig(
        dataset="unused",
        policy=SMALL,
        machine=MachineConfig(devices=2, latency=0.05, bandwidth=3e5),
        samples=32,
        optimizer=AdamConfig(learning_rate=1e-2),
        run=RunConfig(steps=steps, **run),
    )


def toy_trainer(config: TrainConfig) -> tuple[GDPTrainer, Graphs]:
    torch.manual_seed(config.run.seed)
    graphs = Graphs({"train": [generate("layered", 40, seed=1)]}, config.machine.machine())
    return GDPTrainer(GDPPolicy(config.policy), graphs, np.arange(1), config), graphs


def test_the_same_seed_trains_the_same_way() -> None:
    config = toy_config(3)
    records = []
    for _ in range(2):
        trainer, _ = toy_trainer(config)
        records.append([trainer.step(step) for step in range(3)])
    assert records[0] == records[1]


def test_ppo_raises_the_reward_on_a_toy_placement_problem() -> None:
    """The policy learns to keep neighbours together, from a start that samples widely."""
    config = toy_config(30)
    trainer, graphs = toy_trainer(config)
    task = graphs.get("train", 0)
    start = task.env.step(most_likely(trainer.policy, task)).reward[0]
    rewards = [trainer.step(step)["reward"] for step in range(config.run.steps)]
    assert np.mean(rewards[-5:]) > np.mean(rewards[:5]) + 0.1
    learned = task.env.step(most_likely(trainer.policy, task)).reward[0]
    assert learned > start + 0.05
    assert learned > -1.0  # beats the better of HEFT's schedule and one device (reward -1)


def test_a_run_resumed_from_last_pt_matches_the_uninterrupted_run(tmp_path) -> None:
    graph = tmp_path / "toy.json"
    write_graph(generate("layered", 40, seed=1), graph)
    config = replace(
        toy_config(30, validate_every=10, checkpoint_every=10), dataset=f"graph:{graph}"
    )
    whole = train("gdp", config, tmp_path / "whole")
    resumed = killed_and_resumed("gdp", config, tmp_path / "split", 20)  # after its checkpoint
    assert resumed == without_seconds(whole.history)
    rewards = [row["validation_reward"] for row in whole.history if "validation_reward" in row]
    assert rewards[-1] > rewards[0]  # the validated policy beats its untrained start
    assert (tmp_path / "whole" / "best.pt").is_file()
    with pytest.raises(TrainingError, match="already holds a run"):
        train("gdp", config, tmp_path / "whole")
    other = replace(config, samples=16)
    with pytest.raises(TrainingError, match="samples differ"):
        train("gdp", other, tmp_path / "whole", resume=True)


def test_the_pipeline_prior_starts_from_a_split_along_the_topological_order() -> None:
    """With a strong prior the untrained argmax is op j on device floor(d * position_j)."""
    torch.manual_seed(0)
    graph = generate("layered", 200, seed=3)
    features = placement_features(graph)
    position = features.node[:, PLACEMENT_FEATURE_NAMES.index("topological_position")]
    policy = GDPPolicy(GDPConfig(hidden=32, sage_layers=1, placer_layers=1, pipeline_prior=50.0))
    for d in (2, 4):
        with torch.no_grad():
            chosen = policy(make_batch([features]), d).argmax(-1).numpy()
        expected = np.minimum((d * position).astype(int), d - 1)
        assert (chosen == expected).mean() > 0.95


def test_the_train_command(tmp_path) -> None:
    write_graph(generate("layered", 30, seed=2), tmp_path / "g.json")
    config = replace(toy_config(2), dataset=f"graph:{tmp_path / 'g.json'}")
    path = tmp_path / "config.json"
    path.write_text(json.dumps(asdict(config)))
    result = CliRunner().invoke(app, ["train", "gdp", str(path), "-o", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    assert "trained 2 steps" in result.stdout and "the untrained start" in result.stdout
    path.write_text(json.dumps({**asdict(config), "samples": 1}))
    bad = CliRunner().invoke(app, ["train", "gdp", str(path), "-o", str(tmp_path / "other")])
    assert bad.exit_code == 2 and "samples must be in [2, 65536], got 1" in bad.output
    assert TrainConfig.load("gdp").machine.devices == 4  # the shipped config reads


def test_worker_processes_and_ray_score_as_this_process_does(tmp_path) -> None:
    """Scoring in workers changes nothing: the same run, step for step."""
    graphs = tmp_path / "a.json", tmp_path / "b.json"
    write_graph(generate("layered", 30, seed=2), graphs[0])
    write_graph(generate("sbm", 30, seed=4), graphs[1])
    config = replace(
        toy_config(3, validate_every=3, checkpoint_every=3),
        dataset="graph:" + ",".join(map(str, graphs)),
        policy=replace(SMALL, pipeline_prior=None, partition_prior=2.0),
    )
    here = train("gdp", config, tmp_path / "here")
    pooled = train("gdp", replace(config, run=replace(config.run, workers=2)), tmp_path / "pool")
    drop = ("seconds",)
    assert [{k: v for k, v in r.items() if k not in drop} for r in pooled.history] == [
        {k: v for k, v in r.items() if k not in drop} for r in here.history
    ]


@pytest.mark.ray
@pytest.mark.slow  # 17 s of Ray start-up; RayWorkers itself is covered by REGAL's Ray test
def test_ray_local_mode_scores_placements_as_this_process_does(tmp_path) -> None:
    ray = pytest.importorskip("ray")
    from graphopt.learning.systems.gdp.env import GraphSource
    from graphopt.learning.systems.gdp.train import ScoringEnv
    from graphopt.learning.workers import RayWorkers

    write_graph(generate("layered", 30, seed=2), tmp_path / "g.json")
    source = GraphSource(f"graph:{tmp_path / 'g.json'}", MachineConfig(devices=2))
    placements = np.random.default_rng(0).integers(0, 2, (5, 30)).astype(np.int32)
    items = [("train", 0, placements), ("valid", 0, placements[::-1].copy())]
    pool = RayWorkers(partial(ScoringEnv, source), "local", 1)
    try:
        remote = pool.map(ScoringEnv.score, items)
    finally:
        pool.close()
        ray.shutdown()
    local = [ScoringEnv(source).score(item) for item in items]
    for a, b in zip(remote, local, strict=True):
        assert np.array_equal(a.makespan, b.makespan) and np.array_equal(a.reward, b.reward)


def test_validation_with_samples_scores_the_best_of_what_the_solver_offers() -> None:
    from graphopt.learning.systems.gdp.train import SYSTEM

    config = toy_config(1)
    trainer, graphs = toy_trainer(config)
    graphs.splits["valid"] = graphs.splits["train"]
    ids = np.arange(1)
    alone = SYSTEM.validate(trainer.policy, graphs, ids, 0, config)["validation_reward"]
    sampled = replace(config, validation_samples=16)
    best = SYSTEM.validate(trainer.policy, graphs, ids, 0, sampled)["validation_reward"]
    assert best >= alone
    assert best == SYSTEM.validate(trainer.policy, graphs, ids, 5, sampled)["validation_reward"]
    with pytest.raises(TrainingError, match="validation_samples"):
        TrainConfig.from_dict({"validation_samples": -1})
