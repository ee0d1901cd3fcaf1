"""The recomputation greedy against the exact CP-SAT model on small graphs.

    .venv/bin/python benchmarks/remat_exact.py [--seconds 20] [--overheads 0.1,0.3]
        [--out docs/results/remat/exact]

Issue 47's check of `optimize --remat` against CP-SAT (`solvers.cpsat.remat.exact_recompute`,
each op at most twice) where the model is small: the zoo's LSTM training step at batch 2, 8
and 32 (89-94 ops), and layered graphs of 30 and 60 ops with persistent sources and scratch
memory (seeds 0-1). Per graph and overhead limit: the best one-device order without
recomputation (`auto`, 20,000 evaluations), `greedy_recompute` from it, and CP-SAT with
`--seconds` on 1 worker. Columns: `best`, `greedy`, `cp_sat` (peaks, bytes), `bound` (CP-SAT's
proven lower bound), `optimal`, and `greedy_gap` = greedy / min(CP-SAT, greedy) - 1 in percent
(how far the greedy is from the best known). It writes `runs.csv` and `summary.md`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from graphopt.costmodels.machine import Machine
from graphopt.costmodels.score import Scorer
from graphopt.evaluation.reports import rows_table, write_csv
from graphopt.importers.zoo import export_graph
from graphopt.ir.generators import SizeDistribution, generate
from graphopt.ir.graph import Graph
from graphopt.optimize import optimize
from graphopt.solvers.cpsat.remat import exact_recompute
from graphopt.solvers.remat import greedy_recompute
from remat_baselines import batched


def graphs(quick: bool) -> list[Graph]:
    """The LSTM training step at three batches, then small layered graphs."""
    scratch = SizeDistribution("uniform", 1, 1000)
    layered = [
        generate("layered", n, seed=seed, persistent_sources=True, temp_memory=scratch)
        for n in ((12,) if quick else (30, 60))
        for seed in range(1 if quick else 2)
    ]
    if quick:
        return layered
    steps = [export_graph(batched("lstm-lm-tiny", batch), training=True) for batch in (1, 4, 16)]
    return steps + layered


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--overheads", default="0.1,0.3")
    parser.add_argument("--evaluations", type=int, default=20_000)
    parser.add_argument("--quick", action="store_true", help="one 12-op graph: a smoke test")
    parser.add_argument("--out", type=Path, default=Path("docs/results/remat/exact"))
    args = parser.parse_args()
    rows = []
    for graph in graphs(args.quick):
        scorer = Scorer(graph, Machine(n_devices=1))
        best = optimize(graph, Machine(1), "peak-memory", evaluations=args.evaluations)
        order = best.solution.order
        for overhead in (float(o) for o in args.overheads.split(",")):
            greedy = scorer.score(greedy_recompute(graph, order, overhead)[0]).peak_memory
            exact = exact_recompute(graph, overhead, seconds=args.seconds)
            cp_sat = scorer.score(exact.solution).peak_memory if exact.solution else None
            known = min(greedy, cp_sat) if cp_sat is not None else greedy
            rows.append(
                {
                    "graph": graph.name,
                    "ops": graph.n_ops,
                    "overhead": overhead,
                    "best": int(best.value),
                    "greedy": greedy,
                    "cp_sat": "-" if cp_sat is None else cp_sat,
                    "bound": int(exact.bound),
                    "optimal": exact.optimal,
                    "greedy_gap": round(100 * (greedy / known - 1), 2),
                }
            )
            print(rows[-1], flush=True)
    write_csv(args.out / "runs.csv", rows)
    command = (
        f"benchmarks/remat_exact.py --seconds {args.seconds:g} --overheads {args.overheads} "
        f"--evaluations {args.evaluations}" + (" --quick" if args.quick else "")
    )
    table = rows_table(rows)
    (args.out / "summary.md").write_text(f"`{command}`\n\n{table}\n")
    print(table)


if __name__ == "__main__":
    main()
