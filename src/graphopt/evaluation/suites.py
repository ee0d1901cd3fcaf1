"""Benchmark suites: synthetic sets, held-out zoo models, a dataset's split, or a folder.

Synthetic seeds are disjoint from the BRKGA tuning set (seeds 10,000+, `benchmarks/tune_brkga.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from graphopt.datasets import SPLITS, Dataset, ZooSource
from graphopt.errors import GraphoptError
from graphopt.evaluation.zoo_real import zoo_graphs
from graphopt.ir.generators import generate
from graphopt.ir.graph import Graph
from graphopt.ir.io import read_graph
from graphopt.solvers.base import SolverError

FAMILIES = ("layered", "erdos_renyi", "sbm", "watts_strogatz", "barabasi_albert")
DATASET_PREFIX = "dataset:"
"""Suites named `dataset:DIR:SPLIT[:N]` are (at most N graphs of) a built dataset's split."""

ZOO_HELD_OUT = (
    ZooSource("resnet18"),
    ZooSource("resnet18", training=True),
    ZooSource("inception-small"),
    ZooSource("inception-small", training=True),
    ZooSource("gnmt-tiny"),
    ZooSource("gnmt-tiny", training=True),
    ZooSource("lstm-lm-unrolled-32"),
    ZooSource("lstm-lm-unrolled-32", training=True),
    ZooSource("t5-tiny", training=True),
    ZooSource("wavenet"),
)
"""Zoo entries REGAL never trains on (its config, `datasets/configs/regal.json`, has only eight
other `-tiny` entries): 10 graphs of 191..3,015 ops, each exported in a few seconds, so results on
real models sit next to those on the synthetic test split (paper 001 table 1)."""


def _mixed(count: int, n_ops: int) -> list[Graph]:
    return [generate(FAMILIES[i % len(FAMILIES)], n_ops, seed=i) for i in range(count)]


def _zoo_held_out() -> list[Graph]:
    return zoo_graphs(ZOO_HELD_OUT, "suite zoo-held-out")


SUITES: dict[str, Callable[[], list[Graph]]] = {
    "tiny-20": lambda: _mixed(50, 20),
    "small-100": lambda: _mixed(20, 100),
    "medium-500": lambda: _mixed(10, 500),
    "layered-1000": lambda: [generate("layered", 1000, seed=s) for s in range(3)],
    "large-3000": lambda: _mixed(5, 3000),
    "zoo-held-out": _zoo_held_out,
}
"""Suite name -> graphs: 50 graphs of 20 ops (CP-SAT proves optima), 20 of 100 ops, 10 of 500
ops (all five families in turn), three 1,000-op layered graphs, five of 3,000 ops (ten times
the largest graph the shipped REGAL policies trained on), and the held-out zoo models."""


def dataset_suite(spec: str) -> list[Graph]:
    """The graphs of `dataset:DIR:SPLIT[:N]`: a split of a built dataset, or N of its graphs.

    N graphs are taken at evenly spread indices, so a subset still covers the split's
    topologies (their noisy copies sit next to each other) and is the same on every run.

    Raises:
        SolverError: a malformed spec, a missing directory or split archive, an unknown split,
            an N that is not a positive integer, or an empty split.
    """
    parts = spec.removeprefix(DATASET_PREFIX).split(":")
    if len(parts) not in (2, 3) or not parts[0]:
        raise SolverError(f"suite {spec!r}: must look like dataset:DIR:SPLIT[:N]")
    directory, split = Path(parts[0]), parts[1]
    if not directory.is_dir():
        raise SolverError(f"suite {spec!r}: no such dataset directory {directory}")
    if split not in SPLITS:
        raise SolverError(f"suite {spec!r}: unknown split {split!r}; valid: {', '.join(SPLITS)}")
    limit = None
    if len(parts) == 3:
        if not parts[2].isdigit() or int(parts[2]) < 1:
            raise SolverError(f"suite {spec!r}: N must be a positive integer, got {parts[2]!r}")
        limit = int(parts[2])
    try:
        dataset = Dataset.open(directory, split)
    except GraphoptError as error:
        raise SolverError(f"suite {spec!r}: {error}") from None
    if not len(dataset):
        raise SolverError(f"suite {spec!r}: split {split!r} has no graphs")
    n = len(dataset)
    count = n if limit is None else min(limit, n)
    return [dataset[int(i)] for i in np.arange(count) * n // count]


def load_suite(name: str) -> list[Graph]:
    """The graphs of a named suite, a dataset split (`dataset:DIR:SPLIT[:N]`) or a folder.

    Raises:
        SolverError: unknown suite name (listing the valid ones), a bad dataset spec or an
            empty folder.
    """
    if name in SUITES:
        return SUITES[name]()
    if name.startswith(DATASET_PREFIX):
        return dataset_suite(name)
    folder = Path(name)
    if folder.is_dir():
        files = sorted(p for p in folder.iterdir() if p.suffix in (".json", ".npz"))
        if not files:
            raise SolverError(f"suite folder {folder} has no .json or .npz graph files")
        return [read_graph(p) for p in files]
    raise SolverError(
        f"unknown suite {name!r}; valid suites: {', '.join(SUITES)}, zoo-real, "
        "dataset:DIR:SPLIT[:N], or a folder of graph files"
    )


def report_name(name: str) -> str:
    """A folder name for a suite's reports, without the colons of a dataset spec.

    A named suite keeps its name, a folder its last part, and `dataset:DIR:SPLIT[:N]` becomes
    DIR's last part, SPLIT and N joined by dashes, e.g. "regal-test-50".
    """
    if name.startswith(DATASET_PREFIX):
        return "-".join(Path(part).name for part in name.removeprefix(DATASET_PREFIX).split(":"))
    return Path(name).name
