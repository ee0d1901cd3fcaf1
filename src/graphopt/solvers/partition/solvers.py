"""The GP+DFS solvers: partition for each weighting and imbalance, order each device, offer.

The Kernighan-Lin solver is paper 001's baseline; the METIS and hypergraph solvers balance
memory-aware weights and try every compiler order per device (`STRONG`, `HYPERGRAPH`).
"""

from __future__ import annotations

import itertools
import math
from abc import abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import ClassVar, get_args

import numpy as np

from graphopt.solvers.base import Initial, Objective, Problem, Rng, Solver, SolverError, Tracker
from graphopt.solvers.device_orders import device_order_candidates
from graphopt.solvers.events import TransferPlacement, offer_op_orders
from graphopt.solvers.memory_schedulers import dfs_order
from graphopt.solvers.partition.backends import hypergraph_partition, metis_partition
from graphopt.solvers.partition.kl import kernighan_lin_partition
from graphopt.solvers.partition.weights import Balance, Weighting, memory_weights


@dataclass(frozen=True)
class GraphPartitionConfig:
    """Options of the graph partitioning solvers (the defaults are paper 001's GP+DFS)."""

    imbalances: tuple[float, ...] = (0.05,)
    """Allowed relative excesses of a device's load over the average; each gives a partition."""
    balances: tuple[Balance, ...] = ("runtime", "memory")
    """Balance modes tried; each gives one partition per imbalance."""
    activation_scales: tuple[float, ...] = ()
    """For peak memory, also balance `memory_weights` at each of these activation scales."""
    transfers: tuple[TransferPlacement, ...] = ("lazy", "eager")
    """Transfer placements tried on each order."""
    device_orders: bool = False
    """Beside the DFS order, try every compiler order and each device's best merged."""
    starts: int = 4
    """Initial splits per bisection (Kernighan-Lin only)."""
    max_passes: int = 16
    """Most refinement passes per bisection and for the k-way pass."""

    def __post_init__(self) -> None:
        for name in ("imbalances", "balances", "activation_scales", "transfers"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        if not self.imbalances or any(
            not math.isfinite(value) or value < 0 for value in self.imbalances
        ):
            raise SolverError(f"imbalances must be finite numbers >= 0, got {self.imbalances!r}")
        if not self.balances or any(b not in get_args(Balance) for b in self.balances):
            raise SolverError(f"balances must be 'runtime' and/or 'memory', got {self.balances}")
        if any(not 0.0 <= value <= 1.0 for value in self.activation_scales):
            raise SolverError(
                f"activation_scales must be numbers in [0, 1], got {self.activation_scales!r}"
            )
        if not self.transfers or any(t not in get_args(TransferPlacement) for t in self.transfers):
            raise SolverError(f"transfers must be 'lazy' and/or 'eager', got {self.transfers}")
        if self.starts < 1 or self.max_passes < 1:
            raise SolverError("starts and max_passes must be >= 1")


STRONG = GraphPartitionConfig(
    imbalances=(0.01, 0.05, 0.2),
    activation_scales=(0.0, 0.01, 0.1, 0.3, 1.0),
    device_orders=True,
)
"""Memory-aware partitioning: weights balanced at several activation scales and imbalances, and
every compiler order per device. The METIS and hypergraph solvers run it with the partitioners'
seed 0 whatever the search's seed, so the baselines inside `auto` are exactly the standalone
ones (weightings and imbalances, not seeds, make the candidates differ)."""


HYPERGRAPH = GraphPartitionConfig(
    imbalances=(0.01, 0.1),
    balances=("runtime",),
    activation_scales=(0.0, 0.1, 1.0),
    device_orders=True,
)
"""`STRONG` thinned to 8 partitions: Mt-KaHyPar takes about 0.4 s per partition of a 2,000-op
graph (METIS 0.02 s), so the hypergraph solver tries the weightings that win most often."""


def weightings(problem: Problem, config: GraphPartitionConfig) -> list[Weighting]:
    """What the partitions balance: the balance modes, and for peak memory `memory_weights`."""
    found: list[Weighting] = list(config.balances)
    if problem.objective is Objective.PEAK_MEMORY:
        found += [memory_weights(problem.graph, scale) for scale in config.activation_scales]
    return found


def offer_partition(
    problem: Problem, tracker: Tracker, placement: np.ndarray, config: GraphPartitionConfig
) -> None:
    """Offers a placement with the DFS order and, when configured, every device order."""
    graph, n_devices = problem.graph, problem.machine.n_devices
    depth_first = dfs_order(graph, placement, n_devices)
    orders: Iterable[np.ndarray] = [depth_first]
    if config.device_orders:
        others = device_order_candidates(problem, placement, {dfs_order: depth_first})
        orders = itertools.chain(orders, others)
    offer_op_orders(problem, tracker, placement, orders, config.transfers)


class _GraphPartitionSolver(Solver):
    """Partition for each weighting and imbalance, then order each device and offer."""

    objectives = frozenset(Objective)

    def __init__(self, config: GraphPartitionConfig | None = None) -> None:
        self.config = config or GraphPartitionConfig()

    @abstractmethod
    def partition(
        self, problem: Problem, balance: Weighting, imbalance: float, rng: Rng
    ) -> np.ndarray:
        """[n_ops] device of each op for one weighting and imbalance."""

    def run(self, problem: Problem, tracker: Tracker, rng: Rng, initial: Initial) -> None:
        """Offers each distinct partition with its orders and transfer placements."""
        seen: set[bytes] = set()
        for balance in weightings(problem, self.config):
            for imbalance in self.config.imbalances:
                placement = self.partition(problem, balance, imbalance, rng)
                if placement.tobytes() not in seen:
                    seen.add(placement.tobytes())
                    offer_partition(problem, tracker, placement, self.config)


class KernighanLinSolver(_GraphPartitionSolver):
    """GP+DFS with the Kernighan-Lin / Fiduccia-Mattheyses partitioner (paper 001, 4.2)."""

    name = "gp-kl"

    def partition(
        self, problem: Problem, balance: Weighting, imbalance: float, rng: Rng
    ) -> np.ndarray:
        """[n_ops] device of each op from `kernighan_lin_partition`."""
        return kernighan_lin_partition(
            problem.graph,
            problem.machine.n_devices,
            balance,
            rng,
            pinned=problem.pinned,
            imbalance=imbalance,
            starts=self.config.starts,
            max_passes=self.config.max_passes,
        )


class _SeededSolver(_GraphPartitionSolver):
    """A partitioner run with seed 0 whatever the search's seed (see `STRONG`)."""

    default: ClassVar[GraphPartitionConfig]
    partitioner: ClassVar[Callable[..., np.ndarray]]

    def __init__(self, config: GraphPartitionConfig | None = None) -> None:
        super().__init__(config or self.default)

    def partition(
        self, problem: Problem, balance: Weighting, imbalance: float, rng: Rng
    ) -> np.ndarray:
        """[n_ops] device of each op from the partitioner with seed 0."""
        return self.partitioner(
            problem.graph,
            problem.machine.n_devices,
            balance,
            0,
            pinned=problem.pinned,
            imbalance=imbalance,
            max_passes=self.config.max_passes,
        )


class MetisSolver(_SeededSolver):
    """METIS partitions balancing weights (`STRONG`), each device's best compiler order."""

    name = "gp-metis"
    default = STRONG
    partitioner = staticmethod(metis_partition)


class HypergraphSolver(_SeededSolver):
    """Mt-KaHyPar partitions balancing weights (`HYPERGRAPH`), each device's best compiler order."""

    name = "gp-hypergraph"
    default = HYPERGRAPH
    partitioner = staticmethod(hypergraph_partition)
