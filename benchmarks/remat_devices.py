"""Recomputation on several devices: `optimize --remat` against the same search without it.

    .venv/bin/python benchmarks/remat_devices.py [--models a,b] [--batch 16] [--devices 2,4]
        [--overhead 0.2] [--evaluations 20000] [--out docs/results/remat/devices]

Issue 47's item 4. Per zoo training step of at most 3,000 ops (or `--models`), captured with
every input repeated `--batch` times (as `remat_baselines.py --batch`), and per device count:
`auto`'s best placement and schedule for peak memory (`--evaluations`, bandwidth 2.5e10 B/s,
latency 1e-5 s), then the same with `--remat` and `--overhead` (the greedy after the search:
ops run again on their own device, copies transferred again). Columns: `best` and `remat`
(peak memory, bytes), `bound` (the bound that holds with recomputation), `lower` (remat / best
- 1, percent), `longer` (the makespan's change, percent) and `again` (events run again).
It writes `runs.csv` and `summary.md`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from graphopt.costmodels.machine import Machine
from graphopt.evaluation.reports import rows_table, write_csv
from graphopt.importers.zoo import export_graph
from graphopt.optimize import optimize
from remat_baselines import batched, training_steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", help="comma-separated zoo names (default: every step <= 3k)")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--devices", default="2,4")
    parser.add_argument("--overhead", type=float, default=0.2)
    parser.add_argument("--evaluations", type=int, default=20_000)
    parser.add_argument("--out", type=Path, default=Path("docs/results/remat/devices"))
    args = parser.parse_args()
    names = args.models.split(",") if args.models else training_steps()
    rows = []
    for name in names:
        graph = export_graph(batched(name, args.batch), training=True)
        for d in (int(x) for x in args.devices.split(",")):
            machine = Machine(n_devices=d, latency=1e-5, bandwidth=2.5e10)
            best = optimize(graph, machine, "peak-memory", evaluations=args.evaluations)
            remat = optimize(
                graph,
                machine,
                "peak-memory",
                evaluations=args.evaluations,
                remat=True,
                max_overhead=args.overhead,
            )
            rows.append(
                {
                    "model": graph.name.removesuffix("-train"),
                    "ops": graph.n_ops,
                    "devices": d,
                    "best": int(best.value),
                    "remat": int(remat.value),
                    "bound": int(remat.bound),
                    "lower": round(100 * (remat.value / best.value - 1), 2),
                    "longer": round(100 * (remat.score.makespan / best.score.makespan - 1), 2),
                    "again": len(remat.solution.order) - len(best.solution.order),
                }
            )
            print(rows[-1], flush=True)
    write_csv(args.out / "runs.csv", rows)
    command = (
        f"benchmarks/remat_devices.py --batch {args.batch} --devices {args.devices} "
        f"--overhead {args.overhead:g} --evaluations {args.evaluations}"
        + (f" --models {args.models}" if args.models else "")
    )
    table = rows_table(rows)
    (args.out / "summary.md").write_text(f"`{command}`\n\n{table}\n")
    print(table)


if __name__ == "__main__":
    main()
