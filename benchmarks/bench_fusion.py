"""Speed of GO's fusion decoder and the fusion baselines on large generated graphs.

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 .venv/bin/python benchmarks/bench_fusion.py \
        [--sizes 1000 10000] [--family layered] [--devices 1] [--repeats 20]

Each graph of `--family` gets random fusion classes (a tenth none, half elementwise, a fifth
reduction, a fifth contraction), compute times at 0.3 x runtime and a kernel whose bandwidth
makes memory traffic the other 0.7 of the runtimes on average, with a launch of 2% of the mean
runtime; the solution is
the topological schedule of a block placement on `--devices` devices. Timed, as medians over
`--repeats` random priority vectors in [0, 1]: the decoder kernel (`priority_groups`), the
re-derived order (`fused_order`), exact scoring (`Scorer.evaluate`) and the whole
`priority_fusion` call (Solution included); then one call of each baseline. Compile time is
excluded (one warm-up call first).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from graphopt.costmodels.machine import Machine
from graphopt.costmodels.score import Scorer
from graphopt.ir.generators import generate
from graphopt.ir.graph import Graph
from graphopt.ir.solution import MAX_GROUP_OPS, topological_schedule
from graphopt.solvers.fusion import (
    PRIORITY_THRESHOLD,
    default_fusion,
    fused_order,
    greedy_fusion,
    priority_fusion,
    priority_groups,
)

CLASSES = ("none", "elementwise", "reduction", "contraction")
SHARES = (0.1, 0.5, 0.2, 0.2)


def annotated(graph: Graph, rng: np.random.Generator) -> Graph:
    """The graph with random fusion classes, compute times and a kernel."""
    classes = rng.choice(len(CLASSES), size=graph.n_ops, p=SHARES)
    attrs = [
        {**extra, "fusion": CLASSES[c], "compute_time": 0.3 * float(runtime)}
        for extra, c, runtime in zip(graph.op_attrs, classes, graph.op_runtime, strict=True)
    ]
    # Memory traffic explains the other 0.7 of the runtimes on average: bytes each op reads
    # and writes over the bandwidth.
    traffic = int(graph.tensor_size[graph.edge_tensor].sum() + graph.tensor_size.sum())
    bandwidth = max(traffic, 1) / max(0.7 * graph.total_runtime, 1e-9)
    launch = 0.02 * graph.total_runtime / max(graph.n_ops, 1)
    kernel = {"memory_bandwidth": bandwidth, "launch_overhead": launch}
    return graph.with_op_attrs(attrs).with_attrs(kernel=kernel)


def median_ms(call, repeats: int) -> float:
    """Median milliseconds of `repeats` calls."""
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        samples.append(time.perf_counter() - start)
    return 1000 * statistics.median(samples)


def bench(n_ops: int, family: str, n_devices: int, repeats: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    graph = annotated(generate(family, n_ops, seed=seed), rng)
    placement = (np.arange(graph.n_ops) * n_devices) // graph.n_ops
    solution = topological_schedule(graph, placement, n_devices)
    scorer = Scorer(graph, Machine(n_devices=n_devices))
    f = graph.fusion_arrays
    place32 = np.ascontiguousarray(solution.placement, dtype=np.int32)
    rank = np.empty(graph.n_ops, dtype=np.int64)
    is_op = solution.order < graph.n_ops
    rank[solution.order[is_op]] = np.flatnonzero(is_op)
    vectors = [rng.random(graph.n_ops) for _ in range(repeats)]
    group = priority_groups(f, place32, rank, vectors[0], PRIORITY_THRESHOLD, MAX_GROUP_OPS)
    order = fused_order(graph, solution, group)
    scorer.evaluate(place32, order, group)  # warm-up: compiles or loads the kernels
    turn = iter(range(10**9))

    def decode() -> None:
        priority_groups(
            f, place32, rank, vectors[next(turn) % repeats], PRIORITY_THRESHOLD, MAX_GROUP_OPS
        )

    fused = priority_fusion(graph, solution, vectors[0])
    times = {
        "priority_groups (kernel)": median_ms(decode, repeats),
        "fused_order": median_ms(lambda: fused_order(graph, solution, fused.fusion), repeats),
        "Scorer.evaluate (fused)": median_ms(
            lambda: scorer.evaluate(fused.placement, fused.order, fused.fusion), repeats
        ),
        "Scorer.evaluate (unfused)": median_ms(
            lambda: scorer.evaluate(solution.placement, solution.order), repeats
        ),
        "priority_fusion (whole call)": median_ms(
            lambda: priority_fusion(graph, solution, vectors[next(turn) % repeats]), repeats
        ),
    }
    baselines = {
        "default_fusion": lambda: default_fusion(graph, solution),
        "default_fusion(priority=True)": lambda: default_fusion(graph, solution, priority=True),
        "greedy_fusion": lambda: greedy_fusion(graph, solution),
    }
    print(
        f"\n{family}, {graph.n_ops:,} ops, {graph.n_edges:,} edges, {n_devices} device(s); "
        f"priority fusion made {fused.n_groups:,} groups of {sum(map(len, fused.groups())):,} ops"
    )
    for name, ms in times.items():
        print(f"  {name:32s} {ms:9.2f} ms  (median of {repeats})")
    for name, call in baselines.items():
        start = time.perf_counter()
        out = call()
        ms = 1000 * (time.perf_counter() - start)
        score = scorer.score(out)
        print(
            f"  {name:32s} {ms:9.2f} ms  (one call) {out.n_groups:,} groups, "
            f"makespan {score.makespan:.4g} vs {scorer.score(solution).makespan:.4g} unfused"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--family", default="layered")
    parser.add_argument("--devices", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    for n_ops in args.sizes:
        bench(n_ops, args.family, args.devices, args.repeats, args.seed)


if __name__ == "__main__":
    main()
