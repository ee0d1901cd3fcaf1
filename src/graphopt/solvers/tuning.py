"""Tuned BRKGA: grid search over BRKGA hyper-parameters on a training set (paper 001 4.2).

The paper tunes the elite bias, the two Beta parameters of the mutant distribution and the
numbers of chromosomes, elites and mutants (648 settings on 10,000 training graphs) and keeps
the setting with the best mean objective under the same evaluation limit. Here each setting is
scored by its mean ratio to default BRKGA on the same graphs and seeds (so graphs of different
scales weigh the same), and the winner is saved as a named preset that `BRKGAConfig.preset`
and the `brkga-tuned` solver load.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from graphopt.costmodels.machine import Machine
from graphopt.ir.graph import Graph
from graphopt.solvers.base import Budget, Objective, Problem, SolverError
from graphopt.solvers.brkga import BRKGA, BRKGAConfig

DEFAULT_GRID: dict[str, list[Any]] = {
    "elite_bias": [0.6, 0.7, 0.8],
    "mutant_alpha": [0.5, 1.0],
    "mutant_beta": [0.5, 1.0],
    "population": [50, 100],
    "elites": [5, 10, 20],
    "mutants": [5, 10, 20],
}
"""A 216-setting grid over the parameters the paper tunes (mutants = population - elites -
children, so children is derived)."""

STRUCTURE_GRID: dict[str, list[Any]] = {
    key: values for key, values in DEFAULT_GRID.items() if not key.startswith("mutant_")
}
"""The 54 settings of DEFAULT_GRID with uniform mutants: a mutant distribution shared by every
gene leaves the ranks of the keys, hence the decoded solutions, distributed as with uniform
genes, so the Beta parameters only matter through how mutant keys mix with inherited ones."""


@dataclass(frozen=True)
class TuningResult:
    """The best configuration and every setting's mean ratio to default BRKGA (lower is better)."""

    best: BRKGAConfig
    best_ratio: float
    table: list[dict[str, Any]]


def grid_configs(grid: Mapping[str, Sequence[Any]]) -> list[BRKGAConfig]:
    """Every valid BRKGAConfig in the grid; settings with too few children are skipped.

    Raises:
        SolverError: for a grid key that is neither a config field nor 'mutants'.
    """
    known = {f.name for f in fields(BRKGAConfig)} | {"mutants"}
    unknown = sorted(set(grid) - known)
    if unknown:
        raise SolverError(f"unknown BRKGA grid keys {unknown}; valid: {sorted(known)}")
    configs = []
    for values in itertools.product(*grid.values()):
        setting = dict(zip(grid, values, strict=True))
        population = setting.get("population", BRKGAConfig.population)
        elites = setting.get("elites", BRKGAConfig.elites)
        mutants = setting.pop("mutants", population - elites - BRKGAConfig.children)
        setting["children"] = population - elites - mutants
        if setting["children"] < 1 or elites >= population:
            continue
        configs.append(BRKGAConfig(**setting))
    return configs


def tune_brkga(
    graphs: Sequence[Graph],
    machine: Machine,
    objective: Objective = Objective.PEAK_MEMORY,
    grid: Mapping[str, Sequence[Any]] = DEFAULT_GRID,
    evaluations: int = 5000,
    seeds: Sequence[int] = (0,),
    progress: Callable[[int, int], None] | None = None,
) -> TuningResult:
    """Grid-searches BRKGA on `graphs`, scoring each setting by its mean ratio to default BRKGA.

    Args:
        graphs: the training graphs.
        machine: the machine every run targets.
        objective: what BRKGA minimizes.
        grid: parameter name -> values to try.
        evaluations: evaluation budget of every run.
        seeds: seeds per graph.
        progress: called as progress(done, total) after each setting.
    """
    problems = [Problem(graph, machine, objective) for graph in graphs]
    budget = Budget(evaluations=evaluations)

    def values(config: BRKGAConfig) -> np.ndarray:
        return np.array(
            [BRKGA(config).solve(p, budget, seed).value for p in problems for seed in seeds]
        )

    baseline = np.maximum(values(BRKGAConfig()), 1e-300)
    configs = grid_configs(grid)
    table = []
    for done, config in enumerate(configs, start=1):
        ratio = float(np.mean(values(config) / baseline))
        table.append({**asdict(config), "mean_ratio_to_default": ratio})
        if progress is not None:
            progress(done, len(configs))
    best = min(range(len(configs)), key=lambda i: table[i]["mean_ratio_to_default"])
    return TuningResult(configs[best], table[best]["mean_ratio_to_default"], table)


def save_preset(result: TuningResult, path: Path, provenance: Mapping[str, Any]) -> None:
    """Writes a preset file: the winning config plus how it was found."""
    document = {
        "config": asdict(result.best),
        "mean_ratio_to_default": result.best_ratio,
        "provenance": dict(provenance),
    }
    path.write_text(json.dumps(document, indent=2) + "\n")
