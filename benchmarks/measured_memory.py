"""Predicted against measured peak memory on the zoo: each order applied to the real program.

    .venv/bin/python benchmarks/measured_memory.py [--models a,b] [--seconds 20] [--repeats 3]
        [--out docs/results/execution]

For every zoo model small enough to run here (training step <= 600 MiB of tensors and <= 3,100 ops,
both graphs), inference and training step: the program as captured (PyTorch's FX order), the
compilers' orders (XLA list, DFS and post-order, Inductor LPMF, BFS and DFS), one random valid
order, and graphopt's (`auto` for peak memory, `--seconds` per graph), each applied to the captured
program and run on fresh random inputs. Per order it records the cost model's peak minus persistent
bytes, the live storage bytes measured by `LiveBytes`, the allocator's peak from the profiler's
memory timeline, the median time, whether the outputs equal the captured program's bit for bit, and
whether they equal eager PyTorch's on the model itself (its own kernels and autograd) within float
reassociation (`measure.EAGER_RTOL`, `EAGER_ATOL`). It writes `results.json` and `README.md`
(tables, exact-match counts, graphopt's saving over the FX order in MiB and %, and the correlations
of predicted with measured peaks) under `--out`.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from graphopt.costmodels.machine import Machine
from graphopt.errors import GraphoptError
from graphopt.execution.measure import measure_orders
from graphopt.importers import capture_model
from graphopt.importers.zoo import ZOO
from graphopt.ir.solution import random_schedule
from graphopt.optimize import optimize

COMPILERS = (
    "xla-list",
    "xla-dfs",
    "xla-postorder",
    "inductor-lpmf",
    "inductor-bfs",
    "inductor-dfs",
)
MAX_TRAIN_BYTES = 600 * 2**20
MAX_OPS = 3_100
MIB = 2**20


def small_models() -> list[str]:
    """Zoo models whose training step fits the limits (the inference graph is smaller)."""
    sizes = json.loads(
        (Path(__file__).parents[1] / "src/graphopt/importers/zoo/sizes.json").read_text()
    )["models"]
    return [
        name
        for name in ZOO
        if sizes[name]["train"]["tensor_bytes"] <= MAX_TRAIN_BYTES
        and max(sizes[name]["train"]["ops"], sizes[name]["inference"]["ops"]) <= MAX_OPS
    ]


def run_graph(model: str, training: bool, seconds: float, repeats: int) -> dict:
    """Every order of one graph, applied and measured."""
    capture = capture_model(model, training=training)
    graph = capture.graph
    machine = Machine(n_devices=1)
    solutions = {}
    for solver in COMPILERS:
        solutions[solver] = optimize(
            graph, machine, solver=solver, objective="peak-memory"
        ).solution
    rng = np.random.default_rng(0)
    solutions["random"] = random_schedule(graph, np.zeros(graph.n_ops, np.int32), 1, rng)
    start = time.perf_counter()
    best = optimize(graph, machine, solver="auto", objective="peak-memory", seconds=seconds, seed=0)
    solve_seconds = time.perf_counter() - start
    solutions["graphopt"] = best.solution
    rows = measure_orders(capture, solutions, seed=1, repeats=repeats)
    return {
        "model": model,
        "training": training,
        "graph": graph.name,
        "ops": graph.n_ops,
        "persistent": rows[0].persistent,
        "lower_bound": best.bound,
        "solve_seconds": solve_seconds,
        "orders": [
            {
                "order": row.label,
                "predicted_live": row.predicted_live,
                "measured_live": row.measurement.live_peak,
                "allocator": row.measurement.allocator_peak,
                "seconds": row.measurement.seconds,
                "identical": row.identical,
                "eager": None if row.eager is None else row.eager.close,
                "eager_difference": None if row.eager is None else row.eager.difference,
            }
            for row in rows
        ],
    }


def report(results: list[dict]) -> str:
    """The README: per graph, every order; then the summary figures."""
    lines = [
        "# Predicted against measured peak memory, zoo models on this CPU",
        "",
        "Made by `benchmarks/measured_memory.py` (its docstring says what it runs). Bytes above",
        "the persistent tensors (parameters, buffers, inputs), which exist before the program",
        "runs: `predicted` is the cost model's peak minus persistent bytes, `live` the peak of",
        "live storages the program creates (`graphopt.execution.measure.LiveBytes`), `allocator`",
        "the peak of the CPU allocator's timeline in torch.profiler (it also sees scratch",
        "buffers inside kernels). `same` = outputs equal the captured program's bit for bit;",
        "`eager` = outputs (and, for a training step, the updated weights) equal eager",
        "PyTorch's on the model within float reassociation (rtol 1e-4, atol 1e-5; - where a",
        "run predates the check).",
        "",
    ]
    exact = total = checked = close = 0
    savings = []
    predicted, live, allocator = [], [], []
    failed = [r for r in results if "failed" in r]
    for result in (r for r in results if "failed" not in r):
        lines += [
            f"## {result['graph']} ({result['ops']:,} ops, persistent "
            f"{result['persistent'] / MIB:,.2f} MiB)",
            "",
            "| order | predicted (MiB) | live (MiB) | allocator (MiB) | time (ms) | exact | same "
            "| eager |",
            "| --- | ---: | ---: | ---: | ---: | --- | --- | --- |",
        ]
        for order in result["orders"]:
            match = order["predicted_live"] == order["measured_live"]
            eager = order.get("eager")
            exact += match and order["identical"]
            total += 1
            checked += eager is not None
            close += bool(eager)
            predicted.append(order["predicted_live"])
            live.append(order["measured_live"])
            allocator.append(order["allocator"] or 0)
            lines.append(
                f"| {order['order']} | {order['predicted_live'] / MIB:,.3f} | "
                f"{order['measured_live'] / MIB:,.3f} | "
                f"{(order['allocator'] or 0) / MIB:,.3f} | {1e3 * order['seconds']:,.1f} | "
                f"{'yes' if match else 'NO'} | {'yes' if order['identical'] else 'NO'} | "
                f"{'-' if eager is None else 'yes' if eager else 'NO'} |"
            )
        captured = result["orders"][0]["measured_live"]
        ours = next(o for o in result["orders"] if o["order"] == "graphopt")["measured_live"]
        savings.append((result["graph"], captured, ours))
        lines.append("")
    lines += [
        "## Summary",
        "",
        f"- Orders whose measured live peak equals the prediction exactly, outputs identical: "
        f"{exact} of {total}.",
        f"- Orders whose outputs equal eager PyTorch's within float reassociation: {close} of "
        f"the {checked} checked.",
        f"- Pearson correlation of predicted with measured live peaks: "
        f"{np.corrcoef(predicted, live)[0, 1]:.6f}; with the allocator's peaks: "
        f"{np.corrcoef(predicted, allocator)[0, 1]:.6f}.",
        "",
        "graphopt's order against PyTorch's FX order (the program as captured), measured live "
        "peak:",
        "",
        "| graph | FX order (MiB) | graphopt (MiB) | saved (MiB) | saved (%) |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for graph, captured, ours in savings:
        saved = captured - ours
        percent = 100 * saved / captured if captured else 0.0
        lines.append(
            f"| {graph} | {captured / MIB:,.3f} | {ours / MIB:,.3f} | {saved / MIB:,.3f} | "
            f"{percent:.1f} |"
        )
    lower = sum(1 for _, captured, ours in savings if ours < captured)
    lines += [
        "",
        f"graphopt's order is lower than the FX order on {lower} of {len(savings)} graphs.",
    ]
    if failed:
        lines += ["", "Graphs whose captured program does not run here:", ""]
        lines += [
            f"- {r['model']}{' (training step)' if r['training'] else ''}: {r['failed']}"
            for r in failed
        ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=str, help="comma-separated zoo names")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("docs/results/execution"))
    parser.add_argument(
        "--resume", action="store_true", help="keep the graphs already in results.json"
    )
    args = parser.parse_args()
    models = args.models.split(",") if args.models else small_models()
    args.out.mkdir(parents=True, exist_ok=True)
    saved = args.out / "results.json"
    results = json.loads(saved.read_text()) if args.resume and saved.exists() else []
    done = {(r["model"], r["training"]) for r in results}
    for model in models:
        for training in (False, True):
            if (model, training) in done:
                continue
            started = time.perf_counter()
            try:
                results.append(run_graph(model, training, args.seconds, args.repeats))
            except GraphoptError as error:  # a capture whose program does not run here
                results.append({"model": model, "training": training, "failed": str(error)})
            print(f"{model} {training}: {time.perf_counter() - started:.1f} s", flush=True)
            saved.write_text(json.dumps(results, indent=1) + "\n")
    (args.out / "README.md").write_text(report(results))


if __name__ == "__main__":
    main()
