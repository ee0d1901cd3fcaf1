"""Every solver by name, for the CLI, the benchmarks and `graphopt.optimize`.

Modules are imported on first use, so that naming a solver does not import OR-Tools or pymetis.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from graphopt.solvers.base import Solver, SolverError

SOLVERS: dict[str, tuple[str, str]] = {
    "auto": ("graphopt.solvers.portfolio", "Portfolio"),
    "brkga": ("graphopt.solvers.brkga", "BRKGA"),
    "brkga-tuned": ("graphopt.solvers.brkga", "tuned_brkga"),
    "xla-list": ("graphopt.solvers.memory_schedulers", "XlaListScheduler"),
    "xla-dfs": ("graphopt.solvers.memory_schedulers", "XlaDfsScheduler"),
    "xla-postorder": ("graphopt.solvers.memory_schedulers", "XlaPostOrderScheduler"),
    "inductor-lpmf": ("graphopt.solvers.memory_schedulers", "InductorLpmfScheduler"),
    "inductor-bfs": ("graphopt.solvers.memory_schedulers", "InductorBfsScheduler"),
    "inductor-dfs": ("graphopt.solvers.memory_schedulers", "InductorDfsScheduler"),
    "compiler-best": ("graphopt.solvers.memory_schedulers", "CompilerBestScheduler"),
    "critical-path": ("graphopt.solvers.list_scheduling", "CriticalPathScheduler"),
    "heft": ("graphopt.solvers.list_scheduling", "HeftScheduler"),
    "gp-kl": ("graphopt.solvers.partition", "KernighanLinSolver"),
    "gp-metis": ("graphopt.solvers.partition", "MetisSolver"),
    "local-search": ("graphopt.solvers.local_search", "LocalSearch"),
    "annealing": ("graphopt.solvers.local_search", "SimulatedAnnealing"),
    "random-search": ("graphopt.solvers.local_search", "RandomSearch"),
    "cp-sat": ("graphopt.solvers.cpsat", "CPSATSolver"),
}
"""Solver name -> (module, factory): calling the factory with no argument gives the solver."""

DESCRIPTIONS: dict[str, str] = {
    "auto": "heuristics, then BRKGA from their best, then local search (default)",
    "brkga": "BRKGA, paper 001 defaults (pi=100, pi_e=10, pi_c=80, rho=0.7)",
    "brkga-tuned": "BRKGA with the grid-searched preset",
    "xla-list": "XLA list memory scheduler, one device",
    "xla-dfs": "XLA DFS memory scheduler, one device",
    "xla-postorder": "XLA post-order memory scheduler, one device",
    "inductor-lpmf": "Inductor least-peak-memory-first reordering, one device",
    "inductor-bfs": "Inductor BFS reordering, one device",
    "inductor-dfs": "Inductor DFS reordering, one device",
    "compiler-best": "best of the XLA and Inductor schedulers, one device",
    "critical-path": "critical-path list scheduling (makespan)",
    "heft": "HEFT earliest-finish-time placement and order (makespan)",
    "gp-kl": "Kernighan-Lin partition + DFS scheduler per device (paper 001 GP+DFS)",
    "gp-metis": "METIS partition + DFS scheduler per device",
    "local-search": "best-improvement local search with random restarts",
    "annealing": "simulated annealing over device and order moves",
    "random-search": "random placements and random valid orders",
    "cp-sat": "OR-Tools CP-SAT exact model; proves optima on small graphs",
}


def make_solver(name: str) -> Solver:
    """The solver registered under `name`.

    Raises:
        SolverError: for an unknown name, listing the valid ones.
    """
    if name not in SOLVERS:
        raise SolverError(f"unknown solver {name!r}; valid solvers: {', '.join(SOLVERS)}")
    module, factory = SOLVERS[name]
    make: Callable[[], Solver] = getattr(importlib.import_module(module), factory)
    return make()
