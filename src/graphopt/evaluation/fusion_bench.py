"""GO's fusion experiment (paper 002 table 3) on zoo training graphs: `bench fusion-table3`.

GO's table 3 gives, per model and device count, each fusion policy's speedup over the same run
without fusion. Here each (graph, device count) gets one base solution without fusion from a
fixed baseline, `base_solution`, and every policy re-decides the fusion groups on that same
placement: none, XLA-like default fusion, XLA's priority fusion, Inductor-like greedy fusion,
GO's simulated-annealing baseline over fusion priorities and the search of fusion with the order
(BRKGA with one fusion priority per op; both on the makespan, `budget` evaluations, one run per
seed). A row reports the speedup over no fusion (unfused makespan / fused makespan; GO prints
(speedup - 1) x 100 %), the memory side (fused peak / unfused peak) and the number of groups.

Every fused solution is re-scored by the scorer, which refuses an illegal group, and on graphs of
at most `REFERENCE_MAX_OPS` ops by the plain reference too; the two must agree. A new column
(a learned fusion policy, say) is one more entry in `POLICIES`.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from graphopt.costmodels._reference import reference_score
from graphopt.costmodels.machine import Machine
from graphopt.costmodels.score import Score, Scorer
from graphopt.datasets import ZooSource
from graphopt.errors import GraphoptError
from graphopt.evaluation import reports
from graphopt.evaluation.metrics import mean_and_half_width
from graphopt.evaluation.suite import BenchSettings, Failures, Progress, Report, check_counts
from graphopt.ir.graph import Graph
from graphopt.ir.solution import Solution
from graphopt.optimize import optimize
from graphopt.solvers.base import Budget, Objective, Problem
from graphopt.solvers.brkga import BRKGA
from graphopt.solvers.fusion import anneal_fusion, default_fusion, greedy_fusion

MODELS = ("gpt2-tiny", "bert-tiny", "t5-tiny", "gnmt-tiny", "lstm-lm-unrolled-32")
"""Zoo models whose training graphs the suite runs (368-3,015 ops): GO's table 3 has
Transformer-XL, GNMT and RNNLM; here three small transformers, a GNMT and an unrolled LSTM LM."""
DEVICES = (1, 2, 4)
"""Device counts of the suite."""
BUDGET = 5000
"""Simulated annealing's evaluations per run."""
SEEDS = 3
"""Runs of each seeded policy (SA) per graph and device count."""
BASE_SOLVER = "cp-search"
"""The base on several devices: critical-path moves from HEFT, re-list-scheduled on the exact
score (within a hair of HEFT or better on these graphs, and deterministic under a budget)."""
BASE_EVALUATIONS = 2000
"""`BASE_SOLVER`'s evaluations (seed 0): 1-4 s per graph here."""
REFERENCE_MAX_OPS = 3500
"""Largest graph re-scored by the plain reference too (about 2.5 s per solution at 3,015 ops)."""

PolicyRun = Callable[[Graph, Machine, Solution, int, int], Solution]
"""(graph, machine, unfused base solution, evaluation budget, seed) -> the fused solution."""


@dataclasses.dataclass(frozen=True)
class FusionPolicy:
    """One column of the table.

    Attributes:
        label: the column's heading.
        run: decides the groups on a base solution, keeping its placement.
        seeded: whether the seed changes the result; such a policy runs once per seed, the
            others once (seed 0).
    """

    label: str
    run: PolicyRun
    seeded: bool = False


def _no_fusion(
    graph: Graph, machine: Machine, solution: Solution, budget: int, seed: int
) -> Solution:
    """The base itself, without groups: the denominator of every speedup."""
    return dataclasses.replace(solution, fusion=None)


def _default(
    graph: Graph, machine: Machine, solution: Solution, budget: int, seed: int
) -> Solution:
    """XLA-like: elementwise producers into consumers, then multi-output fusion."""
    return default_fusion(graph, solution)


def _xla_priority(
    graph: Graph, machine: Machine, solution: Solution, budget: int, seed: int
) -> Solution:
    """XLA's priority fusion: producer-consumer pairs by time saved."""
    return default_fusion(graph, solution, priority=True)


def _greedy(graph: Graph, machine: Machine, solution: Solution, budget: int, seed: int) -> Solution:
    """Inductor-like: rounds of merging the pairs that save most memory traffic."""
    return greedy_fusion(graph, solution)


def _annealing(
    graph: Graph, machine: Machine, solution: Solution, budget: int, seed: int
) -> Solution:
    """GO's SA baseline over fusion priorities, on the makespan."""
    return anneal_fusion(graph, machine, solution, Objective.MAKESPAN, budget, seed)


def _search(graph: Graph, machine: Machine, solution: Solution, budget: int, seed: int) -> Solution:
    """Fusion searched with the order: tuned BRKGA over the random keys and fusion priorities.

    `Problem.fusion` gives the chromosome one fusion priority per op; every op is pinned to the
    base's device (the table compares fusion on one placement) and the base seeds the search.
    """
    problem = Problem(graph, machine, Objective.MAKESPAN, pinned=solution.placement, fusion=True)
    result = BRKGA("tuned").solve(problem, Budget(evaluations=budget), seed, [solution])
    return result.solution


POLICIES: dict[str, FusionPolicy] = {
    "none": FusionPolicy("none", _no_fusion),
    "default": FusionPolicy("default (XLA)", _default),
    "xla-priority": FusionPolicy("XLA priority", _xla_priority),
    "greedy": FusionPolicy("greedy (Inductor)", _greedy),
    "sa": FusionPolicy("SA", _annealing, seeded=True),
    "search": FusionPolicy("search (BRKGA)", _search, seeded=True),
}
"""Policy name -> column, in table order; "none" is the base every ratio divides by."""


def check_policies(names: Sequence[str]) -> list[str]:
    """The policies to run, "none" first and added when missing.

    Raises:
        GraphoptError: an unknown name, listing the known ones.
    """
    for name in names:
        if name not in POLICIES:
            raise GraphoptError(f"unknown fusion policy {name!r}; known: {', '.join(POLICIES)}")
    return list(dict.fromkeys(["none", *names]))


def zoo_training_graphs(models: Sequence[str] = MODELS) -> list[Graph]:
    """The training graphs of zoo models, named `<model>.training`."""
    from graphopt.evaluation.zoo_real import zoo_graphs

    return zoo_graphs([ZooSource(name, training=True) for name in models])


def base_solution(graph: Graph, machine: Machine, evaluations: int) -> Solution:
    """The solution without fusion that every policy starts from.

    One device: critical-path list scheduling (every order of one device has the same unfused
    makespan, the sum of runtimes); more: `BASE_SOLVER` at `evaluations`, seed 0.
    """
    solver = "critical-path" if machine.n_devices == 1 else BASE_SOLVER
    result = optimize(
        graph, machine, Objective.MAKESPAN, solver=solver, evaluations=evaluations, seed=0
    )
    return dataclasses.replace(result.solution, fusion=None)


def checked_score(graph: Graph, machine: Machine, solution: Solution) -> Score:
    """The solution's score, checked by the plain reference too where the graph is small.

    Graphs of at most `REFERENCE_MAX_OPS` ops are re-scored by both twins, which must agree.

    Raises:
        SolutionError: an illegal solution (the scorer names the rule).
        RuntimeError: the scorer and the reference disagree.
    """
    score = Scorer(graph, machine).score(solution)
    if graph.n_ops <= REFERENCE_MAX_OPS:
        truth = reference_score(graph, solution, machine)
        if truth.peak_memory_per_device != score.peak_memory_per_device or not math.isclose(
            truth.makespan, score.makespan, rel_tol=1e-9, abs_tol=0.0
        ):
            raise RuntimeError(
                f"{graph.name}: scorer ({score.makespan}, {score.peak_memory_per_device}) and "
                f"reference ({truth.makespan}, {truth.peak_memory_per_device}) disagree"
            )
    return score


def rescore(graph: Graph, machine: Machine, base: Solution, solution: Solution) -> Score:
    """The fused solution's score, checked: legal, on the base's placement, twins agree.

    Raises:
        SolutionError: an illegal solution (the scorer names the rule).
        RuntimeError: the placement moved, or the scorer and the reference disagree.
    """
    score = checked_score(graph, machine, solution)
    if not np.array_equal(solution.placement, base.placement):
        raise RuntimeError(f"{graph.name}: a fusion policy moved ops between devices")
    return score


def run_table3(
    graphs: Sequence[Graph],
    devices: Sequence[int] = DEVICES,
    policies: Sequence[str] = tuple(POLICIES),
    budget: int = BUDGET,
    seeds: int = SEEDS,
    base_evaluations: int = BASE_EVALUATIONS,
    progress: Progress | None = None,
    failures: Failures | None = None,
) -> list[dict[str, Any]]:
    """One row per graph, device count, policy and seed (seed 0 only for unseeded policies).

    Row fields: graph, ops, devices, policy, seed, groups, makespan, peak_memory, speedup
    (unfused makespan / this one), memory_ratio (this peak / unfused peak), seconds (the
    policy's wall time) and reference ("agrees", or "skipped" above `REFERENCE_MAX_OPS` ops).
    A base or a policy run that fails is recorded in `failures` and has no row (None: it
    raises); a failed base leaves its graph and device count without rows.
    """
    names = check_policies(policies)
    failures = Failures.or_raising(failures)
    runs = [(name, seed) for name in names for seed in _seeds(name, seeds)]
    total = len(graphs) * len(devices) * len(runs)
    rows: list[dict[str, Any]] = []
    done = 0
    for graph in graphs:
        for n_devices in devices:
            machine = Machine(n_devices=n_devices)
            if progress is not None:
                progress(done, total, f"{graph.name}, {n_devices} dev., base")
            what = f"base on {graph.name} ({n_devices} devices)"
            based = failures.run(what, partial(_base, graph, machine, base_evaluations))
            if based is None:
                done += len(runs)
                continue
            for name, seed in runs:
                if progress is not None:
                    progress(done, total, f"{graph.name}, {n_devices} dev., {name}")
                what = f"{name} on {graph.name} ({n_devices} devices, seed {seed})"
                row = failures.run(what, partial(_row, graph, machine, *based, name, budget, seed))
                if row is not None:
                    rows.append(row)
                done += 1
    if progress is not None:
        progress(total, total, "done")
    return rows


def _base(graph: Graph, machine: Machine, evaluations: int) -> tuple[Solution, Score]:
    """The unfused base solution every policy starts from, and its checked score."""
    base = base_solution(graph, machine, evaluations)
    return base, rescore(graph, machine, base, base)


def _row(
    graph: Graph,
    machine: Machine,
    base: Solution,
    unfused: Score,
    name: str,
    budget: int,
    seed: int,
) -> dict[str, Any]:
    """One policy run on the base: its groups, checked score and ratios to the unfused one."""
    start = time.perf_counter()
    fused = POLICIES[name].run(graph, machine, base, budget, seed)
    seconds = time.perf_counter() - start
    score = rescore(graph, machine, base, fused)
    return {
        "graph": graph.name,
        "ops": graph.n_ops,
        "devices": machine.n_devices,
        "policy": name,
        "seed": seed,
        "groups": fused.n_groups,
        "makespan": score.makespan,
        "peak_memory": score.peak_memory,
        "speedup": _ratio(unfused.makespan, score.makespan),
        "memory_ratio": _ratio(score.peak_memory, unfused.peak_memory),
        "seconds": seconds,
        "reference": "agrees" if graph.n_ops <= REFERENCE_MAX_OPS else "skipped",
    }


def _seeds(policy: str, seeds: int) -> range:
    """The seeds a policy runs with."""
    return range(seeds) if POLICIES[policy].seeded else range(1)


def _ratio(numerator: float, denominator: float) -> float:
    """The ratio, 1.0 for 0 / 0 (a graph of zero runtimes or bytes)."""
    if denominator == 0:
        return 1.0 if numerator == 0 else math.inf
    return numerator / denominator


METRICS = ("speedup", "memory_ratio", "groups")
"""Columns summarized per cell."""


def summarize(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per graph, device count and policy: each metric's mean and 95% CI half-width over seeds.

    Then per device count and policy a row with graph "mean": the mean over graphs, with its
    CI over seeds (each seed's mean over graphs), so the CI is SA's seed noise, not the spread
    between models; NaN for a policy that runs with one seed.
    """
    cells: dict[tuple[str, int, str], list[dict[str, Any]]] = {}
    for row in rows:
        cells.setdefault((row["graph"], row["devices"], row["policy"]), []).append(row)
    summary = [
        _summary_row(graph, devices, policy, [[m[k] for m in members] for k in METRICS])
        | {"ops": members[0]["ops"], "unfused_makespan": _unfused(rows, graph, devices)}
        for (graph, devices, policy), members in cells.items()
    ]
    for devices in dict.fromkeys(row["devices"] for row in rows):
        for policy in dict.fromkeys(row["policy"] for row in rows):
            here = [r for r in rows if r["devices"] == devices and r["policy"] == policy]
            by_seed: dict[int, list[dict[str, Any]]] = {}
            for row in here:
                by_seed.setdefault(row["seed"], []).append(row)
            values = [
                [float(np.mean([r[k] for r in s])) for s in by_seed.values()] for k in METRICS
            ]
            summary.append(
                _summary_row("mean", devices, policy, values)
                | {"ops": None, "unfused_makespan": None}
            )
    return summary


def _summary_row(
    graph: str, devices: int, policy: str, values: list[list[float]]
) -> dict[str, Any]:
    """A summary row: each metric's mean and CI half-width over its values."""
    row: dict[str, Any] = {"graph": graph, "devices": devices, "policy": policy}
    row["n"] = len(values[0])
    for key, series in zip(METRICS, values, strict=True):
        row[key], row[f"{key}_ci"] = mean_and_half_width(series)
    return row


def _unfused(rows: Sequence[dict[str, Any]], graph: str, devices: int) -> float | None:
    """The base's makespan on this graph and device count (None where its run failed)."""
    return next(
        (
            r["makespan"]
            for r in rows
            if r["graph"] == graph and r["devices"] == devices and r["policy"] == "none"
        ),
        None,
    )


def _cell(row: dict[str, Any] | None, key: str, digits: int = 3) -> str:
    """A mean, with ± its CI half-width where seeds vary; '-' where the run failed."""
    if row is None:
        return "-"
    mean, half = row[key], row[f"{key}_ci"]
    text = f"{mean:.{digits}f}"
    return text if math.isnan(half) else f"{text} ± {half:.{digits}f}"


def markdown(summary: Sequence[dict[str, Any]]) -> str:
    """The speedup table, then the memory table (peak ratio and groups), rows by device count."""
    policies = list(dict.fromkeys(row["policy"] for row in summary))
    fused = [p for p in policies if p != "none"]
    order = sorted(summary, key=lambda r: (r["devices"], r["graph"] == "mean"))
    index = {(r["graph"], r["devices"], r["policy"]): r for r in summary}
    rows = list(dict.fromkeys((r["graph"], r["devices"]) for r in order))
    labels = [POLICIES[p].label for p in fused]
    speed = [
        "| model | ops | devices | unfused makespan (ms) | " + " | ".join(labels) + " |",
        "| --- | ---: | ---: | ---: |" + " ---: |" * len(fused),
    ]
    memory = [
        "| model | devices | " + " | ".join(POLICIES[p].label for p in policies) + " |",
        "| --- | ---: |" + " ---: |" * len(policies),
    ]
    for graph, devices in rows:
        here = {p: index.get((graph, devices, p)) for p in policies}
        first = next(row for row in here.values() if row is not None)
        name = "**mean**" if graph == "mean" else graph
        ops = "" if first["ops"] is None else str(first["ops"])
        base = first["unfused_makespan"]
        makespan = "" if base is None else f"{1e3 * base:.4f}"
        shown = [_cell(here[p], "speedup") for p in fused]
        speed.append(f"| {name} | {ops} | {devices} | {makespan} | " + " | ".join(shown) + " |")
        shown = [
            f"{_cell(here[p], 'memory_ratio')} ({_cell(here[p], 'groups', 0)})" for p in policies
        ]
        memory.append(f"| {name} | {devices} | " + " | ".join(shown) + " |")
    return "\n".join(
        [
            "## Makespan speedup over no fusion (unfused makespan / fused makespan)",
            "",
            *speed,
            "",
            "## Peak memory over no fusion (fused peak / unfused peak), and (groups)",
            "",
            *memory,
        ]
    )


def plot(summary: Sequence[dict[str, Any]], path: Path) -> Path:
    """Grouped bars per model and policy, a panel per device count: speedup, then peak ratio.

    A policy's run that failed on a graph leaves a gap.
    """
    plt = reports.pyplot()

    devices = list(dict.fromkeys(row["devices"] for row in summary))
    policies = [p for p in dict.fromkeys(row["policy"] for row in summary) if p != "none"]
    graphs = list(dict.fromkeys(row["graph"] for row in summary))
    index = {(r["graph"], r["devices"], r["policy"]): r for r in summary}
    figure, axes = plt.subplots(
        2, len(devices), figsize=(4.5 * len(devices), 7), squeeze=False, sharey="row"
    )
    for column, n_devices in enumerate(devices):
        for line, (key, name) in enumerate(
            (("speedup", "speedup over no fusion"), ("memory_ratio", "peak memory / unfused"))
        ):
            axes_here = axes[line, column]
            found = {
                POLICIES[p].label: [index.get((g, n_devices, p)) for g in graphs] for p in policies
            }
            means = {label: [_value(c, key) for c in row] for label, row in found.items()}
            errors = {
                label: [_value(c, f"{key}_ci", 0.0) for c in row] for label, row in found.items()
            }
            ticks = reports.grouped_bars(axes_here, means, graphs, errors, centred=True)
            axes_here.axhline(1.0, color="0.3", linewidth=0.8)
            axes_here.set_xticks(
                ticks, [g.removesuffix(".training") for g in graphs], rotation=30, ha="right"
            )
            axes_here.set_title(f"{n_devices} device{'s' if n_devices > 1 else ''}")
            if column == 0:
                axes_here.set_ylabel(name)
    axes[0, 0].legend(fontsize=8)
    return reports.save_figure(figure, path)


def _value(row: dict[str, Any] | None, key: str, missing: float = math.nan) -> float:
    """A summary row's value, `missing` where the row or its value is missing (NaN)."""
    value = math.nan if row is None else row[key]
    return missing if math.isnan(value) else value


def write_report(
    rows: Sequence[dict[str, Any]],
    folder: Path,
    title: str,
    command: str,
    failures: Failures | None = None,
) -> Report:
    """Writes summary.md (title, command, tables, failed runs) and the rows' other files.

    The others: runs.csv, summary.csv, summary.json and fusion.png.
    """
    failures = Failures() if failures is None else failures
    summary = summarize(rows)
    skipped = sorted({r["graph"] for r in rows if r["reference"] == "skipped"})
    note = (
        f"Re-scored by the scorer and the reference (agreeing) on every graph but "
        f"{', '.join(skipped)} (over {REFERENCE_MAX_OPS:,} ops: scorer only)."
        if skipped
        else "Every fused solution re-scored by the scorer and the reference, which agree."
    )
    folder.mkdir(parents=True, exist_ok=True)
    files = [
        reports.write_csv(folder / "runs.csv", rows),
        reports.write_csv(folder / "summary.csv", summary),
        reports.write_json(folder / "summary.json", summary, indent=2),
        plot(summary, folder / "fusion.png"),
    ]
    table = markdown(summary)
    return reports.paper_report(
        folder, title, command, f"{note}\n\n{table}", failures, files, [title, table]
    )


@dataclasses.dataclass(frozen=True)
class FusionBench(reports.PaperSuite):
    """The settings of a `graphopt bench fusion-table3` run.

    Attributes:
        models: zoo models whose training graphs run.
        devices: device counts.
        budget: SA's evaluations per run.
        seeds: runs of each seeded policy.
        policies: names in `POLICIES` ("none" is always run).
        base_evaluations: the base solver's evaluations.
    """

    models: tuple[str, ...] = MODELS
    devices: tuple[int, ...] = DEVICES
    budget: int = BUDGET
    seeds: int = SEEDS
    policies: tuple[str, ...] = tuple(POLICIES)
    base_evaluations: int = BASE_EVALUATIONS

    def __post_init__(self) -> None:
        check_policies(self.policies)
        if not self.models:
            raise GraphoptError("fusion-table3: name at least one zoo model")
        check_counts(
            "fusion-table3", self.devices, (1, None), budget=self.budget, seeds=self.seeds,
            base_evaluations=self.base_evaluations,
        )  # fmt: skip

    def title(self) -> str:
        """The report's title: what ran, at which budgets."""
        return (
            f"GO table 3 shape: fusion policies over no fusion, {len(self.models)} zoo training "
            f"graphs, {', '.join(map(str, self.devices))} devices; base: critical-path on one "
            f"device, {BASE_SOLVER} ({self.base_evaluations:,} evaluations) on more; SA: "
            f"{self.budget:,} evaluations, {self.seeds} seed(s) (mean ± 95% CI over seeds)"
        )

    def table(self, folder: Path, progress: Progress, failures: Failures) -> list[dict[str, Any]]:
        """Exports the graphs and runs the table (`run_table3`)."""
        return run_table3(
            zoo_training_graphs(self.models), self.devices, self.policies, self.budget,
            self.seeds, self.base_evaluations, progress, failures,
        )  # fmt: skip

    def report(
        self, rows: list[dict[str, Any]], folder: Path, command: str, failures: Failures
    ) -> Report:
        """The tables, the CSV and JSON summaries and the bars (`write_report`)."""
        return write_report(rows, folder, self.title(), command, failures)


def run_suite(settings: BenchSettings, progress: Progress) -> Report:
    """`graphopt bench fusion-table3`: the table on `--models`, `--devices`, `--policies`."""
    bench = FusionBench(
        budget=settings.budget, **settings.given("models", "devices", "seeds", "policies")
    )
    return bench.run(settings.output_dir / settings.suite, settings.command, progress)
