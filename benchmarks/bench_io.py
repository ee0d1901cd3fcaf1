"""Load and save times of graphs: `graphopt.graph/1` JSON and `.npz`, with full validation.

    .venv/bin/python benchmarks/bench_io.py [--ops 100000] [--family layered] [--json out.json]

Generates one graph, writes it in both formats, then times `read_graph` (validation, topological
sort and all, in a warm process) as the median of several loads, plus the generation itself.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from graphopt.ir.generators import generate
from graphopt.ir.io import read_graph, write_graph


def timed(call, repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=100_000)
    parser.add_argument("--family", default="layered")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)

    generate(args.family, 50, seed=0)  # numba kernels compiled or loaded before timing
    results = {"ops": args.ops, "family": args.family}
    results["generate_seconds"] = timed(
        lambda: generate(args.family, args.ops, seed=0), args.repeats
    )
    graph = generate(args.family, args.ops, seed=0)
    results["edges"] = graph.n_edges
    with tempfile.TemporaryDirectory() as folder:
        for suffix in ("json", "npz"):
            path = Path(folder) / f"graph.{suffix}"
            results[f"{suffix}_write_seconds"] = timed(lambda p=path: write_graph(graph, p), 1)
            results[f"{suffix}_bytes"] = path.stat().st_size
            results[f"{suffix}_load_seconds"] = timed(lambda p=path: read_graph(p), args.repeats)
            assert read_graph(path).n_edges == graph.n_edges

    table = Table(
        title=f"{args.family} graph, {args.ops:,} ops, {results['edges']:,} edges (medians)"
    )
    for column in ("format", "file size", "write", "load + validate"):
        table.add_column(column, justify="right")
    for suffix in ("json", "npz"):
        table.add_row(
            suffix,
            f"{results[f'{suffix}_bytes'] / 2**20:,.1f} MiB",
            f"{results[f'{suffix}_write_seconds']:.3f} s",
            f"{results[f'{suffix}_load_seconds']:.3f} s",
        )
    Console().print(table)
    Console().print(f"generate: {results['generate_seconds']:.3f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
