"""numba kernels for graph algorithms on CSR arrays: topological order, critical path, reachability.

A small graph runs the kernels' code as plain Python and a large one compiled (cached, on first
use), so that reading and describing a graph of a few thousand ops, all that `graphopt info` and
`graphopt import` do, never imports numba: 0.3 s for milliseconds of work. Their plain twins are
the networkx algorithms, used as oracles in the tests.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

PLAIN_SIZE = 10_000
"""Array elements (ops and edges, about 2,500 ops) up to which a kernel runs uncompiled: at most
a few tens of ms, against numba's import and the cached kernel's load."""


class Kernel:
    """A numba kernel compiled on first use over more than `plain_size` array elements."""

    def __init__(self, function: Callable[..., Any], plain_size: int) -> None:
        functools.update_wrapper(self, function)
        self.py_func = function
        self.plain_size = plain_size
        self._compiled: Callable[..., Any] | None = None

    def __call__(self, *args: Any) -> Any:
        size = sum(arg.size for arg in args if isinstance(arg, np.ndarray))
        return self.py_func(*args) if size <= self.plain_size else self.compiled(*args)

    @property
    def compiled(self) -> Callable[..., Any]:
        """The numba dispatcher (`numba.njit(cache=True)`), made on first use."""
        if self._compiled is None:
            import numba

            self._compiled = numba.njit(cache=True)(self.py_func)
        return self._compiled


def kernel(plain_size: int = PLAIN_SIZE) -> Callable[[Callable[..., Any]], Kernel]:
    """Decorates numba code as a `Kernel` that runs uncompiled up to `plain_size` elements."""
    return functools.partial(Kernel, plain_size=plain_size)


@kernel()
def topological_order(n_ops: int, succ_ptr: np.ndarray, succ_op: np.ndarray) -> np.ndarray:
    """Kahn's algorithm with a FIFO queue seeded with sources in index order (deterministic).

    Args:
        n_ops: number of ops.
        succ_ptr: [n_ops + 1] CSR offsets of each op's successor edges (with multiplicity).
        succ_op: [n_edges] successor op of each edge.

    Returns:
        [k] op indices in topological order; k < n_ops exactly when the graph has a cycle.
    """
    indegree = np.zeros(n_ops, dtype=np.int64)
    for e in range(succ_op.shape[0]):
        indegree[succ_op[e]] += 1
    order = np.empty(n_ops, dtype=np.int64)
    tail = 0
    for j in range(n_ops):
        if indegree[j] == 0:
            order[tail] = j
            tail += 1
    head = 0
    while head < tail:
        j = order[head]
        head += 1
        for e in range(succ_ptr[j], succ_ptr[j + 1]):
            k = succ_op[e]
            indegree[k] -= 1
            if indegree[k] == 0:
                order[tail] = k
                tail += 1
    return order[:tail]


@kernel()
def longest_path(
    order: np.ndarray, pred_ptr: np.ndarray, pred_op: np.ndarray, weight: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Node-weighted longest path ending at each op, and the predecessor on that path.

    Args:
        order: [n_ops] a topological order.
        pred_ptr: [n_ops + 1] CSR offsets of each op's predecessor edges.
        pred_op: [n_edges] predecessor op of each edge.
        weight: [n_ops] op weights (runtimes).

    Returns:
        finish: [n_ops] largest weight sum of a path ending at (and including) each op.
        parent: [n_ops] previous op on that path, or -1 at its start.
    """
    n_ops = order.shape[0]
    finish = np.zeros(n_ops, dtype=np.float64)
    parent = np.full(n_ops, -1, dtype=np.int64)
    for i in range(n_ops):
        j = order[i]
        best = 0.0
        for e in range(pred_ptr[j], pred_ptr[j + 1]):
            p = pred_op[e]
            if parent[j] == -1 or finish[p] > best:
                best = finish[p]
                parent[j] = p
        finish[j] = best + weight[j]
    return finish, parent


@kernel(plain_size=0)  # quadratic work: always compiled
def reachable(n_ops: int, order: np.ndarray, ptr: np.ndarray, other: np.ndarray) -> np.ndarray:
    """[n_ops, ceil(n_ops / 64)] uint64 bit rows: the ops reachable from each op, not itself.

    Args:
        n_ops: number of ops.
        order: [n_ops] a topological order of the direction followed (its reverse is visited,
            so every op's neighbours are complete before the op).
        ptr: [n_ops + 1] CSR offsets of each op's neighbour edges (with multiplicity).
        other: [n_edges] the neighbour op of each edge.
    """
    words = (n_ops + 63) // 64
    reach = np.zeros((n_ops, words), dtype=np.uint64)
    for position in range(n_ops - 1, -1, -1):
        op = order[position]
        for k in range(ptr[op], ptr[op + 1]):
            near = other[k]
            reach[op, near >> 6] |= np.uint64(1) << np.uint64(near & 63)
            for w in range(words):
                reach[op, w] |= reach[near, w]
    return reach
