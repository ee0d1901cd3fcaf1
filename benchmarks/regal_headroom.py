"""How much a per-op REGAL policy could gain over its own actions, and how much its features know.

    .venv/bin/python benchmarks/regal_headroom.py DATASET [--objective peak-memory]
        [--policy P.pt] [--graphs 40] [--max-ops 200] [--seeds 3] [--evaluations 5000]
        [--oracle-evaluations 20000] [--variance 1] [--split valid] [--json out.json]

A REGAL action vector gives each op its own mutant distributions; nothing else of the search
changes. This asks what the best such vector is worth and whether the graph's features point
to it. For `--graphs` graphs of `--split` (validation by default) of at most `--max-ops` ops,
spread over the split as training picks them, with the policy's own search settings and
`--evaluations` per run, it scores four action vectors over `--seeds` search seeds:
  - policy: the policy's greedy actions (the shipped one's by default);
  - oracle: actions that point at the best solution of a long run (`--oracle-evaluations`,
    continuing the graph's feature run with the policy's search and uniform mutants): each
    placement gene's mean at the top level on the op's device and the bottom level elsewhere,
    the priority gene's mean at the quantized 1 - (op's position in that solution's schedule),
    variance level `--variance`. It knows the answer of a longer search, which no policy does;
  - oracle schedule: the oracle's priorities with the policy's placement actions;
  - features: the same rule fed with what the features say instead, the feature run's
    expected device and expected schedule position of each op.
Each is reported as mean % improvement over uniform BRKGA with the same budget and seeds, and
paired against the policy [95% CI]. It also reports how often the features' rule picks the
oracle's levels per op, next to how often a second long run (another seed) does: a policy
reads these features, so the first says how much of the oracle's per-op targets the features
carry, and the second how much of them any prediction could (the makespan policy's anchor
starts from this rule).
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
from graphopt.evaluation.metrics import mean_with_ci
from graphopt.learning.batching import make_batch
from graphopt.learning.features import FeatureRun, node_feature_names
from graphopt.learning.formats import shipped_policy_path
from graphopt.learning.runs import spread
from graphopt.learning.systems.regal.checkpoints import load_policy
from graphopt.learning.systems.regal.env import RolloutEnv, RolloutTask
from graphopt.learning.systems.regal.network import greedy_actions
from graphopt.solvers.base import Budget, Problem, Tracker
from graphopt.solvers.brkga import BRKGA, GeneDistributions

VARIANTS = ("policy", "oracle", "oracle schedule", "features")
ORACLE_SEED = 5_000_000
"""The oracle's long run on graph i uses seed ORACLE_SEED + i."""
SECOND_SEED = 5_500_000
"""A second long run on graph i (seed SECOND_SEED + i) measures how much two runs agree."""
AGREEMENTS = (
    "features_priority_agreement",
    "features_device_agreement",
    "runs_priority_agreement",
    "runs_device_agreement",
)


def pointed_actions(
    base: np.ndarray,
    levels: int,
    n_devices: int,
    device_share: np.ndarray | None,
    priority: np.ndarray,
    variance: int,
) -> np.ndarray:
    """`base` with each Beta slot's (m, v) set to point at per-op targets in [0, 1].

    Args:
        base: [n_ops, n_heads] actions the slots not set keep.
        levels: k, the levels of the action space (placement and scheduling actions).
        n_devices: devices of the machine.
        device_share: [n_ops, d] target mean of each placement gene, or None to keep them.
        priority: [n_ops] target mean of the priority gene.
        variance: the variance level of every slot set.
    """
    k = levels
    actions = base.copy()

    def level(x: np.ndarray) -> np.ndarray:
        return np.clip(np.rint(np.asarray(x) * (k - 1)), 0, k - 1).astype(actions.dtype)

    d = n_devices
    if device_share is not None:
        actions[:, 0 : 2 * d : 2] = level(device_share)
        actions[:, 1 : 2 * d : 2] = variance
    actions[:, 2 * d] = level(priority)
    actions[:, 2 * d + 1] = variance
    return actions


def long_run(
    env: RolloutEnv, problem: Problem, run: FeatureRun, evaluations: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Placement and schedule position in [0, 1] of each op in the best solution of a run that
    continues the feature run with the policy's search and uniform mutants."""
    size = run.population.keys.shape[1]
    bias = env.spec.inner.config(env.spec.objective).elite_bias
    uniform = GeneDistributions(np.ones(size), np.ones(size), np.full(size, bias))
    tracker = Tracker(problem, Budget(evaluations=evaluations - env.spec.feature_evaluations))
    env.spec.inner.evolve(problem, tracker, np.random.default_rng(seed), uniform, run.population)
    n = problem.graph.n_ops
    order = np.asarray(tracker.best_order)
    position = np.empty(n)
    position[order[order < n]] = np.arange(n) / max(n - 1, 1)
    return np.asarray(tracker.best_placement), position


def graph_headroom(
    env: RolloutEnv,
    network: torch.nn.Module,
    split: str,
    index: int,
    seeds: int,
    evaluations: int,
    oracle_evaluations: int,
    variance: int,
) -> dict:
    """Values of the four action vectors and of uniform BRKGA, and the features' agreement."""
    problem, run = env.feature_run(split, index)
    n, d = problem.graph.n_ops, env.spec.n_devices
    k = env.spec.actions.levels
    with torch.inference_mode():
        policy = greedy_actions(network(make_batch([run.features]))).numpy().astype(np.int8)

    placement, position = long_run(env, problem, run, oracle_evaluations, ORACLE_SEED + index)
    second = long_run(env, problem, run, oracle_evaluations, SECOND_SEED + index)
    oracle_share = np.eye(d)[placement]

    names = node_feature_names(d)
    first = names.index("expected_device_0")
    x = run.features.node
    feature_share = x[:, first : first + d]
    feature_position = x[:, names.index("expected_position")]

    vectors = {
        "policy": policy,
        "oracle": pointed_actions(policy, k, d, oracle_share, 1 - position, variance),
        "oracle schedule": pointed_actions(policy, k, d, None, 1 - position, variance),
        "features": pointed_actions(policy, k, d, feature_share, 1 - feature_position, variance),
    }

    def value(actions: np.ndarray, seed: int) -> float:
        return env.rollout(RolloutTask(split, index, actions, evaluations, seed))

    values = {
        name: [value(a, 1000 * index + s) for s in range(seeds)] for name, a in vectors.items()
    }
    reference = [
        BRKGA().solve(problem, Budget(evaluations=evaluations), 1000 * index + s).value
        for s in range(seeds)
    ]

    def level(position: np.ndarray) -> np.ndarray:
        return np.rint((1 - position) * (k - 1))

    return {
        "graph": index,
        "ops": n,
        "reference": float(np.mean(reference)),
        "values": {name: float(np.mean(v)) for name, v in values.items()},
        "features_priority_agreement": float(np.mean(level(feature_position) == level(position))),
        "features_device_agreement": float(np.mean(np.argmax(feature_share, 1) == placement)),
        "runs_priority_agreement": float(np.mean(level(second[1]) == level(position))),
        "runs_device_agreement": float(np.mean(second[0] == placement)),
    }


def summarize(rows: list[dict]) -> dict:
    """Mean improvements over uniform BRKGA, paired differences to the policy, agreements."""
    reference = np.array([r["reference"] for r in rows])

    def improvement(name: str) -> np.ndarray:
        return 100.0 * (1.0 - np.array([r["values"][name] for r in rows]) / reference)

    policy = improvement("policy")
    summary: dict = {"graphs": len(rows)}
    for name in VARIANTS:
        mean, low, high = mean_with_ci(improvement(name) - policy)
        summary[name] = {
            "improvement_pct": float(np.mean(improvement(name))),
            "vs_policy": [mean, low, high],
        }
    for key in AGREEMENTS:
        summary[key] = float(np.mean([r[key] for r in rows]))
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", type=Path)
    parser.add_argument("--objective", default="peak-memory")
    parser.add_argument("--policy", type=Path)
    parser.add_argument("--graphs", type=int, default=40)
    parser.add_argument("--max-ops", type=int, default=200)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--evaluations", type=int, default=5000)
    parser.add_argument("--oracle-evaluations", type=int, default=20000)
    parser.add_argument("--variance", type=int, default=1)
    parser.add_argument("--split", default="valid")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    policy = load_policy(
        args.policy or shipped_policy_path("regal", args.objective, 2), args.objective, 2
    )
    actions = policy.config.actions
    if not (actions.placement and actions.scheduling):
        parser.error("the policy must take placement and scheduling actions")
    if args.oracle_evaluations <= policy.feature_evaluations:
        parser.error(
            f"--oracle-evaluations must exceed the policy's {policy.feature_evaluations} "
            "feature-run evaluations, which the long runs continue"
        )
    if not 0 <= args.variance < actions.levels:
        parser.error(f"--variance must be a level in [0, {actions.levels - 1}]")
    env = RolloutEnv(policy.env_spec(str(args.dataset)))
    counts = Dataset.open(args.dataset, args.split).op_counts
    eligible = np.flatnonzero(counts <= args.max_ops)
    picks = spread(eligible, args.graphs)
    rows = [
        graph_headroom(
            env,
            policy.network,
            args.split,
            int(i),
            args.seeds,
            args.evaluations,
            args.oracle_evaluations,
            args.variance,
        )
        for i in track(picks, description="graphs")
    ]
    summary = summarize(rows)
    table = Table(
        title=f"REGAL headroom, {args.objective}, {len(rows)} graphs, {args.seeds} seeds, "
        f"{args.evaluations} evaluations"
    )
    for column in ("actions", "% over uniform BRKGA", "vs policy [95% CI]"):
        table.add_column(column, justify="right")
    for name in VARIANTS:
        mean, low, high = summary[name]["vs_policy"]
        table.add_row(
            name,
            f"{summary[name]['improvement_pct']:+.2f}",
            f"{mean:+.2f} [{low:+.2f}, {high:+.2f}]",
        )
    console = Console()
    console.print(table)
    console.print(
        f"the features' rule picks the oracle's priority level for "
        f"{100 * summary['features_priority_agreement']:.1f}% of ops and its device for "
        f"{100 * summary['features_device_agreement']:.1f}%; a second long run agrees with "
        f"the oracle on {100 * summary['runs_priority_agreement']:.1f}% and "
        f"{100 * summary['runs_device_agreement']:.1f}%"
    )
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "summary": summary}, indent=2) + "\n")


if __name__ == "__main__":
    main()
