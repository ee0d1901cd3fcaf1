"""The fused makespan bound: below every fused solution, and tight where launches dominate.

Each op weighs the least it can cost (runtime alone, compute time in a group, plus the launch
for the group's one contraction), so the bound must hold for any placement, order and grouping:
checked on many random graphs against fused solutions decoded from random keys, half of them
fusing every legal pair. On a chain of contractions no grouping can save a launch, which the
bound knows and the old compute-only bound did not.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from graphopt.costmodels.machine import Machine
from graphopt.costmodels.score import score
from graphopt.ir.generators import FAMILIES, generate
from graphopt.ir.graph import Graph
from graphopt.ir.solution import Solution
from graphopt.solvers.base import Problem
from graphopt.solvers.bounds import fused_makespan_lower_bound, makespan_lower_bound
from graphopt.solvers.random_keys import RandomKeyDecoder


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 100_000),
    family=st.sampled_from(sorted(FAMILIES)),
    n_devices=st.integers(1, 4),
    n_ops=st.integers(12, 70),
)
def test_no_fused_solution_beats_the_bound(seed: int, family: str, n_devices: int, n_ops: int):
    graph = generate(family, n_ops, seed=seed, fusion=True)
    machine = Machine(n_devices=n_devices)  # free transfers: the most a schedule can gain
    decoder = RandomKeyDecoder(Problem(graph, machine, "makespan", fusion=True))
    keys = np.random.default_rng(seed).random((16, decoder.n_genes))
    keys[:8, -graph.n_ops :] = 0.999  # every fusion priority high: fuse all that may
    makespans = decoder.evaluate(keys).makespans
    bound = fused_makespan_lower_bound(graph, n_devices)
    assert makespans.min() >= bound * (1 - 1e-12)
    assert bound <= makespan_lower_bound(graph, machine) * (1 + 1e-12)


def _contractions(n: int, launch: float | None) -> Graph:
    """A chain of `n` matmuls, each 1 s of launch-bound runtime and no arithmetic (no kernel:
    None)."""
    graph = Graph.from_arrays(
        "matmuls", [f"m{i}" for i in range(n)], [1.0] * n, [f"m{i}:0" for i in range(n)],
        [8] * n, list(range(n)), [*range(n), n - 1], list(range(1, n)),
    )  # fmt: skip
    graph = graph.with_op_attrs([{"fusion": "contraction", "compute_time": 0.0}] * n)
    if launch is None:
        return graph
    return graph.with_attrs(kernel={"memory_bandwidth": 1e12, "launch_overhead": launch})


def test_the_bound_counts_a_launch_per_contraction() -> None:
    graph = _contractions(5, launch=1.0)
    chain = score(graph, Solution(np.zeros(5), np.arange(5), 1))
    assert chain.makespan == 5.0
    assert fused_makespan_lower_bound(graph, 1) == 5.0  # tight: no group holds two matmuls
    assert fused_makespan_lower_bound(graph, 4) == 5.0  # the chain, whatever the devices
    cheaper = _contractions(5, launch=0.25)  # each alone in a group: 0.25 instead of 1
    assert fused_makespan_lower_bound(cheaper, 1) == 5 * 0.25
    plain = _contractions(5, launch=None)
    assert fused_makespan_lower_bound(plain, 2) == makespan_lower_bound(plain, Machine(2))
