"""Recomputation (docs/format.md section 15): the numba scorer against the plain reference."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphopt.costmodels._reference import reference_check, reference_score
from graphopt.costmodels.machine import Machine
from graphopt.costmodels.score import Scorer
from graphopt.costmodels.validity import Violation
from graphopt.errors import GraphError, SolutionError
from graphopt.ir.graph import Graph
from graphopt.ir.io import solution_from_json, solution_to_json
from graphopt.ir.solution import Solution
from strategies import CORRUPTIONS, corrupt, problems, remat_problems


def _scores_agree(problem) -> None:
    graph, machine, solution = problem
    fast = Scorer(graph, machine).score(solution)
    assert fast == reference_score(graph, solution, machine)


@settings(max_examples=1500, deadline=None)
@given(remat_problems())
def test_fast_equals_reference_when_recomputing(problem) -> None:
    _scores_agree(problem)


@pytest.mark.slow
@settings(max_examples=10_000, deadline=None)
@given(remat_problems())
def test_fast_equals_reference_on_10000_recomputing_cases(problem) -> None:
    _scores_agree(problem)


@settings(max_examples=500, deadline=None)
@given(problems())
def test_a_schedule_without_repeats_scores_the_same_under_either_rules(problem) -> None:
    """Section 15 reduces to sections 4-6 when nothing runs twice: checked against the plain
    scorer, which knows nothing of instances."""
    graph, machine, solution = problem
    scorer = Scorer(graph, machine)
    assert scorer.score(replace(solution, remat=True)) == scorer.score(solution)


@settings(max_examples=1500, deadline=None)
@given(
    remat_problems(),
    st.sampled_from(CORRUPTIONS),
    st.integers(0, 2**32 - 1),
)
def test_fast_and_reference_report_the_same_first_violation(problem, how, seed) -> None:
    _first_violations_agree(problem, how, seed)


@pytest.mark.slow
@settings(max_examples=10_000, deadline=None)
@given(remat_problems(), st.sampled_from(CORRUPTIONS), st.integers(0, 2**32 - 1))
def test_the_first_violation_agrees_on_10000_broken_cases(problem, how, seed) -> None:
    _first_violations_agree(problem, how, seed)


def _first_violations_agree(problem, how: str, seed: int) -> None:
    graph, machine, solution = problem
    broken = corrupt(solution, graph, np.random.default_rng(seed), how)
    scorer = Scorer(graph, machine)
    _, _, status = scorer.evaluate(broken.placement, broken.order, remat=True)
    expected = reference_check(graph, broken)
    assert tuple(int(s) for s in status) == (int(expected[0]), expected[1], expected[2])
    if expected[0] is Violation.NONE:
        assert reference_score(graph, broken, machine) == scorer.score(broken)


def _big_activation() -> Graph:
    """x -> a -> A (1000 B) -> b -> B -> c (2000 B scratch) -> C; d reads C and A (an output)."""
    return Graph.from_arrays(
        "activation",
        ["x", "a", "b", "c", "d"],
        np.ones(5),
        ["X", "A", "B", "C", "D"],
        [1, 1000, 10, 10, 10],
        [0, 1, 2, 3, 4],
        [0, 1, 3, 4, 5, 5],
        [1, 2, 4, 3, 4],
        op_temp_memory=[0, 0, 0, 2000, 0],
        tensor_output=[False, False, False, False, True],
    )


def test_recomputing_a_large_activation_lowers_the_peak_by_its_size() -> None:
    """Worked by hand (section 15's example): keeping A through c's scratch costs 3,020 B;
    freeing it after b and running a again before d costs 2,021 B and one more second."""
    graph = _big_activation()
    kept = Solution(np.zeros(5), [0, 1, 2, 3, 4], 1)
    again = Solution(np.zeros(5), [0, 1, 2, 3, 1, 4], 1, remat=True)
    for solution, peak, makespan in ((kept, 3020, 5.0), (again, 2021, 6.0)):
        for score in (
            Scorer(graph, Machine(1)).score(solution),
            reference_score(graph, solution, Machine(1)),
        ):
            assert (score.peak_memory, score.makespan) == (peak, makespan)


def test_a_repeat_without_remat_or_of_a_source_is_refused() -> None:
    graph = _big_activation()
    with pytest.raises(SolutionError, match="each op runs exactly once"):
        Scorer(graph, Machine(1)).score(Solution(np.zeros(5), [0, 1, 2, 3, 1, 4], 1))
    with pytest.raises(SolutionError, match="is not recomputable"):
        Scorer(graph, Machine(1)).score(Solution(np.zeros(5), [0, 1, 0, 2, 3, 4], 1, remat=True))


def test_which_ops_are_recomputable() -> None:
    graph = _big_activation().with_op_attrs(
        [
            {},
            {"type": "aten.add_.Tensor"},
            {"type": "aten.native_dropout.default"},
            {"type": "aten.native_dropout.default", "deterministic": True},
            {"type": "aten.add_", "recomputable": True},
        ]
    )
    assert graph.op_recomputable.tolist() == [False, False, False, True, True]
    persistent = Graph.from_arrays(
        "p", ["w", "u"], [1.0, 1.0], ["W", "U"], [4, 4], [0, 1], [0, 1, 1], [1],
        tensor_persistent=[False, True],
    )  # fmt: skip
    assert persistent.op_recomputable.tolist() == [False, False]
    with pytest.raises(GraphError, match="recomputable cannot be true: it makes the persistent"):
        persistent.with_op_attrs([{}, {"recomputable": True}])
    with pytest.raises(GraphError, match="recomputable must be true or false"):
        graph.with_op_attrs([{"recomputable": 1}, {}, {}, {}, {}])


def test_remat_round_trips_and_is_checked() -> None:
    graph = _big_activation()
    again = Solution(np.zeros(5), [0, 1, 2, 3, 1, 4], 1, remat=True)
    document = solution_to_json(graph, again)
    assert document["remat"] is True
    back = solution_from_json(document, graph)
    assert back.remat and back.order.tolist() == again.order.tolist()
    assert "remat" not in solution_to_json(graph, replace(again, remat=False))
    with pytest.raises(SolutionError, match="remat must be true or false"):
        solution_from_json({**document, "remat": "yes"}, graph)
    fused = replace(again, fusion=np.array([-1, -1, 0, 0, -1]))
    with pytest.raises(SolutionError, match="cannot have fusion groups yet"):
        Scorer(graph, Machine(1)).score(fused)
    with pytest.raises(SolutionError, match="cannot have fusion groups yet"):
        Scorer(graph, Machine(1)).evaluate(fused.placement, fused.order, fused.fusion, True)
