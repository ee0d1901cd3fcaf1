"""`graphopt import`: every source kind, profiles, and one-line errors."""

from __future__ import annotations

import json
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
        ("no_such_module:f",): "cannot load the factory",
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
    assert result.exit_code == 2 and "op 'matmul': runtime must be a finite number" in result.output


def test_zoo_list_and_export(tmp_path):
    result = invoke("zoo", "list", "--json")
    assert result.exit_code == 0, result.output
    names = {m["name"] for m in json.loads(result.stdout)["models"]}
    assert {"resnet18", "gpt2", "lstm-lm-unrolled-512", "vit-tiny"} <= names
    out = tmp_path / "g.npz"
    result = invoke("zoo", "export", "resnet-tiny", "--train", "-o", out, "--device", "v100")
    assert result.exit_code == 0, result.output
    graph = read_graph(out)
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
