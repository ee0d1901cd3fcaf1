"""Smoke test of benchmarks/import_phases.py: every phase of an import is timed, none is lost."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "import_phases.py"


@pytest.fixture
def import_phases(monkeypatch: pytest.MonkeyPatch):
    """The benchmark script as a module, run from the directory of `user_models.py`."""
    monkeypatch.chdir(Path(__file__).parent)
    spec = importlib.util.spec_from_file_location("import_phases", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("training", "onnx"), [(False, True), (True, False)])
def test_phases_cover_the_import_and_the_onnx_route(import_phases, tmp_path, training, onnx):
    out = tmp_path / "phases.json"
    argv = ["user_models:build_cnn", "--json", str(out)]
    import_phases.main(argv + ["--train"] * training + ["--onnx"] * onnx)
    result = json.loads(out.read_text())
    phases = result["phases"]
    tracing = "make_fx trace (training step)" if training else "run_decompositions"
    for name in (tracing, "conversion to a graph (with FLOP counting)", "writing JSON"):
        assert phases[name] > 0
    assert all(seconds >= 0 for seconds in phases.values())
    counted = sum(s for name, s in phases.items() if not name.startswith(" "))
    assert counted == pytest.approx(result["total"], rel=1e-6)
    assert result["ops"] > 0 and result["training"] is training
    assert (len(result["onnx_route"]) == 2) is onnx
