"""Run directories written before the one checkpoint convention resume exactly with today's code.

Each system's 2-step run is written with the writer that graphopt used before `System.save` and
`System.restore` became the platform's (`legacy_save`, kept here verbatim as the reader's twin:
REGAL's records, and `runs.save_run` for GDP, GO and GFlowNet), then resumed to 4 steps with
today's code; its log and weights must equal those of an uninterrupted 4-step run, and its
best.pt must load as a policy.
"""

from __future__ import annotations

import csv
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
import torch

from graphopt.ir.generators import generate
from graphopt.ir.io import write_graph
from graphopt.learning.features import FEATURE_SET, node_feature_names
from graphopt.learning.optim import AdamConfig
from graphopt.learning.runs import RunConfig, RunState
from graphopt.learning.saving import read_checkpoint, save_checkpoint
from graphopt.learning.systems.gdp.config import GDPConfig, MachineConfig, TrainConfig
from graphopt.learning.systems.gdp.solver import load_gdp_checkpoint
from graphopt.learning.systems.gflownet.config import TrainConfig as GFlowNetTrainConfig
from graphopt.learning.systems.gflownet.solver import load_gflownet_policy
from graphopt.learning.systems.go.config import GOConfig, GOTrainConfig
from graphopt.learning.systems.go.solver import GO
from graphopt.learning.systems.regal.checkpoints import load_policy
from graphopt.learning.systems.regal.env import InnerSearch
from graphopt.learning.systems.regal.train import TrainConfig as RegalTrainConfig
from graphopt.learning.training import System, find_system, train

SMALL = GDPConfig(hidden=16, sage_layers=1, placer_layers=1, heads=2, segment=16, max_devices=4)
MACHINE = MachineConfig(devices=2, latency=0.05, bandwidth=3e5)
RUN = RunConfig(steps=4, validate_every=2, checkpoint_every=2, workers=0)


def legacy_save(
    system: System,
    path: Path,
    network: torch.nn.Module,
    optimizer: torch.optim.Optimizer | None,
    config: Any,
    state: RunState,
) -> None:
    """best.pt or last.pt exactly as graphopt wrote them before the one convention."""
    if system.name == "regal":
        record: dict[str, Any] = {
            "format": system.form.tag,
            "policy_config": asdict(network.config),
            "feature_set": FEATURE_SET,
            "node_features": list(node_feature_names(network.config.n_devices)),
            "objective": config.objective,
            "search": config.search,
            "feature_evaluations": config.feature_evaluations,
            "inner_search": asdict(config.inner or InnerSearch()),
            "model_state": network.state_dict(),
        }
        if optimizer is None:
            record["metadata"] = {
                "train_config": json.dumps(asdict(config)),
                "step": state.step,
                "validation_reward": state.best_validation,
                "validation_improvement_pct": 100.0 * (state.best_validation + 1.0),
            }
            save_checkpoint(path, record)
            return
        record["train_config"] = json.dumps(asdict(config))
    else:
        record = {
            "format": system.form.tag,
            **system.fields(config),
            "model_state": network.state_dict(),
            "train_config": json.dumps(asdict(config)),
            "step": state.step,
            "best_validation": state.best_validation,
            "best_step": state.best_step,
        }
    if optimizer is not None:
        record.update(
            optimizer_state=optimizer.state_dict(),
            step=state.step,
            best_validation=state.best_validation,
            best_step=state.best_step,
            seconds=state.seconds,
            history=json.dumps(state.history),
        )
    save_checkpoint(path, record)


def _configs(toy_dataset: Path, folder: Path) -> dict[str, Any]:
    """A seconds-long 4-step config of each system."""
    graph = folder / "toy.json"
    write_graph(generate("layered", 40, seed=1, fusion=True), graph)
    gdp = TrainConfig(
        dataset=f"graph:{graph}",
        policy=SMALL,
        machine=MACHINE,
        samples=8,
        optimizer=AdamConfig(learning_rate=1e-2),
        run=RUN,
    )
    go = GOTrainConfig(
        dataset=f"graph:{graph}",
        policy=GOConfig(mode="pl+sch+fu", placer=SMALL),
        machine=MACHINE,
        samples=8,
        graphs_per_step=1,
        optimizer=AdamConfig(learning_rate=1e-2),
        run=RUN,
    )
    regal = RegalTrainConfig.from_dict(
        {
            "dataset": str(toy_dataset),
            **{"hidden": 16, "rounds": 2, "feature_evaluations": 100, "train_evaluations": 300},
            **{"validation_evaluations": 300, "reference_seeds": 1, "validation_graphs": 2},
            **{"batch_graphs": 2, "samples_per_graph": 2, "learning_rate": 3e-3, "workers": 0},
            **{"steps": 4, "validate_every": 2, "checkpoint_every": 2},
        }
    )
    gflownet = GFlowNetTrainConfig.from_dict(
        {
            "dataset": str(toy_dataset),
            "policy": {"n_devices": 2, "hidden": 16, "layers": 1, "heads": 4, "condition": 8},
            "sampling": {"trajectories": 8, "subgraph_ops": 16, "validation_samples": 4},
            "run": {"steps": 4, "validate_every": 2, "checkpoint_every": 2, "validation_graphs": 2},
        }
    )
    return {"regal": regal, "gdp": gdp, "go": go, "gflownet": gflownet}


class Killed(Exception):
    """A run killed right after its step-2 checkpoint."""


def _kill_at_step_2(row: dict[str, float]) -> None:
    if row["step"] == 2:
        raise Killed


def _rows(run: Path) -> list[dict[str, str]]:
    with (run / "log.csv").open() as file:
        return [{k: v for k, v in row.items() if k != "seconds"} for row in csv.DictReader(file)]


def _load_best(name: str, path: Path) -> None:
    """Loads best.pt the way the system's solver does."""
    if name == "regal":
        load_policy(path, "peak-memory", 2)
    elif name == "gdp":
        load_gdp_checkpoint(str(path))
    elif name == "go":
        GO()._load(str(path))
    else:
        load_gflownet_policy(str(path), 2)


@pytest.mark.parametrize("name", ["regal", "gdp", "go", "gflownet"])
def test_a_run_written_in_the_old_layout_resumes_exactly(
    name, toy_dataset, tmp_path, monkeypatch
) -> None:
    config = _configs(toy_dataset, tmp_path)[name]
    whole = train(name, config, tmp_path / "whole")
    system = find_system(name)
    with monkeypatch.context() as patch, pytest.raises(Killed):
        patch.setattr(system, "save", lambda *args: legacy_save(system, *args))
        train(name, config, tmp_path / "old", progress=_kill_at_step_2)
    _load_best(name, tmp_path / "old" / "best.pt")
    resumed = train(name, config, tmp_path / "old", resume=True)
    assert resumed.step == whole.step == 4
    assert _rows(tmp_path / "old") == _rows(tmp_path / "whole")
    before = read_checkpoint(tmp_path / "whole" / "last.pt", system.form)["model_state"]
    after = read_checkpoint(tmp_path / "old" / "last.pt", system.form)["model_state"]
    assert before.keys() == after.keys()
    for key, value in before.items():
        assert torch.equal(after[key], value), key
    _load_best(name, tmp_path / "old" / "best.pt")
