"""The GDP policy against its own untrained start on held-out graphs (the "it learned" bar).

    .venv/bin/python benchmarks/gdp_heldout_gain.py [--policy P.pt] [--seeds 3]
        [--models llama-tiny,t5-tiny,...]

Zero-shot `gdp` (the most likely placement and 64 samples, one evaluation each) of the trained
checkpoint against the same solver on an untrained network of the checkpoint's shape
(`scratch`, seeded by the solve), on zoo training graphs the policy never trained on, on 2, 4
and 8 devices (10 us, 10 GB/s, no capacity), seeds 0..S-1. Per solve the gain is untrained
makespan / trained makespan - 1; per (graph, devices) cell, the mean over seeds; printed: the
mean over cells with its 95% CI and how many cells are better, equal and worse.
"""

from __future__ import annotations

import argparse

import numpy as np

from graphopt.costmodels.machine import Machine
from graphopt.evaluation.fusion_bench import zoo_training_graphs
from graphopt.evaluation.metrics import mean_with_ci
from graphopt.learning.systems.gdp.solver import GDPAlone, GDPSolverConfig
from graphopt.solvers.base import Budget, Problem

HELD_OUT = (
    "llama-tiny",
    "llama-tiny-sdpa",
    "t5-tiny",
    "gpt2-tiny-sdpa",
    "resnet18",
    "inception-small",
    "wavenet",
    "lstm-lm-unrolled-32",
)
"""Zoo models none of whose graphs the shipped policy trained on."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--policy", default=None, help="GDP checkpoint (default: the shipped)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--models", default=",".join(HELD_OUT))
    args = parser.parse_args()
    cells: dict[tuple[str, int], list[float]] = {}
    for graph in zoo_training_graphs(args.models.split(",")):
        for devices in (2, 4, 8):
            machine = Machine(n_devices=devices, latency=1e-5, bandwidth=1e10)
            problem = Problem(graph, machine, "makespan")
            for seed in range(args.seeds):
                makespans = [
                    GDPAlone(GDPSolverConfig(args.policy, scratch=scratch))
                    .solve(problem, Budget(evaluations=1000), seed=seed)
                    .value
                    for scratch in (False, True)
                ]
                gain = makespans[1] / makespans[0] - 1
                cells.setdefault((graph.name, devices), []).append(gain)
                print(
                    f"{graph.name} d={devices} seed {seed}: trained {makespans[0] * 1e3:.4f} ms, "
                    f"untrained {makespans[1] * 1e3:.4f} ms, gain {gain:+.4%}",
                    flush=True,
                )
    per_cell = np.array([np.mean(gains) for gains in cells.values()])
    mean, low, high = mean_with_ci(100 * per_cell)
    print(
        f"gain per (graph, devices) cell: {mean:+.3f}% [95% CI {low:+.3f}, {high:+.3f}], "
        f"{len(per_cell)} cells: {int((per_cell > 0).sum())} better, "
        f"{int((per_cell == 0).sum())} equal, {int((per_cell < 0).sum())} worse"
    )


if __name__ == "__main__":
    main()
