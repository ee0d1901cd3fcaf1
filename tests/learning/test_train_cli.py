"""`graphopt train regal` and `graphopt optimize --solver regal|gas|idrs` end to end."""

import json

from test_train_regal import TINY
from typer.testing import CliRunner

from graphopt.cli import app
from graphopt.ir.generators import generate
from graphopt.ir.io import write_graph

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_train_then_optimize_with_the_trained_policy(toy_dataset, tmp_path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({**TINY, "dataset": str(toy_dataset), "objective": "makespan"}))
    result = invoke("train", "regal", config, "-o", tmp_path / "run", "--steps", 2)
    assert result.exit_code == 0, result.output
    assert "trained 2 steps" in result.stdout
    graph_path = tmp_path / "g.json"
    write_graph(generate("layered", 40, seed=9), graph_path)
    for solver in ("regal", "idrs"):
        out = tmp_path / f"{solver}.json"
        result = invoke(
            "optimize",
            graph_path,
            "--devices",
            2,
            "--objective",
            "makespan",
            "--solver",
            solver,
            "--policy",
            tmp_path / "run" / "best.pt",
            "--budget",
            600,
            "-o",
            out,
        )
        assert result.exit_code == 0, result.output
        document = json.loads(out.read_text())
        assert document["solver"]["name"] == solver and document["solver"]["evaluations"] == 600
        scored = invoke("score", graph_path, out, "--json")
        assert scored.exit_code == 0 and json.loads(scored.stdout)["claims_agree"] is True
    result = invoke(
        "optimize",
        graph_path,
        "--devices",
        2,
        "--solver",
        "regal",
        "--policy",
        tmp_path / "run" / "best.pt",
        "-o",
        tmp_path / "x.json",
    )
    assert result.exit_code == 2
    assert "trained to minimize makespan, not peak-memory" in result.stderr


def test_train_errors_are_one_line(tmp_path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"learning_rat": 1}))
    result = invoke("train", "regal", config, "-o", tmp_path / "run")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: unknown training config field(s): learning_rat")
    result = invoke("train", "regal", "no-such-config", "-o", tmp_path / "run")
    assert result.exit_code == 2 and "no training config file" in result.stderr
