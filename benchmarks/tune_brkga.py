"""Regenerates the `brkga-tuned` preset: grid search on a seeded training set (paper 001 4.2).

    .venv/bin/python benchmarks/tune_brkga.py --graphs 8 --ops 150 --evaluations 5000

Training graphs are layered and Erdos-Renyi graphs with REGAL's tensor-size augmentation, on 2
devices for peak memory, disjoint (by seed) from the graphs the bench suites use.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.progress import Progress

from graphopt.costmodels.machine import Machine
from graphopt.ir.generators import generate
from graphopt.solvers.base import Objective
from graphopt.solvers.tuning import DEFAULT_GRID, save_preset, tune_brkga

PRESET = Path(__file__).parents[1] / "src/graphopt/solvers/presets/brkga-tuned.json"


def main() -> None:
    """Runs the grid search and writes the preset."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--graphs", type=int, default=8, help="training graphs")
    parser.add_argument("--ops", type=int, default=150, help="ops per training graph")
    parser.add_argument("--evaluations", type=int, default=5000, help="budget per run")
    parser.add_argument("--devices", type=int, default=2)
    parser.add_argument("--output", type=Path, default=PRESET)
    args = parser.parse_args()
    families = ("layered", "erdos_renyi")
    graphs = [generate(families[i % 2], args.ops, seed=10_000 + i) for i in range(args.graphs)]
    with Progress() as bar:
        task = bar.add_task("grid search", total=None)
        result = tune_brkga(
            graphs,
            Machine(n_devices=args.devices),
            Objective.PEAK_MEMORY,
            DEFAULT_GRID,
            evaluations=args.evaluations,
            progress=lambda done, total: bar.update(task, completed=done, total=total),
        )
    provenance = {
        "command": "benchmarks/tune_brkga.py "
        + " ".join(f"--{k} {v}" for k, v in vars(args).items() if k != "output"),
        "training_graphs": [g.name for g in graphs],
        "objective": "peak-memory",
        "grid": DEFAULT_GRID,
        "settings_tried": len(result.table),
    }
    save_preset(result, args.output, provenance)
    print(json.dumps({"best": vars(result.best), "mean_ratio": result.best_ratio}))


if __name__ == "__main__":
    main()
