"""How much of a REGAL training reward the policy's actions explain, and how much is search luck.

    .venv/bin/python benchmarks/regal_reward_noise.py DATASET [--objective peak-memory]
        [--policy P.pt] [--graphs 20] [--max-ops 200] [--samples 8] [--evaluations 5000]
        [--json out.json]

A REINFORCE step compares the rewards of action vectors sampled for the same graph and run with
the same search seed. Their spread mixes two things: what the actions change (the signal) and
how differently BRKGA unfolds once anything differs (chaos that common seeds do not remove).
For `--graphs` training graphs of at most `--max-ops` ops (spread over the split, as training
picks them) this measures
  - the spread of `--samples` sampled action vectors' values at one seed (what training sees),
  - the spread of the greedy action vector's values over `--samples` seeds (pure search noise),
as coefficients of variation, and the share of the first variance the second does not explain:
the part of the reward differences that could carry a gradient. The policy defaults to the
shipped one for the objective; the dataset is a built one (`graphopt dataset build`).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch
from rich.console import Console
from rich.progress import track
from rich.table import Table

from graphopt.datasets import Dataset
from graphopt.learning.batching import make_batch
from graphopt.learning.formats import shipped_policy_path
from graphopt.learning.runs import spread
from graphopt.learning.systems.regal.checkpoints import load_policy
from graphopt.learning.systems.regal.env import RolloutEnv, RolloutTask
from graphopt.learning.systems.regal.network import greedy_actions, sample_actions


def graph_noise(
    env: RolloutEnv, network: torch.nn.Module, index: int, samples: int, evaluations: int
) -> dict:
    """Values of sampled actions at one seed and of the greedy actions over seeds, for a graph."""
    batch = make_batch([env.features(("train", index))])
    with torch.inference_mode():
        logits = network(batch)
    generator = torch.Generator().manual_seed(index)

    def value(actions: torch.Tensor, seed: int) -> float:
        task = RolloutTask("train", index, actions.numpy().astype(np.int8), evaluations, seed)
        return env.rollout(task)

    sampled = np.array([value(a, 0) for a in sample_actions(logits, generator, samples)])
    greedy = greedy_actions(logits)
    seeded = np.array([value(greedy, seed) for seed in range(samples)])
    return {
        "graph": index,
        "ops": int(batch.x.shape[0]),
        "actions_cv": float(sampled.std(ddof=1) / sampled.mean()),
        "seeds_cv": float(seeded.std(ddof=1) / seeded.mean()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", type=Path)
    parser.add_argument("--objective", default="peak-memory")
    parser.add_argument("--policy", type=Path)
    parser.add_argument("--graphs", type=int, default=20)
    parser.add_argument("--max-ops", type=int, default=200)
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--evaluations", type=int, default=5000)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    policy = load_policy(
        args.policy or shipped_policy_path("regal", args.objective, 2), args.objective, 2
    )
    env = RolloutEnv(policy.env_spec(str(args.dataset)))
    counts = Dataset.open(args.dataset, "train").op_counts
    eligible = np.flatnonzero(counts <= args.max_ops)
    picks = spread(eligible, args.graphs)
    rows = [
        graph_noise(env, policy.network, int(i), args.samples, args.evaluations)
        for i in track(picks, description="rollouts")
    ]
    actions_var = np.array([r["actions_cv"] for r in rows]) ** 2
    seeds_var = np.array([r["seeds_cv"] for r in rows]) ** 2
    moving = actions_var > 0
    summary = {
        "graphs": len(rows),
        "graphs_where_actions_change_the_value": int(moving.sum()),
        "median_actions_cv": float(np.median(np.sqrt(actions_var[moving])))
        if moving.any()
        else 0.0,
        "median_seeds_cv": float(np.median(np.sqrt(seeds_var[moving]))) if moving.any() else 0.0,
        # No spread across actions means nothing for a gradient, not all signal.
        "signal_share": float(max(0.0, 1.0 - seeds_var.sum() / actions_var.sum()))
        if actions_var.sum() > 0
        else 0.0,
    }
    table = Table(title=f"REGAL reward noise, {args.objective}, {args.evaluations} evaluations")
    for column in ("graph", "ops", "actions CV %", "seeds CV %"):
        table.add_column(column, justify="right")
    for r in rows:
        table.add_row(
            str(r["graph"]),
            str(r["ops"]),
            f"{100 * r['actions_cv']:.2f}",
            f"{100 * r['seeds_cv']:.2f}",
        )
    console = Console()
    console.print(table)
    console.print(summary)
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "summary": summary}, indent=2) + "\n")


if __name__ == "__main__":
    main()
