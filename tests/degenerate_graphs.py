"""Degenerate graphs (issue 15 item 3): empty, one op, no edges, only persistent tensors, ...

Each is valid by the contract (docs/format.md section 1), so every solver, command and learned
policy must handle it: built with `Graph.from_arrays` so no loader rule is bypassed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from graphopt.ir.graph import Graph


def _graph(
    name: str,
    runtimes: Sequence[float],
    tensors: Sequence[tuple[int, int, Sequence[int]]],
    persistent: Sequence[bool] | None = None,
) -> Graph:
    """A graph from op runtimes and (size, producer, consumers) tensors; ops named o0, o1, ..."""
    consumers = [list(t[2]) for t in tensors]
    ptr = np.zeros(len(tensors) + 1, dtype=np.int64)
    np.cumsum([len(c) for c in consumers], out=ptr[1:])
    return Graph.from_arrays(
        name,
        [f"o{i}" for i in range(len(runtimes))],
        np.asarray(runtimes, dtype=np.float64),
        [f"t{i}" for i in range(len(tensors))],
        np.asarray([t[0] for t in tensors], dtype=np.int64),
        np.asarray([t[1] for t in tensors], dtype=np.int64),
        ptr,
        np.asarray([c for row in consumers for c in row], dtype=np.int64),
        tensor_persistent=None if persistent is None else np.asarray(persistent, dtype=bool),
    )


def empty() -> Graph:
    """0 ops, 0 tensors."""
    return _graph("empty", [], [])


def one_op() -> Graph:
    """One op, no tensors."""
    return _graph("one-op", [1.5], [])


def one_op_dead_output() -> Graph:
    """One op whose output tensor nobody consumes."""
    return _graph("one-op-dead-output", [2.0], [(64, 0, [])])


def no_edges() -> Graph:
    """Five ops, no consumer anywhere: two with unconsumed outputs, three without tensors."""
    return _graph("no-edges", [1.0, 0.5, 3.0, 0.0, 2.0], [(100, 0, []), (7, 2, []), (0, 2, [])])


def only_persistent() -> Graph:
    """Every tensor persistent: two weights read by one op, whose output is persistent too."""
    return _graph(
        "only-persistent",
        [0.0, 0.0, 1.0, 1.0],
        [(300, 0, [2, 3]), (200, 1, [2]), (50, 2, [3]), (10, 3, [])],
        persistent=[True, True, True, True],
    )


def only_zero_size() -> Graph:
    """A diamond of control dependencies: every tensor has size 0 (peak memory 0)."""
    return _graph(
        "only-zero-size",
        [1.0, 2.0, 3.0, 1.0],
        [(0, 0, [1, 2]), (0, 1, [3]), (0, 2, [3]), (0, 3, [])],
    )


def zero_runtimes() -> Graph:
    """A diamond whose ops all take 0 seconds (makespan 0 without transfer latency)."""
    return _graph(
        "zero-runtimes",
        [0.0, 0.0, 0.0, 0.0],
        [(40, 0, [1, 2]), (30, 1, [3]), (20, 2, [3]), (10, 3, [])],
    )


def chain_of_two() -> Graph:
    """a -> b, the smallest graph with an edge."""
    return _graph("chain-of-two", [1.0, 2.0], [(128, 0, [1]), (16, 1, [])])


def isolated(n_ops: int, seed: int = 0) -> Graph:
    """`n_ops` ops, no edges; every other op has an output tensor nobody consumes."""
    rng = np.random.default_rng(seed)
    runtimes = rng.uniform(0.0, 1.0, n_ops)
    producers = np.arange(0, n_ops, 2, dtype=np.int64)
    sizes = rng.integers(0, 1000, producers.shape[0])
    return Graph.from_arrays(
        f"isolated-{n_ops}",
        [f"o{i}" for i in range(n_ops)],
        runtimes,
        [f"t{i}" for i in range(producers.shape[0])],
        sizes,
        producers,
        np.zeros(producers.shape[0] + 1, dtype=np.int64),
        np.zeros(0, dtype=np.int64),
    )


SMALL: dict[str, Callable[[], Graph]] = {
    "empty": empty,
    "one-op": one_op,
    "one-op-dead-output": one_op_dead_output,
    "no-edges": no_edges,
    "only-persistent": only_persistent,
    "only-zero-size": only_zero_size,
    "zero-runtimes": zero_runtimes,
    "chain-of-two": chain_of_two,
}
"""The small degenerate graphs by name."""
