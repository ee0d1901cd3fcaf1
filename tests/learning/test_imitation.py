"""Expert iteration's parts (issue 45): labels from search, the renaming-invariant imitation
loss, and GDP's imitation steps."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from tests.learned import killed_and_resumed, without_seconds
from typer.testing import CliRunner

import graphopt.learning.labels as labels_module
from graphopt.cli import app
from graphopt.costmodels.score import Scorer
from graphopt.ir.generators import generate
from graphopt.ir.io import write_graph
from graphopt.learning.labels import LabelConfig, LabelError, Labels, build_labels
from graphopt.learning.objectives.imitation import best_renaming, matched_cross_entropy
from graphopt.learning.optim import AdamConfig
from graphopt.learning.run_dir import TrainingError
from graphopt.learning.runs import RunConfig
from graphopt.learning.systems.gdp.config import (
    GDPConfig,
    ImitationConfig,
    MachineConfig,
    TrainConfig,
)
from graphopt.learning.systems.gdp.env import Graphs, most_likely
from graphopt.learning.systems.gdp.network import GDPPolicy
from graphopt.learning.systems.gdp.train import GDPTrainer
from graphopt.learning.systems.go.config import GOTrainConfig
from graphopt.learning.training import train
from graphopt.solvers.base import Budget, Objective, Problem
from graphopt.solvers.registry import make_solver

SMALL = GDPConfig(hidden=32, sage_layers=2, placer_layers=1, segment=32, pipeline_prior=None)


def brute_force_cross_entropy(log_p: np.ndarray, label: np.ndarray, n_devices: int) -> float:
    """The reference: the least mean cross-entropy over every renaming of the label's devices."""
    return min(
        -float(np.mean(log_p[np.arange(label.size), np.array(perm)[label]]))
        for perm in itertools.permutations(range(n_devices))
    )


@pytest.mark.parametrize("seed", range(40))
def test_the_matched_loss_is_the_least_cross_entropy_over_all_renamings(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_devices = int(rng.integers(1, 6))
    n_ops = int(rng.integers(1, 30))
    logits = torch.tensor(rng.normal(0, 2, (n_ops, 8)))
    logits[:, n_devices:] = float("-inf")
    log_p = torch.log_softmax(logits, dim=-1)
    label = rng.integers(0, n_devices, n_ops)
    loss = matched_cross_entropy(log_p, label, n_devices)
    reference = brute_force_cross_entropy(log_p.numpy(), label, n_devices)
    assert float(loss.loss) == pytest.approx(reference, rel=1e-12, abs=1e-12)
    renaming = best_renaming(log_p, label, n_devices)
    assert sorted(renaming.tolist()) == list(range(n_devices))
    renamed = torch.from_numpy(renaming[label])
    assert loss.agreement == pytest.approx(float((log_p.argmax(1) == renamed).double().mean()))


def test_the_loss_does_not_see_how_a_label_names_its_devices() -> None:
    rng = np.random.default_rng(3)
    log_p = torch.log_softmax(torch.tensor(rng.normal(0, 1, (50, 4))), dim=-1)
    label = rng.integers(0, 4, 50)
    swapped = np.array([2, 0, 3, 1])[label]
    assert float(matched_cross_entropy(log_p, label, 4).loss) == pytest.approx(
        float(matched_cross_entropy(log_p, swapped, 4).loss), rel=1e-12
    )
    with pytest.raises(ValueError, match="1..8 devices"):
        best_renaming(log_p, label, 9)


@pytest.fixture(scope="module")
def toy_graphs(tmp_path_factory) -> tuple[str, list]:
    """Two small graphs as a graph: dataset."""
    folder = tmp_path_factory.mktemp("toy")
    graphs = [generate("layered", 40, seed=1), generate("sbm", 30, seed=2)]
    paths = []
    for k, graph in enumerate(graphs):
        paths.append(folder / f"g{k}.json")
        write_graph(graph, paths[-1])
    return "graph:" + ",".join(map(str, paths)), graphs


def toy_labels(dataset: str) -> LabelConfig:
    return LabelConfig(dataset, devices=2, latency=0.05, bandwidth=3e5, evaluations=300)


def test_labels_are_the_search_s_placements_and_rebuild_byte_for_byte(toy_graphs, tmp_path) -> None:
    dataset, graphs = toy_graphs
    config = toy_labels(dataset)
    made = build_labels(config, tmp_path / "a")
    build_labels(config, tmp_path / "b", workers=2)
    assert (tmp_path / "a" / "labels.npz").read_bytes() == (
        tmp_path / "b" / "labels.npz"
    ).read_bytes()
    read = Labels.open(tmp_path / "a")
    assert read.config == config and len(read) == 2
    machine = config.machine()
    for index, graph in enumerate(graphs):
        label = made.labels[index]
        placement = read.placement("train", index, graph)
        assert np.array_equal(placement, label.placement)
        # The label is the search's solution: an independent solve with its seed finds it.
        problem = Problem(graph, machine, Objective.MAKESPAN)
        seed = labels_module.graph_seed(config.seed, "train", index)
        result = make_solver("auto").solve(problem, Budget(evaluations=300), seed=seed)
        assert np.array_equal(result.solution.placement, placement)
        assert label.makespan == pytest.approx(
            Scorer(graph, machine).score(result.solution).makespan
        )
        assert label.makespan <= label.hint_makespan * (1 + 1e-12)
    manifest = json.loads((tmp_path / "a" / "manifest.json").read_text())
    assert manifest["labels"] == {"train": 2} and manifest["headroom"]["graphs"] == 2
    assert "Headroom over the best classical hint" in (tmp_path / "a" / "README.md").read_text()
    with pytest.raises(LabelError, match=r"label train/1 \(.*\) was made for another graph"):
        read.placement("train", 1, graphs[0])


def test_a_stopped_labelling_resumes_to_the_same_labels(toy_graphs, tmp_path, monkeypatch) -> None:
    dataset, _ = toy_graphs
    config = toy_labels(dataset)
    build_labels(config, tmp_path / "whole")
    monkeypatch.setattr(labels_module, "CHUNK", 1)

    def stop(done: int, total: int) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        build_labels(config, tmp_path / "split", progress=stop)
    assert len(Labels.open(tmp_path / "split")) == 1  # the first chunk was kept
    build_labels(config, tmp_path / "split")
    whole = (tmp_path / "whole" / "labels.npz").read_bytes()
    assert (tmp_path / "split" / "labels.npz").read_bytes() == whole
    with pytest.raises(LabelError, match=r"made with other settings \(evaluations differ\)"):
        build_labels(replace(config, evaluations=301), tmp_path / "split")
    (tmp_path / "split" / "labels.npz").write_bytes(whole[:100])
    with pytest.raises(LabelError, match="not a readable labels archive"):
        Labels.open(tmp_path / "split")


def imitation_config(dataset: str, labels: Path, steps: int, ppo: bool = False) -> TrainConfig:
    return TrainConfig(
        dataset=dataset,
        policy=SMALL,
        machine=MachineConfig(devices=2, latency=0.05, bandwidth=3e5),
        samples=8,
        graphs_per_step=2,
        optimizer=AdamConfig(learning_rate=1e-2),
        run=RunConfig(steps=steps, validate_every=5, checkpoint_every=5, validation_graphs=2),
        imitation=ImitationConfig(str(labels), ppo=ppo),
    )


def test_imitation_steps_learn_the_search_s_placements(toy_graphs, tmp_path) -> None:
    """From an untrained (near-uniform) start, the most likely placement comes to agree with
    the labels on most ops, and the loss falls."""
    dataset, graphs = toy_graphs
    build_labels(toy_labels(dataset), tmp_path / "labels")
    config = imitation_config(dataset, tmp_path / "labels", 60)
    torch.manual_seed(0)
    split = Graphs({"train": graphs}, config.machine.machine())
    trainer = GDPTrainer(GDPPolicy(config.policy), split, np.arange(2), config)
    rows = [trainer.step(step) for step in range(config.run.steps)]
    assert set(rows[0]) == {"step", "imitation_loss", "label_agreement"}  # no PPO step
    assert rows[-1]["imitation_loss"] < 0.5 * rows[0]["imitation_loss"]
    assert rows[-1]["label_agreement"] > 0.9 > 0.7 > rows[0]["label_agreement"]
    labels = Labels.open(tmp_path / "labels")
    for index, graph in enumerate(graphs):
        placement = most_likely(trainer.policy, split.get("train", index))
        label = labels.placement("train", index, graph)
        assert max(np.mean(placement == label), np.mean(placement == 1 - label)) > 0.9


def test_expert_iteration_runs_resume_exactly_and_bad_labels_are_refused(
    toy_graphs, tmp_path
) -> None:
    dataset, _ = toy_graphs
    build_labels(toy_labels(dataset), tmp_path / "labels")
    config = imitation_config(dataset, tmp_path / "labels", 10, ppo=True)
    whole = train("gdp", config, tmp_path / "whole")
    assert {"reward", "imitation_loss", "label_agreement"} <= set(whole.history[1])
    resumed = killed_and_resumed("gdp", config, tmp_path / "split", 5)
    assert resumed == without_seconds(whole.history)

    four = replace(config, machine=replace(config.machine, devices=4))
    with pytest.raises(TrainingError, match="places onto 2 devices, the run's machine has 4"):
        train("gdp", four, tmp_path / "four")
    swapped = "graph:" + ",".join(reversed(dataset.removeprefix("graph:").split(",")))
    other = replace(config, dataset=swapped)
    with pytest.raises(TrainingError, match="was made for another graph"):
        train("gdp", other, tmp_path / "other")
    with pytest.raises(TrainingError, match="imitation.labels: .*not a readable labels archive"):
        train("gdp", replace(config, imitation=ImitationConfig(str(tmp_path))), tmp_path / "none")
    with pytest.raises(Exception, match="GO learns by PPO alone"):
        GOTrainConfig(imitation=ImitationConfig("labels"))


def test_the_label_command(toy_graphs, tmp_path) -> None:
    dataset, _ = toy_graphs
    runner = CliRunner()
    args = ["dataset", "label", dataset, "-o", str(tmp_path / "l"), "--devices", "2",
            "--evaluations", "200", "--json"]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["labels"] == 2
    for extra, message in (
        (["--evaluations", "201"], "evaluations differ"),
        (["--splits", "valid"], "must be train alone for a graph: dataset"),
        (["--solver", "nope"], "unknown solver 'nope'"),
    ):
        result = runner.invoke(app, [*args, *extra])
        assert result.exit_code == 2 and message in result.output, result.output
        assert "Traceback" not in result.output
