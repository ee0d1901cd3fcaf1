"""GDP's human-expert placement: whole modules, contiguous runs of about equal runtime."""

from __future__ import annotations

import numpy as np
import pytest

from graphopt.costmodels._reference import reference_score
from graphopt.costmodels.machine import Machine
from graphopt.evaluation.fusion_bench import zoo_training_graphs
from graphopt.ir.generators import generate
from graphopt.solvers.base import Budget, Problem
from graphopt.solvers.expert import ExpertPlacement, expert_placement, op_modules


@pytest.fixture(scope="module")
def gpt2():
    return zoo_training_graphs(["gpt2-tiny"])[0]


@pytest.mark.parametrize("n_devices", [2, 4])
def test_modules_stay_whole_and_runs_are_contiguous_and_balanced(gpt2, n_devices) -> None:
    module = op_modules(gpt2)
    placement = expert_placement(gpt2, n_devices)
    assert (module >= 0).all() and set(placement.tolist()) == set(range(n_devices))
    for index in np.unique(module):
        assert len(set(placement[module == index].tolist())) == 1  # a module on one device
    # Modules in order of first appearance: their devices never go back.
    device_of = [int(placement[module == index][0]) for index in range(module.max() + 1)]
    assert device_of == sorted(device_of)
    runtime = np.bincount(placement, weights=gpt2.op_runtime, minlength=n_devices)
    largest = np.bincount(module, weights=gpt2.op_runtime).max()
    assert np.abs(runtime - runtime.sum() / n_devices).max() <= largest


def test_backward_ops_join_the_module_they_differentiate(gpt2) -> None:
    names = [attrs.get("module") for attrs in gpt2.op_attrs]
    module = op_modules(gpt2)
    unlabeled = [op for op, name in enumerate(names) if name is None]
    assert unlabeled  # a training graph's backward ops have no module stack
    # Each takes the module of some op at the nearest distance: a neighbour's, when one has one.
    for op in unlabeled:
        neighbours = [*gpt2.predecessors(op), *gpt2.successors(op)]
        labelled = [n for n in neighbours if names[n] is not None]
        if labelled:
            assert module[op] in {module[n] for n in labelled}


def test_a_graph_without_modules_is_cut_along_its_topological_order() -> None:
    graph = generate("layered", 90, seed=3)
    placement = expert_placement(graph, 3)
    along = placement[graph.topological_order]
    assert (np.diff(along) >= 0).all() and set(along.tolist()) == {0, 1, 2}


def test_the_solver_offers_a_valid_exactly_scored_solution(gpt2) -> None:
    machine = Machine(n_devices=2, latency=1e-5, bandwidth=1e10)
    result = ExpertPlacement().solve(Problem(gpt2, machine, "makespan"), Budget(evaluations=1))
    assert reference_score(gpt2, result.solution, machine).makespan == result.value
    np.testing.assert_array_equal(result.solution.placement, expert_placement(gpt2, 2))
