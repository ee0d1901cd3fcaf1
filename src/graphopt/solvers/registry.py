"""Every solver by name, for the CLI, the benchmarks and `graphopt.optimize`.

Modules are imported on first use, so that naming a solver does not import OR-Tools or pymetis,
and so that the learned solvers, which live with the learning code (`graphopt.learning`), load by
name without any module of `solvers/` importing `learning/`. This module imports nothing heavy
itself: the command line's help lists which solvers take which options from its entries.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from graphopt.solvers.base import Solver


class SolverEntry(NamedTuple):
    """Where a solver lives and what it does."""

    module: str
    factory: str
    """Called with no argument, it returns the solver; a learned one also takes `policy`, and a
    `named` one the solver's name."""
    description: str
    learned: bool = False
    """Steered by a trained policy, whose checkpoint a user may pass instead of the shipped one."""
    finetunes: bool = False
    """Its factory takes `finetune`, steps of training on the graph before solving it."""
    searches_fusion: bool = False
    """On a problem that may fuse (`Problem.fusion`, `--fusion search`), its search covers
    fusion groups with placement and order."""
    samples: bool = False
    """It samples many schedules and keeps the best K distinct ones (`--candidates`)."""
    named: bool = False
    """Its factory takes the solver's name: one class runs several solvers from a table (the
    compiler schedulers, `memory_schedulers.COMPILER_SCHEDULERS`)."""
    fusion: str = "none"
    """The fusion policy it runs with when the caller names none, on a graph whose ops have
    fusion classes (`default_fusion`)."""


SOLVERS: dict[str, SolverEntry] = {
    "auto": SolverEntry(
        "graphopt.solvers.portfolio",
        "Portfolio",
        "heuristics, then tuned BRKGA from their best, then local search (default)",
        searches_fusion=True,
    ),
    "brkga": SolverEntry(
        "graphopt.solvers.brkga",
        "BRKGA",
        "BRKGA, paper 001 defaults (pi=100, pi_e=10, pi_c=80, rho=0.7)",
        searches_fusion=True,
    ),
    "brkga-tuned": SolverEntry(
        "graphopt.solvers.brkga",
        "tuned_brkga",
        "BRKGA with the grid-searched preset",
        searches_fusion=True,
    ),
    "xla-list": SolverEntry(
        "graphopt.solvers.memory_schedulers",
        "CompilerScheduler",
        "XLA list memory scheduler, one device",
        named=True,
    ),
    "xla-dfs": SolverEntry(
        "graphopt.solvers.memory_schedulers",
        "CompilerScheduler",
        "XLA DFS memory scheduler, one device",
        named=True,
    ),
    "xla-postorder": SolverEntry(
        "graphopt.solvers.memory_schedulers",
        "CompilerScheduler",
        "XLA post-order memory scheduler, one device",
        named=True,
    ),
    "inductor-lpmf": SolverEntry(
        "graphopt.solvers.memory_schedulers",
        "CompilerScheduler",
        "Inductor least-peak-memory-first reordering, one device",
        named=True,
    ),
    "inductor-bfs": SolverEntry(
        "graphopt.solvers.memory_schedulers",
        "CompilerScheduler",
        "Inductor BFS reordering, one device",
        named=True,
    ),
    "inductor-dfs": SolverEntry(
        "graphopt.solvers.memory_schedulers",
        "CompilerScheduler",
        "Inductor DFS reordering, one device",
        named=True,
    ),
    "compiler-best": SolverEntry(
        "graphopt.solvers.memory_schedulers",
        "CompilerScheduler",
        "best of the XLA and Inductor schedulers, one device",
        named=True,
    ),
    "critical-path": SolverEntry(
        "graphopt.solvers.list_scheduling",
        "CriticalPathScheduler",
        "critical-path list scheduling (makespan)",
    ),
    "heft": SolverEntry(
        "graphopt.solvers.list_scheduling",
        "HeftScheduler",
        "HEFT earliest-finish-time placement and order (makespan)",
    ),
    "partition-hint": SolverEntry(
        "graphopt.solvers.placement_hints",
        "PlacementHints",
        "METIS splits and HEFT's placements, each scheduled by critical-path ready queues and "
        "by insertion timelines (GDP's partition hint; makespan)",
    ),
    "expert": SolverEntry(
        "graphopt.solvers.expert",
        "ExpertPlacement",
        "human-expert placement: whole modules in order, split by runtime (GDP table 1)",
    ),
    "compiler-default": SolverEntry(
        "graphopt.solvers.go_baselines",
        "CompilerDefault",
        "compiler default: HEFT placement, critical-path ready queues, XLA-like fusion (GO's "
        "TF-default)",
        fusion="default",
    ),
    "go-anneal": SolverEntry(
        "graphopt.solvers.go_baselines",
        "GOAnnealing",
        "simulated annealing over GO's per-op device, scheduling and fusion levels",
        searches_fusion=True,
    ),
    "cp-search": SolverEntry(
        "graphopt.solvers.makespan_search",
        "CriticalPathSearch",
        "moves on the critical path re-list-scheduled with insertion, from HEFT (makespan)",
    ),
    "gp-kl": SolverEntry(
        "graphopt.solvers.partition",
        "KernighanLinSolver",
        "Kernighan-Lin partition + DFS scheduler per device (paper 001 GP+DFS)",
    ),
    "gp-metis": SolverEntry(
        "graphopt.solvers.partition",
        "MetisSolver",
        "METIS partitions balancing weights and activations, best compiler order per device",
    ),
    "gp-hypergraph": SolverEntry(
        "graphopt.solvers.partition",
        "HypergraphSolver",
        "Mt-KaHyPar hypergraph partitions (tensors as nets), best compiler order per device",
    ),
    "gp-pipeline": SolverEntry(
        "graphopt.solvers.pipeline",
        "PipelineSolver",
        "contiguous pipeline stages along topological orders, cuts refined on the exact score",
    ),
    "block-search": SolverEntry(
        "graphopt.solvers.block_search",
        "BlockSearch",
        "moves whole modules and runs of ops between devices, each device's order re-run",
    ),
    "local-search": SolverEntry(
        "graphopt.solvers.local_search",
        "LocalSearch",
        "best-improvement local search with random restarts",
        searches_fusion=True,
    ),
    "annealing": SolverEntry(
        "graphopt.solvers.annealing",
        "SimulatedAnnealing",
        "simulated annealing over device and order moves",
    ),
    "random-search": SolverEntry(
        "graphopt.solvers.random_search",
        "RandomSearch",
        "random placements and random valid orders",
    ),
    "regal": SolverEntry(
        "graphopt.learning.systems.regal.solver",
        "regal",
        "REGAL: shipped GNN policy's Beta distributions steering BRKGA, zero-shot (paper 001)",
        learned=True,
        searches_fusion=True,
    ),
    "gas": SolverEntry(
        "graphopt.learning.systems.regal.solver",
        "gas",
        "GAS: shipped graph-as-sequence LSTM policy steering BRKGA (paper 001 baseline)",
        learned=True,
        searches_fusion=True,
    ),
    "idrs": SolverEntry(
        "graphopt.learning.systems.regal.solver",
        "idrs",
        "IDRS: REGAL's distributions sampled at random, no evolution (paper 000 baseline)",
        learned=True,
        searches_fusion=True,
    ),
    "gflownet": SolverEntry(
        "graphopt.learning.systems.gflownet.solver",
        "gflownet",
        "GFlowNet: the shipped per-graph policy samples up to 1,000 schedules within the "
        "budget, HEFT's four schedules scored beside them, best kept (paper 004; makespan, any "
        "device count)",
        learned=True,
        samples=True,
    ),
    "gdp": SolverEntry(
        "graphopt.learning.systems.gdp.solver",
        "gdp",
        "GDP: a placement policy places every op in one pass (zero-shot, --finetune STEPS "
        "of PPO first), GO's ready-queue schedule, then auto's search from its best samples "
        "for the rest of the budget (paper 003; makespan, 2-8 devices)",
        learned=True,
        finetunes=True,
    ),
    "gdp-policy": SolverEntry(
        "graphopt.learning.systems.gdp.solver",
        "gdp_policy",
        "GDP's policy alone: gdp without the search after it (paper 003's placer)",
        learned=True,
        finetunes=True,
    ),
    "go": SolverEntry(
        "graphopt.learning.systems.go.solver",
        "go",
        "GO: a multi-task policy decides every op's device, scheduling priority and (with "
        "--fusion search) fusion priority in one pass (zero-shot, --finetune STEPS of PPO "
        "first), then auto's search from its best samples for the rest of the budget "
        "(paper 002; makespan, 1-8 devices)",
        learned=True,
        finetunes=True,
        searches_fusion=True,
    ),
    "go-policy": SolverEntry(
        "graphopt.learning.systems.go.solver",
        "go_policy",
        "GO's policy alone: go without the search after it (paper 002's decisions)",
        learned=True,
        finetunes=True,
        searches_fusion=True,
    ),
    "hdp": SolverEntry(
        "graphopt.learning.systems.hdp.solver",
        "HDP",
        "HDP: grouper + LSTM placer trained on the graph with REINFORCE (paper 003's baseline; "
        "makespan)",
    ),
    "cp-sat": SolverEntry(
        "graphopt.solvers.cpsat",
        "CPSATSolver",
        "OR-Tools CP-SAT exact model; proves optima on small graphs",
    ),
}
"""Solver name -> entry, in the order `graphopt solvers` lists them."""

LEARNED = tuple(name for name, entry in SOLVERS.items() if entry.learned)
"""The solvers that take a policy checkpoint (`--policy`)."""
FINETUNERS = tuple(name for name, entry in SOLVERS.items() if entry.finetunes)
"""The solvers that fine-tune their policy on the graph first (`--finetune`)."""
FUSION_SEARCHERS = tuple(name for name, entry in SOLVERS.items() if entry.searches_fusion)
"""The solvers whose search covers fusion groups (`--fusion search`)."""
SAMPLERS = tuple(name for name, entry in SOLVERS.items() if entry.samples)
"""The solvers that keep their top-K distinct schedules (`--candidates`)."""


def check_solver(name: str) -> None:
    """Raises SolverError for an unknown solver name, listing the valid ones."""
    from graphopt.solvers.base import SolverError

    if name not in SOLVERS:
        raise SolverError(f"unknown solver {name!r}; valid solvers: {', '.join(SOLVERS)}")


def make_solver(name: str, policy: str | None = None, finetune: int = 0) -> Solver:
    """The solver registered under `name`, steered by the checkpoint at `policy` if given.

    Args:
        name: a key of `SOLVERS`.
        policy: a checkpoint for a learned solver (None: the shipped one).
        finetune: training steps on the graph first, for a solver that fine-tunes (gdp).

    Raises:
        SolverError: for an unknown name, listing the valid ones, or a policy or fine-tuning
            for a solver that takes none.
    """
    from graphopt.solvers.base import SolverError

    check_solver(name)
    entry = SOLVERS[name]
    if policy is not None and not entry.learned:
        learned = ", ".join(LEARNED)
        raise SolverError(f"a policy file applies to the learned solvers {learned}, not {name!r}")
    if finetune and not entry.finetunes:
        raise SolverError(f"--finetune applies to {', '.join(FINETUNERS)}, not {name!r}")
    make: Callable[..., Solver] = getattr(importlib.import_module(entry.module), entry.factory)
    options: dict[str, object] = {} if policy is None else {"policy": policy}
    if entry.named:
        options["name"] = name
    if finetune:
        options["finetune"] = finetune
    return make(**options)


def default_fusion(name: str, fusable: bool) -> str:
    """The fusion policy solver `name` runs with when the caller names none.

    `compiler-default` is the compiler's whole default, XLA-like fusion included (GO's
    "TF-default"); every other solver leaves fusion to be asked for. A graph whose ops have no
    fusion class (`fusable` False) has nothing to fuse: "none".

    Raises:
        SolverError: for an unknown name, listing the valid ones.
    """
    check_solver(name)
    return SOLVERS[name].fusion if fusable else "none"
