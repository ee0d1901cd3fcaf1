"""Does the default budget's stall rule answer sooner without losing the objective?

    .venv/bin/python benchmarks/default_stop.py
        [--suites zoo-real,small-100,medium-500,layered-1000] [--devices 2,4,8]
        [--objectives peak-memory,makespan] [--solver auto] [--seconds 10] [--graphs N]
        [--out docs/results/default-stop]

`optimize` without `--time` or `--budget` searches `DEFAULT_SECONDS` and ends a search that has
stalled (`DEFAULT_STALL`); `--time 10` searches exactly 10 s (the default before the stall
rule). Each problem is solved both ways, one after the other on the same machine, with the same
seed: the wall time of each call, its objective, how the default run ended (`stopped`), and the
default run's loss against the full run (default value / full value - 1; positive = worse).
Printed per suite and over all: median wall times and their ratio, mean and worst loss with a
95 % CI, how many problems lost more than 0.3 % and 1 %, and how many the default run won.
Every row is written to `runs.csv` in `--out`, with each run's improvement trace in
`traces.jsonl`.

A time-limited search does not repeat exactly: the evaluations it fits in its seconds vary, and
so does where it ends. So every problem the default run lost more than 0.3 % on is solved twice
more, the default way and the full way, and both are compared with the first full run: when a
second full run loses as much as the default one, that loss is the search's own noise, not the
stall rule's (`noise.csv`, and the last lines of `summary.txt`).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import time
from pathlib import Path

import numpy as np

from graphopt.costmodels.machine import Machine
from graphopt.evaluation.metrics import gain_line
from graphopt.evaluation.suites import load_suite
from graphopt.evaluation.zoo_real import zoo_graphs
from graphopt.ir.graph import Graph
from graphopt.optimize import DEFAULT_SECONDS, OptimizeResult, optimize


@dataclasses.dataclass(frozen=True)
class Row:
    """One problem solved with the default budget and with the full time."""

    suite: str
    graph: str
    ops: int
    devices: int
    objective: str
    default_seconds: float
    full_seconds: float
    default_value: float
    full_value: float
    default_feasible: bool
    full_feasible: bool
    stopped: str

    @property
    def loss(self) -> float:
        """Default value / full value - 1 (positive: the default run is worse)."""
        if self.default_feasible != self.full_feasible:
            return 1.0 if self.full_feasible else -1.0
        return self.default_value / self.full_value - 1.0 if self.full_value > 0 else 0.0


def suite_graphs(name: str) -> list[Graph]:
    """The suite's graphs: `zoo-real`'s real models, or a synthetic suite of `bench`."""
    return zoo_graphs() if name == "zoo-real" else load_suite(name)


def timed(graph: Graph, machine: Machine, objective: str, solver: str, seconds: float | None):
    """`optimize` once, and the wall time of the call."""
    start = time.perf_counter()
    result = optimize(graph, machine, objective, solver, seconds=seconds, seed=0)
    return result, time.perf_counter() - start


def trace(result: OptimizeResult) -> dict[str, list[float]]:
    return {"seconds": result.trace.seconds, "value": result.trace.value}


def summary(label: str, rows: list[Row]) -> list[str]:
    """Median wall times and the losses of the default runs, in a few lines."""
    default = np.median([row.default_seconds for row in rows])
    full = np.median([row.full_seconds for row in rows])
    losses = 100 * np.array([row.loss for row in rows])
    stalled = sum(row.stopped == "stalled" for row in rows)
    return [
        f"{label} ({len(rows)} problems): median wall {default:.2f} s default vs {full:.2f} s "
        f"full ({default / full:.2f} x); stopped on the stall rule {stalled}",
        f"  default run's gain over the full run (> 0: better): "
        f"{gain_line(-losses, digits=3)}; worst loss "
        f"{losses.max():+.3f} %; "
        f"above 0.3 %: {(losses > 0.3).sum()}, above 1 %: {(losses > 1).sum()}",
    ]


def noise_floor(rows: list[Row], args: argparse.Namespace, path: Path) -> list[str]:
    """Solves each problem the default run lost > 0.3 % on again, both ways, against the first
    full run: the loss a second full run shows is the noise the default run's loss stands in."""
    lost = [row for row in rows if row.loss > 0.003]
    if not lost:
        return ["noise floor: the default run lost more than 0.3 % on no problem"]
    graphs = {
        (suite, g.name): g for suite in {row.suite for row in lost} for g in suite_graphs(suite)
    }
    again = []
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(
            [
                "suite",
                "graph",
                "devices",
                "objective",
                "first_default_loss",
                "default_again_loss",
                "full_again_loss",
            ]
        )
        for row in lost:
            machine = Machine(n_devices=row.devices)
            graph = graphs[(row.suite, row.graph)]
            default, _ = timed(graph, machine, row.objective, args.solver, None)
            full, _ = timed(graph, machine, row.objective, args.solver, args.seconds)
            losses = (default.value / row.full_value - 1.0, full.value / row.full_value - 1.0)
            again.append(losses)
            writer.writerow([row.suite, row.graph, row.devices, row.objective, row.loss, *losses])
            print(
                f"again {row.suite} {row.graph} d={row.devices} {row.objective}: default "
                f"{100 * losses[0]:+.3f} %, full {100 * losses[1]:+.3f} %",
                flush=True,
            )
    first = 100 * np.array([row.loss for row in lost])
    default_again, full_again = 100 * np.array(again).T
    return [
        f"noise floor: the {len(lost)} problems the default run lost > 0.3 % on, solved again "
        "and compared with the first full run:",
        f"  first default run mean {first.mean():+.3f} % (worst {first.max():+.3f} %); "
        f"default again {default_again.mean():+.3f} % (worst {default_again.max():+.3f} %); "
        f"full again {full_again.mean():+.3f} % (worst {full_again.max():+.3f} %)",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--suites", default="zoo-real,small-100,medium-500,layered-1000")
    parser.add_argument("--devices", default="2,4,8")
    parser.add_argument("--objectives", default="peak-memory,makespan")
    parser.add_argument("--solver", default="auto")
    parser.add_argument("--seconds", type=float, default=DEFAULT_SECONDS)
    parser.add_argument("--graphs", type=int, default=None, help="the first N of each suite")
    parser.add_argument("--out", type=Path, default=Path("out/default-stop"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    devices = [int(d) for d in args.devices.split(",")]
    objectives = args.objectives.split(",")
    rows: list[Row] = []
    with (args.out / "traces.jsonl").open("w") as traces:
        for suite in args.suites.split(","):
            for graph in suite_graphs(suite)[: args.graphs]:
                for d in devices:
                    for objective in objectives:
                        machine = Machine(n_devices=d)
                        default, default_s = timed(graph, machine, objective, args.solver, None)
                        full, full_s = timed(graph, machine, objective, args.solver, args.seconds)
                        row = Row(
                            suite,
                            graph.name,
                            graph.n_ops,
                            d,
                            objective,
                            default_s,
                            full_s,
                            default.value,
                            full.value,
                            default.feasible,
                            full.feasible,
                            str(default.solution.solver.get("stopped")),
                        )
                        rows.append(row)
                        traces.write(
                            json.dumps(
                                {
                                    **dataclasses.asdict(row),
                                    "default": trace(default),
                                    "full": trace(full),
                                }
                            )
                            + "\n"
                        )
                        traces.flush()
                        print(
                            f"{suite} {graph.name} d={d} {objective}: default "
                            f"{default_s:.2f} s ({row.stopped}), full {full_s:.2f} s, "
                            f"loss {100 * row.loss:+.3f} %",
                            flush=True,
                        )
    with (args.out / "runs.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        names = [field.name for field in dataclasses.fields(Row)]
        writer.writerow([*names, "loss"])
        for row in rows:
            writer.writerow([*(getattr(row, name) for name in names), row.loss])
    lines = []
    for suite in args.suites.split(","):
        lines += summary(suite, [row for row in rows if row.suite == suite])
    synthetic = [row for row in rows if row.suite != "zoo-real"]
    if synthetic and len(synthetic) < len(rows):
        lines += summary("synthetic suites", synthetic)
    lines += summary("all", rows)
    lines += noise_floor(rows, args, args.out / "noise.csv")
    (args.out / "summary.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
