"""Torch on one thread beside numba: the policies here are small, the collisions are not."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


@contextmanager
def one_torch_thread() -> Iterator[None]:
    """Runs the block's torch ops on one thread, restoring the count after.

    The networks of one graph are too small to gain from threads, and the environments' numba
    kernels leave the OpenMP runtime they share with torch at every core: torch's threads then
    collide with numba's waiting ones (measured: one 16-group LSTM step, forward and backward,
    took 1.5 s instead of 2 ms on 2 busy cores; REGAL's inference ran ten times slower).
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
