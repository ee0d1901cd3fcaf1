"""Regenerates a tuned BRKGA preset: grid search on a seeded training set (paper 001 4.2).

    .venv/bin/python benchmarks/tune_brkga.py --graphs 8 --ops 150 --evaluations 5000
    .venv/bin/python benchmarks/tune_brkga.py --objective makespan --dataset data/regal \
        --graphs 24 --grid structure

Without `--dataset` the training graphs are layered and Erdos-Renyi graphs with REGAL's
tensor-size augmentation, disjoint (by seed) from the graphs the bench suites use; with it they
are spread evenly over the dataset's train split. The peak-memory preset is `brkga-tuned`, the
one for another objective `brkga-tuned-<objective>` (`BRKGAConfig.preset` picks it by objective).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from rich.progress import Progress

from graphopt.costmodels.machine import Machine
from graphopt.datasets import Dataset
from graphopt.ir.generators import generate
from graphopt.ir.graph import Graph
from graphopt.solvers.base import Objective
from graphopt.solvers.brkga import preset_file_name
from graphopt.solvers.tuning import DEFAULT_GRID, STRUCTURE_GRID, save_preset, tune_brkga

PRESETS = Path(__file__).parents[1] / "src/graphopt/solvers/presets"
GRIDS = {"full": DEFAULT_GRID, "structure": STRUCTURE_GRID}


def training_graphs(args: argparse.Namespace) -> list[Graph]:
    """The dataset's train graphs spread evenly, or seeded synthetic graphs."""
    if args.dataset is None:
        families = ("layered", "erdos_renyi")
        return [generate(families[i % 2], args.ops, seed=10_000 + i) for i in range(args.graphs)]
    split = Dataset.open(args.dataset, "train")
    picks = np.linspace(0, len(split) - 1, args.graphs).round().astype(int)
    return [split[int(i)] for i in picks]


def main() -> None:
    """Runs the grid search and writes the preset."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--graphs", type=int, default=8, help="training graphs")
    parser.add_argument("--ops", type=int, default=150, help="ops per synthetic training graph")
    parser.add_argument("--dataset", type=Path, help="built dataset whose train split to use")
    parser.add_argument("--evaluations", type=int, default=5000, help="budget per run")
    parser.add_argument("--seeds", type=int, default=1, help="runs per graph and setting")
    parser.add_argument("--devices", type=int, default=2)
    parser.add_argument("--objective", choices=[o.value for o in Objective], default="peak-memory")
    parser.add_argument("--grid", choices=sorted(GRIDS), default="full")
    parser.add_argument("--output", type=Path, help="preset file (default: by objective)")
    args = parser.parse_args()
    objective = Objective(args.objective)
    specific = None if objective is Objective.PEAK_MEMORY else objective.value
    output = args.output or PRESETS / preset_file_name("tuned", specific)
    graphs = training_graphs(args)
    with Progress() as bar:
        task = bar.add_task("grid search", total=None)
        result = tune_brkga(
            graphs,
            Machine(n_devices=args.devices),
            objective,
            GRIDS[args.grid],
            evaluations=args.evaluations,
            seeds=range(args.seeds),
            progress=lambda done, total: bar.update(task, completed=done, total=total),
        )
    unused = {"output", "ops"} if args.dataset is not None else {"output"}
    provenance = {
        "command": "benchmarks/tune_brkga.py "
        + " ".join(
            f"--{k} {v}" for k, v in vars(args).items() if k not in unused and v is not None
        ),
        "training_graphs": [g.name for g in graphs],
        "objective": objective.value,
        "grid": GRIDS[args.grid],
        "settings_tried": len(result.table),
    }
    save_preset(result, output, provenance)
    print(json.dumps({"best": vars(result.best), "mean_ratio": result.best_ratio}))


if __name__ == "__main__":
    main()
