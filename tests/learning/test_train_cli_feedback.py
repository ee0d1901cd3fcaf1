"""`graphopt train` says what it is doing (issue 43): a line for every phase before the first
step (on stdout where no bar is drawn; stderr keeps an error's one line), `--smoke` runs of every
shipped config, `--resume` without a run refused at once, and the whole command's wall time in
its last line."""

import csv
import json
import re
import subprocess
import sys
import time

import pytest
from test_train_regal import TINY
from typer.testing import CliRunner

from graphopt import progress
from graphopt.cli import app
from graphopt.datasets import DEFAULT_CONFIG, DatasetConfig
from graphopt.learning.run_dir import TrainingError
from graphopt.learning.runs import (
    CONFIGS,
    GRAPH_PREFIX,
    SMOKE_PREFIX,
    open_run,
    smoke,
    smoke_dataset,
)
from graphopt.learning.systems.gdp.config import TrainConfig as GDPConfig
from graphopt.learning.systems.regal.train import TrainConfig as RegalConfig
from graphopt.progress import Phases

runner = CliRunner()

REFUSE = """
import sys
from graphopt.cli import app
try:
    app(sys.argv[1:])
except SystemExit as exit:
    print(exit.code, "torch" in sys.modules, "numba" in sys.modules)
"""


def test_resume_without_a_run_is_refused_before_anything_is_imported(tmp_path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"dataset": "no-such-dataset"}))
    run = tmp_path / "run"
    result = subprocess.run(
        [sys.executable, "-c", REFUSE, "train", "regal", str(config), "-o", str(run), "--resume"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.stdout.split() == ["2", "False", "False"]  # exit 2, neither torch nor numba
    assert result.stderr.splitlines() == [
        f"error: {run}: no run to resume (no last.pt); start a new run there without --resume"
    ]
    assert not run.exists()
    with pytest.raises(TrainingError, match="no run to resume"):
        open_run(tmp_path / "empty", resume=True)


def test_phases_print_a_line_as_each_begins_where_no_bar_is_drawn(capsys, monkeypatch) -> None:
    with Phases("train x") as phases:
        phases.phase("building dataset d", 0)
        count = phases.phase("references of the train graphs", 40)
        count(10)  # within LINE_SECONDS of the phase's line: the bar alone would say it
        monkeypatch.setattr(progress, "LINE_SECONDS", 0.0)
        count(20)
    printed = capsys.readouterr()
    assert printed.err == ""
    assert printed.out.splitlines() == [
        "train x: building dataset d",
        "train x: references of the train graphs",
        "train x: references of the train graphs: 20/40",
    ]


def test_smoke_shrinks_the_run_and_the_dataset_to_build() -> None:
    shipped = RegalConfig.load("regal-peak-memory")
    shrunk = smoke(shipped)
    assert shrunk.dataset == SMOKE_PREFIX + "regal" and shrunk.name == "regal-peak-memory-smoke"
    assert (shrunk.run.steps, shrunk.run.validation_graphs, shrunk.run.workers) == (1, 2, 1)
    assert shrunk.run.validate_every == shrunk.run.checkpoint_every == 1
    assert shrunk.rollouts == shipped.rollouts and shrunk.policy == shipped.policy
    assert smoke(shrunk).dataset == shrunk.dataset
    files = GDPConfig(dataset=f"{GRAPH_PREFIX}a.json,b.json")
    assert smoke(files).dataset == files.dataset
    dataset = smoke_dataset(DatasetConfig.from_json(DEFAULT_CONFIG.parent / "gflownet.json"))
    assert [(s.sizes, s.count) for s in dataset.synthetic] == [((30,), 3), ((30,), 3)]
    assert dataset.copies == 0 and not dataset.zoo
    dataset = smoke_dataset(DatasetConfig.from_json(DEFAULT_CONFIG.parent / "regal.json"))
    assert sum(s.count for s in dataset.synthetic) == 5 and dataset.copies == 1
    assert {s.sizes for s in dataset.synthetic} == {(30,)} and not dataset.zoo


def test_a_smoke_run_shows_its_phases_and_reports_the_commands_wall_time(tmp_path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({**TINY, "dataset": "regal"}))
    start = time.perf_counter()
    result = runner.invoke(
        app, ["train", "regal", str(config), "-o", str(tmp_path / "run"), "--smoke"]
    )
    took = time.perf_counter() - start
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    *lines, last = result.stdout.splitlines()
    for phase in (
        "importing torch and the trainer",
        f"building dataset regal-smoke in {tmp_path / 'run' / 'dataset'}",
        "features and uniform-BRKGA references of the train graphs",
        "features and uniform-BRKGA references of the valid graphs",
        "validating the policy at step 0",
        "validating at step 1",
    ):
        assert f"train config: {phase}" in lines
    assert lines.index("train config: validating the policy at step 0") < lines.index(
        "train config: validating at step 1"
    )
    trained = re.fullmatch(r"trained 1 step in ([0-9.]+) s; .*", last)
    assert trained, last
    with (tmp_path / "run" / "log.csv").open() as file:
        steps_took = float(list(csv.DictReader(file))[-1]["seconds"])
    # the whole command, not only its steps; the line shows tenths, rounded
    assert steps_took < float(trained[1]) + 0.05 and float(trained[1]) <= round(took, 1)
    assert {"best.pt", "last.pt", "log.csv", "config.json"} <= {
        path.name for path in (tmp_path / "run").iterdir()
    }


COMMANDS = {"regal": "regal", "gas": "regal", "gflownet": "gflownet", "gdp": "gdp", "go": "go"}
"""The `train` command of each shipped config, by its name's first word."""


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(path.stem for path in CONFIGS.glob("*.json")))
def test_every_shipped_config_has_a_smoke_run_slow(name, tmp_path) -> None:
    command = COMMANDS[name.split("-")[0]]
    result = runner.invoke(app, ["train", command, name, "-o", str(tmp_path), "--smoke"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1].startswith("trained 1 step in ")
    assert json.loads((tmp_path / "config.json").read_text())["run"]["steps"] == 1
    assert (tmp_path / "best.pt").is_file() and (tmp_path / "last.pt").is_file()
