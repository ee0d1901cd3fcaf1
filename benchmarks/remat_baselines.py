"""Recomputation on zoo training steps: sqrt(n) checkpointing and the greedy against the best order.

    .venv/bin/python benchmarks/remat_baselines.py [--models a,b] [--batch K]
        [--evaluations 20000] [--budgets 0.8,0.6] [--out docs/results/remat]

Issue 47's reference point, one device. Per zoo training step of at most 3,000 ops (or
`--models`): graphopt's best one-device peak without recomputation (`auto`, peak memory,
`--evaluations`, so that a row does not depend on the machine's load), then Chen et al.'s
segment checkpointing (`solvers.remat.checkpoint_segments`) at sqrt(n) ops a segment and at
every power of two, along two program orders: the graph's own (`topological_order`, the captured
program's) and the order of `auto`'s schedule; then `solvers.remat.greedy_recompute` from
`auto`'s order. Every solution is scored by the section 15 scorer. The zoo's batches are small
(2 images, 2 sequences), so its steps hold mostly weights; `--batch K` captures each step with
every input repeated K times along its first dimension (model `NAME-xK`), which scales the
activations as a larger batch does. Columns:

- `best`: `auto`'s peak without recomputation, bytes; `persistent`: the weights' and inputs'
  bytes, resident at every step whatever the schedule; `bound`: persistent bytes plus the
  largest op's footprint (`peak_memory_lower_bound(recompute=True)`), under which no schedule,
  recomputing or not, goes;
- `sqrt_act`, `sqrt_overhead`: sqrt(n) checkpointing along the order where it peaks lower: its
  activation peak (peak - persistent) / `best`'s, and its recomputed seconds / the step's
  seconds, in percent;
- `greedy_act`, `greedy_overhead`: `greedy_recompute` from `auto`'s order, allowed the recomputed
  seconds of sqrt(n) checkpointing: its activation peak and overhead, as above;
- `sqrt_B`, `greedy_B`: for each budget B, the least overhead (%) of a sweep solution whose
  activation peak is at most B x `best`'s, and the overhead at which `greedy_recompute` (no
  overhead limit) first fits it; '-' when none does. Budgets are taken on activations because
  recomputing cannot touch the persistent bytes, and on the zoo's small batches those are most
  of the peak (B x `best` itself is below `bound` on most of them).

It writes `runs.csv` and `summary.md` under `--out`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import torch

from graphopt.costmodels.machine import Machine
from graphopt.costmodels.score import Scorer
from graphopt.evaluation.reports import rows_table, write_csv
from graphopt.importers.zoo import ZOO, ZooModel, export_graph, get_model
from graphopt.ir.graph import Graph
from graphopt.optimize import optimize
from graphopt.solvers.bounds import peak_memory_lower_bound
from graphopt.solvers.remat import greedy_recompute, segment_sweep, sqrt_length

MAX_OPS = 3_000


def training_steps() -> list[str]:
    """Zoo models whose training step has at most MAX_OPS ops."""
    sizes = json.loads(
        (Path(__file__).parents[1] / "src/graphopt/importers/zoo/sizes.json").read_text()
    )["models"]
    return [name for name in ZOO if sizes[name]["train"]["ops"] <= MAX_OPS]


def lengths(graph: Graph) -> list[int]:
    """sqrt(n) and every power of two below n, then n (one segment: nothing recomputed)."""
    powers = [2**k for k in range(1, max(1, math.ceil(math.log2(graph.n_ops))))]
    return sorted({sqrt_length(graph), *powers, graph.n_ops})


def overhead(graph: Graph, makespan: float) -> float:
    """Recomputed seconds / the step's, in percent, to 2 decimals (0, not -0, for none)."""
    return max(0.0, round(100 * (makespan / graph.total_runtime - 1), 2))


def batched(name: str, batch: int) -> ZooModel:
    """The zoo entry with every example input repeated `batch` times along its first dimension."""
    entry = get_model(name)
    if batch == 1:
        return entry

    def build() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
        module, inputs = entry.build()
        return module, tuple(torch.cat([x] * batch) for x in inputs)

    return dataclasses.replace(entry, name=f"{name}-x{batch}", build=build)


def measure(name: str, batch: int, evaluations: int, budgets: list[float]) -> dict[str, object]:
    """One model's row (module docstring)."""
    graph = export_graph(batched(name, batch), training=True)
    machine = Machine(n_devices=1)
    best = optimize(graph, machine, "peak-memory", evaluations=evaluations).solution
    orders = {
        "program": graph.topological_order,
        "auto": np.array([c for c in best.order.tolist() if c < graph.n_ops]),
    }
    base = None
    points: list[tuple[int, float, str, int]] = []  # (peak, overhead %, order, length)
    for label, order in orders.items():
        for length, _, score in segment_sweep(graph, order, lengths(graph), machine):
            points.append((score.peak_memory, overhead(graph, score.makespan), label, length))
            if length == graph.n_ops and label == "auto":
                base = score.peak_memory
    assert base is not None
    persistent = int(graph.tensor_size[graph.tensor_persistent].sum())
    activations = base - persistent
    sqrt_points = [p for p in points if p[3] == sqrt_length(graph)]
    peak, extra, order, _ = min(sqrt_points)
    row: dict[str, object] = {
        "model": graph.name.removesuffix("-train"),
        "ops": graph.n_ops,
        "best": base,
        "persistent": persistent,
        "bound": peak_memory_lower_bound(graph, 1, recompute=True),
        "sqrt_order": order,
        "sqrt_act": round(100 * (peak - persistent) / max(1, activations), 2),
        "sqrt_overhead": extra,
    }
    greedy, _ = greedy_recompute(graph, orders["auto"], extra / 100, candidates=16)
    score = Scorer(graph, machine).score(greedy)
    row["greedy_act"] = round(100 * (score.peak_memory - persistent) / max(1, activations), 2)
    row["greedy_overhead"] = overhead(graph, score.makespan)
    for budget in budgets:
        cap = persistent + int(budget * activations)
        under = [p[1] for p in points if p[0] <= cap]
        row[f"sqrt_{budget:g}"] = round(min(under), 2) if under else "-"
        fit, _ = greedy_recompute(graph, orders["auto"], capacity=cap, candidates=16)
        score = Scorer(graph, machine).score(fit)
        fits = score.peak_memory <= cap
        row[f"greedy_{budget:g}"] = overhead(graph, score.makespan) if fits else "-"
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", help="comma-separated zoo names (default: every step <= 3k)")
    parser.add_argument("--batch", type=int, default=1, help="repeat every input K times")
    parser.add_argument("--evaluations", type=int, default=20_000)
    parser.add_argument("--budgets", default="0.8,0.6")
    parser.add_argument("--out", type=Path, default=Path("docs/results/remat"))
    args = parser.parse_args()
    names = args.models.split(",") if args.models else training_steps()
    budgets = [float(b) for b in args.budgets.split(",")]
    rows = []
    for name in names:
        rows.append(measure(name, args.batch, args.evaluations, budgets))
        print(rows[-1], flush=True)
    write_csv(args.out / "runs.csv", rows)
    table = rows_table(rows)
    command = (
        f"benchmarks/remat_baselines.py --batch {args.batch} --evaluations {args.evaluations} "
        f"--budgets {args.budgets}" + (f" --models {args.models}" if args.models else "")
    )
    (args.out / "summary.md").write_text(f"`{command}`\n\n{table}\n")
    print(table)


if __name__ == "__main__":
    main()
