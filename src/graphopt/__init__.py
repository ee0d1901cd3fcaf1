"""graphopt: placement, scheduling and fusion of ML computation graphs.

See `graphopt.api` for the stable Python API and `graphopt --help` for the command line.

The API's names are resolved on first use (PEP 562): `import graphopt` alone must stay cheap,
because every `graphopt` command imports this package, and the API pulls in numpy, numba and
every cost model, which `graphopt --help` or `--version` never need. `from graphopt import
optimize` and `graphopt.optimize` work as before; the first such access imports `graphopt.api`.

`graphopt.optimize` is both an API function and a submodule. Importing the submodule makes the
import system set the package attribute to the module; the eager package used to overwrite it
with the function right away, so the package ignores that assignment to keep the API's meaning.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

from graphopt.errors import GraphError, GraphoptError, MachineError, SolutionError

if TYPE_CHECKING:
    from graphopt.api import (
        SOLVERS,
        Budget,
        Graph,
        Machine,
        MemoryProfile,
        Objective,
        Problem,
        Result,
        Score,
        Scorer,
        Solution,
        apply,
        backend,
        capture,
        import_graph,
        load_graph,
        load_solution,
        make_solver,
        measure,
        memory_profile,
        optimize,
        random_schedule,
        replay,
        save_graph,
        save_solution,
        score,
        topological_schedule,
    )

__version__ = "0.1.0"
"""The one place the version is written: pyproject.toml reads it (`dynamic = ["version"]`)."""

__all__ = [
    "SOLVERS",
    "Budget",
    "Graph",
    "GraphError",
    "GraphoptError",
    "Machine",
    "MachineError",
    "MemoryProfile",
    "Objective",
    "Problem",
    "Result",
    "Score",
    "Scorer",
    "Solution",
    "SolutionError",
    "apply",
    "backend",
    "capture",
    "import_graph",
    "load_graph",
    "load_solution",
    "make_solver",
    "measure",
    "memory_profile",
    "optimize",
    "random_schedule",
    "replay",
    "save_graph",
    "save_solution",
    "score",
    "topological_schedule",
]
"""`graphopt.api.__all__` and the error types, spelled out so that listing the package's names
imports nothing (tests/test_cli.py checks that they agree with the API)."""

_API_NAMES = frozenset(__all__) - {"GraphError", "GraphoptError", "MachineError", "SolutionError"}


def __getattr__(name: str) -> Any:
    """Imports `graphopt.api` when one of its names is first asked for, and binds them all."""
    if name not in _API_NAMES:
        raise AttributeError(f"module 'graphopt' has no attribute {name!r}")
    api = importlib.import_module("graphopt.api")
    globals().update({api_name: getattr(api, api_name) for api_name in _API_NAMES})
    return globals()[name]


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


class _Package(types.ModuleType):
    """The package module, whose API names never become the submodules that share them."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _API_NAMES and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
