"""Latency of the `graphopt` command line, end to end, warm and on a fresh install.

    .venv/bin/python benchmarks/bench_cli.py [--repeats 5] [--ops 200] [--cold] [--cold-baseline]
        [--graphopt PATH] [--json out.json]

Runs the installed `graphopt` executable in fresh processes, as a user does, and reports the
median wall time over `--repeats` runs of `--help`, `--version`, `info`, `score` and `optimize`
(default solver and budget) on a layered graph of `--ops` ops (seed 0), and the median CPU time
(user + system), which other work on the machine disturbs much less; the load average is
recorded beside them. Each command runs once untimed first, and the timed runs go round the
commands in turn, so that load from other work spreads over all of them.

`--cold` measures a fresh install: with a new, empty NUMBA_CACHE_DIR it times `graphopt warmup`
(the Makefile's install step), then the first `optimize` and the second, and counts the numba
cache files the first `optimize` wrote (0 when the warm-up compiled everything it needs).
`--cold-baseline` also times a first `optimize` with an empty cache and no warm-up.
The bars of issue 15 are printed beside the figures.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

BARS = {"help": 0.5, "optimize": 1.0, "cold first optimize": 5.0}
BUDGET = "5000"
"""Evaluations of the timed `optimize`: issue 15's bars were set on this budget, the default
before `optimize` searched for 10 s (issue 16); the bars time start-up and kernels, not search."""
"""Issue 15's limits in seconds: `--help`, a warm `optimize`, the first `optimize` after install."""


def run(command: list[str], env: dict[str, str] | None = None) -> tuple[float, int, float]:
    """Wall seconds, exit status and CPU seconds (its own processes' user + system) of a command."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    completed = subprocess.run(command, env=env, capture_output=True, check=False)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - usage.ru_utime - usage.ru_stime
    return seconds, completed.returncode, cpu


def cache_files(folder: Path) -> int:
    """numba cache data files (one per compiled signature) under `folder`."""
    return sum(1 for _ in folder.rglob("*.nbc"))


def write_graph(graphopt: str, path: Path, ops: int) -> None:
    subprocess.run(
        [graphopt, "generate", "layered", "-n", str(ops), "--seed", "0", "-o", str(path)],
        check=True,
        capture_output=True,
    )


def warm(graphopt: str, folder: Path, ops: int, repeats: int) -> dict[str, Any]:
    """Medians, minimum and samples of each command, all run in the current environment."""
    graph, solution = folder / "graph.json", folder / "solution.json"
    write_graph(graphopt, graph, ops)
    commands = {
        "help": [graphopt, "--help"],
        "version": [graphopt, "--version"],
        "info": [graphopt, "info", str(graph)],
        "optimize": [graphopt, "optimize", str(graph), "--budget", BUDGET, "-o", str(solution)],
        "score": [graphopt, "score", str(graph), str(solution)],
    }
    wall: dict[str, list[float]] = {name: [] for name in commands}
    cpu: dict[str, list[float]] = {name: [] for name in commands}
    status: dict[str, int] = {}
    for name, command in commands.items():  # untimed: compiles whatever is not cached yet
        status[name] = run(command)[1]
    for _ in range(repeats):
        for name, command in commands.items():
            seconds, status[name], cpu_seconds = run(command)
            wall[name].append(seconds)
            cpu[name].append(cpu_seconds)
    return {
        name: {
            "median_seconds": statistics.median(wall[name]) if status[name] == 0 else math.nan,
            "min_seconds": min(wall[name]) if status[name] == 0 else math.nan,
            "median_cpu_seconds": statistics.median(cpu[name]) if status[name] == 0 else math.nan,
            "samples": wall[name],
            "exit_status": status[name],
        }
        for name in commands
    }


def cold(graphopt: str, folder: Path, ops: int, baseline: bool) -> dict[str, Any]:
    """A fresh install's first runs, each series with its own new, empty numba cache."""
    graph = folder / "cold.json"
    write_graph(graphopt, graph, ops)
    cold_solution = str(folder / "cold-solution.json")
    optimize = [graphopt, "optimize", str(graph), "--budget", BUDGET, "-o", cold_solution]
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="numba-cache-") as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache}
        seconds, status, cpu = run([graphopt, "warmup"], env)
        results["warmup_exit_status"] = status
        results["warmup_seconds"] = seconds if status == 0 else math.nan
        results["warmup_cpu_seconds"] = cpu
        files = cache_files(Path(cache))
        for key in ("first_optimize", "second_optimize"):
            results[f"{key}_seconds"], _, results[f"{key}_cpu_seconds"] = run(optimize, env)
            if key == "first_optimize":
                results["first_optimize_new_cache_files"] = cache_files(Path(cache)) - files
    if baseline:
        with tempfile.TemporaryDirectory(prefix="numba-cache-") as cache:
            env = {**os.environ, "NUMBA_CACHE_DIR": cache}
            seconds, _, cpu = run(optimize, env)
            results["no_warmup_first_optimize_seconds"] = seconds
            results["no_warmup_first_optimize_cpu_seconds"] = cpu
    return results


def verdict(seconds: float, bar: float | None) -> str:
    if bar is None:
        return ""
    if math.isnan(seconds):
        return f"<= {bar:g} s: fails to run"
    return f"<= {bar:g} s: {'yes' if seconds <= bar else 'NO'}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--ops", type=int, default=200)
    parser.add_argument("--cold", action="store_true", help="also time a fresh install")
    parser.add_argument(
        "--cold-baseline",
        action="store_true",
        help="with --cold, also time a first optimize with an empty cache and no warm-up",
    )
    parser.add_argument(
        "--graphopt",
        default=str(Path(sys.executable).parent / "graphopt"),
        help="the executable to time (default: the one installed beside this Python)",
    )
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)

    results: dict[str, Any] = {
        "graphopt": args.graphopt,
        "ops": args.ops,
        "family": "layered",
        "seed": 0,
        "repeats": args.repeats,
        "bars_seconds": BARS,
        "load_average_at_start": os.getloadavg(),
        "PYTHONDONTWRITEBYTECODE": os.environ.get("PYTHONDONTWRITEBYTECODE", ""),
    }
    with tempfile.TemporaryDirectory() as folder:
        results["warm"] = warm(args.graphopt, Path(folder), args.ops, args.repeats)
        if args.cold:
            results["cold"] = cold(args.graphopt, Path(folder), args.ops, args.cold_baseline)
    results["load_average_at_end"] = os.getloadavg()

    table = Table(title=f"graphopt, layered graph of {args.ops} ops (medians of {args.repeats})")
    for column in ("command", "wall", "min wall", "CPU", "bar (wall)"):
        table.add_column(column, justify="left" if column == "command" else "right")
    for name, row in results["warm"].items():
        table.add_row(
            f"graphopt {'--' if name in ('help', 'version') else ''}{name}",
            f"{row['median_seconds']:.3f} s",
            f"{row['min_seconds']:.3f} s",
            f"{row['median_cpu_seconds']:.3f} s",
            verdict(row["median_seconds"], BARS.get(name)),
        )
    rows = [
        ("install: graphopt warmup", "warmup", None),
        ("then first optimize", "first_optimize", "cold first optimize"),
        ("then second optimize", "second_optimize", "optimize"),
        ("no warm-up: first optimize", "no_warmup_first_optimize", None),
    ]
    figures = results.get("cold", {})
    for label, key, bar in rows:
        if f"{key}_seconds" in figures:
            table.add_row(
                label,
                f"{figures[f'{key}_seconds']:.3f} s",
                "",
                f"{figures[f'{key}_cpu_seconds']:.3f} s",
                verdict(figures[f"{key}_seconds"], BARS[bar] if bar else None),
            )
    Console().print(table)
    Console().print(
        f"load average (1 min) at start {results['load_average_at_start'][0]:.2f}, at end "
        f"{results['load_average_at_end'][0]:.2f}, on {os.cpu_count()} CPUs: wall times grow "
        "with other work on the machine, CPU times much less"
    )
    if figures:
        Console().print(
            "numba cache files written by the first optimize after the warm-up: "
            f"{figures['first_optimize_new_cache_files']}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
