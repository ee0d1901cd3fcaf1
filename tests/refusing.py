"""A solver that refuses one graph: how the suites' tests make one cell fail."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from graphopt.solvers.base import SolverError


class Refusing:
    """Wraps a solver; `solve` raises SolverError on the graph named `graph`."""

    def __init__(self, solver: Any, graph: str) -> None:
        self.solver = solver
        self.graph = graph

    def solve(self, problem: Any, *args: Any, **kwargs: Any) -> Any:
        if problem.graph.name == self.graph:
            raise SolverError(f"refuses {self.graph}")
        return self.solver.solve(problem, *args, **kwargs)


def refusing(make: Callable[..., Any], name: str, graph: str) -> Callable[..., Any]:
    """`make` (a `make_solver`) whose solver `name` refuses `graph`."""

    def made(solver: str, *args: Any, **kwargs: Any) -> Any:
        found = make(solver, *args, **kwargs)
        return Refusing(found, graph) if solver == name else found

    return made
