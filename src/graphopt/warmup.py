"""Compile every numba kernel signature the commands use, once, at install time.

Every kernel is `numba.njit(cache=True)`: the first call with a new signature compiles it
(0.1 to 3 s each; a first `graphopt optimize` compiled 20 and took 26 s) and writes the machine
code beside the source (or under NUMBA_CACHE_DIR), where later processes load it in milliseconds.
numba keys that cache by signature and by a hash of the source file's contents, so it stays
valid until the source changes. A signature is made of dtypes, read-only flags and literal
arguments, which only the real code paths produce, so the warm-up runs them on small graphs:
every generator family written and read back as .json and .npz, what `info` and `score` compute,
and every solver for both objectives on one and two devices, with synchronous and asynchronous
transfers, latency and bandwidth, a capacity and a pin, through `graphopt.optimize` as the CLI
calls it. `make` runs it (`graphopt warmup`) after installing.

It also writes the package's bytecode (.pyc), as pip does for a regular install: an editable
install writes none, and where PYTHONDONTWRITEBYTECODE is set no run ever does, so every command
would compile graphopt's modules from source again (about 0.1 s of each `optimize`).

The learned solvers (regal, gas, idrs) are left out: their search is BRKGA's with per-gene Beta
distributions, whose kernels brkga-tuned compiles with the same signatures (tests/test_cli.py
checks that regal compiles nothing after a warm-up), and importing torch would add seconds.

Two processes may compile side by side, but not the same kernel: numba's cache files are not
safe against two processes compiling different signatures of one function at once (both may
claim the same data file name). So the kernels every solver shares (graph, scoring, events) are
compiled first, in this process, by the solvers of `SHARED`; then each group of `PARALLEL`, whose
kernels no other group uses, compiles in its own process; `LAST` only loads what they compiled.
"""

from __future__ import annotations

import compileall
import math
import multiprocessing
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from graphopt.costmodels.machine import Machine

SHARED = ("xla-list", "xla-dfs", "xla-postorder", "critical-path", "heft", "inductor-lpmf")
"""Solvers whose kernels every group uses: the graph, scoring and event kernels, and the
memory-aware orders (LPMF) that the partition baselines also run on each device."""

PARALLEL: dict[str, tuple[str, ...]] = {
    "brkga, memory schedulers, random search, cp-sat": (
        "brkga",
        "brkga-tuned",
        "inductor-bfs",
        "inductor-dfs",
        "compiler-best",
        "random-search",
        "cp-sat",
    ),
    "partition, local search": (
        "gp-kl",
        "gp-metis",
        "gp-hypergraph",
        "gp-pipeline",
        "block-search",
        "cp-search",
        "local-search",
        "annealing",
        "expert",
    ),
}
"""Groups of solvers whose own kernels no other group uses: each may compile in its own process.
(random-search's kernels are not local search's: it samples orders and scores them in batches.)
The two groups take about the same time to compile."""

LAST = ("auto",)
"""Solvers made of the others' pieces (the portfolio): they run once everything is compiled."""

OPS = 30
"""Ops of the warm-up graphs: enough for every solver phase, small enough to solve in ms."""

EXACT_OPS = 8
"""Ops of CP-SAT's warm-up graph, which it solves to optimality in milliseconds."""

EVALUATIONS = 600
"""Evaluation budget per warm-up solve: several BRKGA generations and a local search phase."""


@dataclass(frozen=True)
class WarmupReport:
    """What a warm-up did.

    Attributes:
        seconds: wall time.
        compiled: kernel signatures compiled (cache misses), over all processes.
        loaded: kernel signatures loaded from the cache, over all processes.
        solves: solver runs.
        overlap: kernel signatures that more than one group of `PARALLEL` used and the
            shared part did not: two processes may compile them at once. Empty unless the
            groups are out of date with the solvers' code (found only when workers > 1).
    """

    seconds: float
    compiled: int
    loaded: int
    solves: int
    overlap: tuple[str, ...]


@dataclass(frozen=True)
class _Part:
    """What one part of the warm-up did in its process."""

    solves: int
    compiled: int = 0
    loaded: int = 0
    signatures: frozenset[str] = frozenset()
    seconds: float = 0.0


def warmup(workers: int = 2, progress: Callable[[str], None] | None = None) -> WarmupReport:
    """Compiles (or loads) every kernel signature the CLI's commands use.

    Args:
        workers: processes for the groups of `PARALLEL`; 1 runs everything in this process.
        progress: called with a short line as each part finishes.

    Returns:
        Counts and time of the warm-up.
    """
    start = time.perf_counter()
    say = progress or (lambda line: None)
    with tempfile.TemporaryDirectory(prefix="graphopt-warmup-") as folder:
        paths: list[Path] = []

        def warm_shared() -> _Part:
            compileall.compile_dir(Path(__file__).parent, quiet=2)
            paths.extend(warm_graphs(Path(folder)))
            return warm_solvers(SHARED, paths)

        shared = _measured(warm_shared)
        parts = [shared]
        say(_line("bytecode, graphs, scoring, list schedulers", shared))
        if workers > 1:
            context = multiprocessing.get_context("spawn")
            with ProcessPoolExecutor(min(workers, len(PARALLEL)), mp_context=context) as pool:
                futures = {
                    group: pool.submit(warm_solvers, names, paths)
                    for group, names in PARALLEL.items()
                }
                for group, future in futures.items():
                    parts.append(future.result())
                    say(_line(group, parts[-1]))
        else:
            for group, names in PARALLEL.items():
                parts.append(warm_solvers(names, paths))
                say(_line(group, parts[-1]))
        parts.append(warm_solvers(LAST, paths))
        say(_line(", ".join(LAST), parts[-1]))
    groups = [part.signatures - shared.signatures for part in parts[1:-1]]
    overlap = {
        s for i, group in enumerate(groups) for other in groups[i + 1 :] for s in group & other
    }
    return WarmupReport(
        seconds=time.perf_counter() - start,
        compiled=sum(part.compiled for part in parts),
        loaded=sum(part.loaded for part in parts),
        solves=sum(part.solves for part in parts),
        overlap=tuple(sorted(overlap)) if workers > 1 else (),
    )


def _line(what: str, part: _Part) -> str:
    return (
        f"warmup: {what}: {part.compiled} kernel signatures compiled, {part.loaded} loaded, "
        f"{part.seconds:.1f} s"
    )


def _measured(run: Callable[[], _Part]) -> _Part:
    """`run()`, with the signatures it compiled and loaded in this process, and its time."""
    start = time.perf_counter()
    compiled, loaded = signatures("cache_misses"), signatures("cache_hits")
    part = run()
    new_compiled = signatures("cache_misses") - compiled
    new_loaded = signatures("cache_hits") - loaded
    return _Part(
        part.solves,
        len(new_compiled),
        len(new_loaded),
        new_compiled | new_loaded,
        time.perf_counter() - start,
    )


def warm_graphs(folder: Path) -> list[Path]:
    """Runs `generate`, `info` and `score`'s kernels; returns the graph files to solve.

    Every family is generated, written as .json and .npz and read back, as `generate` and the
    commands that read graphs do. The graphs to solve are written the same way and scored: one
    with persistent sources and scratch memory (`solve`) and a tiny one for CP-SAT (`exact`).
    Solving them from .json only is enough: graphs read from .npz have the same array types.
    """
    import numpy as np

    from graphopt.costmodels.machine import Machine
    from graphopt.costmodels.score import Scorer
    from graphopt.ir.generators import FAMILIES, SizeDistribution, generate
    from graphopt.ir.io import read_graph, read_solution, write_graph, write_solution
    from graphopt.ir.solution import random_schedule, topological_schedule

    for family in FAMILIES:
        graph = generate(family, OPS, seed=0)
        for suffix in ("json", "npz"):
            path = folder / f"{family}.{suffix}"
            write_graph(graph, path)
            _ = read_graph(path).critical_path
    scratch = SizeDistribution("uniform", 1, 1000)
    graphs = {
        "solve": generate("layered", OPS, seed=1, persistent_sources=True, temp_memory=scratch),
        "exact": generate("layered", EXACT_OPS, seed=2),
    }
    rng = np.random.default_rng(0)
    saved = folder / "solution.json"
    for path in (folder / f"{name}.{suffix}" for name in graphs for suffix in ("json", "npz")):
        write_graph(graphs[path.stem], path)
        graph = read_graph(path)
        for devices in (1, 2):
            placement = rng.integers(0, devices, graph.n_ops)
            for solution in (
                topological_schedule(graph, placement, devices),
                random_schedule(graph, placement, devices, rng),
            ):
                write_solution(graph, solution, saved)
                Scorer(graph, Machine(n_devices=devices)).score(read_solution(saved, graph))
    return [folder / f"{name}.json" for name in graphs]


def machines(capacity: int) -> Iterator[tuple[Machine, bool]]:
    """(machine, whether an op is pinned) for each solve.

    Between them they take every code path of `optimize`'s options that could change a
    signature: one or two devices, no capacity or one, free or costed transfers, synchronous or
    asynchronous, pins or none. (Every combination of these, three times as many solves, compiles
    nothing more.)
    """
    from graphopt.costmodels.machine import Machine

    yield Machine(n_devices=1), False
    yield Machine(n_devices=1, capacity=capacity), False
    yield Machine(n_devices=2), False
    yield Machine(n_devices=2, latency=1e-5, bandwidth=1e10), True
    yield Machine(n_devices=2, mode="async", latency=1e-5, bandwidth=1e10, capacity=capacity), False


def warm_solvers(names: Sequence[str], paths: Sequence[Path]) -> _Part:
    """Runs each solver on each machine of `machines`, for both objectives, as `optimize` does.

    CP-SAT solves only the `exact` graph, the others only the rest.
    """

    def run() -> _Part:
        from graphopt.ir.io import read_graph
        from graphopt.optimize import optimize
        from graphopt.solvers.base import SolverError
        from graphopt.solvers.bounds import peak_memory_lower_bound

        solves = 0
        for path in paths:
            graph = read_graph(path)
            capacity = math.ceil(1.2 * peak_memory_lower_bound(graph))
            pin = {graph.op_names[-1]: 1}
            for name in names:
                if (name == "cp-sat") != path.name.startswith("exact"):
                    continue
                for machine, pinned in machines(capacity):
                    for objective in ("peak-memory", "makespan"):
                        try:
                            optimize(
                                graph,
                                machine,
                                objective,
                                name,
                                EVALUATIONS,
                                pins=pin if pinned else None,
                            )
                        except SolverError:
                            continue  # the CLI refuses this combination too: nothing to compile
                        solves += 1
        return _Part(solves)

    return _measured(run)


def signatures(kind: str = "cache_misses") -> frozenset[str]:
    """Kernel signatures of graphopt compiled or loaded from the cache in this process so far.

    Args:
        kind: "cache_misses" (compiled) or "cache_hits" (loaded), numba's dispatcher stats.

    Returns:
        "module.function signature" strings.
    """
    from numba.core.registry import CPUDispatcher

    found = set()
    for name, module in list(sys.modules.items()):
        if not name.startswith("graphopt.") or module is None:
            continue
        for value in vars(module).values():
            if isinstance(value, CPUDispatcher) and value.py_func.__module__ == name:
                kernel = f"{name}.{value.py_func.__name__}"
                found.update(f"{kernel} {signature}" for signature in getattr(value.stats, kind))
    return frozenset(found)
