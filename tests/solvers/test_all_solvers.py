"""Every registered solver: valid output under the reference scorer, exact claims, seeds, optima."""

from __future__ import annotations

import numpy as np
import pytest

from graphopt.costmodels._reference import reference_check, reference_score
from graphopt.costmodels.machine import Machine
from graphopt.costmodels.validity import Violation
from graphopt.ir.generators import generate
from graphopt.solvers.base import Budget, Objective, Problem
from graphopt.solvers.registry import SOLVERS, make_solver


def budget_for(name: str) -> Budget:
    return Budget(seconds=20.0) if name == "cp-sat" else Budget(evaluations=300)


DEVICES = 2
"""The device count every solver is tested on (each shipped policy serves it)."""


@pytest.mark.parametrize("objective", list(Objective))
@pytest.mark.parametrize("name", list(SOLVERS))
def test_output_is_valid_and_claims_are_exact(name: str, objective: Objective) -> None:
    graph = generate("erdos_renyi", 10, seed=4)
    machine = Machine(DEVICES, latency=0.01, bandwidth=1e7)
    solver = make_solver(name)
    if objective not in solver.objectives:
        pytest.skip(f"{name} does not optimize {objective.value}")
    problem = Problem(graph, machine, objective)
    result = solver.solve(problem, budget_for(name), seed=0)
    assert reference_check(graph, result.solution)[0] == Violation.NONE
    exact = reference_score(graph, result.solution, machine)
    assert exact.peak_memory_per_device == result.score.peak_memory_per_device
    assert exact.makespan == result.score.makespan
    expected = exact.peak_memory if objective is Objective.PEAK_MEMORY else exact.makespan
    assert result.value == expected
    assert result.solution.solver["name"] == name
    again = make_solver(name).solve(problem, budget_for(name), seed=0)
    assert again.value == result.value


@pytest.mark.parametrize("objective", list(Objective))
@pytest.mark.parametrize("seed", range(3))
def test_no_solver_beats_a_proven_optimum(objective: Objective, seed: int) -> None:
    graph = generate("layered", 7, seed=seed)
    optima: dict[int, float] = {}
    for name in SOLVERS:
        if name == "cp-sat" or objective not in make_solver(name).objectives:
            continue
        problem = Problem(graph, Machine(DEVICES), objective)
        if problem.machine.n_devices not in optima:
            exact = make_solver("cp-sat").solve(problem, Budget(seconds=30.0))
            assert exact.status == "optimal"
            assert np.isfinite(exact.value)
            optima[problem.machine.n_devices] = exact.value
        value = make_solver(name).solve(problem, Budget(evaluations=300), seed=0).value
        assert value >= optima[problem.machine.n_devices] * (1 - 1e-9), name
