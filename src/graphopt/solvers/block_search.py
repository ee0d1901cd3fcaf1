"""Block moves between devices: the local search that matters on real models.

Single-op moves (`local_search`) rarely help a real model spread over devices: moving one
weight away from its readers only adds a copy, and moving one reader away from its weight adds
one too. What a person does instead is move a whole module (a transformer block, a CNN stage),
or a run of consecutive ops, to another device, or swap two such blocks. This search does that:

- blocks are modules (ops grouped by the `module` attribute importers record, or by the prefix
  of a parameter's name, at every depth of the module path) and runs of consecutive ops of one
  device in the current order;
- a move takes a block from a device (most often the one with the highest peak, since the peak
  is the largest device's) to another (most often the least loaded one), or swaps two blocks;
- a moved solution keeps its op order (each device's order is unchanged except for what moved)
  with transfers placed right before their first reader, and is scored exactly; when a move
  improves, each device's best compiler order for the new placement is tried too
  (`device_orders`), with lazy and eager transfers.

It climbs (best of a sampled neighbourhood, ties taken to walk plateaus of the max) from each
starting solution in turn, the tracker's best first, until `patience` steps fail to improve.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from graphopt.ir.graph import Graph
from graphopt.ir.solution import Solution
from graphopt.solvers.base import Initial, Problem, Rng, Solver, Tracker
from graphopt.solvers.checks import check_fields
from graphopt.solvers.device_orders import device_order_candidates
from graphopt.solvers.events import events_from_op_order, offer_op_order


def module_blocks(graph: Graph) -> list[np.ndarray]:
    """Ops grouped by module path at every depth, each group of at least two ops.

    An op's path is its `module` attribute (importers record the module that ran it) or, for a
    parameter or buffer, its name without the last component ("h.0.attn.c_attn.weight" ->
    "h.0.attn.c_attn"); the groups are all ops whose path starts with "h", "h.0", "h.0.attn",
    and so on. Ops with neither belong to no module block.
    """
    groups: dict[str, list[int]] = {}
    for op, (name, attrs) in enumerate(zip(graph.op_names, graph.op_attrs, strict=True)):
        path = attrs.get("module")
        if not isinstance(path, str) and attrs.get("kind") in ("parameter", "buffer"):
            path = name.rsplit(".", 1)[0] if "." in name else None
        if not isinstance(path, str) or not path:
            continue
        parts = path.split(".")
        for depth in range(1, len(parts) + 1):
            groups.setdefault(".".join(parts[:depth]), []).append(op)
    blocks = {tuple(ops) for ops in groups.values() if 2 <= len(ops) < graph.n_ops}
    return [np.array(ops, dtype=np.int64) for ops in sorted(blocks)]


@dataclass(frozen=True)
class BlockSearchConfig:
    """Options of the block search."""

    neighbourhood_size: int = 24
    """Moves sampled and scored at each step."""
    patience: int = 12
    """Consecutive steps without a strict improvement before the next start."""
    max_run: int = 64
    """Longest run of consecutive ops moved at once."""
    module_probability: float = 0.5
    """Chance that a move takes a module rather than a run of consecutive ops."""
    swap_probability: float = 0.25
    """Chance that a move also brings a block back from the target device."""
    bottleneck_probability: float = 0.7
    """Chance that a move starts from the device with the highest peak."""

    def __post_init__(self) -> None:
        check_fields(
            self,
            integer=("neighbourhood_size", "patience", "max_run"),
            probability=("module_probability", "swap_probability", "bottleneck_probability"),
        )


class BlockSearch(Solver):
    """Hill climbing over module and run moves between devices (module docstring)."""

    name = "block-search"

    def __init__(self, config: BlockSearchConfig | None = None) -> None:
        self.config = config or BlockSearchConfig()

    def run(self, problem: Problem, tracker: Tracker, rng: Rng, initial: Initial) -> None:
        """Climbs from the tracker's best, then from each initial solution.

        With nothing to move (one device, fewer than two ops) it only scores its first start.
        """
        graph, n_devices = problem.graph, problem.machine.n_devices
        starts = [
            start
            for start in initial
            if start.n_devices == n_devices and start.placement.shape[0] == graph.n_ops
        ]
        if tracker.best_placement is not None and tracker.best_order is not None:
            starts.insert(0, Solution(tracker.best_placement, tracker.best_order, n_devices))
        if not starts:
            placement = np.zeros(graph.n_ops, dtype=np.int32)
            if problem.pinned is not None:
                placement = np.maximum(problem.pinned, 0).astype(np.int32)
            order = np.array(graph.topological_order, dtype=np.int64)
            starts = [
                Solution(
                    placement, events_from_op_order(graph, placement, order, n_devices), n_devices
                )
            ]
        climb = _Climb(problem, tracker, rng, self.config, module_blocks(graph))
        for start in starts:
            placement = np.asarray(start.placement, dtype=np.int32)
            if n_devices == 1 or graph.n_ops < 2:
                climb.score(placement, _op_order(graph, start.order))
                return
            climb.run(placement, np.asarray(start.order))


def _op_order(graph: Graph, order: np.ndarray) -> np.ndarray:
    """The op events of an event order, in order."""
    order = np.asarray(order, dtype=np.int64)
    return order[order < graph.n_ops]


class _Climb:
    """One search's state: its problem, blocks and scoring; `run` climbs from one start."""

    def __init__(
        self,
        problem: Problem,
        tracker: Tracker,
        rng: np.random.Generator,
        config: BlockSearchConfig,
        modules: list[np.ndarray],
    ) -> None:
        self.problem, self.tracker, self.rng, self.config = problem, tracker, rng, config
        self.graph = problem.graph
        self.n_devices = problem.machine.n_devices
        self.modules = modules
        pins = problem.pinned
        self.free = np.ones(self.graph.n_ops, dtype=bool) if pins is None else pins < 0

    def score(
        self, placement: np.ndarray, op_order: np.ndarray
    ) -> tuple[tuple[int, float, int], np.ndarray]:
        """Scores the placement with the op order and lazy transfers, offers it; (key, peaks)."""
        peaks, makespan = offer_op_order(self.problem, self.tracker, placement, op_order)
        excess, value = self.problem.fitness(peaks[None], np.array([makespan]))
        return (int(excess[0]), float(value[0]), int(peaks.sum())), peaks

    def reorder(
        self, placement: np.ndarray, op_order: np.ndarray, key: tuple[int, float, int]
    ) -> tuple[np.ndarray, tuple[int, float, int]]:
        """Each device's best compiler order for the placement, kept when it scores better."""
        for candidate in device_order_candidates(self.problem, placement):
            candidate_key, _ = self.score(placement, candidate)
            if candidate_key < key:
                op_order, key = candidate, candidate_key
        return op_order, key

    def run(self, placement: np.ndarray, order: np.ndarray) -> None:
        """Climbs from one solution until `patience` steps fail to improve."""
        op_order = _op_order(self.graph, order)
        key, peaks = self.score(placement, op_order)
        stale = 0
        while stale < self.config.patience:
            best: tuple[tuple[int, float, int], np.ndarray, np.ndarray] | None = None
            for _ in range(self.config.neighbourhood_size):
                moved = self.move(placement, op_order, peaks)
                if moved is None:
                    continue
                moved_key, moved_peaks = self.score(moved, op_order)
                if best is None or moved_key < best[0]:
                    best = (moved_key, moved, moved_peaks)
            if best is None:
                return
            improved = best[0][:2] < key[:2]
            if best[0] <= key:
                key, placement, peaks = best
                if improved:
                    op_order, key = self.reorder(placement, op_order, key)
            stale = 0 if improved else stale + 1

    def move(
        self, placement: np.ndarray, op_order: np.ndarray, peaks: np.ndarray
    ) -> np.ndarray | None:
        """A placement with one block moved to another device, or two blocks swapped."""
        rng, config = self.rng, self.config
        used = np.bincount(placement, minlength=self.n_devices) > 0
        if rng.random() < config.bottleneck_probability:
            source = int(np.argmax(peaks))
        else:
            source = int(rng.choice(np.flatnonzero(used)))
        others = [x for x in range(self.n_devices) if x != source]
        if rng.random() < 0.5:
            target = min(others, key=lambda x: (peaks[x], x))
        else:
            target = int(rng.choice(others))
        block = self.block(placement, op_order, source)
        if block is None:
            return None
        moved = placement.copy()
        moved[block] = target
        if rng.random() < config.swap_probability:
            back = self.block(placement, op_order, target)
            if back is not None:
                moved[back] = source
        return moved

    def block(self, placement: np.ndarray, op_order: np.ndarray, device: int) -> np.ndarray | None:
        """Free ops of a module, or a run of consecutive ops, on `device`; None if none."""
        on_device = op_order[(placement[op_order] == device) & self.free[op_order]]
        if on_device.size == 0:
            return None
        if self.modules and self.rng.random() < self.config.module_probability:
            module = self.modules[int(self.rng.integers(len(self.modules)))]
            members = module[(placement[module] == device) & self.free[module]]
            if members.size:
                return members
        length = min(
            1 + int(self.rng.geometric(1.0 / math.sqrt(self.config.max_run))), self.config.max_run
        )
        start = int(self.rng.integers(on_device.size))
        return on_device[start : start + length]
