"""Does GO's PPO learn? GO-one against its own untrained start at equal evaluations.

    .venv/bin/python benchmarks/go_learning.py [--steps 20] [--seeds 2] [--devices 2,4]
        [--models gpt2-tiny,wavenet-tiny,lstm-lm-tiny]

GO-one (pl+sch+fu, an untrained network of the shipped config's shape trained on the graph
alone for `steps` PPO steps of 32 samples, then 64 samples; fusion searched) against the same
untrained network that only samples, as many decisions as GO-one evaluates: what PPO adds beyond
drawing from its start. Per solve the gain is untrained makespan / trained makespan - 1; per
(graph, devices) cell the mean over seeds; printed: the mean over cells with its 95 % CI and
the cells better, equal and worse. Every solution is re-scored (`fusion_bench.checked_score`).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np

from graphopt.evaluation.fusion_bench import zoo_training_graphs
from graphopt.evaluation.go_bench import SAMPLES, go_solver, solve, template
from graphopt.evaluation.metrics import mean_with_ci


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--devices", default="2,4")
    parser.add_argument("--models", default="gpt2-tiny,wavenet-tiny,lstm-lm-tiny")
    args = parser.parse_args()
    policy = template("pl+sch+fu", Path(tempfile.mkdtemp()))
    cells: dict[tuple[str, int], list[float]] = {}
    for graph in zoo_training_graphs(args.models.split(",")):
        for devices in map(int, args.devices.split(",")):
            for seed in range(args.seeds):
                trained, seconds = solve(
                    graph, devices, go_solver(policy, args.steps, SAMPLES, True), seed
                )
                sampled = trained.evaluations - 3  # the start's two offers and the argmax
                untrained, _ = solve(graph, devices, go_solver(policy, 0, sampled, True), seed)
                gain = untrained.value / trained.value - 1
                cells.setdefault((graph.name, devices), []).append(gain)
                print(
                    f"{graph.name} d={devices} seed {seed}: GO-one {trained.value * 1e3:.4f} ms "
                    f"({trained.evaluations} evaluations, {seconds:.0f} s), untrained "
                    f"{untrained.value * 1e3:.4f} ms ({untrained.evaluations}): "
                    f"{100 * gain:+.2f} %",
                    flush=True,
                )
    gains = 100 * np.array([np.mean(v) for v in cells.values()])
    mean, low, high = mean_with_ci(gains)
    print(
        f"GO-one against its untrained start at equal evaluations: {mean:+.2f} % "
        f"[{low:+.2f}, {high:+.2f}] over {len(gains)} cells; better {int((gains > 1e-9).sum())}, "
        f"equal {int((abs(gains) <= 1e-9).sum())}, worse {int((gains < -1e-9).sum())}"
    )


if __name__ == "__main__":
    main()
