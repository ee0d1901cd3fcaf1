"""Does GO's PPO learn? GO-one against its own untrained start running the same search.

    .venv/bin/python benchmarks/go_learning.py [--steps 20] [--seeds 2] [--devices 2,4]
        [--models gpt2-tiny,wavenet-tiny,lstm-lm-tiny] [--explore 1] [--prior STRENGTH] [--no-paper]

GO-one (pl+sch+fu, an untrained network of the shipped config's shape trained on the graph
alone for `steps` PPO steps of 32 samples, then 64 samples; fusion searched) against the same
untrained network running the same search without PPO's updates (`GOSolverConfig.learn`), so
both make the same evaluations: what learning adds beyond the search. With `--explore K`
(default 1, the solver's) both search around their incumbent, a sample changing about K
decisions per task (`train_go.CentredGOTrainer`); `--explore none` samples the policy's own
priors as GO's paper does, and the untrained start then only samples. Also printed: GO-one of
the paper's kind (`explore` none) at the same evaluations, the method this one replaced.
Per solve the gain is untrained makespan / trained makespan - 1; per (graph, devices) cell
the mean over seeds; printed: the mean over cells with its 95 % CI and the cells better, equal
and worse. Every solution is re-scored (`fusion_bench.checked_score`). `--prior` sets the
three priors' strengths (hint, scheduling, fusion; shipped: 4) of the untrained network.
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
from pathlib import Path

import numpy as np

from graphopt.evaluation.fusion_bench import zoo_training_graphs
from graphopt.evaluation.metrics import gain_line
from graphopt.learning.runs import RunState
from graphopt.learning.systems.go.config import GOTrainConfig
from graphopt.learning.systems.go.network import GOPolicy
from graphopt.learning.systems.go.train import SYSTEM
from graphopt.papers.go import SAMPLES, go_solver, solve, template


def untrained_start(folder: Path, prior: float) -> str:
    """An untrained pl+sch+fu checkpoint of the shipped shape with all three priors at `prior`."""
    shipped = GOTrainConfig.load("go")
    placer = dataclasses.replace(shipped.policy.placer, partition_prior=prior)
    policy = dataclasses.replace(
        shipped.policy, placer=placer, schedule_prior=prior, fusion_prior=prior
    )
    config = dataclasses.replace(shipped, policy=policy, graphs_per_step=1)
    path = folder / "untrained.pt"
    SYSTEM.save(path, GOPolicy(config.policy), None, config, RunState())
    return str(path)


PAPER = ("paper GO-one", None, True)
"""GO-one as paper 002 runs it: PPO sampling the policy's own priors (`explore` None)."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--devices", default="2,4")
    parser.add_argument("--models", default="gpt2-tiny,wavenet-tiny,lstm-lm-tiny")
    parser.add_argument("--prior", type=float, default=None, help="priors' strength (shipped: 4)")
    parser.add_argument("--explore", default="1", help="decisions a sample changes, or 'none'")
    parser.add_argument("--no-paper", action="store_true", help="skip the paper's GO-one")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:  # the untrained starts
        cells, paper = compare(args, Path(scratch))
    summary("GO-one against its untrained start, same search, equal evaluations", cells)
    if paper:
        summary("GO-one against the paper's GO-one (own priors), equal evaluations", paper)


def summary(title: str, cells: dict[tuple[str, int], list[float]]) -> None:
    """Prints the mean gain over cells (each the mean over seeds) with its 95 % CI."""
    print(f"{title}: {gain_line(100 * np.array([np.mean(v) for v in cells.values()]))}")


def compare(
    args: argparse.Namespace, folder: Path
) -> tuple[dict[tuple[str, int], list[float]], dict[tuple[str, int], list[float]]]:
    """GO-one's gains over its untrained start and over the paper's GO-one, per cell and seed."""
    policy = (
        template("pl+sch+fu", folder) if args.prior is None else untrained_start(folder, args.prior)
    )
    explore = None if args.explore == "none" else float(args.explore)
    cells: dict[tuple[str, int], list[float]] = {}
    paper: dict[tuple[str, int], list[float]] = {}
    for graph in zoo_training_graphs(args.models.split(",")):
        for devices in map(int, args.devices.split(",")):
            for seed in range(args.seeds):
                runs = {}
                kinds = [("GO-one", explore, True), ("untrained", explore, False)]
                for name, search, learn in kinds + ([] if args.no_paper else [PAPER]):
                    solver = go_solver(policy, args.steps, SAMPLES, True, search, learn)
                    runs[name] = solve(graph, devices, solver, seed)
                trained, untrained = runs["GO-one"][0], runs["untrained"][0]
                assert untrained.evaluations == trained.evaluations
                gain = untrained.value / trained.value - 1
                cells.setdefault((graph.name, devices), []).append(gain)
                if not args.no_paper:
                    old = runs[PAPER[0]][0].value
                    paper.setdefault((graph.name, devices), []).append(old / trained.value - 1)
                print(
                    f"{graph.name} d={devices} seed {seed}: "
                    + ", ".join(
                        f"{name} {result.value * 1e3:.4f} ms ({seconds:.0f} s)"
                        for name, (result, seconds) in runs.items()
                    )
                    + f"; {trained.evaluations} evaluations each; learning {100 * gain:+.2f} %",
                    flush=True,
                )
    return cells, paper


if __name__ == "__main__":
    main()
