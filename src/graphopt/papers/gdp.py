"""GDP's placement experiments (paper 003 tables 1-2, GO paper 002 fig. 5): `bench gdp-table1`.

Each zoo training graph is placed on 2, 4 and 8 devices of a machine with slow-ish links (10 us,
10 GB/s) and a memory capacity per device that one device cannot meet (`CAPACITY_FRACTION` of
the one-device peak, or midway between the d-device peak lower bound and the one-device peak
where that bound is higher), by:

- one-device: every op on device 0 (infeasible under the capacity: its excess is reported);
- expert: the human-expert split of whole modules in order, balanced by runtime;
- metis: the `gp-metis` solver (METIS splits, DFS orders, its own search);
- hint: the best of METIS splits, HEFT's variants' placements and one device, each scheduled as the
  pre-trained policy's environment schedules (`placement.hint`, the classical placement GDP's
  policy starts from; with the shipped policy, the better of GO's ready queues and insertion
  timelines);
- heft: HEFT's placement and insertion schedule;
- brkga, regal: BRKGA (placement and order genes) and the shipped REGAL policy (2 devices only)
  at GDP-one's evaluations;
- hdp: the HDP grouper + placer trained on the graph with REINFORCE, at GDP-one's evaluations;
- gdp-one: GDP's network trained from scratch on this graph alone (`GDP_ONE_STEPS` PPO steps);
- gdp-zero-shot: the pre-trained (shipped) policy's hint, most likely placement and samples;
- gdp-finetune: the pre-trained policy after `FINETUNE_STEPS` PPO steps on the graph (GDP-batch
  then fine-tuned, GDP's table 2 and GO's fig. 5).

Table 1 compares gdp-one with the baselines per graph and device count, with the geomean
gain; table 2 compares gdp-finetune (pre-trained on many graphs) with gdp-one; the held-out
table puts zero-shot beside fine-tuned on graphs of families the shipped policy never saw. Every
solution is re-scored by the scorer, and on graphs up to `REFERENCE_MAX_OPS` ops by the plain
reference, which must agree; the makespan lower bound is printed beside each row. A method that
fails on a cell is recorded and the table goes on without it.
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

from graphopt.costmodels.machine import Machine
from graphopt.errors import GraphoptError
from graphopt.evaluation import reports
from graphopt.evaluation.fusion_bench import REFERENCE_MAX_OPS, checked_score, zoo_training_graphs
from graphopt.evaluation.suite import BenchSettings, Failures, Progress, Report, check_counts
from graphopt.ir.graph import Graph
from graphopt.ir.solution import Solution
from graphopt.learning.formats import shipped_policy_path
from graphopt.learning.placement.env import PlacementEnv
from graphopt.learning.placement.hint import partition_hint
from graphopt.learning.systems.gdp.solver import (
    GDPAlone,
    GDPSolverConfig,
    load_gdp_checkpoint,
)
from graphopt.solvers.base import Budget, Problem
from graphopt.solvers.bounds import makespan_lower_bound, peak_memory_lower_bound
from graphopt.solvers.registry import make_solver

MODELS = ("gpt2-tiny", "inception-small", "wavenet", "gnmt-tiny", "lstm-lm-unrolled-32")
"""Table 1's zoo training graphs (368-3,015 ops): a transformer, Inception, WaveNet, GNMT and
an unrolled RNN LM, GDP's table 1 families."""
HELD_OUT = ("llama-tiny", "t5-tiny")
"""Graphs of families the shipped policy never trained on (GO's fig. 5, zero-shot)."""
DEVICES = (2, 4, 8)
"""Device counts."""
LATENCY = 1e-5
"""Seconds per transfer."""
BANDWIDTH = 1e10
"""Bytes per second of a transfer."""
CAPACITY_FRACTION = 0.6
"""Each device's capacity as a fraction of the one-device peak memory: one device is infeasible."""
GDP_ONE_STEPS = 100
"""PPO steps of GDP-one (from scratch, on the graph alone)."""
FINETUNE_STEPS = 30
"""PPO steps of fine-tuning the pre-trained policy ("in under 50 steps", paper 003)."""
METIS_EVALUATIONS = 2000
"""The `gp-metis` solver's budget (it stops early once its partitions are offered)."""


@dataclasses.dataclass(frozen=True)
class Cell:
    """One graph on one machine, with what every method there shares."""

    graph: Graph
    machine: Machine
    env: PlacementEnv
    bound: float


def _machine(graph: Graph, n_devices: int, fraction: float | None) -> Machine:
    """The suite's machine, its capacity `fraction` of the one-device ready-queue peak.

    Where the instance's peak-memory lower bound on d devices is above that, no placement could
    fit; the capacity is then midway between the bound and the one-device peak instead.
    """
    free = Machine(n_devices=n_devices, latency=LATENCY, bandwidth=BANDWIDTH)
    if fraction is None:
        return free
    one_device = PlacementEnv(graph, free, reference=1.0)  # only its peak is read
    peak = int(one_device.step(np.zeros(graph.n_ops, np.int32)).peaks[0, 0])
    bound = peak_memory_lower_bound(graph, n_devices)
    capacity = int(fraction * peak) if bound <= fraction * peak else (bound + peak) // 2
    return dataclasses.replace(free, capacity=max(1, capacity))


def _solve(cell: Cell, solver: Any, evaluations: int, seed: int) -> Solution:
    """One solver's best solution on the cell."""
    problem = Problem(cell.graph, cell.machine, "makespan")
    return solver.solve(problem, Budget(evaluations=evaluations), seed=seed).solution


def _placed(cell: Cell, placement: np.ndarray) -> Solution:
    """A placement scheduled as the cell's environment schedules placements."""
    return cell.env.solution(placement)


def _methods(
    steps: int, finetune: int, samples: int, policy: str | None
) -> dict[str, Callable[[Cell, int], Solution | None]]:
    """Method name -> (cell, seed) -> solution, or None where the method does not apply.

    BRKGA, REGAL (its shipped policy places onto 2 devices only) and HDP get the evaluations of
    GDP-one's policy; each GDP variant one more, for the partition hint it offers first.
    """
    evaluations = (steps + 1) * samples + 2
    return {
        "one-device": lambda cell, seed: _placed(cell, np.zeros(cell.graph.n_ops, np.int32)),
        "expert": lambda cell, seed: _solve(cell, make_solver("expert"), 1, seed),
        "metis": lambda cell, seed: _solve(cell, make_solver("gp-metis"), METIS_EVALUATIONS, seed),
        "hint": lambda cell, seed: _placed(cell, partition_hint(cell.env)),
        "heft": lambda cell, seed: _solve(cell, make_solver("heft"), 10, seed),
        "brkga": lambda cell, seed: _solve(cell, make_solver("brkga"), evaluations, seed),
        "regal": lambda cell, seed: (
            _solve(cell, make_solver("regal"), evaluations, seed)
            if cell.machine.n_devices == 2
            else None
        ),
        "hdp": lambda cell, seed: _solve(cell, make_solver("hdp"), evaluations, seed),
        "gdp-one": lambda cell, seed: _solve(
            cell,
            GDPAlone(GDPSolverConfig(policy, finetune=steps, samples=samples, scratch=True)),
            evaluations + 1,
            seed,
        ),
        "gdp-zero-shot": lambda cell, seed: _solve(
            cell, GDPAlone(GDPSolverConfig(policy, samples=samples)), samples + 2, seed
        ),
        "gdp-finetune": lambda cell, seed: _solve(
            cell,
            GDPAlone(GDPSolverConfig(policy, finetune=finetune, samples=samples)),
            (finetune + 1) * samples + 3,
            seed,
        ),
    }


METHODS = tuple(_methods(1, 1, 1, None))
"""Every method of the suite, in table order."""


def policy_schedulers(policy: str | None) -> tuple[str, ...]:
    """How the pre-trained policy's environment schedules placements (None: the shipped one's)."""
    path = policy or shipped_policy_path("gdp", "makespan")
    return ("ready-queue",) if path is None else load_gdp_checkpoint(path)[2].schedulers


def rescored(cell: Cell, solution: Solution) -> tuple[float, int]:
    """(makespan, bytes over capacity) of a solution, the scorer and the reference agreeing.

    Raises:
        RuntimeError: the scorer and the reference disagree.
    """
    score = checked_score(cell.graph, cell.machine, solution)
    excess = int(cell.machine.excess(score.peak_memory_per_device))
    return score.makespan, excess


def run_table1(
    graphs: Sequence[Graph],
    devices: Sequence[int] = DEVICES,
    methods: Sequence[str] = METHODS,
    seeds: int = 1,
    capacity_fraction: float | None = CAPACITY_FRACTION,
    steps: int = GDP_ONE_STEPS,
    finetune: int = FINETUNE_STEPS,
    samples: int = 32,
    policy: str | None = None,
    progress: Progress | None = None,
    failures: Failures | None = None,
) -> list[dict[str, Any]]:
    """One row per graph, device count, method and seed.

    Row fields: graph, ops, devices, capacity, method, seed, makespan, excess (bytes over
    capacity), lower_bound, seconds (the method's wall time) and reference ("agrees", or
    "skipped" above `REFERENCE_MAX_OPS` ops). A method that fails on a cell (or the cell's
    machine) is recorded in `failures` and has no row (None: it raises).
    """
    table = _methods(steps, finetune, samples, policy)
    schedulers = policy_schedulers(policy)
    unknown = sorted(set(methods) - set(table))
    if unknown:
        raise GraphoptError(f"gdp-table1: unknown methods {unknown}; valid: {', '.join(table)}")
    failures = Failures.or_raising(failures)
    total = len(graphs) * len(devices) * len(methods) * seeds
    rows: list[dict[str, Any]] = []
    done = 0
    for graph in graphs:
        for n_devices in devices:
            what = f"machine of {graph.name} ({n_devices} devices)"
            setup = partial(_cell, graph, n_devices, capacity_fraction, schedulers)
            cell = failures.run(what, setup)
            if cell is None:
                done += len(methods) * seeds
                continue
            for name in methods:
                for seed in range(seeds):
                    if progress is not None:
                        progress(done, total, f"{graph.name}, {n_devices} dev., {name}")
                    what = f"{name} on {graph.name} ({n_devices} devices, seed {seed})"
                    row = failures.run(what, partial(_row, cell, table[name], name, seed))
                    if row is not None:  # None: failed, or does not apply to this cell
                        rows.append(row)
                    done += 1
    if progress is not None:
        progress(total, total, "done")
    return rows


def _cell(
    graph: Graph, n_devices: int, fraction: float | None, schedulers: tuple[str, ...]
) -> Cell:
    """The graph on the suite's machine with `n_devices`, its environment and bound."""
    machine = _machine(graph, n_devices, fraction)
    bound = makespan_lower_bound(graph, machine)
    return Cell(graph, machine, PlacementEnv(graph, machine, schedulers=schedulers), bound)


def _row(
    cell: Cell, method: Callable[[Cell, int], Solution | None], name: str, seed: int
) -> dict[str, Any] | None:
    """One method's re-scored solution of the cell as a row; None where it does not apply."""
    start = time.perf_counter()
    solution = method(cell, seed)
    if solution is None:
        return None
    seconds = time.perf_counter() - start
    makespan, excess = rescored(cell, solution)
    return {
        "graph": cell.graph.name,
        "ops": cell.graph.n_ops,
        "devices": cell.machine.n_devices,
        "capacity": cell.machine.capacity,
        "method": name,
        "seed": seed,
        "makespan": makespan,
        "excess": excess,
        "lower_bound": cell.bound,
        "seconds": seconds,
        "reference": "agrees" if cell.graph.n_ops <= REFERENCE_MAX_OPS else "skipped",
    }


def mean_cell(rows: Sequence[dict[str, Any]], graph: str, devices: int, method: str) -> dict | None:
    """The cell's mean makespan, seconds and worst excess over seeds; None if not run."""
    found = [r for r in rows if (r["graph"], r["devices"], r["method"]) == (graph, devices, method)]
    if not found:
        return None
    return {
        "makespan": float(np.mean([r["makespan"] for r in found])),
        "excess": max(r["excess"] for r in found),
        "seconds": float(np.mean([r["seconds"] for r in found])),
    }


def _cells(rows: Sequence[dict[str, Any]]) -> list[tuple[str, int, float]]:
    """(graph, devices, lower bound) of each cell, in run order."""
    seen: dict[tuple[str, int], float] = {}
    for r in rows:
        seen.setdefault((r["graph"], r["devices"]), r["lower_bound"])
    return [(g, d, b) for (g, d), b in seen.items()]


def ms(cell: dict | None) -> str:
    """A makespan in ms, marked with * when over capacity; '-' when not run."""
    if cell is None:
        return "-"
    return f"{cell['makespan'] * 1e3:.3f}{'*' if cell['excess'] else ''}"


def gains(
    rows: Sequence[dict[str, Any]], method: str, against: str
) -> list[tuple[str, int, float]]:
    """(graph, devices, baseline makespan / method makespan - 1) where both ran and fit."""
    found = []
    for graph, devices, _ in _cells(rows):
        ours, theirs = (mean_cell(rows, graph, devices, m) for m in (method, against))
        if ours and theirs and not ours["excess"] and not theirs["excess"]:
            found.append((graph, devices, theirs["makespan"] / ours["makespan"] - 1))
    return found


def geomean_gain(values: Sequence[float]) -> float:
    """Geometric mean of (1 + gain), minus 1."""
    return float(np.exp(np.mean(np.log1p(values)))) - 1 if len(values) else math.nan


def makespan_table(
    rows: Sequence[dict[str, Any]],
    heads: Sequence[tuple[str, str]],
    shown: Sequence[tuple[Sequence[str], str, int]],
    methods: Sequence[str],
) -> list[str]:
    """A markdown table of each method's mean makespan per cell (`ms`), one column a method.

    Args:
        rows: the runs.
        heads: the leading columns' headings and markdown alignments.
        shown: per line, its leading cells and the (graph, devices) cell whose makespans follow.
        methods: the methods, in column order.
    """
    lines = [
        "| " + " | ".join([*(head for head, _ in heads), *methods]) + " |",
        "| " + " | ".join([*(align for _, align in heads), *("---:" for _ in methods)]) + " |",
    ]
    for leading, graph, devices in shown:
        cells = [ms(mean_cell(rows, graph, devices, m)) for m in methods]
        lines.append("| " + " | ".join([*leading, *cells]) + " |")
    return lines


def markdown(rows: Sequence[dict[str, Any]], held_out: Sequence[str] = ()) -> str:
    """Table 1 (every method, ms), the gains, table 2 and the held-out table."""
    methods = [m for m in METHODS if any(r["method"] == m for r in rows)]
    heads = (("graph", "---"), ("d", "---:"), ("lower bound", "---:"))
    shown = [((g, str(d), f"{b * 1e3:.3f}"), g, d) for g, d, b in _cells(rows)]
    lines = [
        "Makespan in ms (* over capacity); lower bound: the instance's makespan bound.",
        "",
        *makespan_table(rows, heads, shown, methods),
    ]
    lines += [
        "",
        "Gain of each GDP variant (makespan of the baseline / its own - 1, both fit):",
        "",
    ]
    lines += [
        "| method | against | cells | geomean | worst | best |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for method in ("gdp-one", "gdp-finetune", "gdp-zero-shot"):
        for against in ("expert", "metis", "hint", "heft", "brkga", "regal", "hdp", "gdp-one"):
            found = [g for *_, g in gains(rows, method, against)] if method != against else []
            if found:
                lines.append(
                    f"| {method} | {against} | {len(found)} | {geomean_gain(found):+.1%} | "
                    f"{min(found):+.1%} | {max(found):+.1%} |"
                )
    if held_out:
        lines += [
            "",
            "Held-out families (GO fig. 5 shape): zero-shot / fine-tuned / GDP-one, ms",
            "",
        ]
        lines += ["| graph | d | zero-shot | fine-tuned | gdp-one | zero-shot vs fine-tuned |"]
        lines += ["| --- | ---: | ---: | ---: | ---: | ---: |"]
        for graph, devices, _ in _cells(rows):
            if graph.split(".")[0] not in held_out:
                continue
            zero, tuned, one = (
                mean_cell(rows, graph, devices, m)
                for m in ("gdp-zero-shot", "gdp-finetune", "gdp-one")
            )
            ratio = f"{zero['makespan'] / tuned['makespan'] - 1:+.1%}" if zero and tuned else "-"
            lines.append(
                f"| {graph} | {devices} | {ms(zero)} | {ms(tuned)} | {ms(one)} | {ratio} |"
            )
    seconds = {
        m: float(np.median([r["seconds"] for r in rows if r["method"] == m])) for m in methods
    }
    lines += ["", "Median seconds to a placement per method:", ""]
    lines += ["| " + " | ".join(methods) + " |", "|" + " ---: |" * len(methods)]
    lines.append("| " + " | ".join(f"{seconds[m]:.2f}" for m in methods) + " |")
    return "\n".join(lines)


def expert_bars(
    ax: Any,
    rows: Sequence[dict[str, Any]],
    cells: Sequence[tuple[str, int]],
    methods: Sequence[str],
    labels: Sequence[str],
) -> None:
    """Bars of each method's makespan / the expert split's per (graph, devices) cell on `ax`."""
    ratios = {}
    for method in methods:
        ratios[method] = []
        for graph, devices in cells:
            ours, expert = (mean_cell(rows, graph, devices, m) for m in (method, "expert"))
            ratios[method].append(
                ours["makespan"] / expert["makespan"] if ours and expert else np.nan
            )
    ticks = reports.grouped_bars(ax, ratios, labels)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(ticks)
    ax.set_xticklabels(labels, rotation=35, ha="right", fontsize=7)
    ax.set_ylabel("makespan / expert's (lower is better)")


def plot(rows: Sequence[dict[str, Any]], path: Path) -> Path:
    """Makespan relative to expert, per graph (bars by method), one panel per device count."""
    plt = reports.pyplot()

    devices = sorted({r["devices"] for r in rows})
    graphs = list(dict.fromkeys(r["graph"] for r in rows))
    methods = [m for m in METHODS if m != "one-device" and any(r["method"] == m for r in rows)]
    figure, axes = plt.subplots(1, len(devices), figsize=(5 * len(devices), 4), squeeze=False)
    for column, n_devices in enumerate(devices):
        ax = axes[0, column]
        labels = [g.split(".")[0] for g in graphs]
        expert_bars(ax, rows, [(g, n_devices) for g in graphs], methods, labels)
        ax.set_title(f"{n_devices} devices")
    axes[0, 0].legend(fontsize=7)
    return reports.save_figure(figure, path)


@dataclasses.dataclass(frozen=True)
class GDPBench(reports.PaperSuite):
    """The settings of a `graphopt bench gdp-table1` run.

    Attributes:
        models: table 1's zoo models (training graphs).
        held_out: models of families the pre-trained policy never saw.
        devices: device counts.
        methods: names in `METHODS`.
        seeds: runs of each method per cell (mean reported).
        capacity_fraction: capacity / one-device peak; None: no capacity.
        steps: GDP-one's PPO steps.
        finetune: fine-tuning's PPO steps.
        policy: the pre-trained GDP checkpoint (None: the shipped one).
    """

    models: tuple[str, ...] = MODELS
    held_out: tuple[str, ...] = HELD_OUT
    devices: tuple[int, ...] = DEVICES
    methods: tuple[str, ...] = METHODS
    seeds: int = 1
    capacity_fraction: float | None = CAPACITY_FRACTION
    steps: int = GDP_ONE_STEPS
    finetune: int = FINETUNE_STEPS
    policy: str | None = None

    def __post_init__(self) -> None:
        unknown = sorted(set(self.methods) - set(METHODS))
        if unknown:
            raise GraphoptError(
                f"gdp-table1: unknown methods {unknown}; valid: {', '.join(METHODS)}"
            )
        if not self.models and not self.held_out:
            raise GraphoptError("gdp-table1: name at least one zoo model")
        check_counts(
            "gdp-table1", self.devices, (2, 8), seeds=self.seeds, steps=self.steps,
            finetune=self.finetune,
        )  # fmt: skip
        if self.capacity_fraction is not None and not 0 < self.capacity_fraction:
            raise GraphoptError("gdp-table1: the capacity fraction must be > 0")

    def title(self) -> str:
        """The report's title: what ran, at which budgets."""
        capacity = (
            "no capacity"
            if self.capacity_fraction is None
            else f"capacity {self.capacity_fraction:g} x the one-device peak"
        )
        return (
            f"GDP table 1 shape: placement of {len(self.models) + len(self.held_out)} zoo "
            f"training graphs on {', '.join(map(str, self.devices))} devices ({LATENCY * 1e6:g} "
            f"us, {BANDWIDTH / 1e9:g} GB/s, {capacity}); GDP-one {self.steps} PPO steps from "
            f"scratch, fine-tuning {self.finetune} steps from the pre-trained policy; "
            f"{self.seeds} seed(s)"
        )

    def table(self, folder: Path, progress: Progress, failures: Failures) -> list[dict[str, Any]]:
        """Exports the graphs and runs the table (`run_table1`)."""
        return run_table1(
            zoo_training_graphs(self.models + self.held_out), self.devices, self.methods,
            self.seeds, self.capacity_fraction, self.steps, self.finetune, policy=self.policy,
            progress=progress, failures=failures,
        )  # fmt: skip

    def report(
        self, rows: list[dict[str, Any]], folder: Path, command: str, failures: Failures
    ) -> Report:
        """The tables, runs.csv, runs.json and the bars (gdp.png)."""
        files = [
            reports.write_csv(folder / "runs.csv", rows),
            plot(rows, folder / "gdp.png"),
            reports.write_json(folder / "runs.json", rows),
        ]
        text = markdown(rows, self.held_out)
        return reports.paper_report(folder, self.title(), command, text, failures, files)


def run_suite(settings: BenchSettings, progress: Progress) -> Report:
    """`graphopt bench gdp-table1`: the suite with the options given, the others' defaults.

    Naming `--models` replaces the held-out models too; a capacity fraction of 0 runs without
    a capacity.
    """
    fields = settings.given("models", "devices", "seeds", "steps", "policy", policies="methods")
    if settings.models is not None:
        fields["held_out"] = ()
    if settings.capacity_fraction is not None:
        fields["capacity_fraction"] = settings.capacity_fraction or None
    bench = GDPBench(**fields)
    return bench.run(settings.output_dir / settings.suite, settings.command, progress)
