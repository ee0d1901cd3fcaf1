import csv
import json
import math
import time
from dataclasses import asdict, replace
from functools import partial
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from graphopt.configs import FieldError
from graphopt.learning.run_dir import TrainingError
from graphopt.learning.runs import CONFIGS, spread
from graphopt.learning.saving import read_checkpoint, save_checkpoint
from graphopt.learning.systems.regal.checkpoints import load_policy
from graphopt.learning.systems.regal.env import RolloutEnv
from graphopt.learning.systems.regal.records import REGAL_FORMAT
from graphopt.learning.systems.regal.train import FLAT_FIELDS, TrainConfig
from graphopt.learning.training import train

SHIPPED_POLICIES = resources.files("graphopt.policies")

TINY = dict(
    hidden=16,
    rounds=2,
    feature_evaluations=100,
    train_evaluations=300,
    validation_evaluations=300,
    reference_seeds=1,
    validation_graphs=4,
    batch_graphs=2,
    samples_per_graph=2,
    learning_rate=3e-3,
    workers=0,
    validate_every=2,
    checkpoint_every=2,
)


def _config(dataset, **changes) -> TrainConfig:
    """A config from flat keys (`FLAT_FIELDS`), which read to their sections."""
    return TrainConfig.from_dict({"dataset": str(dataset), **TINY, "steps": 4, **changes})


def _rows(path):
    with path.open() as file:
        return list(csv.DictReader(file))


def test_training_writes_checkpoints_and_logs(toy_dataset, tmp_path) -> None:
    state = train("regal", _config(toy_dataset), tmp_path / "run")
    run = tmp_path / "run"
    assert state.step == 4 and state.best_step in (0, 2, 4)
    rows = _rows(run / "log.csv")
    assert [int(r["step"]) for r in rows] == [0, 1, 2, 3, 4]
    assert rows[0]["validation_reward"] and not rows[0]["reward"]
    assert rows[2]["validation_reward"] and not rows[1]["validation_reward"]
    assert json.loads((run / "config.json").read_text())["run"]["steps"] == 4
    policy = load_policy(run / "best.pt", "peak-memory", 2)
    assert policy.metadata["step"] == state.best_step
    assert policy.metadata["validation_reward"] == pytest.approx(state.best_validation)


def test_variance_switches_train_and_each_validation_keeps_its_graphs(toy_dataset, tmp_path):
    config = _config(toy_dataset, samples_per_graph=4, advantage="sample-mean")
    config = replace(
        config,
        rollouts=replace(config.rollouts, antithetic=True),
        reinforce=replace(config.reinforce, normalize=True),
    )
    train("regal", config, tmp_path / "run")
    run = tmp_path / "run"
    logged = {int(r["step"]): float(r["validation_reward"]) for r in _rows(run / "log.csv")
              if r["validation_reward"]}  # fmt: skip
    assert sorted(logged) == [0, 2, 4]
    for step, mean in logged.items():
        with np.load(run / "validations" / f"step-{step:07d}.npz") as kept:
            assert kept["reward"].shape == (4,) and kept["index"].shape == (4,)
            assert kept["reward"].mean() == pytest.approx(mean)
        assert load_policy(run / "snapshots" / f"step-{step:07d}.pt").metadata["step"] == step
    with pytest.raises(FieldError, match="antithetic samples come in pairs"):
        replace(config.rollouts, samples_per_graph=3)
    with pytest.raises(TrainingError, match=r"samples_per_graph >= 4 with antithetic pairs"):
        replace(config, rollouts=replace(config.rollouts, samples_per_graph=2))


@pytest.mark.parametrize(
    "inner", [{}, {"brkga_preset": "tuned", "kept_from_feature_run": 10, "anchor": 4.0}]
)
def test_resuming_reproduces_the_uninterrupted_run(toy_dataset, tmp_path, inner) -> None:
    train("regal", _config(toy_dataset, steps=6, **inner), tmp_path / "straight")
    killed = _config(toy_dataset, steps=4, **inner)  # killed after step 4
    train("regal", killed, tmp_path / "killed")
    train("regal", _config(toy_dataset, steps=6, **inner), tmp_path / "killed", resume=True)
    straight = read_checkpoint(tmp_path / "straight" / "last.pt", REGAL_FORMAT)
    resumed = read_checkpoint(tmp_path / "killed" / "last.pt", REGAL_FORMAT)
    assert straight["step"] == resumed["step"] == 6
    for key, value in straight["model_state"].items():
        assert torch.equal(resumed["model_state"][key], value), key
    policy = load_policy(tmp_path / "straight" / "best.pt")
    assert policy.inner == TrainConfig.from_dict(inner).inner
    assert policy.config.anchor == inner.get("anchor")

    def without_time(path):
        return [{k: v for k, v in r.items() if k != "seconds"} for r in _rows(path / "log.csv")]

    assert without_time(tmp_path / "straight") == without_time(tmp_path / "killed")


def _scalars(run) -> dict[str, list[tuple[int, float]]]:
    """TensorBoard's view of a run's scalars (wall time left out), purged events hidden."""
    events = EventAccumulator(str(run / "tensorboard")).Reload()
    tags = [t for t in events.Tags()["scalars"] if t != "training/seconds"]
    return {t: [(e.step, e.value) for e in events.Scalars(t)] for t in tags}


def test_tensorboard_hides_what_a_killed_run_logged_after_its_checkpoint(
    toy_dataset, tmp_path
) -> None:
    train("regal", _config(toy_dataset), tmp_path / "straight")
    run = tmp_path / "killed"
    train("regal", _config(toy_dataset, steps=2), run)
    checkpoint = (run / "last.pt").read_bytes()
    # TensorBoard orders a run's event files by name, whose time part has 1 s resolution; a
    # real resume starts seconds after the kill, so these restarts wait as long.
    time.sleep(1.1)
    # Logs step 3 and its validation, then dies before checkpointing them.
    train("regal", _config(toy_dataset, steps=3), run, resume=True)
    (run / "last.pt").write_bytes(checkpoint)
    time.sleep(1.1)
    train("regal", _config(toy_dataset), run, resume=True)
    straight = _scalars(tmp_path / "straight")
    assert {"training/reward", "training/loss", "validation/reward"} <= set(straight)
    assert [step for step, _ in straight["training/reward"]] == [1, 2, 3, 4]
    assert [step for step, _ in straight["validation/improvement_pct"]] == [0, 2, 4]
    assert _scalars(run) == straight


def test_an_existing_run_needs_resume(toy_dataset, tmp_path) -> None:
    train("regal", _config(toy_dataset, steps=2), tmp_path / "run")
    with pytest.raises(TrainingError, match="already holds a run"):
        train("regal", _config(toy_dataset, steps=2), tmp_path / "run")
    with pytest.raises(TrainingError, match="learning_rate differ"):
        train(
            "regal", _config(toy_dataset, steps=3, learning_rate=0.1), tmp_path / "run", resume=True
        )


def test_non_finite_rewards_stop_training_and_keep_the_last_checkpoint(
    toy_dataset, tmp_path, monkeypatch
) -> None:
    train("regal", _config(toy_dataset, steps=2), tmp_path / "run")
    before = (tmp_path / "run" / "last.pt").read_bytes()
    monkeypatch.setattr(RolloutEnv, "rollout", lambda self, task: math.nan)
    with pytest.raises(TrainingError, match="step 3: non-finite rewards"):
        train("regal", _config(toy_dataset, steps=4), tmp_path / "run", resume=True)
    assert (tmp_path / "run" / "last.pt").read_bytes() == before


@pytest.mark.parametrize(
    "changes,message",
    [
        ({"advantage": "median"}, "advantage must be"),
        ({"advantage": "sample-mean", "samples_per_graph": 1}, "needs samples_per_graph >= 2"),
        ({"train_evaluations": 50}, "feature_evaluations < train_evaluations"),
        ({"search": "anneal"}, "search must be"),
        ({"objective": "speed"}, "unknown objective"),
        ({"steps": 0}, "steps must be >= 1"),
        ({"brkga_preset": "nope"}, "bad inner search: no BRKGA preset named 'nope'"),
        ({"kept_from_feature_run": 0}, "bad inner search: kept must be >= 1"),
    ],
)
def test_bad_configs(changes, message) -> None:
    with pytest.raises(Exception, match=message):
        TrainConfig.from_dict(changes)


def test_config_files(tmp_path) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"steps": 3, "adam_betas": [0.8, 0.9]}))
    config = TrainConfig.load(path)
    assert config.run.steps == 3 and config.optimizer.betas == (0.8, 0.9)
    path.write_text(json.dumps({"stepz": 3}))
    with pytest.raises(TrainingError, match="unknown training config field.*stepz"):
        TrainConfig.load(path)
    with pytest.raises(TrainingError, match="no training config file"):
        TrainConfig.load(tmp_path / "missing.json")
    path.write_text("{")
    with pytest.raises(TrainingError, match="not valid JSON"):
        TrainConfig.load(path)


@pytest.mark.ray
def test_ray_local_mode_gives_the_same_rollouts(toy_dataset) -> None:
    ray = pytest.importorskip("ray")
    from graphopt.learning.systems.regal.actions import ActionConfig
    from graphopt.learning.systems.regal.env import EnvSpec, RolloutEnv
    from graphopt.learning.workers import RayWorkers, SerialWorkers

    factory = partial(
        RolloutEnv, EnvSpec(str(toy_dataset), 2, "makespan", "brkga", 100, ActionConfig())
    )
    items = [("train", i, 300, 1) for i in range(3)]
    pool = RayWorkers(factory, "local", 2)
    try:
        remote = pool.map(RolloutEnv.prepare, items)
    finally:
        pool.close()
        ray.shutdown()
    local = SerialWorkers(factory).map(RolloutEnv.prepare, items)
    assert [p.reference for p in remote] == [p.reference for p in local]
    for a, b in zip(remote, local, strict=True):
        assert (a.features.node == b.features.node).all()


LEARNABLE = dict(
    TINY,
    objective="makespan",
    validation_graphs=16,
    batch_graphs=4,
    samples_per_graph=4,
    advantage="sample-mean",
    learning_rate=0.02,
    validate_every=10,
    initial_mode_logit=0.0,
)
"""Uniform initial actions, so the greedy policy at step 0 is an arbitrary, poor one."""


def _validation_gain(run) -> tuple[float, float]:
    rows = [r for r in _rows(run / "log.csv") if r["validation_reward"]]
    first = float(rows[0]["validation_improvement_pct"])
    return first, max(float(r["validation_improvement_pct"]) for r in rows[1:])


def test_training_raises_the_validation_reward(toy_dataset, tmp_path) -> None:
    """Elite biases alone: a small policy learns them within a few seeded steps."""
    config = TrainConfig.from_dict(
        {
            "dataset": str(toy_dataset),
            **LEARNABLE,
            **{"steps": 20, "placement": False, "scheduling": False, "elite_bias": True},
        }
    )
    train("regal", config, tmp_path / "run")
    first, best = _validation_gain(tmp_path / "run")
    assert best > first + 1.0, (first, best)


@pytest.mark.slow
def test_five_minutes_of_training_raise_the_validation_reward(toy_dataset, tmp_path) -> None:
    """All three action types, seeded, about five minutes on two cores."""
    config = TrainConfig.from_dict(
        {"dataset": str(toy_dataset), **LEARNABLE, "steps": 300, "elite_bias": True}
    )
    train("regal", config, tmp_path / "run")
    first, best = _validation_gain(tmp_path / "run")
    assert best > first + 1.0, (first, best)


def test_spread_picks_evenly_with_both_ends_and_never_repeats() -> None:
    ids = np.arange(100, 110)
    assert spread(ids, 3).tolist() == [100, 104, 109]
    assert spread(ids, 50).tolist() == ids.tolist()
    assert spread(ids, 1).tolist() == [100]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"adam_betas": 5}, "adam_betas must be a list of two finite numbers, got 5"),
        ({"adam_betas": [0.9, 1.5]}, r"adam_betas must be in \[0, 1\)"),
        ({"rounds": 10**9}, r"rounds must be in \[0, 256\]"),
        ({"hidden": 10**6}, r"hidden must be in \[1, 4096\]"),
        ({"learning_rate": float("nan")}, "learning_rate must be a finite number, got NaN"),
        ({"learning_rate": 0}, "learning_rate must be > 0"),
        ({"name": ["x"]}, r"name must be a string, got \[\"x\"\]"),
        ({"steps": True}, "steps must be an integer, got true"),
        ({"kept_from_feature_run": 2.5}, "kept_from_feature_run must be an integer or null"),
        ({"n_devices": 10**6}, r"n_devices must be in \[2, 512\]"),
    ],
)
def test_config_values_of_the_wrong_type_or_range_are_refused(change, message) -> None:
    with pytest.raises(TrainingError, match=message):
        TrainConfig.from_dict(change)


SHIPPED_FLAT = {
    "gas-makespan": {
        "name": "gas-makespan", "dataset": "regal", "objective": "makespan", "n_devices": 2,
        "encoder": "lstm", "search": "brkga", "hidden": 32, "rounds": 8, "levels": 4,
        "placement": True, "scheduling": True, "elite_bias": False, "initial_mode_logit": 1.0,
        "feature_evaluations": 400, "train_evaluations": 1000, "validation_evaluations": 5000,
        "reference_seeds": 2, "max_train_ops": 200, "validation_graphs": 48, "steps": 100,
        "batch_graphs": 4, "samples_per_graph": 8, "advantage": "sample-mean",
        "learning_rate": 0.0015, "entropy_weight": 0.05, "validate_every": 50,
        "checkpoint_every": 50, "seed": 0, "workers": 1,
    },
    "gas-peak-memory": {
        "name": "gas-peak-memory", "dataset": "regal", "objective": "peak-memory",
        "n_devices": 2, "encoder": "lstm", "search": "brkga", "hidden": 32, "rounds": 8,
        "levels": 4, "placement": True, "scheduling": True, "elite_bias": False,
        "initial_mode_logit": 1.0, "feature_evaluations": 400, "train_evaluations": 1000,
        "validation_evaluations": 5000, "reference_seeds": 2, "max_train_ops": 200,
        "validation_graphs": 48, "steps": 100, "batch_graphs": 4, "samples_per_graph": 8,
        "advantage": "sample-mean", "learning_rate": 0.0015, "entropy_weight": 0.05,
        "validate_every": 50, "checkpoint_every": 50, "seed": 0, "workers": 1,
    },
    "regal-makespan": {
        "name": "regal-makespan", "dataset": "regal", "objective": "makespan", "n_devices": 2,
        "encoder": "mpnn", "search": "brkga", "kept_from_feature_run": 10, "hidden": 32,
        "rounds": 8, "levels": 4, "placement": True, "scheduling": True, "elite_bias": False,
        "initial_mode_logit": 1.0, "anchor": 4.0, "feature_evaluations": 400,
        "train_evaluations": 5000, "validation_evaluations": 5000, "reference_seeds": 2,
        "max_train_ops": 200, "validation_graphs": 200, "steps": 100, "batch_graphs": 4,
        "samples_per_graph": 8, "advantage": "sample-mean", "learning_rate": 0.0015,
        "entropy_weight": 0.01, "validate_every": 50, "checkpoint_every": 50, "seed": 0,
        "workers": 1,
    },
    "regal-peak-memory": {
        "name": "regal-peak-memory", "dataset": "regal", "objective": "peak-memory",
        "n_devices": 2, "encoder": "mpnn", "search": "brkga", "brkga_preset": "tuned",
        "kept_from_feature_run": 10, "hidden": 32, "rounds": 8, "levels": 4, "placement": True,
        "scheduling": True, "elite_bias": False, "initial_mode_logit": 1.0,
        "feature_evaluations": 400, "train_evaluations": 5000, "validation_evaluations": 5000,
        "reference_seeds": 2, "max_train_ops": 200, "validation_graphs": 200, "steps": 100,
        "batch_graphs": 4, "samples_per_graph": 8, "advantage": "sample-mean",
        "learning_rate": 0.0015, "entropy_weight": 0.01, "validate_every": 50,
        "checkpoint_every": 50, "seed": 0, "workers": 1,
    },
}  # fmt: skip
"""The shipped configs as they were written before the sections (and as old checkpoints hold
them)."""


@pytest.mark.parametrize("name", sorted(SHIPPED_FLAT))
def test_the_flat_layout_of_each_shipped_config_reads_the_same(name) -> None:
    newer = ("gflownet", "gdp", "go", "regal-campaign", "gas-campaign")  # written later
    regal = [p.stem for p in CONFIGS.glob("*.json") if not p.stem.startswith(newer)]
    assert sorted(regal) == sorted(SHIPPED_FLAT)
    nested = TrainConfig.load(name)
    assert TrainConfig.from_dict(SHIPPED_FLAT[name]) == nested
    assert TrainConfig.from_dict(json.loads(json.dumps(asdict(nested)))) == nested
    flat = {key: _at(asdict(nested), path) for key, path in FLAT_FIELDS.items()}
    assert TrainConfig.from_dict(flat) == nested


@pytest.mark.parametrize("objective", ["peak-memory", "makespan"])
@pytest.mark.parametrize("budget", ["", "-5k"])
def test_campaign_configs_are_the_shipped_ones_at_the_campaign_budget(objective, budget) -> None:
    campaign = TrainConfig.load(f"regal-campaign-{objective}{budget}")
    shipped = TrainConfig.load(f"regal-{objective}")
    assert campaign.rollouts.train_evaluations == (5000 if budget else 1000)
    assert campaign.run.steps >= 10_000 and campaign.run.workers == 0
    same = {"name": shipped.name, "rollouts": shipped.rollouts, "run": shipped.run}
    assert replace(campaign, **same) == shipped


def _at(data: dict, path: tuple[str, ...]):
    for key in path:
        data = data[key]
    return data


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"steps": 3, "run": {"seed": 1}}, r"mixes flat fields \(steps\) with sections \(run\)"),
        ({"steps": 3, "stepz": 1}, r"^unknown training config field\(s\): stepz; valid: adam_"),
        ({"run": {"stepz": 1}}, r"unknown training config field\(s\): run.stepz; valid: run."),
        ({"run": {"steps": 0}}, r"^training config: run.steps must be >= 1, got 0$"),
        ({"optimizer": {"betas": [0.9, 1.5]}}, r"optimizer.betas must be in \[0, 1\)"),
        ({"inner": {"kept": 2.5}}, "inner.kept must be an integer or null"),
        ({"inner": {"kept": 0}}, "bad inner search: kept must be >= 1"),
        ({"policy": {"actions": {"levels": 1}}}, r"policy.actions.levels must be in \[2, 1024\]"),
        ({"rollouts": {"samples_per_graph": 1}, "reinforce": {"advantage": "sample-mean"}},
         "needs samples_per_graph >= 2"),
    ],
)  # fmt: skip
def test_nested_configs_name_fields_by_path(data, message) -> None:
    with pytest.raises(TrainingError, match=message):
        TrainConfig.from_dict(data)


def test_shipped_policies_record_flat_configs_that_still_read() -> None:
    for path in sorted(Path(str(SHIPPED_POLICIES)).glob("*-d2.pt")):
        stored = TrainConfig.from_dict(json.loads(load_policy(path).metadata["train_config"]))
        shipped = TrainConfig.load(path.stem.removesuffix("-d2"))
        # The runs were resumed for more steps, on the dataset built from the shipped config.
        run = replace(stored.run, steps=shipped.run.steps)
        assert replace(stored, dataset=shipped.dataset, run=run) == shipped


def test_a_run_checkpointed_with_a_flat_config_resumes(toy_dataset, tmp_path) -> None:
    train("regal", _config(toy_dataset, steps=4), tmp_path / "straight")
    run = tmp_path / "run"
    train("regal", _config(toy_dataset, steps=2), run)
    record = read_checkpoint(run / "last.pt", REGAL_FORMAT)
    nested = json.loads(record["train_config"])
    flat = {key: _at(nested, path) for key, path in FLAT_FIELDS.items()}
    save_checkpoint(run / "last.pt", {**record, "train_config": json.dumps(flat)})
    with pytest.raises(TrainingError, match=r"\(optimizer.learning_rate, run.seed differ\)"):
        train("regal", _config(toy_dataset, steps=4, learning_rate=0.1, seed=1), run, resume=True)
    train("regal", _config(toy_dataset, steps=4), run, resume=True)
    straight = read_checkpoint(tmp_path / "straight" / "last.pt", REGAL_FORMAT)
    resumed = read_checkpoint(run / "last.pt", REGAL_FORMAT)
    for key, value in straight["model_state"].items():
        assert torch.equal(resumed["model_state"][key], value), key
