"""Contiguous pipeline splits: what a person splitting a model into stages over d devices does.

The ops, in a topological order (the program's own order, or a compiler's memory order), are cut
into d consecutive stages, stage k on device k. The first cuts put about W / d of the weight in
each stage (weights as in `partition.memory_weights` for peak memory, runtimes for makespan);
then each cut point is moved by halving steps while the exact score improves (coordinate
descent, every candidate scored by the cost model and offered to the tracker). The best split
is finally offered with every compiler order per device (`device_orders`).

Every stage boundary is crossed by the tensors that flow over it, so a split of a layered model
(a transformer's blocks, a CNN's stages) transfers one activation per boundary, and weights stay
with the ops that read them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from graphopt.solvers.base import Initial, Objective, Problem, Rng, Solver, SolverError, Tracker
from graphopt.solvers.device_orders import device_order_candidates
from graphopt.solvers.events import offer_op_order, offer_op_orders
from graphopt.solvers.memory_schedulers import OrderFunction, dfs_order, graph_order, list_order
from graphopt.solvers.partition import memory_weights


def stage_cuts(weights: np.ndarray, n_devices: int) -> np.ndarray:
    """[d - 1] first positions of stages 1..d-1 that give each stage about W / d of the weight.

    An op goes to the stage in which the midpoint of its weight falls, so no stage is empty
    while the ops outnumber the stages; with no weight at all the ops are split by count.

    Args:
        weights: [n] weights of the ops in stage order.
        n_devices: number of stages d.
    """
    n = weights.shape[0]
    total = float(weights.sum())
    if total <= 0:
        midpoint, total = np.arange(n) + 0.5, float(n)
    else:
        midpoint = np.cumsum(weights) - 0.5 * weights
    stage = np.minimum((midpoint * n_devices / total).astype(np.int64), n_devices - 1)
    return np.searchsorted(stage, np.arange(1, n_devices)).astype(np.int64)


def split_placement(op_order: np.ndarray, cuts: np.ndarray, pins: np.ndarray) -> np.ndarray:
    """[n_ops] int32 stage of each op for cut positions along `op_order`; pins override."""
    stage = np.searchsorted(cuts, np.arange(op_order.shape[0]), side="right")
    placement = np.empty(op_order.shape[0], dtype=np.int32)
    placement[op_order] = stage
    return np.where(pins >= 0, pins, placement).astype(np.int32)


@dataclass(frozen=True)
class PipelineConfig:
    """Options of the pipeline split."""

    orders: tuple[str, ...] = ("graph", "dfs", "list")
    """Op orders split into stages: the graph's own, XLA's DFS and list memory orders."""
    activation_scales: tuple[float, ...] = (0.0, 0.1, 1.0)
    """For peak memory, weights balanced by the first cuts (`partition.memory_weights`)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "orders", tuple(self.orders))
        object.__setattr__(self, "activation_scales", tuple(self.activation_scales))
        if not self.orders or any(name not in _ORDERS for name in self.orders):
            raise SolverError(f"orders must be among {', '.join(_ORDERS)}, got {self.orders!r}")
        if not self.activation_scales or any(
            not 0.0 <= value <= 1.0 for value in self.activation_scales
        ):
            raise SolverError(
                f"activation_scales must be numbers in [0, 1], got {self.activation_scales!r}"
            )


_ORDERS: dict[str, OrderFunction] = {"graph": graph_order, "dfs": dfs_order, "list": list_order}


class PipelineSolver(Solver):
    """Contiguous stages along topological orders, cut points refined on the exact score."""

    name = "gp-pipeline"

    def __init__(self, config: PipelineConfig | None = None) -> None:
        self.config = config or PipelineConfig()

    def run(self, problem: Problem, tracker: Tracker, rng: Rng, initial: Initial) -> None:
        """Refines the cuts of every order and weighting; offers the best split's device orders."""
        graph, n_devices = problem.graph, problem.machine.n_devices
        pins = _pins(problem)
        if problem.objective is Objective.PEAK_MEMORY:
            weightings = [memory_weights(graph, scale) for scale in self.config.activation_scales]
        else:
            weightings = [np.asarray(graph.op_runtime, dtype=np.float64)]
        best: tuple[tuple[int, float], np.ndarray] | None = None
        for name in self.config.orders:
            op_order = _ORDERS[name](graph, None, 1)
            for weights in weightings:
                cuts = stage_cuts(weights[op_order], n_devices)
                key, placement = _refine_cuts(problem, tracker, op_order, cuts, pins)
                if best is None or key < best[0]:
                    best = (key, placement)
        if best is not None:
            offer_op_orders(problem, tracker, best[1], device_order_candidates(problem, best[1]))


def _pins(problem: Problem) -> np.ndarray:
    if problem.pinned is None:
        return np.full(problem.graph.n_ops, -1, dtype=np.int32)
    return np.asarray(problem.pinned, dtype=np.int32)


def _refine_cuts(
    problem: Problem, tracker: Tracker, op_order: np.ndarray, cuts: np.ndarray, pins: np.ndarray
) -> tuple[tuple[int, float], np.ndarray]:
    """Coordinate descent on the cut positions, halving the step; returns the best (key, split)."""
    graph, n_devices = problem.graph, problem.machine.n_devices
    cache: dict[bytes, tuple[int, float]] = {}

    def score(candidate: np.ndarray) -> tuple[int, float]:
        if candidate.tobytes() not in cache:
            placement = split_placement(op_order, candidate, pins)
            peaks, makespan = offer_op_order(problem, tracker, placement, op_order)
            excess, value = problem.fitness(peaks[None], np.array([makespan]))
            cache[candidate.tobytes()] = (int(excess[0]), float(value[0]))
        return cache[candidate.tobytes()]

    best = score(cuts)
    step = max(graph.n_ops // (2 * n_devices), 1)
    while step >= 1:
        improved = False
        for i in range(cuts.shape[0]):
            low = cuts[i - 1] if i > 0 else 0
            high = cuts[i + 1] if i + 1 < cuts.shape[0] else graph.n_ops
            for shift in (-step, step):
                if not low <= cuts[i] + shift <= high:
                    continue
                candidate = cuts.copy()
                candidate[i] += shift
                key = score(candidate)
                if key < best:
                    best, cuts, improved = key, candidate, True
        if not improved:
            step //= 2
    return best, split_placement(op_order, cuts, pins)
