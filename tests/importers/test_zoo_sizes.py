"""Recorded zoo sizes: one entry per zoo model, equal to a fresh export, read without torch.

The default run re-exports the smallest CNN and the smallest transformer (a few seconds); `-m slow`
re-exports every entry, the >= 20,000-op training step included (minutes).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from graphopt.errors import GraphError
from graphopt.importers import zoo_sizes as sizes_module
from graphopt.importers.zoo import ZOO
from graphopt.importers.zoo_sizes import (
    FIELDS,
    KINDS,
    REGENERATE,
    SIZES_PATH,
    format_sizes,
    installed_versions,
    main,
    measure,
    read_sizes,
    zoo_sizes,
)

RECORDED = read_sizes()
# The smallest CNN and the smallest transformer by exported ops (inference and training step).
FAST = {"resnet-tiny", "vit-tiny"}


def test_every_zoo_model_has_sizes_and_no_recorded_name_is_stale() -> None:
    recorded = set(RECORDED["models"])
    assert set(ZOO) - recorded == set(), f"missing: measure them with `{REGENERATE} NAME...`"
    assert recorded - set(ZOO) == set(), f"stale: remove them with `{REGENERATE}`"
    for name in ZOO:
        sizes = zoo_sizes(name)
        assert list(sizes) == list(KINDS)
        for figures in sizes.values():
            assert list(figures) == list(FIELDS)
            assert all(isinstance(value, int) and value > 0 for value in figures.values())
            assert figures["persistent_bytes"] <= figures["tensor_bytes"]


def test_sizes_were_measured_with_the_installed_versions() -> None:
    versions = installed_versions()
    recorded = {key: RECORDED.get(key) for key in versions}
    assert recorded == versions, f"stale file: regenerate it with `{REGENERATE}`"


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=() if n in FAST else pytest.mark.slow) for n in ZOO]
)
def test_recorded_sizes_equal_a_fresh_export(name: str, kind: str) -> None:
    assert measure(name, kind) == RECORDED["models"][name][kind], (
        f"regenerate with `{REGENERATE} {name}`"
    )


def test_unknown_name_is_refused_with_the_recorded_names() -> None:
    with pytest.raises(GraphError, match="'no-such-model'.*resnet-tiny"):
        zoo_sizes("no-such-model")


def test_callers_get_a_copy() -> None:
    zoo_sizes("resnet-tiny")["inference"]["ops"] = -1
    assert zoo_sizes("resnet-tiny")["inference"]["ops"] > 0


def test_reading_sizes_imports_no_torch() -> None:
    heavy = ("torch", "transformers", "graphopt.importers.zoo")
    code = (
        "import sys; from graphopt.importers.zoo_sizes import zoo_sizes; zoo_sizes('gpt2'); "
        f"print([m for m in {heavy!r} if m in sys.modules])"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == "[]"


def test_committed_file_is_in_the_writers_format() -> None:
    versions = {key: value for key, value in RECORDED.items() if key.endswith("_version")}
    assert format_sizes(versions, RECORDED["models"]) == SIZES_PATH.read_text()


@pytest.fixture
def sizes_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the committed file, with measuring replaced by its recorded figures."""
    monkeypatch.setattr(
        sizes_module, "measure", lambda name, kind: dict(RECORDED["models"][name][kind])
    )
    copy = tmp_path / "sizes.json"
    copy.write_text(SIZES_PATH.read_text())
    return copy


def test_main_reports_differences_and_rewrites_the_file(
    sizes_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["resnet-tiny", "--file", str(sizes_copy)]) == 0
    assert "matches" in capsys.readouterr().out
    document = read_sizes(sizes_copy)
    document["models"]["resnet-tiny"]["train"]["ops"] += 1
    document["models"]["retired-model"] = document["models"]["resnet-tiny"]
    sizes_copy.write_text(json.dumps(document))
    assert main(["resnet-tiny", "--file", str(sizes_copy)]) == 1
    out = capsys.readouterr().out
    assert "resnet-tiny train ops: recorded" in out
    assert "retired-model: recorded but not in the zoo" in out
    assert main(["resnet-tiny", "--write", "--file", str(sizes_copy)]) == 0
    assert sizes_copy.read_text() == SIZES_PATH.read_text()


def test_main_refuses_unknown_models_and_mixed_versions(
    sizes_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["no-such-model", "--file", str(sizes_copy)]) == 2
    assert "unknown zoo model 'no-such-model'" in capsys.readouterr().err
    document = read_sizes(sizes_copy)
    document["torch_version"] = "0.0.1"
    sizes_copy.write_text(json.dumps(document))
    assert main(["resnet-tiny", "--write", "--file", str(sizes_copy)]) == 2
    assert "measure every model" in capsys.readouterr().err
