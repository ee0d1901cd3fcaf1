"""GO's modes head to head over seeds: does deciding the tasks jointly beat deciding them apart?

    .venv/bin/python benchmarks/go_modes.py [--modes pl+sch+fu,pl|sch|fu] [--seeds 3]
        [--devices 4] [--models gpt2-tiny,t5-tiny,wavenet-tiny,inception-tiny,lstm-lm-tiny]
        [--steps 20]

`bench go-fig6` runs every mode and baseline once per graph; its one-seed comparison of
pl+sch+fu with pl|sch|fu (GO fig. 6's 7.8 % bar) has a CI as wide as the gain. This runs only
the modes named, each GO-one as fig. 6 runs it (an untrained network of the shipped config in
that mode, trained on the graph alone for `steps` PPO steps, then 64 samples; fusion searched;
the same evaluations), over more seeds. Per solve the gain of the first mode over another is
other makespan / first makespan - 1; printed per (graph, devices) cell the mean over seeds,
then the mean over cells and over solves with 95 % CIs, and the solves better, equal and worse.
Every solution is re-scored (`fusion_bench.checked_score`).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np

from graphopt.evaluation.fusion_bench import zoo_training_graphs
from graphopt.evaluation.metrics import gain_line
from graphopt.learning.systems.go.config import MODES
from graphopt.papers.go import FIG6_MODELS, SAMPLES, go_solver, solve, template


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--modes", default="pl+sch+fu,pl|sch|fu")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--devices", default="4")
    parser.add_argument("--models", default=",".join(FIG6_MODELS))
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    modes = args.modes.split(",")
    unknown = [mode for mode in modes if mode not in MODES]
    if len(modes) < 2 or unknown:
        parser.error(f"--modes: two or more of {', '.join(MODES)}, got {args.modes!r}")
    first, others = modes[0], modes[1:]
    with tempfile.TemporaryDirectory() as scratch:  # the untrained starts
        gains = head_to_head(args, modes, Path(scratch))
    for mode in others:
        cells = gains[mode]
        for (name, devices), values in cells.items():
            print(f"{first} against {mode}, {name} d={devices}: {100 * np.mean(values):+.2f} %")
        per_cell = 100 * np.array([np.mean(v) for v in cells.values()])
        per_solve = 100 * np.array([g for v in cells.values() for g in v])
        print(f"{first} against {mode}, per cell: {gain_line(per_cell)}")
        print(f"{first} against {mode}, per solve: {gain_line(per_solve)}")


def head_to_head(
    args: argparse.Namespace, modes: list[str], folder: Path
) -> dict[str, dict[tuple[str, int], list[float]]]:
    """Each later mode's gains of the first, per (graph, devices) cell, one per seed."""
    first, others = modes[0], modes[1:]
    policies = {mode: template(mode, folder) for mode in modes}
    gains: dict[str, dict[tuple[str, int], list[float]]] = {mode: {} for mode in others}
    for graph in zoo_training_graphs(args.models.split(",")):
        for devices in map(int, args.devices.split(",")):
            for seed in range(args.seeds):
                runs = {}
                for mode in modes:
                    solver = go_solver(policies[mode], args.steps, SAMPLES, True)
                    runs[mode] = solve(graph, devices, solver, seed)
                for mode in others:
                    gain = runs[mode][0].value / runs[first][0].value - 1
                    gains[mode].setdefault((graph.name, devices), []).append(gain)
                print(
                    f"{graph.name} d={devices} seed {seed}: "
                    + ", ".join(
                        f"{mode} {result.value * 1e3:.4f} ms ({result.evaluations} evaluations, "
                        f"{seconds:.0f} s)"
                        for mode, (result, seconds) in runs.items()
                    ),
                    flush=True,
                )
    return gains


if __name__ == "__main__":
    main()
