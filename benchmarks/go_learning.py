"""Does GO's PPO learn? GO-one against its own untrained start at equal evaluations.

    .venv/bin/python benchmarks/go_learning.py [--steps 20] [--seeds 2] [--devices 2,4]
        [--models gpt2-tiny,wavenet-tiny,lstm-lm-tiny] [--prior STRENGTH]

GO-one (pl+sch+fu, an untrained network of the shipped config's shape trained on the graph
alone for `steps` PPO steps of 32 samples, then 64 samples; fusion searched) against the same
untrained network that only samples, as many decisions as GO-one evaluates: what PPO adds beyond
drawing from its start. Per solve the gain is untrained makespan / trained makespan - 1; per
(graph, devices) cell the mean over seeds; printed: the mean over cells with its 95 % CI and
the cells better, equal and worse. Every solution is re-scored (`fusion_bench.checked_score`).
`--prior` sets the three priors' strengths (hint, scheduling, fusion; shipped: 4): stronger
priors sample fewer changes from the start, so samples explore around it as a local search does.
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
from pathlib import Path

import numpy as np

from graphopt.evaluation.fusion_bench import zoo_training_graphs
from graphopt.evaluation.go_bench import SAMPLES, go_solver, solve, template
from graphopt.evaluation.metrics import mean_with_ci
from graphopt.learning.networks.go import GOPolicy
from graphopt.learning.runs import RunState
from graphopt.learning.train_gdp import save_policy
from graphopt.learning.train_go import GO_SYSTEM, GOTrainConfig


def untrained_start(folder: Path, prior: float) -> str:
    """An untrained pl+sch+fu checkpoint of the shipped shape with all three priors at `prior`."""
    shipped = GOTrainConfig.load("go")
    placer = dataclasses.replace(shipped.policy.placer, partition_prior=prior)
    policy = dataclasses.replace(
        shipped.policy, placer=placer, schedule_prior=prior, fusion_prior=prior
    )
    config = dataclasses.replace(shipped, policy=policy, graphs_per_step=1)
    path = folder / "untrained.pt"
    save_policy(path, GO_SYSTEM, GOPolicy(config.policy), None, config, RunState())
    return str(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--devices", default="2,4")
    parser.add_argument("--models", default="gpt2-tiny,wavenet-tiny,lstm-lm-tiny")
    parser.add_argument("--prior", type=float, default=None, help="priors' strength (shipped: 4)")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp())
    policy = (
        template("pl+sch+fu", folder) if args.prior is None else untrained_start(folder, args.prior)
    )
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
