"""REGAL's wall time against BRKGA's at equal evaluations on real graphs, and where it goes.

    .venv/bin/python benchmarks/bench_regal_scale.py [GRAPH ...] [--devices 2 4]
        [--objective peak-memory] [--evaluations 5000] [--repeats 5] [--cold-repeats 3]
        [--seed 0] [--cache DIR] [--json out.json]

GRAPH is a graph file (.npz or .json), a zoo model (`gpt2`, or `gpt2:train` for its training
step; exported once with `graphopt zoo export` into --cache) or `family:ops` for a generated
graph (`graphopt.ir.generators`). The default is issue 16's zoo graphs of 300 to 1,700 ops.
Device counts without a shipped REGAL policy for the objective are skipped with a note.

Every solve spends exactly --evaluations evaluations (a peak memory search is not stopped at
the lower bound; the script stops if one spends fewer). For each graph and device count, on a
fresh Problem per run:

- warm, as a compiler runs it (one process, the policy loaded and every kernel compiled by an
  untimed solve of each): the median over --repeats of `make_solver("brkga").solve` and
  `make_solver("regal").solve` with --evaluations evaluations and --seed, run in turns, their
  ratio (and that of their median CPU times, all threads, which other work on the machine
  disturbs less), and the median of each of REGAL's phases (`regal.timed_solve`): finding and
  loading the policy, the 400-evaluation feature run, building the features from its
  population, the policy's inference (forward pass and gene distributions), and the BRKGA
  search after it;
- cold, as `graphopt optimize` runs it: the same `make_solver(...).solve` timed in fresh
  processes, where it makes its own imports and loads its own policy (median over
  --cold-repeats, BRKGA and REGAL in turns; numba kernels come from the on-disk cache in
  both), their ratio (and their CPU times'), and REGAL's policy phase there (imports and
  loading).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]

DEFAULT_GRAPHS = (
    "t5-tiny",
    "gpt2-tiny:train",
    "bert-tiny:train",
    "bert-base",
    "gpt2",
    "resnet50",
    "googlenet",
    "llama-small",
    "t5-small",
    "lstm-lm",
    "inception-small:train",
    "resnet152",
)
"""Issue 16's zoo graphs: 303 to 1,447 ops."""


def graph_file(spec: str, cache: Path) -> Path | None:
    """The file of a graph spec (exported into `cache` for a zoo model), None for family:ops."""
    path = Path(spec)
    if path.suffix in (".npz", ".json"):
        return path
    name, _, variant = spec.partition(":")
    if variant.isdigit():
        return None
    out = cache / f"{name}{'-train' if variant == 'train' else ''}.npz"
    if not out.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        command = [str(Path(sys.executable).with_name("graphopt")), "zoo", "export", name]
        command += ["--train"] * (variant == "train") + ["-o", str(out)]
        subprocess.run(command, check=True, capture_output=True)
    return out


def load_graph(spec: str, cache: Path):
    from graphopt.ir.generators import generate
    from graphopt.ir.io import read_graph

    path = graph_file(spec, cache)
    if path is None:
        family, ops = spec.split(":")
        return generate(family, int(ops), seed=0)
    return read_graph(path)


def make_problem(graph, devices: int, objective: str):
    from graphopt.costmodels.machine import Machine
    from graphopt.solvers.base import Problem

    return Problem(graph, Machine(n_devices=devices), objective)


def equal_budget(evaluations: int):
    """A budget of exactly `evaluations`: a peak memory search that reaches the lower bound
    would otherwise stop early (`Budget.stop_at_bound`), and REGAL and BRKGA at different times."""
    from dataclasses import fields

    from graphopt.solvers.base import Budget

    if "stop_at_bound" in {f.name for f in fields(Budget)}:
        return Budget(evaluations=evaluations, stop_at_bound=False)
    return Budget(evaluations=evaluations)


def cold_worker(
    spec: str, cache: str, solver: str, devices: int, objective: str, budget: int, seed: int
) -> None:
    """Prints one JSON line: the seconds of a solve in this fresh process, and what it found."""
    from graphopt.solvers.registry import make_solver

    problem = make_problem(load_graph(spec, Path(cache)), devices, objective)
    start, cpu = time.perf_counter(), time.process_time()
    chosen = make_solver(solver)
    if solver == "regal":
        from graphopt.learning.systems.regal.solver import timed_solve

        result, phases = timed_solve(chosen, problem, equal_budget(budget), seed)
    else:
        result, phases = chosen.solve(problem, equal_budget(budget), seed), {}
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    row = {"seconds": seconds, "cpu": cpu, "value": result.value, "torch": "torch" in sys.modules}
    row["evaluations"] = result.evaluations
    print(json.dumps({**row, "phases": phases}))


def cold_run(spec: str, args: argparse.Namespace, solver: str, devices: int) -> dict:
    """One solve of `solver` in a fresh process: its seconds, value and whether torch came in."""
    command = [
        sys.executable,
        __file__,
        "--cold-worker",
        spec,
        str(args.cache),
        solver,
        str(devices),
        args.objective,
        str(args.evaluations),
        str(args.seed),
    ]
    completed = subprocess.run(command, check=True, capture_output=True, text=True, cwd=ROOT)
    return json.loads(completed.stdout.strip().splitlines()[-1])


def bench_graph(spec: str, devices: int, args: argparse.Namespace) -> dict[str, Any]:
    from graphopt.learning.systems.regal.solver import PHASES, timed_solve
    from graphopt.solvers.registry import make_solver

    graph = load_graph(spec, args.cache)
    budget = equal_budget(args.evaluations)

    def fresh():
        return make_problem(graph, devices, args.objective)

    # Warm-up: the policy loaded, every kernel compiled or loaded, quantile tables built.
    make_solver("brkga").solve(fresh(), budget, args.seed)
    make_solver("regal").solve(fresh(), budget, args.seed)
    brkga, regal, phases, values = [], [], {p: [] for p in PHASES}, set()
    cpu: dict[str, list[float]] = {"brkga": [], "regal": []}
    for _ in range(args.repeats):
        problem = fresh()
        start, cpu_start = time.perf_counter(), time.process_time()
        spent = {make_solver("brkga").solve(problem, budget, args.seed).evaluations}
        brkga.append(time.perf_counter() - start)
        cpu["brkga"].append(time.process_time() - cpu_start)
        problem = fresh()
        start, cpu_start = time.perf_counter(), time.process_time()
        result, seconds = timed_solve(make_solver("regal"), problem, budget, args.seed)
        regal.append(time.perf_counter() - start)
        cpu["regal"].append(time.process_time() - cpu_start)
        values.add(result.value)
        spent.add(result.evaluations)
        if spent != {args.evaluations}:
            raise SystemExit(f"{spec}: evaluations {sorted(spent)}, not {args.evaluations}")
        for phase in PHASES:
            phases[phase].append(seconds[phase])
    row: dict[str, Any] = {
        "graph": spec,
        "ops": graph.n_ops,
        "devices": devices,
        "brkga_s": statistics.median(brkga),
        "regal_s": statistics.median(regal),
        "regal_value": result.value,
        "regal_deterministic": len(values) == 1,
        **{f"{phase}_s": statistics.median(phases[phase]) for phase in PHASES},
    }
    row["ratio"] = row["regal_s"] / row["brkga_s"]
    row["cpu_ratio"] = statistics.median(cpu["regal"]) / statistics.median(cpu["brkga"])
    if args.cold_repeats:
        # In turns, so that other work on the machine weighs on both alike.
        runs: dict[str, list[dict]] = {"brkga": [], "regal": []}
        for _ in range(args.cold_repeats):
            for solver, done in runs.items():
                done.append(cold_run(spec, args, solver, devices))
        cold = {s: statistics.median(r["seconds"] for r in done) for s, done in runs.items()}
        cold_cpu = {s: statistics.median(r["cpu"] for r in done) for s, done in runs.items()}
        row.update(
            cold_brkga_s=cold["brkga"],
            cold_regal_s=cold["regal"],
            cold_ratio=cold["regal"] / cold["brkga"],
            cold_cpu_ratio=cold_cpu["regal"] / cold_cpu["brkga"],
            cold_regal_imports_torch=any(r["torch"] for r in runs["regal"]),
            cold_regal_value=runs["regal"][0]["value"],
            cold_evaluations=sorted({r["evaluations"] for done in runs.values() for r in done}),
            cold_policy_s=statistics.median(r["phases"]["policy"] for r in runs["regal"]),
        )
    return row


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--cold-worker":
        spec, cache, solver, devices, objective, budget, seed = sys.argv[2:9]
        cold_worker(spec, cache, solver, int(devices), objective, int(budget), int(seed))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("graphs", nargs="*", default=list(DEFAULT_GRAPHS))
    parser.add_argument("--devices", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--objective", default="peak-memory")
    parser.add_argument("--evaluations", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cold-repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cache", type=Path, default=Path("/tmp/graphopt-zoo"))
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args()

    from graphopt.learning.formats import shipped_policy_path
    from graphopt.learning.systems.regal.solver import PHASES

    console = Console(emoji=False, highlight=False, width=220)
    rows = []
    for devices in args.devices:
        if shipped_policy_path("regal", args.objective, devices) is None:
            console.print(
                f"no shipped regal policy for {args.objective} on {devices} devices: skipped"
            )
            continue
        for spec in args.graphs:
            rows.append(bench_graph(spec, devices, args))
            console.print(f"{spec}: {rows[-1]['ratio']:.2f}x warm")
    table = Table(
        "graph",
        "ops",
        "d",
        "BRKGA s",
        "REGAL s",
        "ratio",
        "cpu ratio",
        *(f"{p} s" for p in PHASES),
        "cold BRKGA s",
        "cold REGAL s",
        "cold ratio",
        "cold cpu ratio",
        "cold policy s",
        title=f"REGAL vs BRKGA, {args.evaluations:,} evaluations, {args.objective} "
        f"(medians of {args.repeats} warm, {args.cold_repeats} cold)",
    )
    for row in rows:
        cold = (
            [f"{row[k]:.3f}" for k in ("cold_brkga_s", "cold_regal_s")]
            if "cold_ratio" in row
            else ["-", "-"]
        )
        table.add_row(
            row["graph"],
            f"{row['ops']:,}",
            str(row["devices"]),
            *(f"{row[k]:.3f}" for k in ("brkga_s", "regal_s")),
            f"{row['ratio']:.2f}",
            f"{row['cpu_ratio']:.2f}",
            *(f"{row[f'{p}_s']:.4f}" for p in PHASES),
            *cold,
            f"{row['cold_ratio']:.2f}" if "cold_ratio" in row else "-",
            f"{row['cold_cpu_ratio']:.2f}" if "cold_ratio" in row else "-",
            f"{row['cold_policy_s']:.4f}" if "cold_ratio" in row else "-",
        )
    console.print(table)
    if args.json:
        with open(args.json, "w") as file:
            json.dump(rows, file, indent=2)


if __name__ == "__main__":
    main()
