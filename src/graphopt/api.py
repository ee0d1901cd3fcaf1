"""The stable Python API: import, load and save graphs and solutions, score and optimize them."""

from __future__ import annotations

from graphopt.costmodels.machine import Machine
from graphopt.costmodels.score import Score, Scorer, score
from graphopt.importers import import_graph
from graphopt.ir.graph import Graph
from graphopt.ir.io import read_graph as load_graph
from graphopt.ir.io import read_solution as load_solution
from graphopt.ir.io import write_graph as save_graph
from graphopt.ir.io import write_solution as save_solution
from graphopt.ir.solution import Solution, random_schedule, topological_schedule
from graphopt.optimize import optimize
from graphopt.solvers.base import Budget, Objective, Problem, Result
from graphopt.solvers.registry import SOLVERS, make_solver

__all__ = [
    "SOLVERS",
    "Budget",
    "Graph",
    "Machine",
    "Objective",
    "Problem",
    "Result",
    "Score",
    "Scorer",
    "Solution",
    "import_graph",
    "load_graph",
    "load_solution",
    "make_solver",
    "optimize",
    "random_schedule",
    "save_graph",
    "save_solution",
    "score",
    "topological_schedule",
]
