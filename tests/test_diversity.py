"""Diversity measures of paper 004 (E.2) on hand-made schedules and against the GFlowNet proxy."""

from __future__ import annotations

import math

import numpy as np
import pytest

from builders import graph, op, tensor
from graphopt.costmodels.machine import Machine
from graphopt.evaluation.diversity import (
    chain_edges,
    op_order,
    pairwise_diversity,
    proxy_start_times,
)
from graphopt.learning.systems.gflownet.env import PartialSchedules
from strategies import random_graph


def four_loners():
    return graph(
        [op("a"), op("b"), op("c"), op("d")],
        [tensor(f"{x}:0", 8, x) for x in "abcd"],
    )


def test_two_schedules_that_share_no_chain_edge() -> None:
    g = four_loners()
    a, b, c, d = range(4)
    first = (np.array([0, 0, 1, 1]), np.array([a, b, c, d]))
    second = (np.array([0, 1, 0, 1]), np.array([a, c, b, d]))
    assert chain_edges(*first) == {(a, b), (c, d)}
    diversity = pairwise_diversity(g, Machine(2), [first, second])
    assert diversity.ged == 1.0
    assert diversity.d_inv == pytest.approx(math.sqrt(2))  # b and c swap start times 0 and 1
    assert diversity.d_sen == pytest.approx(2.0)  # and devices
    same = pairwise_diversity(g, Machine(2), [first, first, first])
    assert same == (0.0, 0.0, 0.0)
    assert pairwise_diversity(g, Machine(2), [first]) == (0.0, 0.0, 0.0)


@pytest.mark.parametrize("seed", range(8))
def test_proxy_start_times_are_the_environments(seed: int) -> None:
    rng = np.random.default_rng(seed)
    g = random_graph(rng, int(rng.integers(1, 20)), 0.3)
    machine = (Machine(3), Machine(2, latency=0.2, bandwidth=500.0, mode="async"))[seed % 2]
    env = PartialSchedules(g, machine, 2)
    while not env.done:
        ready = env.forward_mask()
        ops = np.array([rng.choice(np.flatnonzero(row)) for row in ready])
        env.step(ops, rng.integers(0, machine.n_devices, 2))
    placements, events = env.solutions()
    for b in range(2):
        order = op_order(events[b], g.n_ops)
        assert order.tolist() == env.order[b].tolist()
        starts = proxy_start_times(g, machine, placements[b], order)
        assert np.allclose(starts, env.start[b], rtol=1e-12, atol=1e-12)
