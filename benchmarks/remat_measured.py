"""Recomputing schedules run on the real training step: measured peak against predicted.

    .venv/bin/python benchmarks/remat_measured.py [--models a,b] [--batch 8]
        [--budgets 0.8,0.6] [--evaluations 20000] [--out docs/results/remat/measured]

Issue 47's check on the real program. Per zoo model (its training step captured with every
input repeated `--batch` times, as `remat_baselines.py --batch` does): graphopt's best one-device
order without recomputation (`auto`, peak memory), then for each budget B the recomputing
solution `optimize --remat` finds for makespan under a capacity of persistent bytes + B x the
best order's activation bytes (the fewest recomputed seconds that fit). Each is applied to the
captured program (`execution.apply`: an op run again is a copied fx node) and run on fresh
inputs (`measure_orders`). Columns, per solution:

- `predicted`, `measured`: the cost model's peak less the persistent bytes, and the live bytes
  `LiveBytes` measured; `exact`: whether they are equal;
- `fits`: whether the prediction is within the budget ("below bound": the budget is under
  `peak_memory_lower_bound(recompute=True)`, so no schedule fits it and none is run);
- `overhead`: recomputed seconds / the step's seconds in the cost model, in percent;
  `ms`: the measured median time of the step;
- `identical`: outputs equal to the captured program's bit for bit; `deterministic`: whether the
  captured program itself gives identical outputs on two runs (when it does not, `identical`
  says nothing about the order).

It writes `runs.csv` and `summary.md` under `--out`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch

from graphopt.costmodels.machine import Machine
from graphopt.evaluation.reports import rows_table, write_csv
from graphopt.execution.apply import outputs_identical
from graphopt.execution.measure import fresh_args, measure, measure_orders
from graphopt.importers.torch_export import capture_training_step
from graphopt.optimize import optimize
from graphopt.solvers.base import InfeasibleError
from remat_baselines import batched, overhead

MODELS = (
    "resnet-tiny",
    "inception-tiny",
    "gpt2-tiny",
    "llama-tiny",
    "vit-tiny",
    "t5-tiny",
    "lstm-lm-tiny",
    "wavenet-tiny",
)
"""Small zoo training steps of every family (CNNs, transformers, recurrent, WaveNet)."""


def deterministic(program: torch.nn.Module, args: tuple) -> bool:
    """Whether two runs of `program` on the same inputs give bit-identical outputs."""
    first = measure(program, args, repeats=1, profile=False).outputs
    return outputs_identical(first, measure(program, args, repeats=1, profile=False).outputs)


def measure_model(name: str, batch: int, budgets: list[float], evaluations: int) -> list[dict]:
    """One model's rows: the best order without recomputation, then one per budget."""
    entry = batched(name, batch)
    module, inputs = entry.build()
    capture = capture_training_step(module, inputs, loss=entry.loss, name=f"{entry.name}-train")
    graph = capture.graph
    persistent = int(graph.tensor_size[graph.tensor_persistent].sum())
    best = optimize(graph, Machine(1), "peak-memory", evaluations=evaluations)
    activations = best.score.peak_memory - persistent
    solutions = {"best": best.solution}
    caps = {"best": None}
    below = []  # budgets under the bound with recomputation: no schedule fits them
    for budget in budgets:
        cap = persistent + int(budget * activations)
        try:
            fitted = optimize(
                graph, Machine(1, capacity=cap), "makespan", evaluations=evaluations, remat=True
            )
        except InfeasibleError:
            below.append(f"remat {budget:g}")
            continue
        solutions[f"remat {budget:g}"] = fitted.solution
        caps[f"remat {budget:g}"] = cap
    same = deterministic(capture.program, fresh_args(capture, 0))
    rows = []
    for row in measure_orders(capture, solutions, repeats=3, profile=False):
        solution = solutions.get(row.label)
        makespan = solution.objective["makespan"] if solution is not None else float("nan")
        cap = caps.get(row.label)
        rows.append(
            {
                "model": entry.name,
                "ops": graph.n_ops,
                "order": row.label,
                "predicted": row.predicted_live,
                "measured": row.measurement.live_peak,
                "exact": row.predicted_live == row.measurement.live_peak,
                "fits": "-" if cap is None else row.predicted <= cap,
                "overhead": overhead(graph, makespan),
                "ms": round(1000 * row.measurement.seconds, 2),
                "identical": row.identical,
                "deterministic": same,
            }
        )
    for label in below:
        rows.append(
            {"model": entry.name, "ops": graph.n_ops, "order": label, "fits": "below bound"}
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--budgets", default="0.8,0.6")
    parser.add_argument("--evaluations", type=int, default=20_000)
    parser.add_argument("--out", type=Path, default=Path("docs/results/remat/measured"))
    args = parser.parse_args()
    budgets = [float(b) for b in args.budgets.split(",")]
    rows = []
    for name in args.models.split(","):
        model_rows = measure_model(name, args.batch, budgets, args.evaluations)
        for row in model_rows:
            print(row, flush=True)
        rows += model_rows
    write_csv(args.out / "runs.csv", rows)
    exact = np.mean([row["exact"] for row in rows if "exact" in row])
    command = (
        f"benchmarks/remat_measured.py --models {args.models} --batch {args.batch} "
        f"--budgets {args.budgets} --evaluations {args.evaluations}"
    )
    table = rows_table(rows)
    text = f"`{command}`\n\n{table}\n\npredicted = measured on {exact:.0%} of the rows\n"
    (args.out / "summary.md").write_text(text)
    print(table)


if __name__ == "__main__":
    main()
