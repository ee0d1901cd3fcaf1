"""Named benchmark suites: seeded synthetic graph sets, or any folder of graph files.

Seeds are disjoint from the BRKGA tuning set (seeds 10,000+, `benchmarks/tune_brkga.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from graphopt.ir.generators import generate
from graphopt.ir.graph import Graph
from graphopt.ir.io import read_graph
from graphopt.solvers.base import SolverError

FAMILIES = ("layered", "erdos_renyi", "sbm", "watts_strogatz", "barabasi_albert")


def _mixed(count: int, n_ops: int) -> list[Graph]:
    return [generate(FAMILIES[i % len(FAMILIES)], n_ops, seed=i) for i in range(count)]


SUITES: dict[str, Callable[[], list[Graph]]] = {
    "tiny-20": lambda: _mixed(50, 20),
    "small-100": lambda: _mixed(20, 100),
    "medium-500": lambda: _mixed(10, 500),
    "layered-1000": lambda: [generate("layered", 1000, seed=s) for s in range(3)],
}
"""Suite name -> graphs: 50 graphs of 20 ops (CP-SAT proves optima), 20 of 100 ops, 10 of 500
ops (all five families in turn), and three 1,000-op layered graphs."""


def load_suite(name: str) -> list[Graph]:
    """The graphs of a named suite, or of every .json/.npz graph file in a folder.

    Raises:
        SolverError: unknown suite name (listing the valid ones) or an empty folder.
    """
    if name in SUITES:
        return SUITES[name]()
    folder = Path(name)
    if folder.is_dir():
        files = sorted(p for p in folder.iterdir() if p.suffix in (".json", ".npz"))
        if not files:
            raise SolverError(f"suite folder {folder} has no .json or .npz graph files")
        return [read_graph(p) for p in files]
    raise SolverError(
        f"unknown suite {name!r}; valid suites: {', '.join(SUITES)}, or a folder of graph files"
    )
