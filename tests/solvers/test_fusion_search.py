"""Searching fusion with placement and order: fusion genes in the random-key chromosome.

With `Problem.fusion`, the decoder reads one fusion priority per op after REGAL's keys and
GO's decoder turns them into groups on the decoded placement and order. The tests check that
every decoded solution is legal and scored exactly, that a population is decoded as its members
one by one, that keys without fusion decode as before, and that BRKGA then finds fused
solutions faster than any unfused one (the unfused makespan on one device is the total runtime).
"""

from __future__ import annotations

import numpy as np
import pytest

from graphopt import optimize
from graphopt.costmodels._reference import reference_score
from graphopt.costmodels.machine import Machine
from graphopt.costmodels.score import score
from graphopt.errors import SolutionError
from graphopt.ir.generators import generate
from graphopt.ir.solution import Solution
from graphopt.solvers.base import Budget, Problem
from graphopt.solvers.brkga import BRKGA
from graphopt.solvers.fusion import greedy_fusion
from graphopt.solvers.local_search import LocalSearch
from graphopt.solvers.random_keys import RandomKeyDecoder


@pytest.mark.parametrize(("n_devices", "seed"), [(1, 0), (2, 1), (3, 2)])
def test_decoded_fused_solutions_are_legal_and_scored_exactly(n_devices, seed) -> None:
    graph = generate("layered", 80, seed=seed, fusion=True)
    machine = Machine(n_devices=n_devices, latency=0.01, bandwidth=1e6)
    problem = Problem(graph, machine, "makespan", fusion=True)
    decoder = RandomKeyDecoder(problem)
    keys = np.random.default_rng(seed).random((12, decoder.n_genes))
    population = decoder.evaluate(keys)
    assert population.groups is not None and (population.groups >= 0).any()
    for row in range(keys.shape[0]):
        solution = decoder.decode(keys[row])
        expected = reference_score(graph, solution, machine)
        assert population.makespans[row] == expected.makespan
        assert tuple(population.peaks[row]) == expected.peak_memory_per_device
        np.testing.assert_array_equal(
            population.groups[row], np.full(graph.n_ops, -1) if solution.fusion is None
            else solution.fusion,
        )  # fmt: skip


def test_fusion_genes_switched_off_decode_as_without_fusion() -> None:
    graph = generate("layered", 60, seed=3, fusion=True)
    machine = Machine(n_devices=2)
    plain = RandomKeyDecoder(Problem(graph, machine, "makespan"))
    fused = RandomKeyDecoder(Problem(graph, machine, "makespan", fusion=True))
    assert fused.n_genes == plain.n_genes + graph.n_ops
    keys = np.random.default_rng(0).random(plain.n_genes)
    off = np.concatenate([keys, np.zeros(graph.n_ops)])
    a, b = plain.decode(keys), fused.decode(off)
    assert b.fusion is None
    np.testing.assert_array_equal(a.order, b.order)
    solution = fused.decode(np.concatenate([keys, np.ones(graph.n_ops)]))
    assert solution.fusion is not None
    again = fused.decode(fused.encode(solution))
    assert again.fusion is not None  # a fused seed decodes fused (not always the same groups)


def test_brkga_searching_fusion_beats_every_unfused_solution_on_one_device() -> None:
    graph = generate("layered", 120, seed=5, fusion=True)
    machine = Machine(n_devices=1)
    unfused = BRKGA().solve(Problem(graph, machine, "makespan"), Budget(evaluations=600), 0)
    assert unfused.value == pytest.approx(graph.total_runtime)  # one device: nothing to gain
    problem = Problem(graph, machine, "makespan", fusion=True)
    first = BRKGA().solve(problem, Budget(evaluations=600), 0)
    again = BRKGA().solve(problem, Budget(evaluations=600), 0)
    assert first.value == again.value  # seeded
    assert first.solution.n_groups > 0 and first.value < 0.9 * unfused.value
    assert first.value >= problem.lower_bound
    assert reference_score(graph, first.solution, machine).makespan == first.value


def test_optimize_fusion_search_and_its_bad_input() -> None:
    graph = generate("layered", 100, seed=6, fusion=True)
    result = optimize(graph, Machine(1), "makespan", "brkga", 500, fusion="search")
    assert result.solution.n_groups > 0 and result.value >= result.bound
    assert result.value < graph.total_runtime
    plain = generate("layered", 100, seed=6)
    quiet = optimize(plain, Machine(1), "makespan", "brkga", 200, fusion="search")
    assert quiet.solution.n_groups == 0
    assert any("has a fusion class" in note for note in quiet.solution.solver["notes"])
    bare = plain.with_op_attrs(graph.op_attrs)  # classes, no kernel
    with pytest.raises(SolutionError, match="has no 'kernel' field"):
        optimize(bare, Machine(1), "makespan", "brkga", 200, fusion="search")


def test_optimize_keeps_the_unfused_solution_when_a_policy_would_make_it_worse() -> None:
    graph = generate("layered", 200, seed=4, fusion=True)
    machine = Machine(n_devices=2)
    kept = optimize(graph, machine, "peak-memory", "brkga", 500, seed=0, fusion="default")
    plain = optimize(graph, machine, "peak-memory", "brkga", 500, seed=0)
    assert kept.solution.n_groups == 0 and kept.value == plain.value
    note = kept.solution.solver["notes"][-1]
    assert note.startswith("fusion default: kept the solution without groups; fusing it (")
    assert note.endswith("would leave it worse on peak-memory")
    fused = optimize(graph, machine, "peak-memory", "brkga", 500, seed=0, fusion="greedy")
    assert fused.solution.n_groups > 0 and fused.value < plain.value


def test_local_search_climbs_fusion_priorities_from_its_best_unfused_solution() -> None:
    graph = generate("layered", 200, seed=4, fusion=True)
    machine = Machine(n_devices=1)
    problem = Problem(graph, machine, "makespan", fusion=True)
    first = LocalSearch().solve(problem, Budget(evaluations=3000), 0)
    again = LocalSearch().solve(problem, Budget(evaluations=3000), 0)
    assert first.value == again.value and first.evaluations == 3000  # seeded, on budget
    greedy = greedy_fusion(graph, Solution(first.solution.placement, first.solution.order, 1))
    # Climbing the priorities from the all-ones start (greedy's equal) gains on greedy fusion.
    assert first.solution.n_groups > 0 and first.value < score(graph, greedy, machine).makespan
    assert reference_score(graph, first.solution, machine).makespan == first.value
    two = Problem(graph, Machine(n_devices=2), "makespan", fusion=True)
    unfused = LocalSearch().solve(Problem(graph, Machine(n_devices=2), "makespan"), Budget(1500), 0)
    # On two devices groups only delay this graph: the climb keeps its unfused best.
    assert LocalSearch().solve(two, Budget(evaluations=3000), 0).value <= unfused.value


def test_local_search_with_fusion_on_a_graph_without_classes_climbs_the_other_genes() -> None:
    fused = generate("layered", 40, seed=2, fusion=True)  # a kernel, but every class "none":
    graph = fused.with_op_attrs([{**a, "fusion": "none"} for a in fused.op_attrs])
    assert not graph.op_fusion.any()  # the chromosome has no fusion genes
    problem = Problem(graph, Machine(n_devices=2), "makespan", fusion=True)
    result = LocalSearch().solve(problem, Budget(evaluations=600), 0)
    assert result.solution.n_groups == 0
    assert reference_score(graph, result.solution, problem.machine).makespan == result.value
