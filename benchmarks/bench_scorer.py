"""Evaluations per second of the fast scorer against the reference scorer.

    .venv/bin/python benchmarks/bench_scorer.py [--sizes 1000 10000 100000] [--devices 2]
        [--json out.json]

For each graph size: a graph of `--family` (default Erdos-Renyi; mean degree 6, so about 3
edges per op in every family), random
placements on d devices and random valid orders. It times one solution through
`Scorer.evaluate` (single thread, Python call included), taking the distinct solutions in turn:
scoring the same solution again and again lets the branch predictor learn its branches and
reads about twice as fast, which a search never sees (that figure is shown too, as "same one
repeated"). Then a population of 100 through
`Scorer.evaluate_population` (parallel over members; above 20,000 ops the 100 members repeat
fewer distinct solutions, since drawing random orders is slow Python), and `reference_score` on
the same inputs, and checks that all agree. Times are medians over repeats. It also measures
the numba compile time in a fresh process, and the time to load the kernels from numba's cache
in a second one.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
from rich.console import Console
from rich.table import Table

from graphopt.costmodels._reference import reference_score
from graphopt.costmodels.machine import Machine
from graphopt.costmodels.score import Scorer
from graphopt.ir.generators import generate
from graphopt.ir.solution import random_schedule

POPULATION = 100


def median_seconds(call, repeats: int, inner: int) -> float:
    """Median over `repeats` of the mean time of `inner` back-to-back calls."""
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(inner):
            call()
        samples.append((time.perf_counter() - start) / inner)
    return statistics.median(samples)


def bench_size(n_ops: int, n_devices: int, seed: int, family: str) -> dict:
    graph = generate(family, n_ops, seed=seed)
    machine = Machine(n_devices=n_devices)
    rng = np.random.default_rng(seed)
    distinct = min(POPULATION, max(10, 2_000_000 // n_ops))  # drawing orders is slow Python
    drawn = [
        random_schedule(graph, rng.integers(0, n_devices, graph.n_ops), n_devices, rng)
        for _ in range(distinct)
    ]
    members = [drawn[i % distinct] for i in range(POPULATION)]
    scorer = Scorer(graph, machine)
    first = members[0]
    scorer.evaluate(first.placement, first.order)  # compile or load from cache

    inner = max(1, 20_000 // n_ops)
    arrays = [
        (np.ascontiguousarray(m.placement, np.int32), np.ascontiguousarray(m.order, np.int64))
        for m in drawn
    ]
    turn = iter(range(10**12))
    single = median_seconds(
        lambda: scorer.evaluate(*arrays[next(turn) % distinct]), repeats=9, inner=inner
    )
    repeated = median_seconds(lambda: scorer.evaluate(*arrays[0]), repeats=9, inner=inner)

    length = max(m.order.shape[0] for m in members)
    orders = np.full((POPULATION, length), -1, dtype=np.int64)
    for row, member in enumerate(members):
        orders[row, : member.order.shape[0]] = member.order
    placements = np.stack([m.placement for m in members])
    lengths = np.array([m.order.shape[0] for m in members])
    peaks, makespans, status = scorer.evaluate_population(placements, orders, lengths)
    batch = median_seconds(
        lambda: scorer.evaluate_population(placements, orders, lengths), repeats=5, inner=1
    )

    checked = 3 if n_ops <= 10_000 else 1
    reference_times = []
    for row in range(checked):
        start = time.perf_counter()
        expected = reference_score(graph, members[row], machine)
        reference_times.append(time.perf_counter() - start)
        assert status[row, 0] == 0
        assert tuple(peaks[row]) == expected.peak_memory_per_device, (
            "fast and reference peaks differ"
        )
        assert makespans[row] == expected.makespan, "fast and reference makespans differ"
    reference = statistics.median(reference_times)
    return {
        "ops": graph.n_ops,
        "edges": graph.n_edges,
        "events": int(first.order.shape[0]),
        "devices": n_devices,
        "single_seconds": single,
        "single_evals_per_second": 1.0 / single,
        "repeated_seconds": repeated,
        "batch_seconds": batch,
        "batch_evals_per_second": POPULATION / batch,
        "reference_seconds": reference,
        "reference_evals_per_second": 1.0 / reference,
        "speedup_single_vs_reference": reference / single,
    }


COMPILE_SNIPPET = """
import time
start = time.perf_counter()
from graphopt.costmodels.score import Scorer
from graphopt.costmodels.machine import Machine
from graphopt.ir.generators import generate
from graphopt.ir.solution import topological_schedule
import numpy as np
graph = generate("erdos_renyi", 100, seed=0)
solution = topological_schedule(graph, np.zeros(100, dtype=np.int32), 1)
ready = time.perf_counter()
Scorer(graph, Machine()).evaluate(solution.placement, solution.order)
print(time.perf_counter() - ready)
"""


def compile_times() -> tuple[float, float]:
    """First-call time of the single-solution kernel with an empty cache, then with a warm one."""
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        run = [sys.executable, "-c", COMPILE_SNIPPET]
        cold = float(
            subprocess.run(run, env=env, capture_output=True, text=True, check=True).stdout
        )
        warm = float(
            subprocess.run(run, env=env, capture_output=True, text=True, check=True).stdout
        )
    return cold, warm


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--devices", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--family", default="erdos_renyi", help="graph family (see generate)")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)

    console = Console(width=160)
    rows = []
    for n_ops in args.sizes:
        with console.status(f"benchmarking {n_ops:,} ops"):
            rows.append(bench_size(n_ops, args.devices, args.seed, args.family))
    cold, warm = compile_times()

    title = f"scorer: peak memory + makespan, {args.family}, {args.devices} devices (medians)"
    table = Table(title=title)
    for column in (
        "ops",
        "edges",
        "events",
        "fast, 1 solution",
        "same one repeated",
        "fast, batch of 100",
        "reference",
        "fast / ref",
    ):
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(
            f"{row['ops']:,}",
            f"{row['edges']:,}",
            f"{row['events']:,}",
            f"{row['single_seconds'] * 1e6:,.1f} us ({row['single_evals_per_second']:,.0f}/s)",
            f"{row['repeated_seconds'] * 1e6:,.1f} us",
            f"{row['batch_seconds'] * 1e3:,.2f} ms ({row['batch_evals_per_second']:,.0f}/s)",
            f"{row['reference_seconds'] * 1e3:,.1f} ms "
            f"({row['reference_evals_per_second']:,.1f}/s)",
            f"{row['speedup_single_vs_reference']:,.0f}x",
        )
    console.print(table)
    console.print(
        f"numba first call: {cold:.2f} s compiling (empty cache), {warm:.3f} s from the cache"
    )
    if args.json:
        with open(args.json, "w") as file:
            json.dump(
                {"rows": rows, "compile_seconds": cold, "cached_load_seconds": warm}, file, indent=1
            )


if __name__ == "__main__":
    main()
