"""What fusion groups cost the scorer: one solution with groups against the same without.

    .venv/bin/python benchmarks/bench_fusion_scorer.py [--sizes 1000 10000] [--devices 1 2]
        [--join 0.9] [--largest 4] [--json out.json]

For each size and device count: a graph of `--family` with fusion fields (a tenth of the ops of
class none, the rest elementwise, reduction or contraction; compute time half the runtime; a
kernel), then distinct solutions as a search sees them: devices in contiguous blocks of the
topological order, and a depth-first order (each op's newly ready consumers run next, so
producers and consumers sit side by side) in which runs of consecutive connected ops on one
device become groups of 2 to `--largest` ops (an op joins its run with probability `--join`);
`--largest 3` makes about 3,000 groups on 10,000 ops, the issue's bar. Each solution
is timed through `Scorer.evaluate` without its groups, then with them, taking the distinct
solutions in turn; the ratio is the bar (at most 2x). The reference scorer checks the first two.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
from rich.console import Console
from rich.table import Table

from graphopt.costmodels._reference import reference_score
from graphopt.costmodels.machine import Machine
from graphopt.costmodels.score import Scorer
from graphopt.ir.generators import generate
from graphopt.ir.graph import Graph
from graphopt.ir.solution import MAX_GROUP_OPS, Solution, implied_transfers

DISTINCT = 10


def with_fusion_fields(graph: Graph, rng: np.random.Generator) -> Graph:
    """Random fusion classes (a tenth none), compute time half the runtime, a kernel."""
    classes = rng.choice(
        ["none", "elementwise", "reduction", "contraction"], graph.n_ops, p=[0.1, 0.6, 0.2, 0.1]
    )
    attrs = [
        {**extra, "fusion": str(c), "compute_time": float(r) / 2}
        for extra, c, r in zip(graph.op_attrs, classes, graph.op_runtime, strict=True)
    ]
    kernel = {"memory_bandwidth": 1e3, "launch_overhead": 1e-3}
    return graph.with_op_attrs(attrs).with_attrs(kernel=kernel)


def depth_first_solution(
    graph: Graph, n_devices: int, join: float, rng: np.random.Generator, largest: int = 4
) -> Solution:
    """Blocks of devices, a depth-first order, groups of consecutive connected ops.

    Each transfer comes right after its producer; a group holds 2 to `largest` consecutive ops
    of one device, at most one contraction, each consuming a tensor of the ops before it.
    """
    topo = graph.topological_order
    placement = np.empty(graph.n_ops, dtype=np.int32)
    placement[topo] = (np.arange(graph.n_ops) * n_devices) // graph.n_ops
    waiting = np.diff(graph.op_input_ptr).astype(np.int64)
    stack = [int(j) for j in rng.permutation(np.flatnonzero(waiting == 0))]
    ops: list[int] = []
    while stack:
        op = stack.pop()
        ops.append(op)
        ready = []
        for t in graph.outputs(op):
            for consumer in graph.consumers(t):
                waiting[consumer] -= 1
                if waiting[consumer] == 0:
                    ready.append(int(consumer))
        stack.extend(rng.permutation(ready).tolist())
    transfers = implied_transfers(graph, placement, n_devices)
    by_producer: dict[int, list[int]] = {}
    for code in transfers.tolist():
        producer = int(graph.tensor_producer[(code - graph.n_ops) // n_devices])
        by_producer.setdefault(producer, []).append(code)
    order = [code for op in ops for code in (op, *by_producer.get(op, ()))]

    classes = graph.op_fusion
    fusion = np.full(graph.n_ops, -1, dtype=np.int32)
    run: list[int] = []
    made: set[int] = set()
    n_groups = 0
    limit = int(rng.integers(2, largest + 1))
    for code in order:
        joins = (
            code < graph.n_ops
            and run
            and classes[code] != 0
            and placement[code] == placement[run[0]]
            and len(run) < min(limit, MAX_GROUP_OPS)
            and not (classes[code] == 3 and any(classes[o] == 3 for o in run))
            and made.intersection(graph.inputs(code).tolist())
            and rng.random() < join
        )
        if not joins:
            if len(run) >= 2:
                fusion[run] = n_groups
                n_groups += 1
            run, made, limit = [], set(), int(rng.integers(2, largest + 1))
        if code < graph.n_ops and classes[code] != 0:
            run.append(code)
            made.update(graph.outputs(code).tolist())
    if len(run) >= 2:
        fusion[run] = n_groups
    return Solution(placement, np.array(order, dtype=np.int64), n_devices, fusion=fusion)


def median_seconds(call, repeats: int, inner: int) -> float:
    """Median over `repeats` of the mean time of `inner` back-to-back calls."""
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(inner):
            call()
        samples.append((time.perf_counter() - start) / inner)
    return statistics.median(samples)


def bench(
    n_ops: int, n_devices: int, join: float, seed: int, family: str, largest: int = 4
) -> dict:
    rng = np.random.default_rng(seed)
    graph = with_fusion_fields(generate(family, n_ops, seed=seed), rng)
    solutions = [
        depth_first_solution(graph, n_devices, join, rng, largest) for _ in range(DISTINCT)
    ]
    scorer = Scorer(graph, Machine(n_devices=n_devices))
    plain = [(s.placement, s.order) for s in solutions]
    fused = [(s.placement, s.order, s.fusion) for s in solutions]
    for args in plain[:1] + fused[:1]:
        scorer.evaluate(*args)  # compile or load from cache
    for solution in solutions[:2]:
        expected = reference_score(graph, solution, scorer.machine)
        assert scorer.score(solution) == expected, "fast and reference scores differ"
    inner = max(1, 20_000 // n_ops)
    turn = iter(range(10**12))
    without = median_seconds(
        lambda: scorer.evaluate(*plain[next(turn) % DISTINCT]), repeats=15, inner=inner
    )
    turn = iter(range(10**12))
    with_groups = median_seconds(
        lambda: scorer.evaluate(*fused[next(turn) % DISTINCT]), repeats=15, inner=inner
    )
    groups = statistics.median(s.n_groups for s in solutions)
    fused_ops = statistics.median(int((s.fusion >= 0).sum()) for s in solutions)
    return {
        "ops": graph.n_ops,
        "devices": n_devices,
        "groups": groups,
        "fused_ops": fused_ops,
        "without_seconds": without,
        "with_seconds": with_groups,
        "ratio": with_groups / without,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000])
    parser.add_argument("--devices", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--join", type=float, default=0.9, help="chance an op joins its run")
    parser.add_argument("--largest", type=int, default=4, help="most ops in a group")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--family", default="layered", help="graph family (see generate)")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)
    console = Console(width=140)
    rows = []
    for n_ops in args.sizes:
        for d in args.devices:
            with console.status(f"benchmarking {n_ops:,} ops on {d} devices"):
                rows.append(bench(n_ops, d, args.join, args.seed, args.family, args.largest))
    table = Table(title=f"scorer with fusion groups, {args.family} (medians, fresh solutions)")
    for column in (
        "ops",
        "devices",
        "groups",
        "fused ops",
        "without groups",
        "with groups",
        "ratio",
    ):
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(
            f"{row['ops']:,}",
            str(row["devices"]),
            f"{row['groups']:,.0f}",
            f"{row['fused_ops']:,.0f}",
            f"{row['without_seconds'] * 1e6:,.1f} us",
            f"{row['with_seconds'] * 1e6:,.1f} us",
            f"{row['ratio']:.2f}x",
        )
    console.print(table)
    if args.json:
        with open(args.json, "w") as file:
            json.dump({"rows": rows}, file, indent=1)


if __name__ == "__main__":
    main()
