"""GO's per-device ready-queue scheduler against its plain twin and the scorer."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.strategies import graphs, machines

from graphopt.costmodels.machine import Machine
from graphopt.costmodels.score import Scorer
from graphopt.ir.generators import generate
from graphopt.solvers._reference import reference_ready_queue_order
from graphopt.solvers.events import events_from_op_order
from graphopt.solvers.list_scheduling import bottom_levels, priority_order
from graphopt.solvers.ready_queue import ready_queue_orders


@settings(max_examples=400, deadline=None)
@given(graph=graphs(max_ops=30), machine=machines(), seed=st.integers(0, 2**32 - 1))
def test_kernel_equals_reference_and_orders_are_valid(graph, machine, seed) -> None:
    rng = np.random.default_rng(seed)
    d = machine.n_devices
    placements = rng.integers(0, d, (3, graph.n_ops)).astype(np.int32)
    # Few priority levels, so that ties between ops are common and their rule is exercised.
    priorities = rng.integers(0, 3, (3, graph.n_ops)).astype(np.float64)
    orders, lengths = ready_queue_orders(graph, machine, placements, priorities)
    scorer = Scorer(graph, machine)
    for b in range(3):
        expected = reference_ready_queue_order(graph, machine, placements[b], priorities[b])
        assert orders[b, : lengths[b]].tolist() == expected
        _, _, (violation, _, _) = scorer.evaluate(placements[b], orders[b, : lengths[b]])
        assert violation == 0


def test_one_device_runs_the_priority_order() -> None:
    graph = generate("layered", 300, seed=3)
    placement = np.zeros(graph.n_ops, dtype=np.int32)
    orders, lengths = ready_queue_orders(graph, Machine(n_devices=1), placement)
    assert lengths[0] == graph.n_ops
    np.testing.assert_array_equal(orders[0], priority_order(graph, bottom_levels(graph)))


def test_ready_queues_beat_one_global_priority_list() -> None:
    """The same placements and priorities, run as one topological list (a device waits for the
    next op of the list even while another of its ops is ready): the ready queues finish sooner."""
    graph = generate("layered", 120, seed=5)
    machine = Machine(n_devices=2, latency=1.0, bandwidth=1e3)
    placements = np.random.default_rng(0).integers(0, 2, (8, graph.n_ops)).astype(np.int32)
    orders, lengths = ready_queue_orders(graph, machine, placements)
    scorer = Scorer(graph, machine)
    listed = priority_order(graph, bottom_levels(graph))
    ours = [scorer.evaluate(p, orders[b, : lengths[b]])[1] for b, p in enumerate(placements)]
    theirs = [scorer.evaluate(p, events_from_op_order(graph, p, listed, 2))[1] for p in placements]
    assert np.mean(ours) < np.mean(theirs)
