"""`graphopt bench`: solvers x graphs x seeds, summarized with the papers' metrics.

Each solver gets the same evaluation budget (paper 001 section 4.2: 5,000); CP-SAT gets a time
limit instead and, where it proves optimality, its value is the best known solution of that
graph. Per graph, a solver's value is its mean over seeds. Metrics are taken against BRKGA with
the same budget, which is added to the run when not asked for. A run that fails (a solver that
refuses the problem, or a bug) is recorded with its one-line error and left out of the metrics;
the others still run.

The reports reproduce paper 001's evaluation: table 1 (mean % improvement over BRKGA with its
95% confidence interval, geometric-mean % gap from the best known value), table 2 (seconds per
graph), fig. 4 (histogram of per-graph improvement over BRKGA) and fig. 5 (mean improvement over
BRKGA at the main budget as every solver's evaluation limit grows).
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from graphopt._messages import count
from graphopt.costmodels.machine import Machine
from graphopt.errors import GraphoptError
from graphopt.evaluation.metrics import (
    gap_from_best,
    geometric_mean_gap,
    improvement_over,
    mean_with_ci,
    ties,
    wins_ties_losses,
)
from graphopt.evaluation.reports import failure_section, pyplot, save_figure, write_csv
from graphopt.evaluation.suite import BenchSettings, Progress, Report, failure_text
from graphopt.evaluation.suites import load_suite, report_name
from graphopt.ir.graph import Graph
from graphopt.ir.solution import Solution
from graphopt.solvers.base import Budget, Objective, Problem, SolverError, Trace
from graphopt.solvers.registry import check_solver, make_solver

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
    lower_bound: float = math.nan
    """The problem's lower bound (`graphopt.solvers.bounds`), which no solver can beat."""
    error: str = ""
    """Why the run failed, on one line; "" when it ran. A failed run has no value (NaN)."""

    def failure(self) -> str:
        """`solver on graph (seed s): error`, the line a report gives a failed run."""
        return f"{self.solver} on {self.graph} (seed {self.seed}): {self.error}"


def _failed(graph: Graph, solver: str, seed: int, error: Exception) -> Run:
    """The record of a run that raised `error`: its message on one line, no value."""
    text = failure_text(error)
    return Run(graph.name, solver, seed, math.nan, False, 0, 0.0, "failed", Trace(), error=text)


@dataclass(frozen=True)
class BenchResult:
    """All runs and the per-solver summary rows (see `summarize`).

    Attributes:
        runs: every run at the main budget (CP-SAT's at its time limit).
        summary: one row per solver, see `summarize`.
        evaluations: the main evaluation budget.
        budgets: the evaluation limits of the budget curve (paper 001 fig. 5), if any.
        curve_runs: limit -> the extra runs of every solver but CP-SAT at that limit; the main
            budget is never run twice, so a limit equal to it has no entry here.
        showcase: the first graph, the machine, and each solver's solution of it at the main
            budget with the first seed: what the report's memory picture compares.
    """

    runs: list[Run]
    summary: list[dict[str, Any]]
    evaluations: int
    budgets: tuple[int, ...] = ()
    curve_runs: dict[int, list[Run]] = field(default_factory=dict)
    showcase: tuple[Graph, Machine, dict[str, Solution]] | None = None

    @property
    def failures(self) -> list[Run]:
        """Every run that failed, at the main budget and on the budget curve."""
        curve = [run for runs in self.curve_runs.values() for run in runs]
        return [run for run in (*self.runs, *curve) if run.error]

    @property
    def n_runs(self) -> int:
        """Runs made, failed ones included."""
        return len(self.runs) + sum(len(runs) for runs in self.curve_runs.values())


def run_bench(
    graphs: Sequence[Graph],
    machine: Machine,
    objective: Objective,
    solvers: Sequence[str],
    seeds: Sequence[int] = (0,),
    evaluations: int = 5000,
    exact_seconds: float = 10.0,
    budgets: Sequence[int] | None = None,
    exact_max_ops: int | None = None,
    progress: Callable[[int, int, str], None] | None = None,
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
        budgets: evaluation limits at which every solver but CP-SAT is also run, with the same
            seeds, for the budget curve (paper 001 fig. 5).
        exact_max_ops: run CP-SAT only on graphs of at most this many ops (it cannot prove
            optima on large graphs within its time limit); None runs it on all.
        progress: called after each run with the runs done, the runs planned and a short label.

    A run that raises is recorded as failed (`Run.error`) and the bench goes on: one solver
    refusing one graph must not lose hours of other runs.

    Raises:
        SolverError: a budget that is not a positive integer or an `exact_max_ops` below 1,
            before anything runs.
    """
    limits = list(dict.fromkeys(budgets or ()))
    for limit in limits:
        Budget(evaluations=limit)  # rejects a bad limit before anything runs
    if exact_max_ops is not None and exact_max_ops < 1:
        raise SolverError(f"exact-max-ops must be a positive number of ops, got {exact_max_ops}")
    names = list(dict.fromkeys([*solvers, BASELINE]))
    runs: list[Run] = []
    curve_runs: dict[int, list[Run]] = {limit: [] for limit in limits if limit != evaluations}

    def plan(graph: Graph) -> Iterator[tuple[str, Budget, list[Run], str]]:
        """(solver, budget, where its runs go, label suffix) for each solver run on the graph."""
        for name in names:
            if name != EXACT:
                yield name, Budget(evaluations=evaluations), runs, ""
                for limit, bucket in curve_runs.items():
                    yield name, Budget(evaluations=limit), bucket, f" at {limit:,}"
            elif exact_max_ops is None or graph.n_ops <= exact_max_ops:
                yield name, Budget(seconds=exact_seconds), runs, ""

    plans = [(graph, list(plan(graph))) for graph in graphs]
    if graphs:
        # One untimed run per solver first: imports, numba compilation, policy loading and the
        # policy's first forward pass (after the 400-evaluation feature run) then stay out of
        # the seconds per graph (paper 001 table 2 times the search itself).
        warm_up = Problem(graphs[0], machine, objective)
        for name in names:
            budget = Budget(seconds=1.0) if name == EXACT else Budget(evaluations=1_000)
            try:
                make_solver(name).solve(warm_up, budget, 0)
            except Exception:  # the timed run on the same graph records the failure
                continue
    total = sum(len(steps) for _, steps in plans) * len(seeds)
    done = 0
    shown: dict[str, Solution] = {}
    for graph, steps in plans:
        problem = Problem(graph, machine, objective)
        for name, budget, bucket, suffix in steps:
            for seed in seeds:
                try:
                    result = make_solver(name).solve(problem, budget, seed)
                except Exception as error:  # recorded, and the suite goes on
                    record = _failed(graph, name, seed, error)
                else:
                    if graph is graphs[0] and seed == seeds[0] and bucket is runs:
                        shown[name] = result.solution
                    record = Run(
                        graph.name,
                        name,
                        seed,
                        result.value,
                        result.feasible,
                        result.evaluations,
                        result.seconds,
                        result.status,
                        result.trace,
                        problem.lower_bound,
                    )
                bucket.append(record)
                done += 1
                if progress is not None:
                    progress(done, total, f"{name}{suffix} on {graph.name}")
    showcase = (graphs[0], machine, shown) if graphs else None
    return BenchResult(
        runs, summarize(runs, names), evaluations, tuple(limits), curve_runs, showcase
    )


def per_graph(
    runs: Sequence[Run], names: Sequence[str], graphs: Sequence[str]
) -> tuple[np.ndarray, np.ndarray]:
    """[solver, graph] mean value and mean seconds over the seeds that ran; NaN where none did."""
    groups: dict[tuple[str, str], list[Run]] = defaultdict(list)
    for run in runs:
        if not run.error:
            groups[run.solver, run.graph].append(run)
    value = np.full((len(names), len(graphs)), np.nan)
    seconds = np.full_like(value, np.nan)
    for i, name in enumerate(names):
        for j, graph in enumerate(graphs):
            mine = groups.get((name, graph))
            if mine:
                value[i, j] = np.mean([run.value for run in mine])
                seconds[i, j] = np.mean([run.seconds for run in mine])
    return value, seconds


def _graphs(runs: Sequence[Run]) -> list[str]:
    return list(dict.fromkeys(run.graph for run in runs))


def summarize(runs: Sequence[Run], names: Sequence[str]) -> list[dict[str, Any]]:
    """Per solver: % improvement over BRKGA (95% CI), geo-mean % gap from best, W/T/L, seconds.

    Each solver is measured over the graphs it ran on (CP-SAT may skip large ones, a run may
    fail), against BRKGA where BRKGA ran too. The best known value of a graph is CP-SAT's proven
    optimum when it has one, else the best mean value of any solver on it.
    """
    graphs = _graphs(runs)
    value, seconds = per_graph(runs, names, graphs)
    best = np.fmin.reduce(value, axis=0)  # NaN, without a warning, where every run failed
    optimal = np.zeros(len(graphs), dtype=bool)
    if EXACT in names:
        for j, graph in enumerate(graphs):
            proven = [r for r in runs if r.solver == EXACT and r.graph == graph]
            if proven and all(r.status == "optimal" for r in proven):
                best[j] = min(best[j], proven[0].value)
                optimal[j] = True
    baseline = value[names.index(BASELINE)]
    bound = np.full(len(graphs), math.nan)
    for run in runs:
        if not run.error:
            bound[graphs.index(run.graph)] = run.lower_bound
    summary = []
    for i, name in enumerate(names):
        ran = ~np.isnan(value[i])
        against = ran & ~np.isnan(baseline)
        mean, low, high = mean_with_ci(improvement_over(value[i, against], baseline[against]))
        wins, tied, losses = wins_ties_losses(value[i, against], baseline[against])
        summary.append(
            {
                "solver": name,
                "improvement_over_brkga_pct": mean,
                "improvement_ci_low_pct": low,
                "improvement_ci_high_pct": high,
                "geomean_gap_from_best_pct": (
                    geometric_mean_gap(gap_from_best(value[i, ran], best[ran]))
                    if ran.any()
                    else math.nan
                ),
                "wins": wins,
                "ties": tied,
                "losses": losses,
                "geomean_gap_from_bound_pct": (
                    geometric_mean_gap(gap_from_best(value[i, ran], bound[ran]))
                    if ran.any() and not np.isnan(bound[ran]).any()
                    else math.nan
                ),
                "seconds_per_graph": float(np.mean(seconds[i, ran])) if ran.any() else math.nan,
                "graphs": int(ran.sum()),
                "proven_optimal_graphs": int(optimal.sum()),
                "failed_runs": sum(1 for run in runs if run.solver == name and run.error),
            }
        )
    return summary


def _number(value: float, digits: int = 2) -> str:
    """A table cell: '-' for a missing number (NaN), 'inf' / '-inf' for an unbounded ratio."""
    return "-" if math.isnan(value) else f"{value:.{digits}f}"


def markdown_table(summary: Sequence[dict[str, Any]], evaluations: int) -> str:
    """The summary as a markdown table, in the papers' column order."""
    lines = [
        f"| solver | % improvement over BRKGA {evaluations:,} [95% CI] | "
        "geo-mean % gap from best | geo-mean % above lower bound | W / T / L vs BRKGA | "
        "seconds per graph | graphs |",
        "| --- | ---: | ---: | ---: | :---: | ---: | ---: |",
    ]
    for row in summary:
        interval = (
            f" [{_number(row['improvement_ci_low_pct'])}, "
            f"{_number(row['improvement_ci_high_pct'])}]"
            if math.isfinite(row["improvement_ci_low_pct"])
            else ""
        )
        lines.append(
            f"| {row['solver']} | {_number(row['improvement_over_brkga_pct'])}{interval} | "
            f"{_number(row['geomean_gap_from_best_pct'])} | "
            f"{_number(row['geomean_gap_from_bound_pct'])} | "
            f"{row['wins']} / {row['ties']} / {row['losses']} | "
            f"{_number(row['seconds_per_graph'], 3)} | {row['graphs']} |"
        )
    return "\n".join(lines) + "\n"


def budget_curve(result: BenchResult) -> list[dict[str, Any]]:
    """Paper 001 fig. 5: mean % improvement over BRKGA at the main budget, per solver and limit.

    CP-SAT has a time limit, not an evaluation limit, so it has no curve.
    """
    graphs = _graphs(result.runs)
    names = [row["solver"] for row in result.summary if row["solver"] != EXACT]
    baseline = per_graph(result.runs, [BASELINE], graphs)[0][0]
    rows = []
    for limit in sorted(result.budgets):
        runs = result.runs if limit == result.evaluations else result.curve_runs[limit]
        value = per_graph(runs, names, graphs)[0]
        for name, values in zip(names, value, strict=True):
            ran = ~np.isnan(values) & ~np.isnan(baseline)
            mean, low, high = mean_with_ci(improvement_over(values[ran], baseline[ran]))
            rows.append(
                {
                    "solver": name,
                    "evaluations": limit,
                    "improvement_over_brkga_pct": mean,
                    "ci_low_pct": low,
                    "ci_high_pct": high,
                }
            )
    return rows


def _curve_table(rows: Sequence[dict[str, Any]], evaluations: int) -> str:
    """The budget curve as a markdown table: one row per solver, one column per limit."""
    limits = list(dict.fromkeys(row["evaluations"] for row in rows))
    cells: dict[str, list[str]] = defaultdict(list)
    for row in rows:
        cells[row["solver"]].append(_number(row["improvement_over_brkga_pct"]))
    lines = [
        f"% improvement over BRKGA {evaluations:,} by evaluation limit (paper 001 fig. 5):\n",
        "| solver | " + " | ".join(f"{limit:,}" for limit in limits) + " |",
        "| --- |" + " ---: |" * len(limits),
    ]
    lines += [f"| {name} | " + " | ".join(values) + " |" for name, values in cells.items()]
    return "\n".join(lines) + "\n"


def write_reports(
    result: BenchResult,
    folder: Path,
    title: str,
    command: str | None = None,
    histogram: str | None = None,
) -> list[Path]:
    """Writes summary.md/.csv, runs.csv and the plots (fig. 4, fig. 5 with budgets) to `folder`.

    The files: summary.md, summary.csv, runs.csv, convergence.png, improvement_histogram.png,
    solutions.png (each solver's memory per step on the first graph, embedded in summary.md)
    and, when the bench had budgets, budget_curve.csv and budget_curve.png.

    Args:
        result: what `run_bench` returned.
        folder: where the reports go, created if needed.
        title: heading of summary.md and the plots.
        command: the command line that produced the result, recorded in summary.md so a
            published result says how to reproduce it.
        histogram: the one solver the histogram shows; None shows every other solver than BRKGA
            that ran on some graph.

    Raises:
        SolverError: `histogram` is BRKGA or a solver the bench did not run.
    """
    solvers = [row["solver"] for row in result.summary]
    if histogram is not None and (histogram == BASELINE or histogram not in solvers):
        raise SolverError(
            f"histogram solver {histogram!r} must be one the bench ran other than {BASELINE} "
            f"({', '.join(s for s in solvers if s != BASELINE) or 'none'})"
        )
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    n_graphs = len(_graphs(result.runs))
    proven = result.summary[0]["proven_optimal_graphs"]
    text = (
        f"# {title}\n\n{markdown_table(result.summary, result.evaluations)}\n"
        f"{n_graphs} graphs; best known = CP-SAT optimum on {proven} of them, "
        "else the best value any solver found.\n"
    )
    curve = budget_curve(result)
    if curve:
        text += "\n" + _curve_table(curve, result.evaluations)
    text += failure_section([run.failure() for run in result.failures], result.n_runs)
    if command is not None:
        text += f"\nCommand: `{command}`\n"
    if result.showcase is not None and result.showcase[2]:
        picture = _plot_showcase(result.showcase, folder / "solutions.png")
        written.append(picture)
        text += (
            f"\n![memory per step of each solver's solution of {result.showcase[0].name}]"
            f"({picture.name})\n"
        )
    summary_md = folder / "summary.md"
    summary_md.write_text(text)
    written.append(summary_md)
    written.append(write_csv(folder / "summary.csv", result.summary))
    runs_csv = folder / "runs.csv"
    with runs_csv.open("w", newline="") as file:
        writer = csv.writer(file)
        columns = ["graph", "solver", "seed", "value", "feasible", "evaluations", "seconds"]
        writer.writerow([*columns, "status", "evaluation_limit", "lower_bound", "error"])
        limited = [(run, "" if run.solver == EXACT else result.evaluations) for run in result.runs]
        limited += [(run, limit) for limit, runs in result.curve_runs.items() for run in runs]
        for run, limit in limited:
            writer.writerow(
                [*(getattr(run, c) for c in columns), run.status, limit, run.lower_bound, run.error]
            )
    written.append(runs_csv)
    written.append(plot_convergence(result, folder / "convergence.png", title))
    others = [
        row["solver"] for row in result.summary if row["solver"] != BASELINE and row["graphs"]
    ]
    shown = [histogram] if histogram is not None else others
    if shown:
        path = folder / "improvement_histogram.png"
        written.append(plot_improvement_histogram(result, path, title, shown))
    if curve:
        written.append(write_csv(folder / "budget_curve.csv", curve))
        path = folder / "budget_curve.png"
        written.append(plot_budget_curve(curve, path, title, result.evaluations))
    return written


def _plot_showcase(showcase: tuple[Graph, Machine, dict[str, Solution]], path: Path) -> Path:
    """Each solver's solution of the first graph, memory per step overlaid (`graphopt compare`)."""
    from graphopt.costmodels.profile import memory_profile
    from graphopt.pictures import compare_solutions

    graph, machine, solutions = showcase
    profiles = [
        (name, memory_profile(graph, solution, machine)) for name, solution in solutions.items()
    ]
    compare_solutions(profiles, path, f"memory of each solver's solution of {graph.name}")
    return path


def plot_convergence(result: BenchResult, path: Path, title: str) -> Path:
    """Best-so-far against evaluations, as % of BRKGA's final value, averaged over runs.

    Paper 000 fig. 2 (right) and paper 001 fig. 5. Solvers without an evaluation budget
    (CP-SAT) are left out.
    """
    plt = pyplot()
    grid = np.unique(np.geomspace(1, result.evaluations, 60).astype(int))
    final = {(run.graph, run.seed): run.value for run in result.runs if run.solver == BASELINE}
    figure, axes = plt.subplots(figsize=(6, 4))
    for name in dict.fromkeys(run.solver for run in result.runs):
        if name == EXACT:
            continue
        curves = [
            100.0 * run.trace.best_at(grid) / final[(run.graph, run.seed)]
            for run in result.runs
            if run.solver == name and not run.error and final[(run.graph, run.seed)] > 0
        ]
        if curves:
            stacked = np.array(curves)
            found = (~np.isnan(stacked)).sum(axis=0)
            total = np.nansum(stacked, axis=0)
            mean = np.divide(total, found, out=np.full(grid.shape, np.nan), where=found > 0)
            axes.plot(grid, mean, label=name)
    return _save_log_plot(
        figure, axes, path, title, "evaluations", f"best so far, % of BRKGA {result.evaluations:,}"
    )


def plot_improvement_histogram(
    result: BenchResult, path: Path, title: str, solvers: Sequence[str]
) -> Path:
    """Paper 001 fig. 4: per solver, a histogram of its per-graph % improvement over BRKGA.

    Better and worse graphs get their own colours; ties would pile up in one bar at zero and
    hide the spread, so they are left out and counted in each panel's title, as are graphs
    worse without bound (BRKGA found 0, the solver did not; `metrics` module docstring).
    """
    plt = pyplot()
    graphs = _graphs(result.runs)
    value = per_graph(result.runs, [BASELINE, *solvers], graphs)[0]
    figure, axes = plt.subplots(
        len(solvers), 1, figsize=(6, 1.0 + 2.2 * len(solvers)), squeeze=False
    )
    for row, name in enumerate(solvers):
        ran = ~np.isnan(value[row + 1]) & ~np.isnan(value[0])
        mine, baseline = value[row + 1, ran], value[0, ran]
        tied = ties(mine, baseline)
        gain = improvement_over(mine[~tied], baseline[~tied])
        bounded = gain[np.isfinite(gain)]
        panel = axes[row, 0]
        if bounded.size:
            low, high = min(bounded.min(), 0.0), max(bounded.max(), 0.0)
            width = (high - low) / 20
            edges = np.arange(math.floor(low / width), math.ceil(high / width) + 1) * width
            panel.hist(bounded[bounded > 0], bins=edges, color="tab:green", label="better")
            panel.hist(bounded[bounded < 0], bins=edges, color="tab:red", label="worse")
            panel.legend(fontsize=7)
        panel.axvline(0.0, color="black", linewidth=0.8)
        panel.set_ylabel("graphs")
        unbounded = gain.size - bounded.size
        panel.set_title(
            f"{name}, {int(ran.sum())} graphs: {int((gain > 0).sum())} better, "
            f"{int((gain < 0).sum())} worse, {int(tied.sum())} ties (left out)"
            + (f"; {unbounded} of the worse against BRKGA's 0, off the axis" if unbounded else ""),
            fontsize=9,
        )
    axes[-1, 0].set_xlabel(f"% improvement over BRKGA {result.evaluations:,}")
    figure.suptitle(title, fontsize=10)
    return save_figure(figure, path)


def plot_budget_curve(
    rows: Sequence[dict[str, Any]], path: Path, title: str, evaluations: int
) -> Path:
    """Paper 001 fig. 5: mean % improvement over BRKGA at the main budget by evaluation limit.

    Bands are 95% confidence intervals over graphs.
    """
    plt = pyplot()
    figure, axes = plt.subplots(figsize=(6, 4))
    for name in dict.fromkeys(row["solver"] for row in rows):
        mine = [
            row
            for row in rows
            if row["solver"] == name and math.isfinite(row["improvement_over_brkga_pct"])
        ]
        if not mine:  # no graph where both it and BRKGA gave a value
            continue
        limits = [row["evaluations"] for row in mine]
        (line,) = axes.plot(
            limits, [row["improvement_over_brkga_pct"] for row in mine], marker="o", label=name
        )
        axes.fill_between(
            limits,
            [row["ci_low_pct"] for row in mine],
            [row["ci_high_pct"] for row in mine],
            color=line.get_color(),
            alpha=0.15,
        )
    axes.axhline(0.0, color="black", linewidth=0.8)
    return _save_log_plot(
        figure,
        axes,
        path,
        title,
        "evaluation limit",
        f"mean % improvement over BRKGA {evaluations:,}",
    )


def _save_log_plot(
    figure: Any, axes: Any, path: Path, title: str, xlabel: str, ylabel: str
) -> Path:
    """Log x axis, labels, title and legend; writes the figure to `path` and closes it.

    With no curve (every run failed, or none gave a point) the axes say so, on a linear axis:
    a log axis has no range to show without data.
    """
    if axes.get_legend_handles_labels()[0]:
        axes.set_xscale("log")
        axes.legend(fontsize=7)
    else:
        axes.text(
            0.5, 0.5, "no run gave a point", ha="center", va="center", transform=axes.transAxes
        )
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.set_title(title)
    return save_figure(figure, path)


def parse_budgets(text: str) -> list[int]:
    """`--budgets 1000,2000,5000` as evaluation limits."""
    parts = [part.strip() for part in text.split(",")]
    if not all(part.isdigit() and int(part) > 0 for part in parts):
        raise GraphoptError(
            f"--budgets must be comma-separated positive evaluation counts, got '{text}'"
        )
    return [int(part) for part in parts]


def _solvers(settings: BenchSettings) -> list[str]:
    """The solvers asked for, the histogram's added; each checked to exist."""
    names = [name.strip() for name in settings.solvers.split(",") if name.strip()]
    if settings.histogram is not None:
        if settings.histogram == BASELINE:
            raise GraphoptError(f"--histogram shows a solver against {BASELINE}, not {BASELINE}")
        names = list(dict.fromkeys([*names, settings.histogram]))
    for name in names:
        check_solver(name)
    return names


def run_graph_suite(settings: BenchSettings, progress: Progress) -> Report:
    """`graphopt bench` on a graph suite: named, a dataset's split or a folder.

    `run_bench` with the options, then `write_reports` into the suite's folder.

    Raises:
        GraphoptError: an unknown solver or suite, or a bad budget, histogram or exact limit,
            before anything runs.
    """
    names = _solvers(settings)
    limits = parse_budgets(settings.budgets) if settings.budgets is not None else None
    exact_time, exact_max_ops = settings.exact_time, settings.exact_max_ops
    if not (math.isfinite(exact_time) and exact_time > 0):
        raise GraphoptError(f"--exact-time must be finite seconds > 0, got {exact_time}")
    if exact_max_ops is not None and exact_max_ops < 1:
        raise GraphoptError(
            f"--exact-max-ops must be a positive number of ops, got {exact_max_ops}"
        )
    goal = Objective.parse(settings.objective or "peak-memory")
    seeds = 1 if settings.seeds is None else settings.seeds
    devices = 2 if settings.devices is None else settings.devices
    graphs = load_suite(settings.suite)
    machine = Machine.from_options(devices, settings.capacity)
    result = run_bench(
        graphs, machine, goal, names, seeds=range(seeds), evaluations=settings.budget,
        exact_seconds=exact_time, budgets=limits, exact_max_ops=exact_max_ops, progress=progress,
    )  # fmt: skip
    title = (
        f"{settings.suite}: {goal.value}, {count(devices, 'device')}, "
        f"{count(len(graphs), 'graph')}, {count(seeds, 'seed')}"
    )
    folder = settings.output_dir / report_name(settings.suite)
    written = write_reports(result, folder, title, settings.command, settings.histogram)
    failed = [run.failure() for run in result.failures]
    text = f"{title}\n{markdown_table(result.summary, result.evaluations)}"
    return Report(text, result.summary, written, folder, failed, result.n_runs)
