"""GFlowNet training runs: files, logs, exact resume, refusals, and the CLI command."""

from __future__ import annotations

import csv
import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from graphopt.cli import app
from graphopt.errors import GraphoptError
from graphopt.ir.generators import generate
from graphopt.ir.io import write_graph
from graphopt.learning.formats import CheckpointError, shipped_policy_path
from graphopt.learning.run_dir import TrainingError
from graphopt.learning.saving import read_checkpoint
from graphopt.learning.systems.gflownet.config import (
    GFLOWNET_FORMAT,
    PLAIN,
    Decoding,
    TrainConfig,
)
from graphopt.learning.systems.gflownet.env import connected_subgraph
from graphopt.learning.systems.gflownet.network import build_policy
from graphopt.learning.systems.gflownet.train import SYSTEM, _graph_files
from graphopt.learning.training import train

SHIPPED = Path(__file__).parents[2] / "src" / "graphopt" / "policies"


def tiny(dataset: Path, steps: int, **sections: dict) -> TrainConfig:
    """A config that trains in seconds on the toy dataset (sub-graphs of 8-24 ops)."""
    data = {
        "dataset": str(dataset),
        "policy": {"n_devices": 2, "hidden": 16, "layers": 1, "heads": 4, "condition": 8},
        "sampling": {"trajectories": 8, "subgraph_ops": 16, "validation_samples": 4},
        "run": {"steps": steps, "validate_every": 2, "checkpoint_every": 2, "validation_graphs": 2},
    }
    for name, values in sections.items():
        data[name] = {**data.get(name, {}), **values}
    return TrainConfig.from_dict(data)


def rows(run: Path) -> list[dict[str, str]]:
    with (run / "log.csv").open() as file:
        return [{k: v for k, v in row.items() if k != "seconds"} for row in csv.DictReader(file)]


def weights(path: Path) -> dict[str, torch.Tensor]:
    return torch.load(path, weights_only=True)["model_state"]


def test_a_run_logs_every_step_and_resumes_exactly(toy_dataset, tmp_path) -> None:
    straight, split = tmp_path / "straight", tmp_path / "split"
    state = train("gflownet", tiny(toy_dataset, 6), straight)
    assert state.step == 6 and 0 <= state.best_step <= 6
    for name in ("config.json", "log.csv", "last.pt", "best.pt"):
        assert (straight / name).is_file()
    log = rows(straight)
    assert [int(r["step"]) for r in log] == list(range(7))
    assert all(float(r["speedup"]) >= 1.0 for r in log[1:])
    validated = [r for r in log if int(r["step"]) % 2 == 0]
    assert all(r["validation_speedup"] for r in validated)
    # the best sample of each graph, and HEFT's speedup: the same on every row (a reference)
    assert all(float(r["validation_best"]) >= float(r["validation_speedup"]) for r in validated)
    assert len({r["validation_heft"] for r in validated}) == 1
    assert float(validated[0]["validation_heft"]) >= 1.0
    train("gflownet", tiny(toy_dataset, 4), split)
    train("gflownet", tiny(toy_dataset, 6), split, resume=True)
    assert rows(split) == log
    for key, value in weights(straight / "last.pt").items():
        assert torch.equal(value, weights(split / "last.pt")[key]), key


def test_a_resumed_run_must_keep_its_config(toy_dataset, tmp_path) -> None:
    run = tmp_path / "run"
    train("gflownet", tiny(toy_dataset, 2), run)
    with pytest.raises(TrainingError, match="already holds a run"):
        train("gflownet", tiny(toy_dataset, 2), run)
    changed = tiny(toy_dataset, 4, optimizer={"learning_rate": 0.01})
    with pytest.raises(TrainingError, match=r"optimizer\.learning_rate differ"):
        train("gflownet", changed, run, resume=True)
    # how the trained policy samples is chosen after training, which it never reads
    decoded = {"inference_sigma": 0.002, "inference_logit_temperature": 0.5}
    assert train("gflownet", tiny(toy_dataset, 3, sampling=decoded), run, resume=True).step == 3
    shutil.copy(SHIPPED / "regal-makespan-d2.pt", run / "last.pt")
    with pytest.raises(CheckpointError, match="graphopt.gflownet-policy/1"):
        train("gflownet", tiny(toy_dataset, 4), run, resume=True)


@pytest.mark.parametrize(
    ("section", "values", "message"),
    [
        ("sampling", {"sigma_min": 2.0}, "sigma_min must be in"),
        ("sampling", {"trajectories": 1}, "trajectories must be >= 2"),
        ("proxy", {"bandwidth": 0}, "bandwidth must be > 0"),
        ("proxy", {"mode": "fast"}, "proxy.mode must be one of"),
        ("policy", {"hidden": 10, "heads": 4}, "hidden must be a multiple of heads"),
        ("run", {"stepz": 3}, "unknown GFlowNet training config field"),
    ],
)
def test_bad_configs_are_refused_naming_the_field(tmp_path, section, values, message) -> None:
    with pytest.raises(TrainingError, match=message):
        tiny(tmp_path, 2, **{section: values})


def test_connected_subgraphs_are_connected_valid_graphs() -> None:
    graph = generate("erdos_renyi", 60, seed=4)
    for seed in range(5):
        sub = connected_subgraph(graph, 20, np.random.default_rng(seed))
        assert sub.n_ops == 20
        assert set(sub.op_names) <= set(graph.op_names)
        src, dst = sub.edge_index
        reached, frontier = {0}, [0]
        while frontier:
            op = frontier.pop()
            for a, b in zip(src.tolist(), dst.tolist(), strict=True):
                for x, y in ((a, b), (b, a)):
                    if x == op and y not in reached:
                        reached.add(y)
                        frontier.append(y)
        assert len(reached) == 20
    assert connected_subgraph(graph, 100, np.random.default_rng(0)) is graph


def test_the_train_command(toy_dataset, tmp_path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps(dataclasses.asdict(tiny(toy_dataset, 2))))
    result = CliRunner().invoke(
        app, ["train", "gflownet", str(config), "-o", str(tmp_path / "run"), "--steps", "2"]
    )
    assert result.exit_code == 0, result.output
    assert "trained 2 steps" in result.stdout
    bad = CliRunner().invoke(app, ["train", "gflownet", str(tmp_path / "none.json"), "-o", "x"])
    assert bad.exit_code == 2 and "no training config file" in bad.output


def test_a_run_can_train_and_validate_on_one_graph_file(tmp_path) -> None:
    write_graph(generate("layered", 14, seed=3), tmp_path / "one.json")
    state = train("gflownet", tiny(f"graph:{tmp_path / 'one.json'}", 3), tmp_path / "run")
    logged = rows(tmp_path / "run")
    assert state.step == 3 and {r["ops"] for r in logged if r["ops"]} == {"14.0"}
    assert logged[-1]["validation_speedup"]
    with pytest.raises(GraphoptError, match="missing.json"):
        train(
            "gflownet",
            tiny(f"graph:{tmp_path / 'one.json'},{tmp_path / 'missing.json'}", 3),
            tmp_path / "o",
        )


def test_a_run_trains_on_several_graph_files_and_validates_on_the_smallest(tmp_path) -> None:
    sizes = (20, 10, 14)
    paths = [tmp_path / f"g{n}.json" for n in sizes]
    for n, path in zip(sizes, paths, strict=True):
        write_graph(generate("layered", n, seed=n), path)
    config = tiny("graph:" + ",".join(map(str, paths)), 12, sampling={"subgraph_ops": 30})
    network = build_policy(config.policy)
    graphs, train_ids, valid_ids = _graph_files(config, config.proxy.machine(2), network)
    assert train_ids.tolist() == [0, 1, 2] and valid_ids.tolist() == [1, 2]
    assert [graphs.get("valid", i)[0].n_ops for i in valid_ids] == [10, 14]
    train("gflownet", config, tmp_path / "run")
    assert {r["ops"] for r in rows(tmp_path / "run") if r["ops"]} == {"20.0", "10.0", "14.0"}
    with pytest.raises(TrainingError, match="an empty graph path"):
        train("gflownet", tiny(f"graph:{paths[0]},", 1), tmp_path / "stray")


def test_replayed_updates_need_a_fixed_backward_policy_and_resume_exactly(
    toy_dataset, tmp_path
) -> None:
    with pytest.raises(
        TrainingError, match=r'replay \(more than one update per batch\) needs "backward"'
    ):
        tiny(toy_dataset, 4, replay={"epochs": 2, "minibatches": 2})
    with pytest.raises(
        TrainingError, match=r"replay.minibatches must be at most sampling.trajectories \(8\)"
    ):
        tiny(toy_dataset, 4, replay={"minibatches": 9})
    config = dataclasses.replace(tiny(toy_dataset, 4), backward="uniform")
    config = dataclasses.replace(
        config, replay=dataclasses.replace(config.replay, epochs=2, minibatches=2)
    )
    train("gflownet", config, tmp_path / "whole")
    train(
        "gflownet",
        dataclasses.replace(config, run=dataclasses.replace(config.run, steps=2)),
        tmp_path / "cut",
    )
    train("gflownet", config, tmp_path / "cut", resume=True)
    assert rows(tmp_path / "cut") == rows(tmp_path / "whole")
    for name in ("last.pt", "best.pt"):
        before, after = weights(tmp_path / "whole" / name), weights(tmp_path / "cut" / name)
        assert all(torch.equal(before[k], after[k]) for k in before)


def test_a_run_can_start_from_a_trained_policy(toy_dataset, tmp_path) -> None:
    first = tmp_path / "first"
    train("gflownet", tiny(toy_dataset, 2), first)
    init = {"init": str(first / "last.pt")}
    config = dataclasses.replace(tiny(toy_dataset, 2), **init)
    started = SYSTEM.network(config)
    for key, value in started.state_dict().items():
        assert torch.equal(value, weights(first / "last.pt")[key]), key
    second = tmp_path / "second"
    state = train("gflownet", config, second)
    assert state.step == 2
    assert rows(second)[0]["validation_speedup"] == rows(first)[-1]["validation_speedup"]
    other = dataclasses.replace(config, policy=dataclasses.replace(config.policy, hidden=8))
    with pytest.raises(TrainingError, match=r"init .*last.pt: its policy.hidden is 16, this"):
        train("gflownet", other, tmp_path / "third")
    missing = dataclasses.replace(config, init=str(tmp_path / "nothing.pt"))
    with pytest.raises(TrainingError, match="init: no policy checkpoint at"):
        train("gflownet", missing, tmp_path / "fourth")


def test_steps_and_validations_run_on_one_torch_thread(toy_dataset, tmp_path, monkeypatch):
    threads: list[int] = []
    start = SYSTEM.start

    def watched(run):
        session = start(run)

        def counted(call):
            return lambda step: threads.append(torch.get_num_threads()) or call(step)

        return dataclasses.replace(
            session, step=counted(session.step), validate=counted(session.validate)
        )

    monkeypatch.setattr(SYSTEM, "start", watched)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        train("gflownet", tiny(toy_dataset, 2), tmp_path / "run")
        assert threads and set(threads) == {1}, threads
        assert torch.get_num_threads() == 2  # the caller's count, back after the run
    finally:
        torch.set_num_threads(before)


def test_a_run_starts_from_a_shipped_policy_named_by_its_file_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no file of that name here: the packaged one is read
    campaign = TrainConfig.load("gflownet-campaign")
    assert campaign.init == "gflownet-makespan.pt"
    started = SYSTEM.network(campaign)
    shipped = read_checkpoint(shipped_policy_path("gflownet", "makespan"), GFLOWNET_FORMAT)
    for key, value in started.state_dict().items():
        assert torch.equal(value, shipped["model_state"][key]), key
    own = tmp_path / "gflownet-makespan.pt"
    own.write_bytes(b"not a checkpoint")  # a user's file of that name wins over the package
    with pytest.raises(TrainingError, match="init: .*gflownet-makespan.pt"):
        SYSTEM.network(campaign)


def test_an_inference_temperature_is_sampled_at_but_never_validated_at(toy_dataset, tmp_path):
    sampling = {"inference_sigma": 0.002}
    config = tiny(toy_dataset, 2, sampling=sampling)
    assert config.inference_sigma == 0.002 and config.validation_temperature == 0.005
    assert tiny(toy_dataset, 2).inference_sigma == 0.005  # unset: the validation's
    ppo = tiny(toy_dataset, 2, sampling=sampling, ppo={"sigma": 0.25})
    assert dataclasses.replace(ppo, loss="ppo").inference_sigma == 0.25
    with pytest.raises(TrainingError, match="inference_sigma must be > 0, got 0"):
        tiny(toy_dataset, 2, sampling={"inference_sigma": 0})
    with pytest.raises(TrainingError, match="inference_logit_temperature must be > 0, got -1"):
        tiny(toy_dataset, 2, sampling={"inference_logit_temperature": -1})
    with pytest.raises(TrainingError, match="inference_locality must be >= 0, got -1"):
        tiny(toy_dataset, 2, sampling={"inference_locality": -1})
    assert config.sampling.decoding == PLAIN  # unset: the GFlowNet itself
    shipped = torch.load(SHIPPED / "gflownet-makespan.pt", weights_only=True)
    trained = TrainConfig.from_dict(json.loads(shipped["train_config"]))
    assert trained.inference_sigma == 0.002 and trained.validation_temperature == 0.005
    assert trained.sampling.decoding == Decoding(logit_temperature=0.25, locality=2.0)
