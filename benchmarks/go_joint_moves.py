"""Do GO-one's improvements need the tasks changed together? Its accepted moves, taken apart.

    .venv/bin/python benchmarks/go_joint_moves.py [--steps 20] [--seeds 2] [--devices 4]
        [--models gpt2-tiny,t5-tiny,wavenet-tiny,inception-tiny,lstm-lm-tiny] [--explore 1]

What pl+sch+fu can find and pl|sch|fu cannot (GO fig. 6's 7.8 % bar) is a change of one task
that pays only beside a change of another. This runs GO-one's centred search
(`papers.go.centred_trainer`: pl+sch+fu, fusion searched, about `explore` changed decisions per
task and sample) and takes apart every move of its incumbent: each task's changes are applied
alone to the old incumbent and scored exactly. Gains are log(old makespan / new makespan). A
move is joint when its best single task's gain is under half of its whole gain: the improvement
needs the tasks together. Printed per (graph, devices, seed): the moves, how many changed 1, 2
or 3 tasks, how many are joint, the run's total gain, and the share of it that each move's best
single task would have kept alone; then that share over all runs, with its 95 % CI.
"""

from __future__ import annotations

import argparse

import numpy as np

from graphopt.evaluation.fusion_bench import zoo_training_graphs
from graphopt.evaluation.metrics import mean_with_ci
from graphopt.ir.graph import Graph
from graphopt.learning.systems.go.config import TASKS
from graphopt.learning.systems.go.env import GOEnv
from graphopt.papers.go import FIG6_MODELS, centred_trainer


def moves(graph: Graph, devices: int, seed: int, steps: int, explore: float):
    """The run's env and its incumbent moves, as (old actions, new actions) [3, n] pairs."""
    trainer = centred_trainer(graph, devices, seed, steps, explore)
    found = []
    for step in range(steps):
        before = trainer.centre.copy()
        trainer.step(step)
        if not np.array_equal(before, trainer.centre):
            found.append((before, trainer.centre.copy()))
    return trainer.graphs.env("train", 0), found


def take_apart(env: GOEnv, old: np.ndarray, new: np.ndarray) -> tuple[int, float, float]:
    """(tasks changed, the move's log gain, its best single task's log gain) of one move.

    A single task's candidate applies only that task's changes to `old`.
    """
    changed = [slot for slot in range(len(TASKS)) if not np.array_equal(old[slot], new[slot])]
    candidates = np.repeat(old[None], len(changed) + 1, axis=0)
    for row, slot in enumerate(changed):
        candidates[row, slot] = new[slot]
    candidates[-1] = new
    makespans = env.decode(np.concatenate([old[None], candidates])).makespans
    gains = np.log(makespans[0] / makespans[1:])
    return len(changed), float(gains[-1]), float(gains[:-1].max(initial=-np.inf))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--devices", default="4")
    parser.add_argument("--models", default=",".join(FIG6_MODELS))
    parser.add_argument("--explore", type=float, default=1.0)
    args = parser.parse_args()
    kept_shares, all_moves = [], []
    for graph in zoo_training_graphs(args.models.split(",")):
        for devices in map(int, args.devices.split(",")):
            for seed in range(args.seeds):
                env, found = moves(graph, devices, seed, args.steps, args.explore)
                parts = [take_apart(env, old, new) for old, new in found]
                all_moves += parts
                tasks = np.bincount([p[0] for p in parts], minlength=4)[1:]
                joint = sum(1 for _, whole, single in parts if single < whole / 2)
                total = sum(whole for _, whole, _ in parts)
                kept = sum(min(max(single, 0.0), whole) for _, whole, single in parts)
                share = kept / total if total > 0 else float("nan")
                if total > 0:
                    kept_shares.append(share)
                print(
                    f"{graph.name} d={devices} seed {seed}: {len(parts)} moves (1/2/3 tasks "
                    f"changed: {'/'.join(map(str, tasks))}), joint {joint}, total gain "
                    f"{100 * np.expm1(total):+.2f} %, kept by single tasks {100 * share:.0f} %",
                    flush=True,
                )
    mean, low, high = mean_with_ci(100 * np.array(kept_shares))
    joint = sum(1 for _, whole, single in all_moves if single < whole / 2)
    print(
        f"moves: {len(all_moves)}, joint {joint}; share of a run's gain each move's best single "
        f"task keeps: {mean:.0f} % [{low:.0f}, {high:.0f}] over {len(kept_shares)} runs"
    )


if __name__ == "__main__":
    main()
