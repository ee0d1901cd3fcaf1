"""Graph partitioning + DFS scheduling (GP+DFS), the placement baseline of paper 001 section 4.2.

REGAL compares against "the graph partitioning baseline for device placement" combined with an
XLA-like depth-first scheduler: partition the ops over the devices so that few bytes cross
devices while each device gets a fair share of the work, then order each device's ops depth
first. The paper uses XLA's modified Kernighan-Lin (Kernighan and Lin 1970) and notes METIS
(Karypis and Kumar 1998) as the faster, usually weaker alternative; both are here.

The partitioning objective is the exact transfer volume of docs/format.md section 2: a tensor
crosses to every device that holds one of its consumers, other than its producer's device. That
is the (lambda - 1) connectivity of the hypergraph whose nets are tensors (pins: producer and
consumers), so both partitioners refine that metric directly:

- `kernighan_lin_partition` runs recursive bisection; each bisection takes the best of several
  initial splits (a topological-order split and breadth-first growths), each improved by
  Fiduccia-Mattheyses passes (the linear-time form of Kernighan-Lin: single-vertex moves chosen
  from gain heaps, every vertex moved once per pass, the best prefix of the pass kept). Cut nets
  are split between the two halves, so the cuts of all levels add up to the (lambda - 1) volume.
  A greedy k-way pass (METIS-style boundary refinement) polishes the result for d > 2.
- `metis_partition` calls METIS through pymetis on the op graph (edge weight: bytes of the
  tensors between two ops), moves pinned ops to their devices after relabelling parts to agree
  with the pins, and polishes with the same k-way pass.

Balance: the weight of an op is its runtime ("runtime") or the bytes it produces ("memory"); a
device may hold at most max((1 + imbalance) W / d, W / d + w_max) of the total weight W, where
w_max is the heaviest op, since no partition can beat one op's granularity. Pinned ops never move.

The modules, along those seams: `weights` (balance and volume), `hypergraph` (tensors as nets),
`fm` (Fiduccia-Mattheyses bisection, numba), `kway` (k-way refinement, numba), `kl` (recursive
bisection), `backends` (METIS and Mt-KaHyPar) and `solvers` (the GP+DFS solvers). This package
is their public face.
"""

from graphopt.solvers.partition.backends import hypergraph_partition, metis_partition
from graphopt.solvers.partition.kl import kernighan_lin_partition
from graphopt.solvers.partition.solvers import (
    HYPERGRAPH,
    STRONG,
    GraphPartitionConfig,
    HypergraphSolver,
    KernighanLinSolver,
    MetisSolver,
    offer_partition,
    weightings,
)
from graphopt.solvers.partition.weights import (
    Balance,
    device_loads,
    load_limit,
    memory_weights,
    transfer_volume,
    vertex_weights,
)

__all__ = [
    "HYPERGRAPH",
    "STRONG",
    "Balance",
    "GraphPartitionConfig",
    "HypergraphSolver",
    "KernighanLinSolver",
    "MetisSolver",
    "device_loads",
    "hypergraph_partition",
    "kernighan_lin_partition",
    "load_limit",
    "memory_weights",
    "metis_partition",
    "offer_partition",
    "transfer_volume",
    "vertex_weights",
    "weightings",
]
