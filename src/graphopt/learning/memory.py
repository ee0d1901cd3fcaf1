"""Giving freed heap memory back to the system during long walks of varying-size steps.

A sampler step allocates arrays whose sizes change with the number of candidates (0.1-2 MB at
100 schedules). glibc raises its mmap threshold to the largest block freed so far, so from then
on such blocks come from the heap, which they fragment: sampling 100 schedules of a 5,000-op
graph grew the resident memory to 4.9-5.6 GB while live data stayed under 30 MB
(`benchmarks/bench_gflownet.py`). `malloc_trim` every few steps returns the free pages and kept
it at 0.41 GB for a 2,000-op graph (1.5 GB without), at about the same speed; a fixed mmap
threshold (`MALLOC_MMAP_THRESHOLD_`) kept it flat too, but made the walk 1.7x slower.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable
from functools import cache


@cache
def _malloc_trim() -> Callable[[int], int] | None:
    """The C library's malloc_trim (glibc), or None where it has none."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        return ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None


def release_freed_memory() -> None:
    """Returns the heap's free pages to the system, where the C library can (glibc)."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
