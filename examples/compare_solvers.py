"""Compare solvers on one graph: peak memory on 2 devices against BRKGA 5K and the compilers.

    python examples/compare_solvers.py graph.json --devices 2 --budget 5000

Runs the default solver (`auto`), plain BRKGA, the XLA DFS scheduler, the best of the compiler
schedulers and GP+DFS (METIS) with the same budget and seed, and prints each one's peak memory,
its % improvement over BRKGA, and seconds. Returns the results by solver name.
"""

from __future__ import annotations

import argparse

from rich.console import Console
from rich.table import Table

import graphopt

SOLVERS = ("auto", "brkga", "xla-dfs", "compiler-best", "gp-metis")


def main(argv: list[str] | None = None) -> dict[str, graphopt.Result]:
    """Optimizes the graph with each solver and prints the comparison table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("graph")
    parser.add_argument("--devices", type=int, default=2)
    parser.add_argument("--budget", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    graph = graphopt.load_graph(args.graph)
    machine = graphopt.Machine(n_devices=args.devices)
    results = {
        name: graphopt.optimize(
            graph, machine, "peak-memory", name, evaluations=args.budget, seed=args.seed
        )
        for name in SOLVERS
    }
    brkga = results["brkga"].value
    table = Table(
        f"solver ({args.devices} devices)",
        "peak memory (bytes)",
        f"vs BRKGA {args.budget:,}",
        "evaluations",
        "seconds",
        title=f"peak memory of {graph.name}: {graph.n_ops} ops",
    )
    for name, result in results.items():
        table.add_row(
            name,
            f"{result.value:,.0f}",
            f"{100 * (brkga - result.value) / brkga:+.2f}%",
            f"{result.evaluations:,}",
            f"{result.seconds:.2f}",
        )
    Console().print(table)
    return results


if __name__ == "__main__":
    main()
