"""`graphopt import`: every source kind, profiles, and one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch
from torch import nn
from typer.testing import CliRunner

from graphopt.cli import app
from graphopt.costmodels.roofline import read_profile
from graphopt.ir.io import read_graph

FIXTURE = Path(__file__).parent / "fixtures" / "tiny.costgraph.pbtxt"
runner = CliRunner()


def small_mlp() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """A factory `graphopt import test_import_cli:small_mlp` can load."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)), (torch.randn(3, 4),)


def invoke(*args: str):
    return runner.invoke(app, [str(a) for a in args])


def test_costgraph_file_imports_and_profile_overrides_runtimes(tmp_path):
    out = tmp_path / "g.json"
    result = invoke("import", FIXTURE, "-o", out, "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["ops"] == 7
    graph = read_graph(out)
    op = graph.op_names[1]
    profile = tmp_path / "profile.csv"
    profile.write_text(f"op,seconds\n{op},0.25\n")
    result = invoke("import", FIXTURE, "-o", out, "--profile", profile)
    assert result.exit_code == 0, result.output
    assert read_graph(out).op_runtime[1] == 0.25
    assert read_profile(profile) == {op: 0.25}


def test_torch_factory_inference_and_training(tmp_path):
    out = tmp_path / "g.npz"
    result = invoke("import", "test_import_cli:small_mlp", "-o", out, "--device", "cpu")
    assert result.exit_code == 0, result.output
    graph = read_graph(out)
    assert graph.attrs["runtime_source"] == "roofline:cpu"
    assert "addmm" in graph.op_names
    result = invoke("import", "test_import_cli:small_mlp", "-o", out, "--train")
    assert result.exit_code == 0, result.output
    trained = read_graph(out)
    assert trained.n_ops > graph.n_ops and trained.attrs["training"] is True
    assert np.isfinite(trained.op_runtime).all()


def test_errors_are_one_line(tmp_path):
    out = tmp_path / "g.json"
    cases = {
        ("missing.onnx",): "missing.onnx",
        ("graph.xyz",): "cannot tell the format",
        ("no_such_module:f",): "no module named 'no_such_module' in the current directory",
        ("test_import_cli:small_mlp", "--train", "--method", "fx"): "cannot be used with --train",
        (str(FIXTURE), "--train"): "--train needs a PyTorch source",
        (
            str(FIXTURE),
            "--device",
            "tpu",
        ): "unknown device spec 'tpu' (known: v100, a100, h100, cpu)",
    }
    for args, message in cases.items():
        result = invoke("import", *args, "-o", out)
        assert result.exit_code == 2, (args, result.output)
        assert message in result.output
        assert len(result.output.strip().splitlines()) == 1
    profile = tmp_path / "bad.json"
    profile.write_text(json.dumps({"nope": 1.0}))
    result = invoke("import", FIXTURE, "-o", out, "--profile", profile)
    assert result.exit_code == 2 and "profile names op 'nope'" in result.output
    profile.write_text(json.dumps({"matmul": -1}))
    result = invoke("import", FIXTURE, "-o", out, "--profile", profile)
    assert result.exit_code == 2 and "op 'matmul'" in result.output
    assert "must be a finite number" in result.output


FAILING_EXPORT = """
import torch
from torch import nn


class DataDependent(nn.Module):
    def forward(self, x):
        return x[x > 0].sum() if x.sum() > 0 else x


def build():
    return DataDependent(), (torch.randn(3),)
"""


def test_a_failing_export_prints_one_error_line_and_no_traceback(tmp_path):
    # torch logs a warning and prints the partial graph before raising; only graphopt's line
    # may reach the terminal. `-P` keeps the working directory off sys.path, as the `graphopt`
    # script does: the importer itself must find the factory module there.
    (tmp_path / "failing_export.py").write_text(FAILING_EXPORT)
    env = {key: value for key, value in os.environ.items() if key != "TORCH_LOGS"}
    command = [sys.executable, "-P", "-m", "graphopt", "import", "failing_export:build"]
    command += ["-o", "g.json"]
    result = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert result.returncode == 2 and result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: torch.export failed for build: ")
    assert not (tmp_path / "g.json").exists()


def test_zoo_list_and_export(tmp_path):
    result = invoke("zoo", "list", "--json")
    assert result.exit_code == 0, result.output
    listing = {m["name"]: m for m in json.loads(result.stdout)["models"]}
    assert {"resnet18", "gpt2", "lstm-lm-unrolled-512", "vit-tiny"} <= set(listing)
    assert listing["lstm-lm-unrolled-512"]["sizes"]["train"]["ops"] > 40_000
    out = tmp_path / "g.npz"
    result = invoke("zoo", "export", "resnet-tiny", "--train", "-o", out, "--device", "v100")
    assert result.exit_code == 0, result.output
    graph = read_graph(out)
    assert listing["resnet-tiny"]["sizes"]["train"]["ops"] == graph.n_ops
    assert graph.name == "resnet-tiny-train" and graph.attrs["runtime_source"] == "roofline:v100"
    result = invoke("zoo", "export", "resnet-9000", "-o", out)
    assert result.exit_code == 2 and "unknown zoo model 'resnet-9000' (known: " in result.output


def test_dataset_build_and_refusal_to_overwrite(tmp_path):
    config = tmp_path / "tiny.json"
    config.write_text(
        json.dumps(
            {
                "copies": 1,
                "synthetic": [{"family": "layered", "sizes": [20, 30], "count": 5}],
                "zoo": [{"name": "gpt2-tiny", "training": False}],
            }
        )
    )
    out = tmp_path / "data"
    result = invoke("dataset", "build", config, "-o", out, "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["topologies"] == 11 and summary["graphs"] == 22
    assert sum(summary["splits"].values()) == 22
    assert {p.name for p in out.iterdir()} >= {"manifest.json", "README.md", "train.npz"}
    result = invoke("dataset", "build", config, "-o", out)
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1
    result = invoke("dataset", "build", tmp_path / "missing.json", "-o", tmp_path / "x")
    assert result.exit_code == 2
