"""Makespan of the HEFT variants and of the critical-path search after HEFT, against plain HEFT.

    .venv/bin/python benchmarks/bench_makespan_search.py [GRAPH ...] [--zoo DIR]
        [--devices 4] [--bandwidth inf 1e11] [--latency 1e-6] [--evaluations 5000]
        [--seed 0] [--json out.json]

GRAPH is a graph file (.npz or .json), a name of a file in --zoo (`gpt2` for DIR/gpt2.npz) or
`family:ops` for a generated graph (`graphopt.ir.generators`, seed 0). The default is every
graph in --zoo, then layered:1000 and erdos_renyi:1000.

For each graph and each --bandwidth (an infinite one is free transfers; a finite one adds
--latency), on --devices devices with sync transfers, the makespan of:

- HEFT: plain HEFT as the `heft` solver ran it before the timeline variants (`heft_schedule`,
  the better of lazy and eager transfers): every other column is a ratio to it;
- bound: `makespan_lower_bound` (critical path or total runtime / d, transfers ignored);
- CP-list: critical-path list scheduling (paper 004's baseline);
- insertion, lookahead, both: `heft_timeline` with the insertion policy, the lookahead, both;
- heft: the `heft` solver (best of plain HEFT and the three variants);
- +search: `CriticalPathSearch` for --evaluations evaluations from the `heft` solver's
  solution, with its wall time (it stops early at the bound).

The last row is the geometric mean of each ratio column.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from graphopt.costmodels.machine import Machine
from graphopt.ir.generators import generate
from graphopt.ir.graph import Graph
from graphopt.ir.io import read_graph
from graphopt.solvers.base import Budget, Objective, Problem
from graphopt.solvers.bounds import makespan_lower_bound
from graphopt.solvers.events import events_from_op_order
from graphopt.solvers.list_scheduling import (
    HEFT_VARIANTS,
    CriticalPathScheduler,
    HeftScheduler,
    heft_schedule,
    heft_timeline,
)
from graphopt.solvers.makespan_search import CriticalPathSearch

SYNTHETIC = ("layered:1000", "erdos_renyi:1000")
"""Generated graphs added to the default zoo graphs."""

RATIOS = ("bound", "CP-list", *HEFT_VARIANTS, "heft", "+search")
"""Columns given as ratios to plain HEFT."""


def load(spec: str, zoo: Path) -> tuple[str, Graph]:
    """(name, graph) of a file, a zoo name or a family:ops spec."""
    path = Path(spec)
    if path.suffix in (".npz", ".json"):
        return path.stem, read_graph(path)
    family, _, ops = spec.partition(":")
    if ops.isdigit():
        return spec, generate(family, int(ops), seed=0)
    return spec, read_graph(zoo / f"{spec}.npz")


def plain_heft(problem: Problem) -> float:
    """Makespan of plain HEFT, the better of lazy and eager transfers."""
    graph, machine = problem.graph, problem.machine
    placement, order = heft_schedule(graph, machine, problem.pinned)
    return min(
        problem.scorer.evaluate(
            placement, events_from_op_order(graph, placement, order, machine.n_devices, mode)
        )[1]
        for mode in ("lazy", "eager")
    )


def bench(name: str, graph: Graph, machine: Machine, evaluations: int, seed: int) -> dict:
    problem = Problem(graph, machine, Objective.MAKESPAN)
    budget = Budget(evaluations=100)
    heft = plain_heft(problem)
    row = {"graph": name, "ops": graph.n_ops, "bandwidth": machine.bandwidth, "HEFT": heft}
    row["bound"] = makespan_lower_bound(graph, machine)
    row["CP-list"] = CriticalPathScheduler().solve(problem, budget).value
    for variant, (insertion, lookahead) in HEFT_VARIANTS.items():
        timed = heft_timeline(graph, machine, insertion=insertion, lookahead=lookahead)
        row[variant] = timed.makespan
    best = HeftScheduler().solve(problem, budget)
    row["heft"] = best.value
    start = time.perf_counter()
    searched = CriticalPathSearch().solve(
        problem, Budget(evaluations=evaluations), seed, initial=[best.solution]
    )
    row["search_seconds"] = time.perf_counter() - start
    row["+search"] = searched.value
    row["search_evaluations"] = searched.evaluations
    return row


def main() -> None:
    """Runs every graph and bandwidth and prints the table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("graphs", nargs="*", metavar="GRAPH")
    parser.add_argument("--zoo", type=Path, default=Path("/tmp/zoo"))
    parser.add_argument("--devices", type=int, default=4)
    parser.add_argument("--bandwidth", type=float, nargs="+", default=[math.inf, 1e11])
    parser.add_argument("--latency", type=float, default=1e-6)
    parser.add_argument("--evaluations", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args()
    specs = args.graphs or [*sorted(p.stem for p in args.zoo.glob("*.npz")), *SYNTHETIC]
    rows = []
    for spec in specs:
        name, graph = load(spec, args.zoo)
        for bandwidth in args.bandwidth:
            latency = 0.0 if math.isinf(bandwidth) else args.latency
            machine = Machine(n_devices=args.devices, bandwidth=bandwidth, latency=latency)
            rows.append(bench(name, graph, machine, args.evaluations, args.seed))
    table = Table(
        title=f"makespan on {args.devices} devices (sync), ratios to plain HEFT; "
        f"+search: {args.evaluations:,} evaluations from the heft solver's best"
    )
    for column in ("graph", "ops", "transfers", "HEFT (s)", *RATIOS, "search (s)"):
        table.add_column(column, justify="left" if column == "graph" else "right")
    for r in rows:
        transfers = "free" if math.isinf(r["bandwidth"]) else f"{r['bandwidth']:.0e} B/s"
        ratios = [f"{r[column] / r['HEFT']:.3f}" for column in RATIOS]
        table.add_row(
            r["graph"],
            f"{r['ops']:,}",
            transfers,
            f"{r['HEFT']:.4g}",
            *ratios,
            f"{r['search_seconds']:.1f}",
        )
    means = [
        f"{math.exp(np.mean([math.log(r[column] / r['HEFT']) for r in rows])):.3f}"
        for column in RATIOS
    ]
    table.add_section()
    table.add_row("geometric mean", "", "", "", *means, "")
    Console(width=170).print(table)
    if args.json:
        with open(args.json, "w") as file:
            json.dump(rows, file, indent=1)


if __name__ == "__main__":
    main()
