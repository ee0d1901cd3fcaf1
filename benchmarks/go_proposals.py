"""Does GO-one's PPO learn to propose better changes? Its samples against a frozen network's.

    .venv/bin/python benchmarks/go_proposals.py [--steps 20] [--seeds 2] [--devices 2,4]
        [--models gpt2-tiny,lstm-lm-tiny,inception-tiny] [--explore 1]

`benchmarks/go_learning.py` asks whether learning improves what the search returns; this asks
whether the policy learns at all. GO-one's centred search (`train_go.CentredGOTrainer`, an
untrained network of the shipped config's shape, pl+sch+fu, fusion searched, 32 samples a step
around the incumbent, about `explore` changed decisions per task) runs once with PPO's updates
and once without (the same network frozen), with the same seeds. Per step it records how each
sample's reward compares with the incumbent it was drawn around: the share that is better, and
the median gap (sample reward - incumbent reward; rewards are -sqrt(makespan / reference), so
0 is as good as the incumbent). A policy that learns which changes pay proposes samples closer
to (or better than) its incumbent as steps go by; a frozen one does not. Printed per (graph,
devices, seed): both runs' last-quarter median gap and better share, and each run's final
incumbent; then the learned minus frozen last-quarter gap averaged over seeds per cell, with
its 95% CI over cells.
"""

from __future__ import annotations

import argparse

import numpy as np

from graphopt.evaluation.fusion_bench import zoo_training_graphs
from graphopt.evaluation.metrics import gain_line
from graphopt.ir.graph import Graph
from graphopt.papers.go import centred_trainer


def run(graph: Graph, devices: int, seed: int, steps: int, explore: float, learn: bool):
    """Per step (better share, median gap) of the samples, and the final incumbent's makespan."""
    trainer = centred_trainer(graph, devices, seed, steps, explore, learn)
    rows = []
    for step in range(steps):
        incumbent = trainer.reward
        trainer.step(step)
        reward = trainer.sampled[0][2].reward
        rows.append((np.mean(reward > incumbent + 1e-12), np.median(reward) - incumbent))
    env = trainer.graphs.env("train", 0)
    return np.array(rows), float(env.decode(trainer.centre).makespans[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--devices", default="2,4")
    parser.add_argument("--models", default="gpt2-tiny,lstm-lm-tiny,inception-tiny")
    parser.add_argument("--explore", type=float, default=1.0)
    args = parser.parse_args()
    quarter = max(args.steps // 4, 1)
    cells: dict[tuple[str, int], list[float]] = {}
    for graph in zoo_training_graphs(args.models.split(",")):
        for devices in map(int, args.devices.split(",")):
            for seed in range(args.seeds):
                runs = {
                    learn: run(graph, devices, seed, args.steps, args.explore, learn)
                    for learn in (True, False)
                }
                late = {learn: rows[-quarter:].mean(0) for learn, (rows, _) in runs.items()}
                cells.setdefault((graph.name, devices), []).append(late[True][1] - late[False][1])
                print(
                    f"{graph.name} d={devices} seed {seed}, last {quarter} steps: "
                    + "; ".join(
                        f"{'learned' if learn else 'frozen'} median gap {late[learn][1]:+.4f}, "
                        f"better {100 * late[learn][0]:.1f} %, final {runs[learn][1] * 1e3:.4f} ms"
                        for learn in (True, False)
                    ),
                    flush=True,
                )
    gaps = np.array([np.mean(v) for v in cells.values()])
    print(
        "last-quarter median sample gap to the incumbent, learned minus frozen (reward units, "
        f"better: learned closer): {gain_line(gaps, digits=4, unit='', tie=0.0)}"
    )


if __name__ == "__main__":
    main()
