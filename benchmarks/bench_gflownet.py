"""Seconds to sample schedules from the GFlowNet scheduler, as `graphopt optimize` does.

    .venv/bin/python benchmarks/bench_gflownet.py [--policy best.pt] [--repeats 3]
        [--large-samples 4] [--json out.json]

Paper 004's inference: 1,000 schedules of a graph at sigma = 0.005, each built op by op, every
step encoding the whole partial schedule. For a fresh Erdos-Renyi graph per repeat (100 ops,
4 devices) it times `GFlowNet.batches` (policy loading and attention masks included, scoring
not), and the median over repeats is the figure the issue's bar reads (<= 20 s on the 2-core
machine). Then a 1,000-op graph, where the dense attention holds one schedule per batch: the
seconds per schedule, so the time for any sample count follows. Without --policy, an untrained
policy of the shipped shape is used (the time does not depend on the weights).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from rich.console import Console
from rich.table import Table

from graphopt.costmodels.machine import Machine
from graphopt.ir.generators import generate
from graphopt.learning.runs import RunState
from graphopt.learning.systems.gflownet.config import TrainConfig
from graphopt.learning.systems.gflownet.network import GFlowNetPolicy
from graphopt.learning.systems.gflownet.solver import GFlowNet, GFlowNetSamplerConfig, chunk_size
from graphopt.learning.systems.gflownet.train import SYSTEM
from graphopt.solvers.base import Objective, Problem


def untrained_policy(folder: Path) -> str:
    """An untrained checkpoint of the shipped config's shape, written into `folder`."""
    config = TrainConfig.load("gflownet")
    torch.manual_seed(0)
    path = folder / "untrained.pt"
    SYSTEM.save(path, GFlowNetPolicy(config.policy), None, config, RunState())
    return str(path)


def sample_seconds(policy: str, n_ops: int, samples: int, seed: int) -> float:
    """Seconds to draw `samples` schedules of a fresh `n_ops`-op Erdos-Renyi graph."""
    graph = generate("erdos_renyi", n_ops, seed=seed)
    problem = Problem(graph, Machine(4), Objective.MAKESPAN)
    sampler = GFlowNet(GFlowNetSamplerConfig(policy, samples=samples))
    start = time.perf_counter()
    drawn = sum(len(batch) for batch in sampler.batches(problem, np.random.default_rng(seed)))
    seconds = time.perf_counter() - start
    assert drawn == samples
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", help="GFlowNet checkpoint (default: untrained, shipped shape)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--large-samples", type=int, default=4)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        policy = args.policy or untrained_policy(Path(folder))
        sample_seconds(policy, 20, 8, 0)  # loads the policy and torch's kernels once
        small = [sample_seconds(policy, 100, args.samples, seed) for seed in range(args.repeats)]
        large = sample_seconds(policy, 1000, args.large_samples, 0)
    results = {
        "samples": args.samples,
        "ops_100_seconds": small,
        "ops_100_median": statistics.median(small),
        "ops_1000_samples": args.large_samples,
        "ops_1000_seconds": large,
        "ops_1000_seconds_per_schedule": large / args.large_samples,
        "ops_1000_batch": chunk_size(1000, TrainConfig.load("gflownet").policy),
        "threads": torch.get_num_threads(),
    }
    table = Table(title="GFlowNet sampling (4 devices)")
    table.add_column("graph")
    table.add_column("schedules", justify="right")
    table.add_column("seconds (median)", justify="right")
    table.add_column("per schedule", justify="right")
    table.add_row(
        "ER, 100 ops",
        f"{args.samples:,}",
        f"{results['ops_100_median']:.2f} ({', '.join(f'{s:.2f}' for s in small)})",
        f"{1000 * results['ops_100_median'] / args.samples:.1f} ms",
    )
    table.add_row(
        "ER, 1,000 ops",
        f"{args.large_samples}",
        f"{large:.2f}",
        f"{large / args.large_samples:.2f} s",
    )
    Console().print(table)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
