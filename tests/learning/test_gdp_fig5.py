"""The gdp-fig5 suite (GO fig. 5 for placement) on small graphs with a toy pre-training config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from graphopt.cli import app
from graphopt.errors import GraphoptError
from graphopt.ir.generators import generate
from graphopt.learning.runs import RunConfig
from graphopt.learning.systems.gdp.config import GDPConfig, MachineConfig, TrainConfig
from graphopt.papers.gdp_fig5 import METHODS, SHIPPED, GDPFig5Bench, markdown, plot, run_fig5
from graphopt.solvers.base import SolverError

runner = CliRunner()

BASE = TrainConfig(
    policy=GDPConfig(
        hidden=16,
        sage_layers=1,
        placer_layers=1,
        segment=16,
        max_devices=4,
        partition_prior=4.0,
        pipeline_prior=None,
    ),
    machine=MachineConfig(devices=2, latency=1e-5, bandwidth=1e10),
    samples=4,
    run=RunConfig(steps=1, validate_every=1, checkpoint_every=1),
)


def _named(family: str, kind: str, seed: int):
    graph = generate(family, 30, seed=seed)
    return graph.with_tensor_sizes(graph.tensor_size, name=f"{family}-{seed}.{kind}")


FAMILIES = {
    "layered": (("layered-1",), [_named("layered", "training", 5)]),
    "sbm": (("sbm-2",), [_named("sbm", "training", 6)]),
}


def _run(folder: Path, families: dict, shipped: str) -> list[dict]:
    """The suite on two tiny families, one device count, the smallest budgets."""
    pretraining = [_named("layered", "training", 1), _named("sbm", "training", 2)]
    return run_fig5(
        folder, pretraining, families, BASE, devices=(2,), steps=2, gdp_one_steps=1, finetune=1,
        samples=2, shipped=shipped,
    )  # fmt: skip


@pytest.fixture(scope="module")
def fig5(tmp_path_factory, hinted_gdp_policy):
    folder = tmp_path_factory.mktemp("fig5")
    return folder, _run(folder, FAMILIES, hinted_gdp_policy)


def test_each_family_is_pretrained_without_its_graphs(fig5) -> None:
    folder, _ = fig5
    for family, other in (("layered", "sbm-2"), ("sbm", "layered-1")):
        run = folder / "runs" / f"without-{family}"
        dataset = json.loads((run / "config.json").read_text())["dataset"]
        assert [Path(p).name for p in dataset.removeprefix("graph:").split(",")] == [
            f"{other}.training.npz"
        ]
        assert (run / "log.csv").read_text().splitlines()[-1].startswith("2,")
        assert (run / "best.pt").is_file()


def test_rows_cover_every_family_method_and_the_shipped_zero_shot(fig5) -> None:
    folder, rows = fig5
    assert plot(rows, folder / "fig5.png").stat().st_size > 0
    assert {r["family"] for r in rows} == {"layered", "sbm"}
    for family in ("layered", "sbm"):
        methods = {r["method"] for r in rows if r["family"] == family}
        assert methods == {*METHODS, SHIPPED}
    assert all(r["reference"] == "agrees" for r in rows)
    text = markdown(rows)
    assert "zero-shot vs fine-tuned (bar: within +5%)" in text
    assert "| layered | layered-5.training | 2 |" in text


def test_a_rerun_resumes_the_pretraining_runs(fig5, hinted_gdp_policy) -> None:
    folder, rows = fig5
    again = _run(folder, {"layered": FAMILIES["layered"]}, hinted_gdp_policy)
    before = [r for r in rows if r["family"] == "layered"]
    assert [r["makespan"] for r in again] == [r["makespan"] for r in before]


def test_bad_settings_are_refused() -> None:
    with pytest.raises(GraphoptError, match="unknown or no families"):
        GDPFig5Bench(families=("cnn",))
    result = runner.invoke(app, ["bench", "gdp-fig5", "--models", "cnn"])
    assert result.exit_code == 2
    assert "gdp-fig5: unknown or no families ['cnn']" in result.output


def test_a_failing_pretraining_run_is_recorded_and_the_suite_goes_on(
    monkeypatch, tmp_path, hinted_gdp_policy
) -> None:
    from graphopt.evaluation.suite import Failures
    from graphopt.papers import gdp_fig5

    def pretrain(base, name, paths, run_dir, steps, progress) -> Path:
        if name == "without-layered":
            raise SolverError("no pre-training today")
        return Path(hinted_gdp_policy)

    monkeypatch.setattr(gdp_fig5, "pretrain", pretrain)
    failures = Failures()
    pretraining = [_named("layered", "training", 1), _named("sbm", "training", 2)]
    rows = run_fig5(
        tmp_path, pretraining, FAMILIES, BASE, devices=(2,), gdp_one_steps=1, finetune=1,
        samples=2, shipped=hinted_gdp_policy, failures=failures,
    )  # fmt: skip
    assert failures.lines == ["pre-training without-layered: no pre-training today"]
    assert {r["method"] for r in rows if r["family"] == "layered"} == {SHIPPED}
    assert {r["method"] for r in rows if r["family"] == "sbm"} == {*METHODS, SHIPPED}
    assert "| layered | layered-5.training | 2 |" in markdown(rows)
