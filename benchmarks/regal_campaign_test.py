"""A REGAL training run's best validated policy against its own step-0 policy, on test graphs.

    .venv/bin/python benchmarks/regal_campaign_test.py RUN [--dataset /work/runs/data-regal]
        [--graphs 60] [--seeds 3] [--evaluations 5000] [--zoo] [-o DIR]

Validation picked the policy, so its validation gain is biased upward (the maximum over many
noisy validations); only graphs it was not picked on say whether training helped. From RUN's
validations/step-N.npz this picks the step with the highest mean validation reward (step 0
excluded) and takes snapshots/step-N.pt and snapshots/step-0000000.pt (the untrained start). On
the first `--graphs` graphs of the dataset's test split (topologies that are in neither
training nor validation), or with `--zoo` on the zoo models REGAL never trains on (the
`zoo-held-out` suite, 10 graphs of 191-3,015 ops), with seeds 0..S-1, the run's objective and
device count (its config.json), it solves each (graph, seed) with `regal` steered by the step-0
snapshot, `regal` steered by the best snapshot and `brkga` (uniform BRKGA), all with the same
seed and a budget of `--evaluations` (5,000: paper 001's test budget, "4,600 + 400").

The `regal` solver spends its whole budget inside the one tracker: first a uniform BRKGA
feature run capped at the checkpoint's `feature_evaluations` (400 in these runs), whose last
population gives the features; one policy inference (no evaluations); then BRKGA steered by the
predicted Beta distributions on the remaining 4,600, with the checkpoint's inner settings (its
BRKGA preset, and `kept`: the 10 best of the feature run's last population start the search,
the rest of its first population is drawn from the distributions). So each solver makes 5,000
evaluations in all. Every returned solution is re-scored with the plain reference scorer
(`_reference.reference_score`), which must agree with the solver's value to a relative 1e-9.

Printed and written (summary.json, summary.md): each policy's mean % improvement over BRKGA
(per seed 100 (brkga - value) / brkga, averaged over seeds per graph) with its 95% CI over the
graphs and W/T/L against BRKGA; the paired gain of the best snapshot over step 0 (per graph,
the mean over seeds of 100 (step0 - best) / step0) with its 95% CI and W/T/L; the chosen step;
and wall seconds per solver and in all.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from graphopt.costmodels._reference import reference_score
from graphopt.costmodels.machine import Machine
from graphopt.datasets import Dataset
from graphopt.evaluation.metrics import mean_with_ci
from graphopt.evaluation.suites import SUITES
from graphopt.ir.graph import Graph
from graphopt.solvers.base import Budget, Objective, Problem, Result, Solver
from graphopt.solvers.registry import make_solver

SOLVERS = ("step0", "best", "brkga")
"""The three solvers run on every (graph, seed): the two snapshots steering `regal`, and BRKGA."""


@dataclass(frozen=True)
class Choice:
    """The validated step picked from a run, with the snapshots to compare."""

    step: int
    reward: float
    step0_reward: float
    best_snapshot: Path
    step0_snapshot: Path


def validation_means(run: Path) -> dict[int, float]:
    """Step -> mean validation reward over the graphs of validations/step-N.npz."""
    means = {}
    for path in sorted((run / "validations").glob("step-*.npz")):
        with np.load(path) as stored:
            means[int(path.stem.removeprefix("step-"))] = float(np.mean(stored["reward"]))
    if 0 not in means or len(means) < 2:
        raise SystemExit(f"{run}: needs validations of step 0 and of at least one later step")
    return means


def choose(run: Path) -> Choice:
    """The step (not 0) with the highest mean validation reward, and both snapshots' paths."""
    means = validation_means(run)
    step = max((s for s in means if s > 0), key=lambda s: means[s])
    snapshots = [run / "snapshots" / f"step-{s:07d}.pt" for s in (step, 0)]
    for path in snapshots:
        if not path.is_file():
            raise SystemExit(f"{path}: no such snapshot")
    return Choice(step, means[step], means[0], snapshots[0], snapshots[1])


def reference_value(graph: Graph, result: Result, machine: Machine, objective: Objective) -> float:
    """The objective of the result's solution by the reference scorer, checked against it."""
    score = reference_score(graph, result.solution, machine)
    value = score.makespan if objective is Objective.MAKESPAN else float(score.peak_memory)
    if not math.isclose(value, result.value, rel_tol=1e-9, abs_tol=0.0):
        raise AssertionError(
            f"{graph.name}: the solver reports {result.value!r}, the reference scorer {value!r}"
        )
    return value


def solve_all(
    graphs: list[Graph],
    solvers: dict[str, Solver],
    machine: Machine,
    objective: Objective,
    seeds: int,
    evaluations: int,
) -> tuple[np.ndarray, dict[str, float]]:
    """[solver, graph, seed] reference-checked values, and each solver's wall seconds."""
    values = np.full((len(solvers), len(graphs), seeds), np.nan)
    seconds = dict.fromkeys(solvers, 0.0)
    budget = Budget(evaluations=evaluations)
    for g, graph in enumerate(graphs):
        problem = Problem(graph, machine, objective)
        for seed in range(seeds):
            for k, (name, solver) in enumerate(solvers.items()):
                start = time.perf_counter()
                result = solver.solve(problem, budget, seed=seed)
                seconds[name] += time.perf_counter() - start
                values[k, g, seed] = reference_value(graph, result, machine, objective)
        row = ", ".join(f"{n} {values[k, g].mean():.6g}" for k, n in enumerate(solvers))
        print(f"[{g + 1}/{len(graphs)}] {graph.name} ({graph.n_ops} ops): {row}", flush=True)
    return values, seconds


def wins(per_graph: np.ndarray) -> tuple[int, int, int]:
    """How many graphs gain (> 0), tie (0) and lose (< 0)."""
    return int((per_graph > 0).sum()), int((per_graph == 0).sum()), int((per_graph < 0).sum())


def gain(base: np.ndarray, other: np.ndarray) -> np.ndarray:
    """Per graph, mean over seeds of 100 (base - other) / base (a minimized objective)."""
    if np.any(base <= 0):
        raise SystemExit("a base value is not positive: no relative gain")
    return np.mean(100.0 * (base - other) / base, axis=1)


def summarize(values: np.ndarray) -> dict[str, Any]:
    """Each policy's gain over BRKGA and best's paired gain over step 0, with CIs and W/T/L."""
    step0, best, brkga = values
    rows: dict[str, Any] = {}
    for name, policy in (("step0", step0), ("best", best)):
        per_graph = gain(brkga, policy)
        mean, low, high = mean_with_ci(per_graph)
        rows[f"{name}_over_brkga"] = {
            "mean_pct": mean,
            "ci95": [low, high],
            "wtl": wins(per_graph),
            "per_graph": per_graph.tolist(),
        }
    per_graph = gain(step0, best)
    mean, low, high = mean_with_ci(per_graph)
    rows["best_over_step0"] = {
        "mean_pct": mean,
        "ci95": [low, high],
        "wtl": wins(per_graph),
        "per_graph": per_graph.tolist(),
    }
    return rows


def markdown(report: dict[str, Any]) -> str:
    """The report as a markdown page."""
    r = report
    lines = [
        f"# REGAL campaign `{r['run']}` on held-out graphs: {r['objective']}, "
        f"{r['devices']} devices",
        "",
        f"{r['graphs']} graphs ({r['source']}) x {r['seeds']} seeds, "
        f"{r['evaluations']:,} evaluations per solve (regal: {r['feature_evaluations']} of them "
        "in its uniform feature run). Best step by mean validation reward (step 0 excluded): "
        f"**{r['step']}** (validation reward {r['validation_reward']:.5f}, step 0 "
        f"{r['step0_validation_reward']:.5f}).",
        "",
        "| comparison | mean % [95% CI] | W / T / L | seconds |",
        "| --- | ---: | :---: | ---: |",
    ]
    names = {
        "step0_over_brkga": ("regal step 0 over BRKGA", "step0"),
        "best_over_brkga": (f"regal step {r['step']} over BRKGA", "best"),
        "best_over_step0": (f"regal step {r['step']} over step 0 (paired)", None),
    }
    for key, (label, solver) in names.items():
        row = r["results"][key]
        low, high = row["ci95"]
        seconds = f"{r['seconds'][solver]:.1f}" if solver else ""
        lines.append(
            f"| {label} | {row['mean_pct']:+.3f} [{low:+.3f}, {high:+.3f}] | "
            f"{' / '.join(map(str, row['wtl']))} | {seconds} |"
        )
    lines += [
        "",
        f"BRKGA: {r['seconds']['brkga']:.1f} s; wall in all {r['wall_seconds']:.1f} s. "
        "Every solution re-scored by the reference scorer (agrees to a relative 1e-9).",
        "",
        f"Command: `{r['command']}`",
        "",
    ]
    return "\n".join(lines)


def report_lines(report: dict[str, Any]) -> list[str]:
    """The printed summary."""
    r = report
    lines = [
        f"{r['run']}: {r['objective']}, {r['devices']} devices, {r['graphs']} graphs x "
        f"{r['seeds']} seeds, {r['evaluations']} evaluations",
        f"chosen step {r['step']} (mean validation reward {r['validation_reward']:.5f}; "
        f"step 0 {r['step0_validation_reward']:.5f})",
    ]
    for key, label in (
        ("step0_over_brkga", "step 0 over BRKGA 5K"),
        ("best_over_brkga", f"step {r['step']} over BRKGA 5K"),
        ("best_over_step0", f"step {r['step']} over step 0 (paired)"),
    ):
        row = r["results"][key]
        lines.append(
            f"  {label}: {row['mean_pct']:+.3f}% [95% CI {row['ci95'][0]:+.3f}, "
            f"{row['ci95'][1]:+.3f}], W/T/L {'/'.join(map(str, row['wtl']))}"
        )
    seconds = ", ".join(f"{k} {v:.1f} s" for k, v in r["seconds"].items())
    lines.append(f"  seconds: {seconds}; wall {r['wall_seconds']:.1f} s")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run", type=Path, help="a `graphopt train regal` run folder")
    parser.add_argument("--dataset", type=Path, default=Path("/work/runs/data-regal"))
    parser.add_argument("--graphs", type=int, default=60)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--evaluations", type=int, default=5000)
    parser.add_argument(
        "--zoo", action="store_true", help="the zoo's held-out models (suite zoo-held-out) instead"
    )
    parser.add_argument("-o", "--output", type=Path, default=None)
    args = parser.parse_args()
    start = time.perf_counter()
    config = json.loads((args.run / "config.json").read_text())
    objective = Objective.parse(config["objective"])
    devices = int(config["policy"]["n_devices"])
    machine = Machine(devices)
    choice = choose(args.run)
    if args.zoo:
        graphs = SUITES["zoo-held-out"]()
        source = "the zoo-held-out suite: models REGAL never trained on"
    else:
        test = Dataset.open(args.dataset, "test")
        graphs = [test[i] for i in range(min(args.graphs, len(test)))]
        source = f"the first of `{args.dataset}`'s test split"
    solvers = {
        "step0": make_solver("regal", policy=str(choice.step0_snapshot)),
        "best": make_solver("regal", policy=str(choice.best_snapshot)),
        "brkga": make_solver("brkga"),
    }
    assert tuple(solvers) == SOLVERS
    policy = solvers["best"].policy(Problem(graphs[0], machine, objective))  # type: ignore[attr-defined]
    print(
        f"chosen step {choice.step}: {choice.best_snapshot} (feature run "
        f"{policy.feature_evaluations} evaluations, inner {policy.inner})",
        flush=True,
    )
    values, seconds = solve_all(graphs, solvers, machine, objective, args.seeds, args.evaluations)
    kind = "zoo" if args.zoo else "test"
    output = args.output or Path(f"docs/results/regal-campaign/{kind}-{objective.value}")
    report = {
        "run": str(args.run),
        "dataset": str(args.dataset),
        "source": source,
        "objective": objective.value,
        "devices": devices,
        "graphs": len(graphs),
        "seeds": args.seeds,
        "evaluations": args.evaluations,
        "feature_evaluations": policy.feature_evaluations,
        "step": choice.step,
        "validation_reward": choice.reward,
        "step0_validation_reward": choice.step0_reward,
        "validation_means": {str(k): v for k, v in validation_means(args.run).items()},
        "results": summarize(values),
        "seconds": seconds,
        "wall_seconds": time.perf_counter() - start,
        "graph_names": [g.name for g in graphs],
        "values": {name: values[k].tolist() for k, name in enumerate(SOLVERS)},
        "command": (
            f".venv/bin/python benchmarks/regal_campaign_test.py {args.run} --dataset "
            f"{args.dataset} --graphs {args.graphs} --seeds {args.seeds} --evaluations "
            f"{args.evaluations}{' --zoo' if args.zoo else ''} -o {output}"
        ),
    }
    output.mkdir(parents=True, exist_ok=True)
    (output / "summary.json").write_text(json.dumps(report, indent=1) + "\n")
    (output / "summary.md").write_text(markdown(report))
    print("\n".join(report_lines(report)))
    print(f"wrote {output / 'summary.json'}, {output / 'summary.md'}")


if __name__ == "__main__":
    main()
