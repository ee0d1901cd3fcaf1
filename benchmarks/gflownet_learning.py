"""Does the GFlowNet policy learn? Its gain over its own untrained start on held-out graphs.

    .venv/bin/python benchmarks/gflownet_learning.py RUN_DIR [--graphs 40] [--samples 32]
        [--checkpoint best.pt] [--json out.json]

RUN_DIR is a `graphopt train gflownet` run (its config.json, best.pt and built dataset;
`--checkpoint last.pt` reads the latest weights of a run still going instead). The
untrained start is rebuilt exactly as training built it (the run's seed, then the network), so
the comparison is the policy before and after training. On `--graphs` graphs spread over the
dataset's test split (never trained or validated on), both sample `--samples` schedules at the
inference temperature with the same seeds; per graph, the mean and the best proxy speedup. The
report is the mean paired gain in percent with a 95% CI (t interval over graphs), for the mean
and for the best, and the same for critical-path list scheduling as a fixed reference.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch
from rich.console import Console
from rich.table import Table

from graphopt.costmodels.score import Scorer
from graphopt.datasets import Dataset
from graphopt.evaluation.metrics import mean_with_ci
from graphopt.learning.systems.gflownet.config import TrainConfig
from graphopt.learning.systems.gflownet.network import Policy, build_policy
from graphopt.learning.systems.gflownet.sampling import sample_trajectories
from graphopt.learning.systems.gflownet.solver import load_gflownet_policy
from graphopt.papers.gflownet import list_scheduling_schedules
from graphopt.solvers.base import Objective, Problem


def speedups(policy: Policy, graph, machine, samples: int, sigma: float, seed: int):
    """Proxy speedups of `samples` schedules of `graph` drawn at `sigma` with seed `seed`."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        drawn = sample_trajectories(
            policy, graph, machine, samples, sigma, generator, policy.context(graph, machine)
        )
    return drawn.schedules.speedups(Scorer(graph, machine))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--graphs", type=int, default=40)
    parser.add_argument("--samples", type=int, default=32)
    parser.add_argument("--checkpoint", default="best.pt")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    config = TrainConfig.load(args.run / "config.json")
    machine = config.proxy.machine(config.policy.n_devices)
    torch.manual_seed(config.run.seed)
    start = build_policy(config.policy).eval()
    trained, sigma, _ = load_gflownet_policy(
        str(args.run / args.checkpoint), config.policy.n_devices
    )
    test = Dataset.open(args.run / "dataset", "test")
    ids = np.unique(np.linspace(0, len(test) - 1, args.graphs).round().astype(int))
    rows = []
    for seed, index in enumerate(ids.tolist()):
        graph = test[index]
        before = speedups(start, graph, machine, args.samples, sigma, seed)
        after = speedups(trained, graph, machine, args.samples, sigma, seed)
        problem = Problem(graph, machine, Objective.MAKESPAN)
        ((placement, events),) = list_scheduling_schedules(problem)
        listed = graph.total_runtime / problem.scorer.evaluate(placement, events)[1]
        rows.append((before.mean(), after.mean(), before.max(), after.max(), listed))
    table = np.array(rows)
    results = {"graphs": len(ids), "samples": args.samples, "sigma": sigma}
    for name, (a, b) in {"mean": (0, 1), "best": (2, 3)}.items():
        gain = 100 * (table[:, b] / table[:, a] - 1)
        results[f"{name}_gain_pct"] = mean_with_ci(gain)
        results[f"{name}_untrained"] = float(table[:, a].mean())
        results[f"{name}_trained"] = float(table[:, b].mean())
        results[f"{name}_vs_list_pct"] = mean_with_ci(100 * (table[:, b] / table[:, 4] - 1))
    results["list_scheduling"] = float(table[:, 4].mean())
    out = Table(title=f"trained vs untrained on {len(ids)} held-out graphs, sigma {sigma:g}")
    for column in ("speedup of", "untrained", "trained", "gain % [95% CI]", "vs list % [95% CI]"):
        out.add_column(column)
    for name in ("mean", "best"):
        gain, versus = results[f"{name}_gain_pct"], results[f"{name}_vs_list_pct"]
        out.add_row(
            f"{name} of {args.samples}",
            f"{results[f'{name}_untrained']:.3f}",
            f"{results[f'{name}_trained']:.3f}",
            f"{gain[0]:+.2f} [{gain[1]:+.2f}, {gain[2]:+.2f}]",
            f"{versus[0]:+.2f} [{versus[1]:+.2f}, {versus[2]:+.2f}]",
        )
    Console().print(out)
    print(f"critical-path list scheduling: mean speedup {results['list_scheduling']:.3f}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
