"""`graphopt bench`: solvers x graphs x seeds, summarized with the papers' metrics.

Each solver gets the same evaluation budget (paper 001 section 4.2: 5,000); CP-SAT gets a time
limit instead and, where it proves optimality, its value is the best known solution of that
graph. Per graph, a solver's value is its mean over seeds. Metrics are taken against BRKGA with
the same budget, which is added to the run when not asked for.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from graphopt.costmodels.machine import Machine
from graphopt.evaluation.metrics import (
    gap_from_best,
    geometric_mean_gap,
    improvement_over,
    wins_ties_losses,
)
from graphopt.ir.graph import Graph
from graphopt.solvers.base import Budget, Objective, Problem, Trace
from graphopt.solvers.registry import make_solver

BASELINE = "brkga"
EXACT = "cp-sat"


@dataclass(frozen=True)
class Run:
    """One solver on one graph with one seed."""

    graph: str
    solver: str
    seed: int
    value: float
    feasible: bool
    evaluations: int
    seconds: float
    status: str
    trace: Trace


@dataclass(frozen=True)
class BenchResult:
    """All runs and the per-solver summary rows (see `summarize`)."""

    runs: list[Run]
    summary: list[dict[str, Any]]
    evaluations: int


def run_bench(
    graphs: Sequence[Graph],
    machine: Machine,
    objective: Objective,
    solvers: Sequence[str],
    seeds: Sequence[int] = (0,),
    evaluations: int = 5000,
    exact_seconds: float = 10.0,
    progress: Callable[[str], None] | None = None,
) -> BenchResult:
    """Runs every solver on every graph with every seed and summarizes.

    Args:
        graphs: the suite.
        machine: the machine every run targets.
        objective: what every solver minimizes.
        solvers: solver names; BRKGA (the metrics' baseline) is added when missing.
        seeds: seeds per graph and solver.
        evaluations: evaluation budget of every solver but CP-SAT.
        exact_seconds: CP-SAT's time limit per graph.
        progress: called with a short label after each run.
    """
    names = list(dict.fromkeys([*solvers, BASELINE]))
    runs = []
    for graph in graphs:
        problem = Problem(graph, machine, objective)
        for name in names:
            budget = (
                Budget(seconds=exact_seconds) if name == EXACT else Budget(evaluations=evaluations)
            )
            for seed in seeds:
                result = make_solver(name).solve(problem, budget, seed)
                runs.append(
                    Run(
                        graph.name,
                        name,
                        seed,
                        result.value,
                        result.feasible,
                        result.evaluations,
                        result.seconds,
                        result.status,
                        result.trace,
                    )
                )
                if progress is not None:
                    progress(f"{name} on {graph.name}")
    return BenchResult(runs, summarize(runs, names), evaluations)


def summarize(runs: Sequence[Run], names: Sequence[str]) -> list[dict[str, Any]]:
    """Per solver: % improvement over BRKGA, geometric-mean % gap from best, W/T/L, seconds.

    The best known value of a graph is CP-SAT's proven optimum when it has one, else the best
    mean value of any solver on it.
    """
    graphs = list(dict.fromkeys(run.graph for run in runs))
    value = np.full((len(names), len(graphs)), np.nan)
    seconds = np.zeros_like(value)
    for i, name in enumerate(names):
        for j, graph in enumerate(graphs):
            mine = [run for run in runs if run.solver == name and run.graph == graph]
            value[i, j] = np.mean([run.value for run in mine])
            seconds[i, j] = np.mean([run.seconds for run in mine])
    best = np.nanmin(value, axis=0)
    optimal = np.zeros(len(graphs), dtype=bool)
    if EXACT in names:
        for j, graph in enumerate(graphs):
            proven = [r for r in runs if r.solver == EXACT and r.graph == graph]
            if proven and all(r.status == "optimal" for r in proven):
                best[j] = min(best[j], proven[0].value)
                optimal[j] = True
    baseline = value[names.index(BASELINE)]
    summary = []
    for i, name in enumerate(names):
        wins, ties, losses = wins_ties_losses(value[i], baseline)
        summary.append(
            {
                "solver": name,
                "improvement_over_brkga_pct": float(np.mean(improvement_over(value[i], baseline))),
                "geomean_gap_from_best_pct": geometric_mean_gap(gap_from_best(value[i], best)),
                "wins": wins,
                "ties": ties,
                "losses": losses,
                "seconds_per_graph": float(np.mean(seconds[i])),
                "graphs": len(graphs),
                "proven_optimal_graphs": int(optimal.sum()),
            }
        )
    return summary


def markdown_table(summary: Sequence[dict[str, Any]], evaluations: int) -> str:
    """The summary as a markdown table, in the papers' column order."""
    lines = [
        f"| solver | % improvement over BRKGA {evaluations:,} | geo-mean % gap from best | "
        "W / T / L vs BRKGA | seconds per graph |",
        "| --- | ---: | ---: | :---: | ---: |",
    ]
    for row in summary:
        lines.append(
            f"| {row['solver']} | {row['improvement_over_brkga_pct']:.2f} | "
            f"{row['geomean_gap_from_best_pct']:.2f} | "
            f"{row['wins']} / {row['ties']} / {row['losses']} | {row['seconds_per_graph']:.3f} |"
        )
    return "\n".join(lines) + "\n"


def write_reports(result: BenchResult, folder: Path, title: str) -> list[Path]:
    """Writes summary.md, summary.csv, runs.csv and convergence.png into `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    summary_md = folder / "summary.md"
    proven = result.summary[0]["proven_optimal_graphs"]
    summary_md.write_text(
        f"# {title}\n\n{markdown_table(result.summary, result.evaluations)}\n"
        f"{result.summary[0]['graphs']} graphs; best known = CP-SAT optimum on {proven} of them, "
        "else the best value any solver found.\n"
    )
    written.append(summary_md)
    summary_csv = folder / "summary.csv"
    with summary_csv.open("w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=list(result.summary[0]))
        writer.writeheader()
        writer.writerows(result.summary)
    written.append(summary_csv)
    runs_csv = folder / "runs.csv"
    with runs_csv.open("w", newline="") as file:
        writer = csv.writer(file)
        columns = ["graph", "solver", "seed", "value", "feasible", "evaluations", "seconds"]
        writer.writerow([*columns, "status"])
        for run in result.runs:
            writer.writerow([*(getattr(run, c) for c in columns), run.status])
    written.append(runs_csv)
    written.append(plot_convergence(result, folder / "convergence.png", title))
    return written


def plot_convergence(result: BenchResult, path: Path, title: str) -> Path:
    """Best-so-far against evaluations, as % of BRKGA's final value, averaged over runs.

    Paper 000 fig. 2 (right) and paper 001 fig. 5. Solvers without an evaluation budget
    (CP-SAT) are left out.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    grid = np.unique(np.geomspace(1, result.evaluations, 60).astype(int))
    final = {(run.graph, run.seed): run.value for run in result.runs if run.solver == BASELINE}
    figure, axes = plt.subplots(figsize=(6, 4))
    for name in dict.fromkeys(run.solver for run in result.runs):
        if name == EXACT:
            continue
        curves = [
            100.0 * run.trace.best_at(grid) / final[(run.graph, run.seed)]
            for run in result.runs
            if run.solver == name and final[(run.graph, run.seed)] > 0
        ]
        if curves:
            stacked = np.array(curves)
            found = (~np.isnan(stacked)).sum(axis=0)
            total = np.nansum(stacked, axis=0)
            mean = np.divide(total, found, out=np.full(grid.shape, np.nan), where=found > 0)
            axes.plot(grid, mean, label=name)
    axes.set_xscale("log")
    axes.set_xlabel("evaluations")
    axes.set_ylabel(f"best so far, % of BRKGA {result.evaluations:,}")
    axes.set_title(title)
    axes.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path
