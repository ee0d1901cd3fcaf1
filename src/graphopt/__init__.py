"""graphopt: placement, scheduling and fusion of ML computation graphs.

See `graphopt.api` for the stable Python API and `graphopt --help` for the command line.
"""

from graphopt.api import (
    Graph,
    Machine,
    Score,
    Scorer,
    Solution,
    load_graph,
    load_solution,
    random_schedule,
    save_graph,
    save_solution,
    score,
    topological_schedule,
)
from graphopt.errors import GraphError, GraphoptError, MachineError, SolutionError

__version__ = "0.1.0"

__all__ = [
    "Graph",
    "GraphError",
    "GraphoptError",
    "Machine",
    "MachineError",
    "Score",
    "Scorer",
    "Solution",
    "SolutionError",
    "load_graph",
    "load_solution",
    "random_schedule",
    "save_graph",
    "save_solution",
    "score",
    "topological_schedule",
]
