"""Random search: random placements and uniformly random valid event orders, best kept.

The baseline that local search and annealing must beat under the same budget. It needs no
incremental evaluation: each batch of random solutions is scored at once by the population
scorer, and its orders are drawn by a numba kernel of its own.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from graphopt.costmodels.machine import MachineArrays
from graphopt.ir.arrays import GraphArrays
from graphopt.solvers.base import Initial, Problem, Rng, Solver, Tracker
from graphopt.solvers.checks import check_integer
from graphopt.solvers.incremental import random_placements


@numba.njit(cache=True, inline="always")
def _input_arrived(u: int, waiting: np.ndarray, ready: np.ndarray, n_ready: int) -> int:
    """One more input of op u is on its device, from its producer or a transfer alike.

    u joins the ready events (`ready[:n_ready]`) when it was the last; returns their new count.
    """
    waiting[u] -= 1
    if waiting[u] == 0:
        ready[n_ready] = u
        n_ready += 1
    return n_ready


@numba.njit(cache=True)
def _random_order(
    g: GraphArrays, m: MachineArrays, placement: np.ndarray, uniforms: np.ndarray, order: np.ndarray
) -> int:
    """A valid order that runs a uniformly random ready event at each step; returns its length.

    The numba twin of `graphopt.ir.solution.random_schedule` (same distribution over orders).
    """
    d = m.n_devices
    n_ops = placement.shape[0]
    n_tensors = g.tensor_size.shape[0]
    waiting = np.empty(n_ops, dtype=np.int64)
    for j in range(n_ops):
        waiting[j] = g.op_input_ptr[j + 1] - g.op_input_ptr[j]
    sent = np.zeros(n_tensors * d, dtype=np.bool_)
    ready = np.empty(order.shape[0], dtype=np.int64)
    n_ready = 0
    for j in range(n_ops):
        if waiting[j] == 0:
            ready[n_ready] = j
            n_ready += 1
    n = 0
    while n_ready > 0:
        pick = int(uniforms[n] * n_ready)
        code = ready[pick]
        n_ready -= 1
        ready[pick] = ready[n_ready]
        order[n] = code
        n += 1
        if code < n_ops:
            device = placement[code]
            for e in range(g.op_output_ptr[code], g.op_output_ptr[code + 1]):
                t = g.op_output_tensor[e]
                for c in range(g.consumer_ptr[t], g.consumer_ptr[t + 1]):
                    u = g.consumer_op[c]
                    if placement[u] == device:
                        n_ready = _input_arrived(u, waiting, ready, n_ready)
                    elif not sent[t * d + placement[u]]:
                        sent[t * d + placement[u]] = True
                        ready[n_ready] = n_ops + t * d + placement[u]
                        n_ready += 1
        else:
            t = (code - n_ops) // d
            device = code - n_ops - t * d
            for c in range(g.consumer_ptr[t], g.consumer_ptr[t + 1]):
                u = g.consumer_op[c]
                if placement[u] == device:
                    n_ready = _input_arrived(u, waiting, ready, n_ready)
    return n


@numba.njit(cache=True, parallel=True)
def _random_orders(
    g: GraphArrays,
    m: MachineArrays,
    placements: np.ndarray,
    uniforms: np.ndarray,
    orders: np.ndarray,
    lengths: np.ndarray,
) -> None:
    """`_random_order` for each row, in parallel."""
    for b in numba.prange(placements.shape[0]):
        lengths[b] = _random_order(g, m, placements[b], uniforms[b], orders[b])


def random_orders(
    problem: Problem, placements: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Uniformly random valid event orders (ready event drawn uniformly at each step).

    Args:
        problem: the problem.
        placements: [B, n_ops] devices.
        rng: source of the draws.

    Returns:
        orders [B, L] int64 (padded) and lengths [B] int64.
    """
    graph, d = problem.graph, problem.machine.n_devices
    placements = np.ascontiguousarray(placements, dtype=np.int32)
    width = graph.n_ops + min(graph.n_edges, graph.n_tensors * (d - 1))
    orders = np.zeros((placements.shape[0], width), dtype=np.int64)
    lengths = np.zeros(placements.shape[0], dtype=np.int64)
    uniforms = rng.random((placements.shape[0], width))
    _random_orders(graph.arrays, problem.machine.arrays, placements, uniforms, orders, lengths)
    return orders, lengths


@dataclass(frozen=True)
class RandomSearchConfig:
    """Options of random search."""

    batch_size: int = 64
    """Random solutions drawn and scored together (in parallel)."""

    def __post_init__(self) -> None:
        check_integer("batch_size", self.batch_size)


class RandomSearch(Solver):
    """Random placements (pins kept) with uniformly random valid orders, best kept."""

    name = "random-search"

    def __init__(self, config: RandomSearchConfig | None = None) -> None:
        self.config = config or RandomSearchConfig()

    def run(self, problem: Problem, tracker: Tracker, rng: Rng, initial: Initial) -> None:
        """Draws and scores batches until the budget is spent."""
        while True:
            placements = random_placements(
                problem, min(self.config.batch_size, tracker.remaining), rng
            )
            orders, lengths = random_orders(problem, placements, rng)
            peaks, makespans, _ = problem.scorer.evaluate_population(placements, orders, lengths)
            excess, value = problem.fitness(peaks, makespans)
            tracker.offer_population(placements, orders, lengths, excess, value)
