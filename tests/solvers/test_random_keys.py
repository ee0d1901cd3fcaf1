"""Random-key decoding: the numba kernel against the plain twin, encoding, pins, shapes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import tiny
from graphopt.costmodels._reference import reference_check, reference_score
from graphopt.costmodels.machine import Machine
from graphopt.costmodels.validity import Violation
from graphopt.ir.generators import generate
from graphopt.solvers._reference import reference_decode
from graphopt.solvers.base import Objective, Problem, SolverError
from graphopt.solvers.random_keys import (
    BUCKETS,
    ChromosomeLayout,
    RandomKeyDecoder,
    _enqueue,
    pack,
    symmetry_pins,
)
from strategies import graphs, machines, problems


@st.composite
def keys_for(draw: st.DrawFn, n_genes: int) -> np.ndarray:
    """Chromosomes: uniform keys, or few distinct values so that ties happen often."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if draw(st.booleans()):
        return rng.random((3, n_genes))
    return rng.integers(0, 3, (3, n_genes)) / 2.0


@settings(max_examples=400, deadline=None)
@given(graphs(), machines(), st.data())
def test_kernel_equals_reference_decoder_and_scorer(graph, machine, data) -> None:
    problem = Problem(graph, machine)
    decoder = RandomKeyDecoder(problem, symmetry_breaking=data.draw(st.booleans()))
    keys = data.draw(keys_for(decoder.n_genes))
    decoded = decoder.evaluate(keys)
    for b in range(keys.shape[0]):
        expected = reference_decode(graph, keys[b], machine.n_devices, decoder.pins)
        order = decoded.orders[b, : decoded.lengths[b]]
        np.testing.assert_array_equal(decoded.placements[b], expected.placement)
        np.testing.assert_array_equal(order, expected.order)
        assert reference_check(graph, expected)[0] == Violation.NONE
        score = reference_score(graph, expected, machine)
        assert tuple(decoded.peaks[b]) == score.peak_memory_per_device
        assert decoded.makespans[b] == score.makespan


@settings(max_examples=300, deadline=None)
@given(problems())
def test_encode_reproduces_any_valid_solution(problem) -> None:
    graph, machine, solution = problem
    decoder = RandomKeyDecoder(Problem(graph, machine), symmetry_breaking=False)
    decoded = decoder.decode(decoder.encode(solution))
    np.testing.assert_array_equal(decoded.placement, solution.placement)
    np.testing.assert_array_equal(decoded.order, solution.order)


@pytest.mark.parametrize("keys", ["uniform", "coarse", "ones"])
def test_kernel_equals_reference_when_ready_buckets_collide(keys: str) -> None:
    """Large ready sets put several entries in one bucket of the decoder's queue (its overflow
    heap then decides), and a priority of exactly 1.0 packs to 2^62, one past the top bucket."""
    graph = generate("layered", 600, seed=3)
    machine = Machine(n_devices=3)
    decoder = RandomKeyDecoder(Problem(graph, machine), symmetry_breaking=False)
    rng = np.random.default_rng(7)
    chromosomes = {
        "uniform": rng.random((2, decoder.n_genes)),
        "coarse": rng.integers(0, 64, (2, decoder.n_genes)) / 63.0,
        "ones": np.ones((2, decoder.n_genes)),
    }[keys]
    decoded = decoder.evaluate(chromosomes)
    for b in range(chromosomes.shape[0]):
        expected = reference_decode(graph, chromosomes[b], 3, decoder.pins)
        np.testing.assert_array_equal(decoded.orders[b, : decoded.lengths[b]], expected.order)
        score = reference_score(graph, expected, machine)
        assert decoded.makespans[b] == score.makespan
        assert tuple(decoded.peaks[b]) == score.peak_memory_per_device


def test_top_priority_takes_the_top_bucket() -> None:
    buckets = np.empty(BUCKETS, dtype=np.int64)
    leaves = np.zeros(BUCKETS >> 6, dtype=np.int64)
    heap = np.full(3, -1, dtype=np.int64)
    top = pack(1.0, 0, 4)
    assert top >> 62 == 1  # 2^58 - 1 levels round up to 2^58 in floating point
    summary, size = _enqueue(buckets, leaves, 0, heap, 0, top)
    assert (summary, size, leaves[-1], buckets[-1]) == (-(1 << 63), 0, -(1 << 63), top)
    summary, size = _enqueue(buckets, leaves, summary, heap, size, pack(1.0, 1, 4))
    assert (size, heap[0]) == (1, pack(1.0, 1, 4))


def test_layout_and_argmax_placement() -> None:
    graph = tiny()  # ops a, b, c; tensors a:0, b:0, c:0
    layout = ChromosomeLayout(graph.n_ops, graph.n_tensors, 2)
    assert (layout.op_priority, layout.transfer_priority, layout.size) == (6, 9, 15)
    decoder = RandomKeyDecoder(Problem(graph, Machine(2)), symmetry_breaking=False)
    keys = np.zeros(layout.size)
    keys[[1, 2, 5]] = 1.0  # a -> device 1, b -> device 0, c -> device 1
    assert decoder.decode(keys).placement.tolist() == [1, 0, 1]


def test_priorities_break_ties_between_ready_events() -> None:
    graph = tiny()  # a feeds b and c; b feeds c
    decoder = RandomKeyDecoder(Problem(graph, Machine(1)))
    keys = np.zeros(decoder.n_genes)
    assert decoder.decode(keys).order.tolist() == [0, 1, 2]


def test_pins_and_symmetry_breaking() -> None:
    graph = tiny()
    pins = symmetry_pins(graph, 2)
    assert pins.tolist() == [-1, -1, 0]  # c reads 500 bytes and writes 100: the most
    pinned = Problem(graph, Machine(3), pinned=np.array([-1, 2, 2]))
    decoder = RandomKeyDecoder(pinned)
    rng = np.random.default_rng(0)
    placements = decoder.evaluate(rng.random((20, decoder.n_genes))).placements
    assert (placements[:, 1:] == 2).all()
    assert len(set(placements[:, 0].tolist())) > 1  # pins replace symmetry breaking


def test_wrong_chromosome_length_names_the_parts() -> None:
    decoder = RandomKeyDecoder(Problem(tiny(), Machine(2)))
    with pytest.raises(SolverError, match="needs 15 .*3 ops x 2 devices affinities"):
        decoder.decode(np.zeros(7))


def test_fitness_ranks_feasible_first() -> None:
    graph = tiny()
    problem = Problem(graph, Machine(2, capacity=450), objective=Objective.MAKESPAN)
    excess, value = problem.fitness(np.array([[500, 0], [400, 400]]), np.array([1.0, 9.0]))
    assert excess.tolist() == [50, 0]
    assert value.tolist() == [1.0, 9.0]
    assert np.lexsort((value, excess)).tolist() == [1, 0]
