"""The one binary heap of the numba kernels: the decoder's ready set, GO's ready queues, FM's gains.

A heap holds int64 items in heap[:size], first item at the root. `before(first, second, u, v)`
says whether item u comes out before item v, reading whatever the caller keeps in `first` and
`second`: the items' keys (FM: gain, then a random tie-break; the ready queues: ready time,
then priority, then the op), or nothing (None) when the items order themselves (the decoder's
packed entries). With `where` ([n_items] int64, -1 for an item not in the heap) each item's
position is kept, so that an item can be removed or re-keyed in place; None skips that
bookkeeping, and numba prunes it.

Every function is inlined into its caller, which gets a heap specialised to its comparator (so
no heap function is compiled or cached on its own, and no two solvers share a kernel here).
numba keys a cached kernel by its own file's contents, so a change here recompiles no caller
(as with `_kernels.op_step`): remove the callers' cache files after one. Sifts move a hole
rather than swapping items: one write per level.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numba
import numpy as np

from graphopt.ir.arrays import _u

Before = Callable[[Any, Any, int, int], bool]
"""A heap's order: (first, second, u, v) -> whether item u comes out before item v."""


@numba.njit(cache=True, nogil=True, inline="always")
def _put(heap: np.ndarray, where: np.ndarray | None, i: int, item: int) -> None:
    """Writes `item` at position i, and i as its position."""
    heap[_u(i)] = item
    if where is not None:
        where[_u(item)] = i


@numba.njit(cache=True, nogil=True, inline="always")
def _rise(
    heap: np.ndarray,
    where: np.ndarray | None,
    before: Before,
    first: Any,
    second: Any,
    i: int,
    v: int,
) -> None:
    """Places item v from the hole at position i up, past every ancestor it comes before."""
    while i > 0:
        parent = (i - 1) >> 1
        u = heap[_u(parent)]
        if not before(first, second, v, u):
            break
        _put(heap, where, i, u)
        i = parent
    _put(heap, where, i, v)


@numba.njit(cache=True, nogil=True, inline="always")
def _sink(
    heap: np.ndarray,
    where: np.ndarray | None,
    before: Before,
    first: Any,
    second: Any,
    size: int,
    i: int,
    v: int,
) -> None:
    """Places item v from the hole at position i down, past every child that comes before it."""
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        # The right child when it comes first, without a branch (the decoder's entries compare
        # at random, so a branch would be mispredicted at every other level); without a right
        # child, `right` is the left one, which does not come before itself.
        right = min(child + 1, size - 1)
        child += before(first, second, heap[_u(right)], heap[_u(child)])
        u = heap[_u(child)]
        if not before(first, second, u, v):
            break
        _put(heap, where, i, u)
        i = child
    _put(heap, where, i, v)


@numba.njit(cache=True, nogil=True, inline="always")
def sift_up(
    heap: np.ndarray, where: np.ndarray | None, before: Before, first: Any, second: Any, i: int
) -> None:
    """Moves the item at position i up until its parent comes before it."""
    _rise(heap, where, before, first, second, i, heap[_u(i)])


@numba.njit(cache=True, nogil=True, inline="always")
def sift_down(
    heap: np.ndarray,
    where: np.ndarray | None,
    before: Before,
    first: Any,
    second: Any,
    size: int,
    i: int,
) -> None:
    """Moves the item at position i down until it comes before both its children."""
    _sink(heap, where, before, first, second, size, i, heap[_u(i)])


@numba.njit(cache=True, nogil=True, inline="always")
def push(
    heap: np.ndarray,
    where: np.ndarray | None,
    before: Before,
    first: Any,
    second: Any,
    size: int,
    item: int,
) -> int:
    """Adds `item` to heap[:size]; returns the new size."""
    _rise(heap, where, before, first, second, size, item)
    return size + 1


@numba.njit(cache=True, nogil=True, inline="always")
def pop(
    heap: np.ndarray, where: np.ndarray | None, before: Before, first: Any, second: Any, size: int
) -> tuple[int, int]:
    """Removes the root of heap[:size]; returns (the root's item, the new size)."""
    top = heap[_u(0)]
    if where is not None:
        where[_u(top)] = -1
    size -= 1
    last = heap[_u(size)]
    # Read first, then leave early: `if size > 0: _sink(...)` made heap-heavy decodes (every
    # key equal) a tenth slower.
    if size == 0:
        return top, 0
    _sink(heap, where, before, first, second, size, 0, last)
    return top, size


@numba.njit(cache=True, nogil=True, inline="always")
def remove(
    heap: np.ndarray,
    where: np.ndarray,
    before: Before,
    first: Any,
    second: Any,
    size: int,
    item: int,
) -> int:
    """Removes `item`, wherever it is in heap[:size] (by `where`); returns the new size."""
    i = where[_u(item)]
    where[_u(item)] = -1
    size -= 1
    if i == size:
        return size
    last = heap[_u(size)]
    _put(heap, where, i, last)
    sift_up(heap, where, before, first, second, i)
    sift_down(heap, where, before, first, second, size, where[_u(last)])
    return size
