"""`graphopt bench zoo-real`: real models on 2-8 devices against strong baselines and bounds.

One device is solved on real graphs (weights dominate the peak, and a compiler order is within a
hair of the optimum); the contest is spreading a model over several devices. This benchmark runs
the zoo's inference and training graphs at each device count, for peak memory and makespan:
every baseline for the objective (compiler orders, the pipeline split and the memory-aware METIS
and hypergraph partitions; HEFT and critical-path list scheduling), `auto` at its default time
budget, and REGAL where a shipped policy exists for the device count. Each result is printed
beside the problem's lower bound (`graphopt.solvers.bounds`) so the room left is visible, and
`auto` is compared with the best baseline of each graph.
"""

from __future__ import annotations

import csv
import dataclasses
import math
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

from graphopt.costmodels.machine import Machine
from graphopt.datasets import ZooSource
from graphopt.errors import GraphoptError
from graphopt.evaluation.reports import failure_section
from graphopt.evaluation.suite import BenchSettings, Failures, Progress, Report
from graphopt.ir.graph import Graph
from graphopt.learning.formats import shipped_policy_path
from graphopt.optimize import DEFAULT_SECONDS
from graphopt.solvers.base import Budget, Objective, Problem, SolverError
from graphopt.solvers.registry import make_solver

ZOO_REAL = (
    ZooSource("resnet18"),
    ZooSource("resnet50"),
    ZooSource("googlenet"),
    ZooSource("inception-small"),
    ZooSource("wavenet"),
    ZooSource("gpt2"),
    ZooSource("bert-base"),
    ZooSource("t5-small"),
    ZooSource("llama-small"),
    ZooSource("vit-base"),
    ZooSource("resnet18", training=True),
    ZooSource("inception-small", training=True),
    ZooSource("gpt2-tiny", training=True),
    ZooSource("bert-tiny", training=True),
    ZooSource("t5-tiny", training=True),
    ZooSource("llama-tiny", training=True),
    ZooSource("vit-tiny", training=True),
)
"""17 graphs of 191..970 ops: ten full-size inference graphs (CNNs, WaveNet, four transformers,
a ViT) and seven training steps (forward, backward, optimizer)."""

PARTITION_BASELINES = ("gp-pipeline", "gp-metis", "gp-hypergraph")
"""The partition baselines `auto` is measured against for peak memory."""

BASELINES: dict[Objective, tuple[str, ...]] = {
    Objective.PEAK_MEMORY: ("compiler-best", "gp-kl", *PARTITION_BASELINES),
    Objective.MAKESPAN: ("critical-path", "heft", "gp-metis", "gp-pipeline"),
}
"""Baselines per objective; each runs to completion (they are fixed sets of candidates)."""

BASELINE_SECONDS = 120.0
"""A safety cap on a baseline's run, far above what any needs on these graphs."""

REGAL_EVALUATIONS = 5000
"""REGAL runs at its paper's budget (paper 001 section 4.2)."""


@dataclasses.dataclass(frozen=True)
class ZooRun:
    """One solver on one graph, device count and objective."""

    graph: str
    n_ops: int
    devices: int
    objective: str
    solver: str
    value: float
    lower_bound: float
    seconds: float
    evaluations: int
    status: str

    @property
    def gap(self) -> float:
        """How far above the lower bound the value is (0.0 = proven optimal)."""
        return self.value / self.lower_bound - 1.0 if self.lower_bound > 0 else 0.0


def zoo_graphs(sources: Sequence[ZooSource] = ZOO_REAL, user: str = "zoo-real") -> list[Graph]:
    """Exports zoo graphs (the benchmark's by default), each named by its model and mode.

    Raises:
        SolverError: the model zoo's exporter is not installed; `user` names who needs it.
    """
    try:
        from graphopt.importers.zoo import export_graph
    except ImportError as error:
        raise SolverError(f"{user} needs the model zoo's exporter ({error})") from None
    return [
        dataclasses.replace(export_graph(z.name, training=z.training), name=z.label)
        for z in sources
    ]


def run_zoo_real(
    graphs: Sequence[Graph],
    devices: Sequence[int] = (2, 4, 8),
    objectives: Sequence[Objective] = (Objective.PEAK_MEMORY, Objective.MAKESPAN),
    auto_seconds: float = DEFAULT_SECONDS,
    seed: int = 0,
    progress: Progress | None = None,
    failures: Failures | None = None,
) -> list[ZooRun]:
    """Every solver of the benchmark on every graph, device count and objective.

    REGAL runs only where a policy is shipped for the objective and device count. A run that
    fails is recorded in `failures` and left out, the others going on (None: it raises).
    """
    failures = Failures.or_raising(failures)
    plan = []
    for graph in graphs:
        for n_devices in devices:
            for objective in objectives:
                names = [*BASELINES[objective], "auto"]
                if shipped_policy_path("regal", objective.value, n_devices) is not None:
                    names.append("regal")
                plan += [(graph, n_devices, objective, name) for name in names]
    runs = []
    for done, (graph, n_devices, objective, name) in enumerate(plan):
        if progress is not None:
            progress(done, len(plan), f"{name} {graph.name} d={n_devices}")
        what = f"{name} on {graph.name} ({n_devices} devices, {objective.value})"
        run = failures.run(
            what, partial(_run, graph, n_devices, objective, name, auto_seconds, seed)
        )
        if run is not None:
            runs.append(run)
    if progress is not None:
        progress(len(plan), len(plan), "done")
    return runs


def _run(
    graph: Graph, n_devices: int, objective: Objective, name: str, auto_seconds: float, seed: int
) -> ZooRun:
    """One solver on one graph, device count and objective, at the benchmark's budget."""
    problem = Problem(graph, Machine(n_devices=n_devices), objective)
    if name == "auto":
        budget = Budget(seconds=auto_seconds)
    elif name == "regal":
        budget = Budget(evaluations=REGAL_EVALUATIONS)
    else:
        budget = Budget(seconds=BASELINE_SECONDS)
    result = make_solver(name).solve(problem, budget, seed)
    return ZooRun(
        graph.name,
        graph.n_ops,
        n_devices,
        objective.value,
        name,
        result.value,
        problem.lower_bound,
        result.seconds,
        result.evaluations,
        result.status,
    )


def _reference(objective: str) -> tuple[str, ...]:
    """The baselines `auto` is compared with: partitions for memory, HEFT for makespan."""
    return PARTITION_BASELINES if objective == Objective.PEAK_MEMORY.value else ("heft",)


def comparisons(runs: Sequence[ZooRun]) -> list[dict[str, Any]]:
    """Per graph, device count and objective: the bound, each solver's gap, auto vs reference."""
    cells: dict[tuple[str, int, str], dict[str, ZooRun]] = {}
    for run in runs:
        cells.setdefault((run.graph, run.devices, run.objective), {})[run.solver] = run
    rows = []
    for (graph, n_devices, objective), by_solver in cells.items():
        reference = [by_solver[name] for name in _reference(objective) if name in by_solver]
        best = min(reference, key=lambda run: run.value) if reference else None
        auto = by_solver.get("auto")
        any_run = next(iter(by_solver.values()))
        row: dict[str, Any] = {
            "graph": graph,
            "ops": any_run.n_ops,
            "devices": n_devices,
            "objective": objective,
            "lower_bound": any_run.lower_bound,
        }
        for name, run in by_solver.items():
            row[f"{name} gap"] = run.gap
        if best is not None and auto is not None:
            row["best reference"] = best.solver
            row["auto vs reference"] = auto.value / best.value - 1.0 if best.value > 0 else 0.0
            row["reference room"] = best.gap
        rows.append(row)
    return rows


def summary_lines(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Per objective and device count: auto against its reference, averaged and counted."""
    lines = []
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for row in rows:
        if "auto vs reference" in row:
            groups.setdefault((row["objective"], row["devices"]), []).append(row)
    for (objective, n_devices), group in sorted(groups.items()):
        change = [row["auto vs reference"] for row in group]
        room = [row for row in group if row["reference room"] > 0.01]
        reference = "best partition baseline" if objective == "peak-memory" else "HEFT"
        lines.append(
            f"- {objective}, {n_devices} devices: auto vs {reference} {_mean(change):+.2%} on "
            f"average over {len(group)} graphs (worst {max(change):+.2%}); above it on "
            f"{sum(c > 1e-12 for c in change)}; on the {len(room)} graphs where the reference is "
            f"more than 1% above the bound: {_mean([r['auto vs reference'] for r in room]):+.2%}, "
            f"below it on {sum(r['auto vs reference'] < -1e-12 for r in room)}"
        )
    return lines


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def markdown(rows: Sequence[dict[str, Any]], command: str) -> str:
    """The report: the command, the summary lines and one table per objective and device count."""
    parts = [f"# zoo-real\n\n`{command}`\n", *summary_lines(rows), ""]
    for objective in sorted({row["objective"] for row in rows}):
        for n_devices in sorted({row["devices"] for row in rows}):
            group = [r for r in rows if r["objective"] == objective and r["devices"] == n_devices]
            if not group:
                continue
            keys = dict.fromkeys(key for row in group for key in row)  # a failed run has none
            solvers = [key[:-4] for key in keys if key.endswith(" gap")]
            parts.append(f"\n## {objective}, {n_devices} devices: % above the lower bound\n")
            parts.append(
                "| graph | ops | lower bound | " + " | ".join(solvers) + " | auto vs reference |"
            )
            parts.append("|---" * (len(solvers) + 4) + "|")
            for row in group:
                gaps = " | ".join(
                    f"{100 * row[f'{name} gap']:.2f}" if f"{name} gap" in row else "-"
                    for name in solvers
                )
                change = row.get("auto vs reference")
                cell = "-" if change is None else f"{100 * change:+.2f}%"
                bound = f"{row['lower_bound']:.6g}"
                parts.append(f"| {row['graph']} | {row['ops']} | {bound} | {gaps} | {cell} |")
    return "\n".join(parts) + "\n"


def write_zoo_real(
    runs: Sequence[ZooRun], folder: Path, command: str, failures: Failures | None = None
) -> list[Path]:
    """Writes runs.csv, summary.csv and summary.md (with the failed runs, if any) to `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = comparisons(runs)
    written = []
    records = [{**dataclasses.asdict(run), "gap": run.gap} for run in runs]
    for name, table in (("runs.csv", records), ("summary.csv", rows)):
        path = folder / name
        fields = list(dict.fromkeys(key for row in table for key in row))
        with path.open("w", newline="") as stream:
            writer = csv.DictWriter(stream, fieldnames=fields)
            writer.writeheader()
            writer.writerows(table)
        written.append(path)
    path = folder / "summary.md"
    failed = "" if failures is None else failure_section(failures.lines, failures.runs)
    path.write_text(markdown(rows, command) + failed)
    written.append(path)
    return written


def run_suite(settings: BenchSettings, progress: Progress) -> Report:
    """`graphopt bench zoo-real`: every solver of the benchmark, `auto` for `--time` seconds.

    Both objectives (or `--objective`'s), on 2, 4 and 8 devices (or `--devices`).

    Raises:
        GraphoptError: a bad `--time` or device count, before anything runs.
    """
    seconds = settings.time_limit
    if seconds is not None and not (math.isfinite(seconds) and seconds > 0):
        raise GraphoptError(f"--time must be finite seconds > 0, got {seconds}")
    if settings.devices is not None:
        Machine.from_options(settings.devices)
    objective = settings.objective
    objectives = [Objective.parse(objective)] if objective else list(Objective)
    devices = (2, 4, 8) if settings.devices is None else (settings.devices,)
    progress(0, 0, "exporting graphs")
    failures = Failures()
    runs = run_zoo_real(
        zoo_graphs(), devices, objectives, seconds or DEFAULT_SECONDS, progress=progress,
        failures=failures,
    )  # fmt: skip
    folder = settings.output_dir / "zoo-real"
    written = write_zoo_real(runs, folder, settings.command, failures)
    lines = summary_lines(comparisons(runs))
    return Report("\n".join(lines), lines, written, folder, failures.lines, failures.runs)
