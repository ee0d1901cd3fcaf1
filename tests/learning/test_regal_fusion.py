"""REGAL, GAS and IDRS with `--fusion search` (issue 43, defect 3).

With fusion the chromosome gains one fusion priority per op, which no shipped policy predicts:
the policy steers the genes it was trained on (placement and scheduling) and the fusion genes
keep BRKGA's mutant distribution and elite bias, as plain BRKGA searches them. The best
solution keeps its groups, so `score` re-scores it to the value the search claims.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from graphopt.cli import app
from graphopt.ir.io import write_graph
from graphopt.learning.systems.regal.actions import ActionConfig, gene_distributions
from graphopt.solvers.brkga import BRKGAConfig
from graphopt.solvers.random_keys import ChromosomeLayout

runner = CliRunner()


def test_fusion_genes_keep_brkgas_distribution_and_the_others_the_policys() -> None:
    plain = ChromosomeLayout(n_ops=3, n_tensors=2, n_devices=2)
    fused = ChromosomeLayout(n_ops=3, n_tensors=2, n_devices=2, fusion=True)
    config = ActionConfig(levels=4, placement=True, scheduling=True, elite_bias=True)
    actions = np.array([[0, 0, 1, 1, 2, 2, 3], [3, 3, 0, 0, 1, 1, 0], [1, 2, 3, 0, 0, 3, 2]])
    defaults = BRKGAConfig(mutant_alpha=2.0, mutant_beta=3.0, elite_bias=0.6)
    producers = np.array([0, 2])
    without = gene_distributions(actions, config, plain, producers, defaults)
    genes = gene_distributions(actions, config, fused, producers, defaults)
    genes.check(fused.size)
    steered = slice(0, fused.fusion_priority)
    for name in ("alpha", "beta", "elite_bias"):
        np.testing.assert_array_equal(getattr(genes, name)[steered], getattr(without, name))
    tail = slice(fused.fusion_priority, fused.size)
    assert genes.alpha[tail].tolist() == [2.0] * 3 and genes.beta[tail].tolist() == [3.0] * 3
    assert genes.elite_bias[tail].tolist() == [0.6] * 3


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> Path:
    """A small MLP's training step captured through the Python API (ops with fusion classes)."""
    import torch

    import graphopt

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32), torch.nn.GELU()
    )
    captured = graphopt.capture(model, (torch.randn(8, 16),), training=True)
    assert captured.graph.kernel is not None and captured.graph.op_fusion.any()
    path = tmp_path_factory.mktemp("imported") / "mlp.json"
    write_graph(captured.graph, path)
    return path


@pytest.mark.parametrize("solver", ["regal", "gas", "idrs"])
def test_learned_solvers_search_fusion_on_an_imported_graph(imported, tmp_path, solver) -> None:
    out = tmp_path / "s.json"
    result = runner.invoke(
        app,
        [
            "optimize", str(imported), "--solver", solver, "--devices", "2", "--fusion", "search",
            "--objective", "peak-memory", "--budget", "600", "--seed", "0", "-o", str(out),
            "--json",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    optimized = json.loads(result.stdout)
    assert optimized["evaluations"] <= 600
    written = json.loads(out.read_text())
    assert written["fusion"], "the best solution fuses ops"
    scored = runner.invoke(app, ["score", str(imported), str(out), "--json"])
    assert scored.exit_code == 0, scored.stderr
    score = json.loads(scored.stdout)
    assert score["valid"] and score["claims_agree"]
    assert score["fusion_groups"] == len(written["fusion"])
    assert score["peak_memory"] == optimized["value"] == written["objective"]["peak_memory"]
