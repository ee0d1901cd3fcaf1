"""Where is there room between the best classical hint and `auto`? (issue 45, item 1)

    .venv/bin/python benchmarks/placement_headroom.py [--graphs SPEC,...] [--devices 2,4,8]
        [--capacity none,0.8,0.6] [--bandwidth inf,2.5e10,1e9] [--fusion none,search]
        [--seconds 10,60] [--latency 1e-5] [--seed 0] [--out docs/results/learned-vs-auto/headroom]

A learned placer can only beat the classical hints where a search finds better placements than
they do; this measures that room before anything is trained for it. Every cell (graph, devices,
capacity, bandwidth, fusion) is solved for makespan by each classical hint (`HINTS`: HEFT with
its timeline variants, critical-path list scheduling, and `partition-hint`, GDP's hint, which
schedules METIS splits and HEFT's placements by ready queues and insertion timelines) and by
`auto` for each budget in `--seconds`, all through `optimize` with the same seed, one after the
other in one process. With `--fusion search` the hints fuse as the compilers do (XLA-like
default fusion; `partition-hint` searches its decodes' fusion) and `auto` searches fusion.

A graph SPEC is a zoo model (`resnet18`, `gpt2-tiny:train` for its training step) or a
generated one (`layered@1000`: the family's graph of 1,000 ops, seed `--seed`). Capacity 0.8 is
0.8 x the one-device optimum's peak memory (`compiler-best` on one device) on every device; a
cell whose capacity is below the peak memory lower bound is skipped with a line. Bandwidth `inf`
is free transfers (of size cost; the latency stays).

The headroom of a cell at T seconds is best hint / `auto` - 1 in % (> 0: `auto` is better).
Printed and written (`summary.md`): per setting, the mean headroom at each T with its 95 % CI
over the cells some hint fits, how many cells only `auto` fits (capacity), how many have more
than 1 %, and the largest; every row goes to `runs.csv`.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from graphopt.costmodels.machine import Machine
from graphopt.evaluation.metrics import mean_with_ci
from graphopt.evaluation.reports import write_csv
from graphopt.importers.zoo import export_graph
from graphopt.ir.generators import generate
from graphopt.ir.graph import Graph
from graphopt.optimize import optimize
from graphopt.solvers.base import Budget, InfeasibleError, Objective, Problem
from graphopt.solvers.registry import FUSION_SEARCHERS, make_solver

GRAPHS = (
    "layered@100",
    "sbm@1000",
    "erdos_renyi@1000",
    "layered@10000",
    "gpt2-tiny:train",
    "resnet18:train",
    "inception-small",
    "gnmt-tiny",
)
"""The training families at 100 to 10,000 ops and zoo models of the three kinds."""
HINTS = ("heft", "critical-path", "partition-hint")


@dataclasses.dataclass(frozen=True)
class Setting:
    """The machine and fusion of a cell, apart from the graph."""

    devices: int
    capacity: str
    bandwidth: str
    fusion: str


def load_graph(spec: str, seed: int) -> Graph:
    """A zoo model ('name', 'name:train') or a generated graph ('family@ops')."""
    if "@" in spec:
        family, _, ops = spec.partition("@")
        return dataclasses.replace(generate(family, int(ops), seed=seed), name=spec)
    name, _, mode = spec.partition(":")
    return dataclasses.replace(export_graph(name, training=mode == "train"), name=spec)


def machine_of(setting: Setting, one_device_peak: float, latency: float) -> Machine:
    """The setting's machine for a graph whose one-device optimum peaks at `one_device_peak`."""
    capacity = None if setting.capacity == "none" else float(setting.capacity) * one_device_peak
    return Machine(
        n_devices=setting.devices,
        capacity=None if capacity is None else int(capacity),
        bandwidth=float(setting.bandwidth),
        latency=latency,
    )


def hint_fusion(name: str, fusion: str) -> str:
    """How hint `name` fuses in a cell with `fusion`: as searched, or as XLA fuses by default."""
    if fusion == "none":
        return "none"
    return "search" if name in FUSION_SEARCHERS else "default"


def solve(graph: Graph, machine: Machine, solver: str, fusion: str, seconds: float, seed: int):
    """(makespan, wall seconds) of one makespan solve; +inf when it does not fit."""
    start = time.perf_counter()
    result = optimize(
        graph, machine, Objective.MAKESPAN, solver, seconds=seconds, seed=seed, fusion=fusion
    )
    wall = time.perf_counter() - start
    return (result.value if result.excess == 0 else math.inf), wall


def headroom(hint: float, auto: float) -> float:
    """Best hint / `auto` - 1 in %; 0 when neither fits, +inf when only `auto` does."""
    if math.isinf(auto):
        return 0.0 if math.isinf(hint) else -math.inf
    return 100.0 * (hint / auto - 1.0)


def summary(rows: list[dict], seconds: list[float]) -> list[str]:
    """Markdown: per setting and T, the mean headroom [95 % CI] over the cells some hint fits,
    how many cells only `auto` fits, how many have more than 1 %, and the largest finite one."""
    lines = [
        "| devices | capacity | bandwidth | fusion | cells | T (s) | headroom % [95% CI] "
        "| no hint fits | > 1 % | largest |",
        "|---:|---|---|---|---:|---:|---|---:|---:|---:|",
    ]
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for row in rows:
        groups[(row["devices"], row["capacity"], row["bandwidth"], row["fusion"])].append(row)
    for key, group in groups.items():
        for t in seconds:
            values = np.array([row[f"headroom_{t:g}"] for row in group], dtype=float)
            finite = values[np.isfinite(values)]
            if finite.size:
                mean, low, high = mean_with_ci(finite)
                average, largest = f"{mean:+.2f} [{low:+.2f}, {high:+.2f}]", f"{finite.max():+.2f}"
            else:
                average = largest = "-"
            lines.append(
                f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {len(group)} | {t:g} "
                f"| {average} | {int(np.sum(values == math.inf))} | {int(np.sum(values > 1.0))} "
                f"| {largest} |"
            )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", default=",".join(GRAPHS))
    parser.add_argument("--devices", default="2,4,8")
    parser.add_argument("--capacity", default="none,0.8,0.6")
    parser.add_argument("--bandwidth", default="inf,2.5e10,1e9")
    parser.add_argument("--fusion", default="none,search")
    parser.add_argument("--seconds", default="10,60")
    parser.add_argument("--latency", type=float, default=1e-5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("docs/results/learned-vs-auto/headroom"))
    args = parser.parse_args()
    seconds = [float(t) for t in args.seconds.split(",")]
    settings = [
        Setting(int(d), c, b, f)
        for d in args.devices.split(",")
        for c in args.capacity.split(",")
        for b in args.bandwidth.split(",")
        for f in args.fusion.split(",")
    ]
    args.out.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    for spec in args.graphs.split(","):
        graph = load_graph(spec, args.seed)
        one = make_solver("compiler-best").solve(
            Problem(graph, Machine(1), Objective.PEAK_MEMORY), Budget(evaluations=100)
        )
        for setting in settings:
            machine = machine_of(setting, one.value, args.latency)
            try:
                Problem(graph, machine, Objective.MAKESPAN).check_capacity()
            except InfeasibleError as error:
                print(f"{spec} {setting}: skipped, {error}", flush=True)
                continue
            hints = {
                name: solve(
                    graph, machine, name, hint_fusion(name, setting.fusion), seconds[-1], args.seed
                )
                for name in HINTS
            }
            best = min(hints, key=lambda name: hints[name][0])
            row = {
                "graph": spec,
                "ops": graph.n_ops,
                **dataclasses.asdict(setting),
                "hint": best,
                "hint_makespan": hints[best][0],
                "hint_seconds": round(sum(wall for _, wall in hints.values()), 3),
            }
            fusion = "search" if setting.fusion != "none" else "none"
            for t in seconds:
                value, wall = solve(graph, machine, "auto", fusion, t, args.seed)
                row[f"auto_{t:g}"] = value
                row[f"auto_{t:g}_seconds"] = round(wall, 3)
                row[f"headroom_{t:g}"] = round(headroom(hints[best][0], value), 4)
            rows.append(row)
            write_csv(args.out / "runs.csv", rows)
            print(
                f"{spec} {setting}: best hint {best} {hints[best][0]:.6g}, "
                + ", ".join(f"auto {t:g} s {row[f'headroom_{t:g}']:+.2f}%" for t in seconds),
                flush=True,
            )
    if not rows:
        print("no cell fits its capacity")
        return
    lines = summary(rows, seconds)
    command = " ".join(["benchmarks/placement_headroom.py", *sys.argv[1:]])
    (args.out / "summary.md").write_text(f"`{command}`\n\n" + "\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
