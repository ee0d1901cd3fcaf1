"""What every partitioner balances and measures: op weights, the balance limit, transfer volume.

Balance: the weight of an op is its runtime ("runtime") or the bytes it produces ("memory"); a
device may hold at most max((1 + imbalance) W / d, W / d + w_max) of the total weight W, where
w_max is the heaviest op, since no partition can beat one op's granularity. Pinned ops never move.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from graphopt.ir.graph import Graph
from graphopt.ir.solution import implied_transfers
from graphopt.solvers.base import SolverError

Balance = Literal["runtime", "memory"]
"""What a balanced partition spreads evenly: op runtimes or the bytes ops produce."""

Weighting = Balance | np.ndarray
"""A balance mode, or explicit [n_ops] op weights (`memory_weights`)."""


def vertex_weights(graph: Graph, balance: Weighting) -> np.ndarray:
    """Weight of each op under a balance mode, or explicit weights passed through.

    Args:
        graph: the graph.
        balance: "runtime" (seconds), "memory" (bytes of the tensors the op produces), or an
            [n_ops] array of weights (e.g. `memory_weights`).

    Returns:
        [n_ops] float64 weights.
    """
    if isinstance(balance, np.ndarray):
        if (
            balance.shape != (graph.n_ops,)
            or not np.all(np.isfinite(balance))
            or np.any(balance < 0)
        ):
            raise SolverError(f"weights must be {graph.n_ops} finite numbers >= 0")
        return balance.astype(np.float64)
    if balance == "runtime":
        return np.asarray(graph.op_runtime, dtype=np.float64)
    if balance == "memory":
        return np.bincount(
            graph.tensor_producer,
            weights=graph.tensor_size.astype(np.float64),
            minlength=graph.n_ops,
        )
    raise SolverError(f"balance must be 'runtime' or 'memory', got {balance!r}")


def memory_weights(graph: Graph, activation_scale: float) -> np.ndarray:
    """[n_ops] persistent and graph output bytes an op produces in full plus its other bytes scaled.

    A persistent tensor (a weight) sits on its producer's device for the whole run, so spreading
    those bytes evenly is what lowers the peak of a real model on several devices; a graph
    output sits there from its step to the last, so all of them meet at the end; activations
    come and go, so they count only in part (`activation_scale` in [0, 1]). Several scales are
    tried, since the right one depends on how much of the peak the activations make.
    """
    size = graph.tensor_size.astype(np.float64)
    held = graph.tensor_persistent | graph.tensor_output
    weight = np.where(held, size, activation_scale * size)
    return np.bincount(graph.tensor_producer, weights=weight, minlength=graph.n_ops)


def transfer_volume(graph: Graph, placement: np.ndarray, n_devices: int) -> int:
    """Bytes moved by the transfers a placement implies (the partitioning objective).

    Args:
        graph: the graph.
        placement: [n_ops] device of each op.
        n_devices: number of devices d.

    Returns:
        Sum of tensor sizes over the implied transfers.
    """
    codes = implied_transfers(graph, placement, n_devices)
    return int(graph.tensor_size[(codes - graph.n_ops) // n_devices].sum())


def device_loads(
    graph: Graph, placement: np.ndarray, n_devices: int, balance: Balance
) -> np.ndarray:
    """Total op weight on each device.

    Returns:
        [n_devices] float64 loads.
    """
    return np.bincount(
        np.asarray(placement, dtype=np.int64),
        weights=vertex_weights(graph, balance),
        minlength=n_devices,
    )


def load_limit(weights: np.ndarray, n_devices: int, imbalance: float) -> float:
    """Largest load a device may carry in a balanced partition (package docstring).

    Args:
        weights: [n_ops] op weights.
        n_devices: number of devices d.
        imbalance: allowed relative excess over the average load.

    Returns:
        max((1 + imbalance) W / d, W / d + w_max).
    """
    total = float(weights.sum())
    heaviest = float(weights.max()) if weights.size else 0.0
    return max((1.0 + imbalance) * total / n_devices, total / n_devices + heaviest)


def checked_pins(graph: Graph, n_devices: int, pinned: np.ndarray | None) -> np.ndarray:
    """[n_ops] int64 pinned device of each op, -1 where free."""
    if pinned is None:
        return np.full(graph.n_ops, -1, dtype=np.int64)
    pins = np.asarray(pinned, dtype=np.int64).reshape(-1)
    if pins.shape[0] != graph.n_ops or np.any((pins < -1) | (pins >= n_devices)):
        raise SolverError(f"pinned must hold {graph.n_ops} devices in [-1, {n_devices})")
    return pins
