"""BRKGA speed: decode + score of one chromosome, BRKGA 5K wall time, and pymoo side by side.

    .venv/bin/python benchmarks/bench_brkga.py [--sizes 1000 10000] [--devices 2]
        [--evaluations 5000] [--family layered] [--json out.json] [--baseline DIR]

For each size: the median time of one `decode_and_score` call (single thread, fused random-key
decoding + exact scoring, paper 001 3.2.1), of a batch of 100 through the parallel population
kernel, and the wall time of `BRKGA().solve` with the evaluation budget (paper 001 defaults).
Then pymoo 0.6's BRKGA drives the same fitness with the same hyper-parameters (pi=100, pi_e=10,
pi_c=80, 10 mutants, rho=0.7) and the same budget, twice: with the population scored in one
vectorized call (our parallel kernel; pymoo adds only its own overhead) and element-wise (one
decoder call per chromosome, how pymoo problems are usually written). Needs the `bench` extra
(`pip install -e '.[bench]'`) for the pymoo columns.

With `--baseline DIR` (a checkout of an earlier commit, e.g. `git worktree add /tmp/before
HEAD`) it times only the single-chromosome kernel, the current one beside DIR's
(`DIR/src/graphopt/solvers/random_keys.py` loaded as a separate module; its imports of other
graphopt modules resolve to the current package), on the same fresh chromosomes: a new random
chromosome per call, as a search sees them, decoded by both kernels one after the other (which
one goes first alternates), so that load changes hit both. It checks that both give the same
placement, order, peaks and makespan, and prints the medians and their ratio.
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from bench_scorer import median_seconds
from graphopt.costmodels.machine import Machine
from graphopt.ir.generators import generate
from graphopt.solvers.base import Budget, Problem
from graphopt.solvers.brkga import BRKGA
from graphopt.solvers.random_keys import RandomKeyDecoder, decode_and_score


def pymoo_seconds(decoder: RandomKeyDecoder, evaluations: int, vectorized: bool) -> float:
    """Wall time of pymoo's BRKGA on the same fitness, or nan without pymoo."""
    try:
        from pymoo.algorithms.soo.nonconvex.brkga import BRKGA as PymooBRKGA
        from pymoo.core.problem import Problem as PymooProblem
        from pymoo.optimize import minimize
    except ImportError:
        return float("nan")

    def fitness(keys: np.ndarray) -> np.ndarray:
        decoded = decoder.evaluate(keys)
        return decoded.value + decoded.excess.astype(float) * 1e30

    class Fitness(PymooProblem):
        def __init__(self) -> None:
            super().__init__(n_var=decoder.n_genes, n_obj=1, xl=0.0, xu=1.0)

        def _evaluate(self, x, out, *args, **kwargs) -> None:
            if vectorized:
                out["F"] = fitness(x)
            else:
                out["F"] = np.array([fitness(row[None])[0] for row in x])

    algorithm = PymooBRKGA(
        n_elites=10, n_offsprings=80, n_mutants=10, bias=0.7, eliminate_duplicates=False
    )
    start = time.perf_counter()
    minimize(Fitness(), algorithm, ("n_evals", evaluations), seed=0, verbose=False)
    return time.perf_counter() - start


def bench_size(n_ops: int, n_devices: int, evaluations: int, family: str) -> dict:
    graph = generate(family, n_ops, seed=0)
    problem = Problem(graph, Machine(n_devices=n_devices))
    decoder = RandomKeyDecoder(problem)
    keys = np.random.default_rng(0).random((100, decoder.n_genes))
    placement = np.empty(graph.n_ops, np.int32)
    order = np.empty(decoder.max_events, np.int64)
    peak = np.empty(n_devices, np.int64)
    row = iter(range(10**9))

    def one() -> None:
        decode_and_score(
            graph.arrays,
            problem.machine.arrays,
            decoder.pins,
            keys[next(row) % 100],
            placement,
            order,
            peak,
        )

    one()
    decoder.evaluate(keys)
    inner = max(1, 20_000 // n_ops)
    single = median_seconds(one, 7, inner)
    batch = median_seconds(lambda: decoder.evaluate(keys), 7, 1)
    BRKGA().solve(problem, Budget(evaluations=300))
    runs = []
    for seed in range(3):
        start = time.perf_counter()
        result = BRKGA().solve(problem, Budget(evaluations=evaluations), seed=seed)
        runs.append(time.perf_counter() - start)
    ours = statistics.median(runs)
    vectorized = pymoo_seconds(decoder, evaluations, vectorized=True)
    elementwise = pymoo_seconds(decoder, evaluations, vectorized=False)
    return {
        "ops": n_ops,
        "edges": graph.n_edges,
        "devices": n_devices,
        "decode_score_single_us": single * 1e6,
        "decode_score_batch100_ms": batch * 1e3,
        "brkga_seconds": ours,
        "brkga_value": result.value,
        "pymoo_vectorized_seconds": vectorized,
        "pymoo_elementwise_seconds": elementwise,
    }


def load_baseline(folder: str):
    """`decode_and_score` of the checkout in `folder`, loaded as a module of its own."""
    path = Path(folder) / "src" / "graphopt" / "solvers" / "random_keys.py"
    spec = importlib.util.spec_from_file_location("baseline_random_keys", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module.decode_and_score


def compare_size(n_ops: int, n_devices: int, family: str, baseline, calls: int) -> dict:
    """Median time of one call of each kernel on the same fresh chromosomes, interleaved."""
    graph = generate(family, n_ops, seed=0)
    decoder = RandomKeyDecoder(Problem(graph, Machine(n_devices=n_devices)))
    rng = np.random.default_rng(0)
    keys = np.empty(decoder.n_genes)
    outputs = {
        name: (
            np.empty(graph.n_ops, np.int32),
            np.empty(decoder.max_events, np.int64),
            np.empty(n_devices, np.int64),
        )
        for name in ("current", "baseline")
    }
    kernels = {"current": decode_and_score, "baseline": baseline}
    g, m = graph.arrays, decoder.problem.machine.arrays
    arguments = {name: (g, m, decoder.pins, keys, *outputs[name]) for name in kernels}
    if "g" not in inspect.signature(baseline.py_func).parameters:
        # A checkout from before GraphArrays takes each array and machine scalar as an argument.
        arguments["baseline"] = (*g, decoder.pins, keys, *m, *outputs["baseline"])
    times: dict[str, list[float]] = {"current": [], "baseline": []}

    def timed(name: str) -> tuple[int, float]:
        kernel, args = kernels[name], arguments[name]
        start = time.perf_counter()
        result = kernel(*args)
        times[name].append(time.perf_counter() - start)
        return result

    for call in range(-20, calls):  # the first 20 compile or load, and warm up
        rng.random(out=keys)
        first, second = ("current", "baseline") if call % 2 == 0 else ("baseline", "current")
        results = {first: timed(first), second: timed(second)}
        length, makespan = results["current"]
        if results["baseline"] != (length, makespan) or not all(
            np.array_equal(now[:length], before[:length])
            for now, before in zip(outputs["current"], outputs["baseline"], strict=True)
        ):
            raise SystemExit(f"the kernels disagree on chromosome {call} of {n_ops} ops")
        if call < 0:
            times["current"].clear()
            times["baseline"].clear()
    current = statistics.median(times["current"])
    before = statistics.median(times["baseline"])
    per_call = [b / c for b, c in zip(times["baseline"], times["current"], strict=True)]
    return {
        "ops": n_ops,
        "events": int(length),
        "calls": calls,
        "baseline_us": before * 1e6,
        "current_us": current * 1e6,
        "speedup": before / current,
        "median_per_call_speedup": statistics.median(per_call),
    }


def compare(args: argparse.Namespace) -> None:
    """The `--baseline` table: both kernels side by side at each size."""
    baseline = load_baseline(args.baseline)
    rows = [
        compare_size(n, args.devices, args.family, baseline, max(200, 2_000_000 // n))
        for n in args.sizes
    ]
    table = Table(
        title=f"decode + score of a fresh chromosome, {args.family}, d={args.devices}: "
        f"current vs {args.baseline}"
    )
    for column in ("ops", "events", "calls", "baseline", "current", "speed-up", "per call"):
        table.add_column(column, justify="right")
    for r in rows:
        table.add_row(
            f"{r['ops']:,}",
            f"{r['events']:,}",
            f"{r['calls']:,}",
            f"{r['baseline_us']:.1f} µs",
            f"{r['current_us']:.1f} µs",
            f"{r['speedup']:.3f}x",
            f"{r['median_per_call_speedup']:.3f}x",
        )
    Console(width=160).print(table)
    if args.json:
        with open(args.json, "w") as file:
            json.dump(rows, file, indent=1)


def main() -> None:
    """Runs the sizes and prints the table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--devices", type=int, default=2)
    parser.add_argument("--evaluations", type=int, default=5000)
    parser.add_argument("--family", default="layered")
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument(
        "--baseline",
        metavar="DIR",
        help="only time the decode + score kernel beside the one of this earlier checkout",
    )
    args = parser.parse_args()
    if args.baseline:
        compare(args)
        return
    rows = [bench_size(n, args.devices, args.evaluations, args.family) for n in args.sizes]
    table = Table(title=f"BRKGA {args.evaluations:,} evaluations, {args.family}, d={args.devices}")
    for column in (
        "ops",
        "decode+score 1",
        "batch of 100",
        "BRKGA",
        "pymoo (vector)",
        "pymoo (element)",
        "speed-up vs pymoo",
    ):
        table.add_column(column, justify="right")
    for r in rows:
        table.add_row(
            f"{r['ops']:,}",
            f"{r['decode_score_single_us']:.1f} µs",
            f"{r['decode_score_batch100_ms']:.2f} ms",
            f"{r['brkga_seconds']:.3f} s",
            f"{r['pymoo_vectorized_seconds']:.3f} s",
            f"{r['pymoo_elementwise_seconds']:.3f} s",
            f"{r['pymoo_vectorized_seconds'] / r['brkga_seconds']:.1f}x / "
            f"{r['pymoo_elementwise_seconds'] / r['brkga_seconds']:.1f}x",
        )
    Console(width=160).print(table)
    if args.json:
        with open(args.json, "w") as file:
            json.dump(rows, file, indent=1)


if __name__ == "__main__":
    main()
