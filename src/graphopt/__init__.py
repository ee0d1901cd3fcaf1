"""graphopt: placement, scheduling and fusion of ML computation graphs.

See `graphopt.api` for the stable Python API and `graphopt --help` for the command line.
"""

from graphopt import api
from graphopt.api import *  # noqa: F403 - the package re-exports the stable API as it is
from graphopt.errors import GraphError, GraphoptError, MachineError, SolutionError

__version__ = "0.1.0"

__all__ = [*api.__all__, "GraphError", "GraphoptError", "MachineError", "SolutionError"]
