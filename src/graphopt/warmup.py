"""Compile every numba kernel signature the commands use, once, at install time.

Every kernel is `numba.njit(cache=True)`: the first call with a new signature compiles it
(0.1 to 3 s each; a first `graphopt optimize` compiled 20 and took 26 s) and writes the machine
code beside the source (or under NUMBA_CACHE_DIR), where later processes load it in milliseconds.
numba keys that cache by signature and by a hash of the source file's contents, so it stays
valid until the source changes. A signature is made of dtypes, read-only flags and literal
arguments, which only the real code paths produce, so the warm-up runs them on small graphs:
every generator family written and read back as .json and .npz, what `info` and `score` compute,
and every solver of the registry for both objectives on one, two and four devices, with
synchronous and asynchronous transfers, latency and bandwidth, a capacity and a pin, through
`graphopt.optimize` as the CLI calls it; on a graph whose ops have fusion classes, every fusion
policy and every solver that searches fusion (`--fusion search`). `make` runs it (`graphopt
warmup`) after installing.

It also writes the package's bytecode (.pyc), as pip does for a regular install: an editable
install writes none, and where PYTHONDONTWRITEBYTECODE is set no run ever does, so every command
would compile graphopt's modules from source again (about 0.1 s of each `optimize`).

Fusion and the learned solvers are warmed too, the latter importing torch (a few seconds): left
to the commands, their kernels (fusion groups' rules and scoring, GFlowNet's partial schedules,
the ready queues over batches of placements, GO's fused decoding) took most of a first run
(issue 43: `--fusion anneal` 14.4 s instead of 1.1 s, `--solver gdp` 10.3 s, `--solver go
--fusion search` 34.5 s with one evaluation, its time budget spent compiling).

Two processes may compile side by side, but not the same kernel: numba's cache files are not
safe against two processes compiling signatures of one function at once (both may claim the
same data file name). So the kernels every solver shares (graph, scoring, events) are compiled
first, in this process, by the solvers of `SHARED`; then the stages of `STAGES` run one after
another, and each group of a stage, whose kernels no other group of the stage compiles, in its
own process.
"""

from __future__ import annotations

import compileall
import math
import multiprocessing
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from numba.core.registry import CPUDispatcher

    from graphopt.costmodels.machine import Machine

SHARED = ("xla-list", "xla-dfs", "xla-postorder", "critical-path", "heft", "inductor-lpmf")
"""Solvers whose kernels every group uses: the graph, scoring and event kernels, and the
memory-aware orders (LPMF) that the partition baselines also run on each device."""

STAGES: tuple[dict[str, tuple[str, ...]], ...] = (
    {
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
            "partition-hint",
        ),
        "fusion policies": (
            "critical-path --fusion default",
            "critical-path --fusion xla-priority",
            "critical-path --fusion greedy",
            "critical-path --fusion anneal",
        ),
    },
    {
        "auto, fusion search": (
            "auto",
            "auto --fusion search",
            "brkga --fusion search",
            "brkga-tuned --fusion search",
            "local-search --fusion search",
        ),
        "learned solvers, GO's baselines": (
            "regal",
            "gas",
            "idrs",
            "gflownet",
            "gdp",
            "gdp-policy",
            "go",
            "go-policy",
            "hdp",
            "compiler-default",
            "compiler-default --fusion default",
            "go-anneal",
        ),
    },
    {
        "their fusion search": (
            "regal --fusion search",
            "gas --fusion search",
            "idrs --fusion search",
            "go --fusion search",
            "go-policy --fusion search",
            "compiler-default --fusion search",
            "go-anneal --fusion search",
        ),
    },
)
"""Stages of solver runs after `SHARED`, one after another; each stage's groups use kernels
that no other group of the stage compiles, so each may compile in its own process. A run is a
solver's name, or a name and `--fusion CHOICE` as on the command line, run on the graph with
fusion classes. The first stage compiles each family's own kernels (random-search's are not
local search's: it samples orders and scores them in batches; the fusion policies run on list
scheduling's solutions; the partition hint, with the partitions it schedules, compiles the ready
queues over batches of placements that `auto`, GO and its baselines share); the second what is
made of them (the portfolio, BRKGA and local search over fusion; the learned solvers, which import
torch, with GO's baselines); the third the learned solvers' and
GO's searches over fusion, which share GO's fused decoder with the searches of the second
stage."""

OPS = 30
"""Ops of the warm-up graphs: enough for every solver phase, small enough to solve in ms."""

EXACT_OPS = 8
"""Ops of CP-SAT's warm-up graph, which it solves to optimality in milliseconds."""

EVALUATIONS = 600
"""Evaluation budget per warm-up solve: several BRKGA generations and a local search phase."""

FUSION_FLAG = " --fusion "
"""What separates a run's solver from its fusion choice in `STAGES`."""


@dataclass(frozen=True)
class WarmupReport:
    """What a warm-up did.

    Attributes:
        seconds: wall time.
        compiled: kernel signatures compiled (cache misses), over all processes.
        loaded: kernel signatures loaded from the cache, over all processes.
        solves: solver runs.
        overlap: kernels (functions) that more than one group of a stage used with
            signatures that no part before the stage did: two processes may compile them at
            once. Empty unless the stages are out of date with the solvers' code (found only
            when workers > 1).
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


def runs() -> tuple[str, ...]:
    """Every run of the warm-up: `SHARED`'s, then each stage's."""
    return (*SHARED, *(run for stage in STAGES for group in stage.values() for run in group))


def warmup(workers: int = 2, progress: Callable[[str], None] | None = None) -> WarmupReport:
    """Compiles (or loads) every kernel signature the CLI's commands use.

    Args:
        workers: processes for the groups of a stage; 1 runs everything in this process.
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

        parts = [_measured(warm_shared)]
        say(_line("bytecode, graphs, scoring, list schedulers", parts[0]))
        shared: set[str] = set()
        for stage in STAGES:
            before = frozenset().union(*(part.signatures for part in parts))
            done = _stage(stage, paths, workers, say)
            if workers > 1:
                shared.update(overlap(done, before))
            parts.extend(done)
    return WarmupReport(
        seconds=time.perf_counter() - start,
        compiled=sum(part.compiled for part in parts),
        loaded=sum(part.loaded for part in parts),
        solves=sum(part.solves for part in parts),
        overlap=tuple(sorted(shared)),
    )


def _stage(
    stage: dict[str, tuple[str, ...]],
    paths: Sequence[Path],
    workers: int,
    say: Callable[[str], None],
) -> list[_Part]:
    """Runs a stage's groups, side by side in processes when there are several and workers."""
    done: list[_Part] = []
    if workers > 1 and len(stage) > 1:
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(min(workers, len(stage)), mp_context=context) as pool:
            futures = {
                group: pool.submit(warm_solvers, names, paths) for group, names in stage.items()
            }
            for group, future in futures.items():
                done.append(future.result())
                say(_line(group, done[-1]))
    else:
        for group, names in stage.items():
            done.append(warm_solvers(names, paths))
            say(_line(group, done[-1]))
    return done


def overlap(groups: Sequence[_Part], before: frozenset[str]) -> tuple[str, ...]:
    """Kernels that two of `groups`, run side by side, used with signatures not in `before`.

    By function, not by signature: two processes that compile different signatures of one
    function at once may write the same cache file.
    """
    kernels = [{s.split(" ", 1)[0] for s in group.signatures - before} for group in groups]
    shared = {
        k for i, mine in enumerate(kernels) for other in kernels[i + 1 :] for k in mine & other
    }
    return tuple(sorted(shared))


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
    with persistent sources and scratch memory (`solve`), a tiny one for CP-SAT (`exact`) and
    one whose ops have fusion classes (`fused`), for the runs with `--fusion`.
    Solving them from .json only is enough: graphs read from .npz have the same array types.
    """
    import numpy as np

    from graphopt.costmodels.machine import Machine
    from graphopt.costmodels.score import Scorer
    from graphopt.ir._algorithms import PLAIN_SIZE
    from graphopt.ir.generators import FAMILIES, SizeDistribution, generate
    from graphopt.ir.io import read_graph, read_solution, write_graph, write_solution
    from graphopt.ir.solution import random_schedule, topological_schedule

    for family in FAMILIES:
        graph = generate(family, OPS, seed=0)
        for suffix in ("json", "npz"):
            path = folder / f"{family}.{suffix}"
            write_graph(graph, path)
            _ = read_graph(path).critical_path
    _ = generate("layered", PLAIN_SIZE // 2, seed=0).critical_path  # compiled graph kernels
    scratch = SizeDistribution("uniform", 1, 1000)
    graphs = {
        "solve": generate("layered", OPS, seed=1, persistent_sources=True, temp_memory=scratch),
        "exact": generate("layered", EXACT_OPS, seed=2),
        "fused": generate("layered", OPS, seed=3, fusion=True),
    }
    rng = np.random.default_rng(0)
    saved = folder / "solution.json"
    for path in (folder / f"{name}.{suffix}" for name in graphs for suffix in ("json", "npz")):
        write_graph(graphs[path.stem], path)
        graph = read_graph(path)
        for devices in (1, 2):
            placement = rng.integers(0, devices, graph.n_ops)
            solutions = (
                topological_schedule(graph, placement, devices),
                random_schedule(graph, placement, devices, rng),
            )
            scorer = Scorer(graph, Machine(n_devices=devices))
            for solution in solutions:
                write_solution(graph, solution, saved)
                scorer.score(read_solution(saved, graph))
                # A solution's placement with an order of its own, as the partition baselines
                # and the fusion policies score them.
                scorer.evaluate(solution.placement, np.array(solution.order))
                # The same under section 15, as `score` and the recomputing searches run it.
                scorer.evaluate(solution.placement, np.array(solution.order), remat=True)
            # A population, as the searches that score batches (random search, the ready
            # queues) pass it: fresh arrays, rows padded to the longest.
            events = max(len(solution.order) for solution in solutions)
            orders = np.zeros((len(solutions), events), dtype=np.int64)
            for row, solution in zip(orders, solutions, strict=True):
                row[: len(solution.order)] = solution.order
            lengths = np.array([len(solution.order) for solution in solutions], dtype=np.int64)
            placements = np.stack([solution.placement for solution in solutions]).astype(np.int32)
            scorer.evaluate_population(placements, orders, lengths)
    return [folder / f"{name}.json" for name in graphs]


def machines(capacity: int) -> Iterator[tuple[Machine, bool]]:
    """(machine, whether an op is pinned) for each solve.

    Between them they take every code path of `optimize`'s options that could change a
    signature: one, two or four devices (the learned solvers' policies are shipped for two or
    four), no capacity or one, free or costed transfers, synchronous or asynchronous, pins or
    none. (Every combination of these, three times as many solves, compiles nothing more.)
    """
    from graphopt.costmodels.machine import Machine

    yield Machine(n_devices=1), False
    yield Machine(n_devices=1, capacity=capacity), False
    yield Machine(n_devices=2), False
    yield Machine(n_devices=2, latency=1e-5, bandwidth=1e10), True
    yield Machine(n_devices=2, mode="async", latency=1e-5, bandwidth=1e10, capacity=capacity), False
    yield Machine(n_devices=4, latency=1e-5, bandwidth=1e10), False


def warm_solvers(names: Sequence[str], paths: Sequence[Path]) -> _Part:
    """Runs each solver run on each machine of `machines`, for both objectives, as `optimize` does.

    CP-SAT solves only the `exact` graph, a run with `--fusion` only the `fused` one, the others
    only `solve`.

    Raises:
        SolverError: a run that every machine and objective refused (it warmed nothing), with
            the last refusal.
    """

    def run() -> _Part:
        from graphopt.ir.io import read_graph
        from graphopt.optimize import optimize
        from graphopt.solvers.base import SolverError
        from graphopt.solvers.bounds import peak_memory_lower_bound

        graphs = {path.stem: read_graph(path) for path in paths}
        solves = 0
        for entry in names:
            name, _, fusion = entry.partition(FUSION_FLAG)
            graph = graphs["exact" if name == "cp-sat" else "fused" if fusion else "solve"]
            capacity = math.ceil(1.2 * peak_memory_lower_bound(graph))
            pin = {graph.op_names[-1]: 1}
            refusal: SolverError | None = None
            before = solves
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
                            fusion=fusion or "none",
                        )
                    except SolverError as error:
                        refusal = error  # the CLI refuses this combination too
                        continue
                    solves += 1
            if solves == before:
                raise SolverError(f"warmup: every solve of {entry!r} was refused: {refusal}")
        return _Part(solves)

    return _measured(run)


def signatures(kind: str = "cache_misses") -> frozenset[str]:
    """Kernel signatures of graphopt compiled or loaded from the cache in this process so far.

    Args:
        kind: "cache_misses" (compiled) or "cache_hits" (loaded), numba's dispatcher stats.

    Returns:
        "module.function signature" strings.
    """
    found = set()
    for name, module in list(sys.modules.items()):
        if not name.startswith("graphopt.") or module is None:
            continue
        for dispatcher in _dispatchers(vars(module).values()):
            if dispatcher.py_func.__module__ == name:
                kernel = f"{name}.{dispatcher.py_func.__name__}"
                stats = getattr(dispatcher.stats, kind)
                found.update(f"{kernel} {signature}" for signature in stats)
    return frozenset(found)


def _dispatchers(values: Iterable[object]) -> Iterator[CPUDispatcher]:
    """The numba dispatchers among `values`, and those the kernel wrappers among them hold.

    A wrapper (`ir._algorithms.Kernel`) has a `py_func` and makes its dispatcher on first use.
    """
    from numba.core.registry import CPUDispatcher

    for value in values:
        if isinstance(value, CPUDispatcher):
            yield value
        elif not isinstance(value, type) and hasattr(value, "py_func"):
            yield from (held for held in vars(value).values() if isinstance(held, CPUDispatcher))
