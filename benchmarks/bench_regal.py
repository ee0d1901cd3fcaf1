"""REGAL's wall time against BRKGA 5K (paper 001 table 2) and where its extra time goes.

    .venv/bin/python benchmarks/bench_regal.py [--sizes 100 300 1000 3000] [--devices 2]
        [--objective peak-memory] [--evaluations 5000] [--repeats 5] [--json out.json]

For each size (layered graphs): the median wall time of `BRKGA().solve` and of the shipped
REGAL policy's `solve` with the same evaluation budget, their ratio, and REGAL's parts: the
policy's forward pass on the graph's features, and drawing the mutants of a 5K run (450
generations' worth of 10 mutants) from per-gene Beta distributions with numpy's
`Generator.beta` against the inverse-CDF tables REGAL uses, next to uniform draws. Policy loading
and imports happen once, before timing (a compiler keeps the policy loaded).
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import torch
from rich.console import Console
from rich.table import Table

from bench_scorer import median_seconds
from graphopt.costmodels.machine import Machine
from graphopt.ir.generators import generate
from graphopt.learning.batching import make_batch
from graphopt.learning.systems.regal.actions import beta_parameters
from graphopt.learning.systems.regal.env import compute_features
from graphopt.learning.systems.regal.solver import Regal
from graphopt.solvers.base import Budget, Problem, Tracker
from graphopt.solvers.beta_tables import BetaSampler
from graphopt.solvers.brkga import BRKGA
from graphopt.solvers.random_keys import RandomKeyDecoder


def bench_size(n_ops: int, devices: int, objective: str, evaluations: int, repeats: int) -> dict:
    problem = Problem(generate("layered", n_ops, seed=1), Machine(n_devices=devices), objective)
    budget = Budget(evaluations=evaluations)
    regal = Regal()
    policy = regal.policy(problem)
    regal.solve(problem, Budget(evaluations=500))  # warm up: numba, torch, the policy
    brkga_s = median_seconds(lambda: BRKGA().solve(problem, budget, 0), repeats, 1)
    regal_s = median_seconds(lambda: Regal().solve(problem, budget, 0), repeats, 1)
    tracker = Tracker(problem, Budget(evaluations=400))
    features = compute_features(problem, tracker, np.random.default_rng(0)).features
    batch = make_batch([features])
    with torch.inference_mode():
        forward_s = median_seconds(lambda: policy.network(batch), repeats, 1)
    n_genes = RandomKeyDecoder(problem).n_genes
    rng = np.random.default_rng(0)
    alpha, beta = beta_parameters(rng.integers(0, 4, n_genes), rng.integers(0, 4, n_genes), 4)
    mutants = (evaluations // 100, 10)  # generations x mutants per generation

    def numpy_beta() -> None:
        for _ in range(mutants[0]):
            rng.beta(alpha, beta, size=(mutants[1], n_genes))

    sampler = BetaSampler(alpha, beta, rng)

    def tables() -> None:
        for _ in range(mutants[0]):
            sampler(mutants[1])

    def uniform() -> None:
        for _ in range(mutants[0]):
            rng.random((mutants[1], n_genes))

    return {
        "ops": n_ops,
        "brkga_s": brkga_s,
        "regal_s": regal_s,
        "ratio": regal_s / brkga_s,
        "forward_s": forward_s,
        "numpy_beta_s": median_seconds(numpy_beta, repeats, 1),
        "table_beta_s": median_seconds(tables, repeats, 1),
        "uniform_s": median_seconds(uniform, repeats, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 300, 1000, 3000])
    parser.add_argument("--devices", type=int, default=2)
    parser.add_argument("--objective", default="peak-memory")
    parser.add_argument("--evaluations", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args()
    rows = [
        bench_size(n, args.devices, args.objective, args.evaluations, args.repeats)
        for n in args.sizes
    ]
    table = Table(
        "ops",
        "BRKGA 5K s",
        "REGAL s",
        "ratio",
        "forward s",
        "numpy beta s",
        "table beta s",
        "uniform s",
        title=f"REGAL vs BRKGA, {args.objective}, {args.devices} devices",
    )
    for row in rows:
        table.add_row(
            f"{row['ops']:,}",
            *(f"{row[k]:.4f}" for k in ("brkga_s", "regal_s")),
            f"{row['ratio']:.2f}",
            *(f"{row[k]:.4f}" for k in ("forward_s", "numpy_beta_s", "table_beta_s", "uniform_s")),
        )
    Console().print(table)
    if args.json:
        with open(args.json, "w") as file:
            json.dump(rows, file, indent=2)


if __name__ == "__main__":
    main()
