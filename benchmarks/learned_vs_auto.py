"""Learned solvers against `auto` at equal wall time, on zoo models held out of training.

    .venv/bin/python benchmarks/learned_vs_auto.py [--system gdp|go] [--models a,b,...]
        [--devices 4,8] [--capacity none,0.6] [--seconds 2,10] [--bandwidth 2.5e10]
        [--latency 1e-5] [--seed 0] [--evaluations N] [--out docs/results/learned-vs-auto]

Issue 45's bars. Every (model, devices, capacity) cell is solved, for each budget T, by:
- `auto`: the default search (`--fusion search` with `--system go`);
- the learned solver (`gdp`, or `go` with fusion): the shipped policy's offers, then `auto`'s
  search seeded with its best samples for the rest of T;
- `untrained`: the same pipeline from an untrained network of the shipped policy's shape, seeded
  by the solve's seed (`scratch`): the ablation that says what training adds;
- `policy`: the shipped policy alone, no search (its hint, most likely and sampled placements);
- `hint`: the best classical heuristic for makespan (HEFT, critical path, METIS), one each.
All run through `Solver.solve` on the same `Problem` with `Budget(seconds=T)`, one after the
other, same seed, in one process that first solves the first cell once with each solver: a
compiler solving many graphs loads its policy, torch and the numba caches once (a cold process
pays that once, about 1-2 s for a learned solver on this 2-core machine). Capacity 0.6 is
0.6 x the one-device optimum's peak memory (`compiler-best` on one device) on every device.
The default models are held out of both shipped policies' training (`MODELS`). With
`--evaluations N` every solver gets N evaluations instead of T seconds: not the bar, but free of
the machine's load, so it says whether the policy's seeds help the search per evaluation.

Printed: per-cell makespans, then for each T the learned solver's gain over `auto` and over
`untrained` (value of the other / own - 1, > 0: the learned solver is better) with 95 % CIs,
the worst cell, and how often the policy alone beats the best hint. Rows go to `runs.csv`.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

import numpy as np

from graphopt.costmodels.machine import Machine
from graphopt.evaluation.metrics import gain_line
from graphopt.evaluation.reports import write_csv
from graphopt.importers.zoo import export_graph
from graphopt.ir.graph import Graph
from graphopt.learning.systems.gdp.env import Graphs, most_likely
from graphopt.learning.systems.gdp.solver import GDP, SEARCH_SAMPLES, GDPAlone, GDPSolverConfig
from graphopt.learning.systems.go.solver import GO, GOAlone, GOSolverConfig
from graphopt.solvers.base import Budget, InfeasibleError, Objective, Problem, Solver
from graphopt.solvers.registry import make_solver

MODELS = (
    "t5-tiny:train",
    "llama-tiny:train",
    "bert-base",
    "resnet18:train",
    "inception-small:train",
    "googlenet",
    "lstm-lm-unrolled-32",
    "gnmt-small",
    "wavenet",
)
"""Transformers, CNNs and recurrent models none of whose graphs the shipped GDP and GO policies
were trained on (the training steps of gpt2-, bert-, resnet-, inception-, wavenet-, lstm-lm-,
gnmt- and vit-tiny, MODEL_CARD.md); ':train' is the training step."""
HINTS = ("heft", "critical-path", "gp-metis")


@dataclasses.dataclass(frozen=True)
class Cell:
    """One problem: a model on a machine."""

    model: str
    graph: Graph
    machine: Machine
    capacity: str


def load_model(spec: str) -> Graph:
    """A zoo model's graph, its training step for 'name:train'."""
    name, _, mode = spec.partition(":")
    return dataclasses.replace(export_graph(name, training=mode == "train"), name=spec)


def cells(args: argparse.Namespace) -> list[Cell]:
    """Every model on every device count and capacity."""
    out = []
    for spec in args.models.split(","):
        graph = load_model(spec)
        one = make_solver("compiler-best").solve(
            Problem(graph, Machine(1), Objective.PEAK_MEMORY), Budget(evaluations=100)
        )
        for devices in map(int, args.devices.split(",")):
            for capacity in args.capacity.split(","):
                limit = None if capacity == "none" else int(float(capacity) * one.value)
                machine = Machine(
                    n_devices=devices,
                    capacity=limit,
                    bandwidth=args.bandwidth,
                    latency=args.latency,
                )
                try:
                    Problem(graph, machine, Objective.MAKESPAN).check_capacity()
                except InfeasibleError as error:
                    print(f"{spec} d={devices} cap={capacity}: skipped, {error}", flush=True)
                    continue
                out.append(Cell(spec, graph, machine, capacity))
    return out


def solvers(system: str, policy: str | None) -> dict[str, Solver]:
    """The compared solvers of `system` with the checkpoint `policy` (None: shipped), by column."""
    if system == "gdp":
        return {
            "auto": make_solver("auto"),
            "learned": GDP(GDPSolverConfig(policy, samples=SEARCH_SAMPLES)),
            "untrained": GDP(GDPSolverConfig(policy, samples=SEARCH_SAMPLES, scratch=True)),
            "policy": GDPAlone(GDPSolverConfig(policy)),
        }
    return {
        "auto": make_solver("auto"),
        "learned": GO(GOSolverConfig(policy, samples=SEARCH_SAMPLES)),
        "untrained": GO(GOSolverConfig(policy, samples=SEARCH_SAMPLES, scratch=True)),
        "policy": GOAlone(GOSolverConfig(policy)),
    }


def forward_pass(policy: str | None, problem: Problem) -> float:
    """Makespan of GDP's most likely placement alone (one forward pass, no hint offered, no
    samples), scheduled as its environment schedules; +inf over capacity."""
    network, trained = GDP(GDPSolverConfig(policy))._checkpoint(problem, np.random.default_rng(0))
    graphs = Graphs(
        {"train": [problem.graph]}, problem.machine, network.hint_strength is not None,
        trained.schedulers,
    )  # fmt: skip
    task = graphs.get("train", 0)
    peaks, makespans, _ = task.env.schedules(most_likely(network, task)[None])
    return float(makespans[0]) if problem.machine.excess(peaks)[0] == 0 else float("inf")


def solve(solver: Solver, problem: Problem, budget: Budget | None, seed: int) -> tuple:
    """(objective, wall seconds) of one solve (None: to its end); infeasible counts as +inf."""
    start = time.perf_counter()
    result = solver.solve(problem, budget or Budget(evaluations=10_000), seed=seed)
    wall = time.perf_counter() - start
    return (result.value if result.status != "infeasible" else float("inf")), wall


def gains(rows: list[dict], column: str, other: str) -> np.ndarray:
    """Per-row gain of `column` over `other` in % (other / own - 1; > 0: `column` better)."""
    own = np.array([row[column] for row in rows])
    base = np.array([row[other] for row in rows])
    return 100 * (base / own - 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--system", choices=("gdp", "go"), default="gdp")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--devices", default="4,8")
    parser.add_argument("--capacity", default="none,0.6")
    parser.add_argument("--seconds", default="2,10")
    parser.add_argument("--bandwidth", type=float, default=2.5e10)
    parser.add_argument("--latency", type=float, default=1e-5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--evaluations", type=int, default=None)
    parser.add_argument("--policy", default=None, help="checkpoint (default: the shipped one)")
    parser.add_argument("--tag", default=None, help="suffix of the output files' names")
    parser.add_argument("--out", type=Path, default=Path("docs/results/learned-vs-auto"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    fusion = args.system == "go"
    compared = solvers(args.system, args.policy)
    stem = args.system if args.tag is None else f"{args.system}-{args.tag}"
    if args.evaluations:
        budgets = {f"{args.evaluations} evaluations": Budget(evaluations=args.evaluations)}
    else:
        budgets = {f"{t:g} s": Budget(seconds=t) for t in map(float, args.seconds.split(","))}
    limits = list(budgets)
    rows: list[dict] = []
    problems = cells(args)
    warm = Problem(problems[0].graph, problems[0].machine, Objective.MAKESPAN, fusion=fusion)
    for solver in compared.values():  # a process solving many graphs loads each model once
        solve(solver, warm, Budget(seconds=0.5), args.seed)
    for cell in problems:
        problem = Problem(cell.graph, cell.machine, Objective.MAKESPAN, fusion=fusion)
        hint = min(solve(make_solver(hint), problem, None, args.seed)[0] for hint in HINTS)
        forward = forward_pass(args.policy, problem) if args.system == "gdp" else float("nan")
        for limit in limits:
            row: dict = {
                "model": cell.model,
                "ops": cell.graph.n_ops,
                "devices": cell.machine.n_devices,
                "capacity": cell.capacity,
                "budget": limit,
                "hint": hint,
                "forward": forward,
            }
            for name, solver in compared.items():
                budget = None if name == "policy" else budgets[limit]
                row[name], row[f"{name}_wall"] = solve(solver, problem, budget, args.seed)
            rows.append(row)
            write_csv(args.out / f"runs-{stem}.csv", rows)
            print(
                f"{cell.model:24s} d={cell.machine.n_devices} cap={cell.capacity:4s} {limit}"
                f"  hint {1e3 * hint:.4f}  policy {1e3 * row['policy']:.4f}  auto "
                f"{1e3 * row['auto']:.4f}  {args.system} {1e3 * row['learned']:.4f}  untrained "
                f"{1e3 * row['untrained']:.4f} ms",
                flush=True,
            )
    lines = []
    for limit in limits:
        at = [row for row in rows if row["budget"] == limit]
        over_auto = gains(at, "learned", "auto")
        lines += [
            f"{limit}, {len(at)} cells:",
            f"  {args.system} vs auto: {gain_line(over_auto)}; worst {over_auto.min():+.2f} %",
            f"  {args.system} vs untrained: {gain_line(gains(at, 'learned', 'untrained'))}",
            f"  untrained vs auto: {gain_line(gains(at, 'untrained', 'auto'))}",
        ]
    first = [row for row in rows if row["budget"] == limits[0]]
    lines.append(f"policy alone vs best hint: {gain_line(gains(first, 'policy', 'hint'))}")
    if args.system == "gdp":
        forward = gains(first, "forward", "hint")
        lines.append(
            f"one forward pass vs best hint: {gain_line(forward)}; better on "
            f"{(forward > 1e-9).sum()} of {forward.size}"
        )
    text = "\n".join(lines)
    print(text)
    (args.out / f"summary-{stem}.txt").write_text(text + "\n")


if __name__ == "__main__":
    main()
