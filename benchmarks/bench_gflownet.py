"""Seconds (and memory) to sample schedules from the GFlowNet scheduler, for both encodings.

    .venv/bin/python benchmarks/bench_gflownet.py [--policy per-state.pt]
        [--fast-policy per-graph.pt] [--repeats 3] [--samples 1000] [--large-samples 4]
        [--huge-samples 100] [--quick] [--json out.json]

Side by side, the paper's 'per-state' policy (a dense Topoformer re-encodes the whole partial
schedule at every step, O(n^2) per step) and the 'per-graph' one (the graph is encoded once by a
sparse Topoformer, each step scores a window of ready ops with a light head). Without --policy
and --fast-policy, untrained checkpoints are used (the time does not depend on the weights):
the per-state one of the shipped config's shape (`TrainConfig.load("gflownet")`), the per-graph
one of the same config with `encoding='per-graph'` and 3 layers. Sampling is timed around
`GFlowNet.batches` (policy loading and the graph's context included, scoring not), after one
warm-up sample of each policy (numba's kernels compile on first use). The rows and the issue's
bars (2-core machine) they read:

- A: 1,000 schedules of a fresh 100-op Erdos-Renyi graph per repeat, 4 devices, both encodings
  (interleaved, so that a change of load hits both): the median and each repeat, and the ratio
  per-state / per-graph. Bar (1): per-graph <= 2 s.
- B: a 1,000-op Erdos-Renyi graph: seconds per schedule, of --large-samples schedules for
  per-state (one per batch: its dense attention) and 100 for per-graph. No bar.
- C: per-graph only (per-state would take hours): 100 schedules of a fresh 5,000-op
  Erdos-Renyi graph and of a 5,000-op layered graph, each in a fresh interpreter
  (`--huge-only`) so that the earlier rows do not set its peak resident memory (`ru_maxrss`,
  read after sampling; the interpreter, torch and the graph included). Bar (2): <= 30 s and
  <= 4 GB (4e9 bytes).
- D: `graphopt optimize g.json --objective makespan --devices 4 --solver gflownet --json` on a
  200-op layered graph (`graphopt generate layered -n 200 --seed 0`), with --policy set to each
  checkpoint: the subprocess's wall time (process start included), and its evaluations and
  seconds from its JSON. Bar (3): per-graph <= 5 s.

A bar is judged only at its own sizes: --quick (20-op graphs, 8 samples, a 200-op "huge" graph,
a 30-op CLI graph with --budget 100) is a smoke test, and its rows say n/a. The table and
--json also record the load average before and after, since another job on the machine slows
every row (--json records torch's threads too; the policy samples on one whatever they are).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from rich.console import Console
from rich.table import Table

from graphopt.costmodels.machine import Machine
from graphopt.ir.generators import generate
from graphopt.learning.runs import RunState
from graphopt.learning.systems.gflownet.config import TrainConfig
from graphopt.learning.systems.gflownet.network import build_policy
from graphopt.learning.systems.gflownet.solver import (
    GFlowNet,
    GFlowNetSamplerConfig,
    chunk_size,
    load_gflownet_policy,
)
from graphopt.learning.systems.gflownet.train import SYSTEM
from graphopt.solvers.base import Objective, Problem

DEVICES = 4
ENCODINGS = ("per-state", "per-graph")
HUGE_FAMILIES = ("erdos_renyi", "layered")
GB = 1e9


@dataclass(frozen=True)
class Sizes:
    """Every size the benchmark runs at.

    Attributes:
        ops: row A's graph.
        samples: row A's schedules per repeat.
        repeats: row A's repeats (a fresh graph each).
        large_ops: row B's graph.
        large_samples: row B's per-state schedules.
        large_fast_samples: row B's per-graph schedules.
        huge_ops: row C's graphs.
        huge_samples: row C's schedules.
        cli_ops: row D's graph.
        cli_budget: row D's --budget (None: the CLI's default, a 10 s time budget).
    """

    ops: int = 100
    samples: int = 1000
    repeats: int = 3
    large_ops: int = 1000
    large_samples: int = 4
    large_fast_samples: int = 100
    huge_ops: int = 5000
    huge_samples: int = 100
    cli_ops: int = 200
    cli_budget: int | None = None


FULL = Sizes()
QUICK = Sizes(
    ops=20,
    samples=8,
    repeats=1,
    large_ops=50,
    large_samples=2,
    large_fast_samples=8,
    huge_ops=200,
    huge_samples=8,
    cli_ops=30,
    cli_budget=100,
)


def untrained_policies(folder: Path) -> dict[str, str]:
    """Untrained checkpoints of both encodings, written into `folder`, by encoding.

    The per-state one has the shipped config's shape; the per-graph one the same config with
    `encoding='per-graph'` and 3 layers.
    """
    config = TrainConfig.load("gflownet")
    fast = replace(config, policy=replace(config.policy, encoding="per-graph", layers=3))
    paths = {}
    for encoding, run in zip(ENCODINGS, (config, fast), strict=True):
        torch.manual_seed(0)
        path = folder / f"untrained-{encoding}.pt"
        SYSTEM.save(path, build_policy(run.policy), None, run, RunState())
        paths[encoding] = str(path)
    return paths


def sample_seconds(policy: str, family: str, n_ops: int, samples: int, seed: int) -> float:
    """Seconds to draw `samples` schedules of a fresh `n_ops`-op graph of `family`."""
    graph = generate(family, n_ops, seed=seed)
    problem = Problem(graph, Machine(DEVICES), Objective.MAKESPAN)
    sampler = GFlowNet(GFlowNetSamplerConfig(policy, samples=samples))
    start = time.perf_counter()
    drawn = sum(len(batch) for batch in sampler.batches(problem, np.random.default_rng(seed)))
    seconds = time.perf_counter() - start
    assert drawn == samples
    return seconds


def warm_up(policy: str) -> None:
    """Loads the policy and compiles the kernels it uses: 8 schedules of a 20-op graph."""
    sample_seconds(policy, "erdos_renyi", 20, 8, 0)


def batch(policy: str, n_ops: int) -> int:
    """Schedules per policy batch of an `n_ops`-op graph (`chunk_size`)."""
    return chunk_size(n_ops, load_gflownet_policy(policy, DEVICES)[0].config)


def max_rss_bytes() -> int:
    """Peak resident memory of this process so far (ru_maxrss is in KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def huge_only(policy: str, family: str, n_ops: int, samples: int) -> dict[str, Any]:
    """Row C in this interpreter: seconds and peak memory of sampling one huge graph."""
    warm_up(policy)
    generate(family, n_ops, seed=0)  # the graph sample_seconds builds: its memory is counted
    before = max_rss_bytes()
    seconds = sample_seconds(policy, family, n_ops, samples, 0)
    return {
        "seconds": seconds,
        "peak_rss_bytes": max_rss_bytes(),
        "rss_before_sampling_bytes": before,
        "batch": batch(policy, n_ops),
    }


def huge_row(policy: str, family: str, sizes: Sizes) -> dict[str, Any]:
    """Row C for one family, in a fresh interpreter (`--huge-only`)."""
    command = [sys.executable, __file__, "--huge-only", "--fast-policy", policy]
    command += ["--huge-family", family, "--huge-ops", str(sizes.huge_ops)]
    command += ["--huge-samples", str(sizes.huge_samples)]
    result = subprocess.run(command, check=False, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"--huge-only {family} exited with {result.returncode}:\n{result.stderr}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def cli_row(policy: str, graph: Path, folder: Path, budget: int | None) -> dict[str, Any]:
    """Row D: one `graphopt optimize` subprocess with `policy`, timed from start to exit."""
    command = [str(Path(sys.executable).parent / "graphopt"), "optimize", str(graph)]
    command += ["-o", str(folder / "solution.json"), "--objective", "makespan"]
    command += ["--devices", str(DEVICES), "--solver", "gflownet", "--policy", policy, "--json"]
    if budget is not None:
        command += ["--budget", str(budget)]
    start = time.perf_counter()
    result = subprocess.run(command, check=False, capture_output=True, text=True, cwd=folder)
    wall = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"graphopt optimize exited with {result.returncode}:\n{result.stderr}")
    answer = json.loads(result.stdout)
    return {
        "wall_seconds": wall,
        "evaluations": answer["evaluations"],
        "seconds": answer["seconds"],
        "stopped": answer["stopped"],
        "makespan": answer["makespan"],
        "notes": answer["notes"],
    }


def verdict(ok: bool | None) -> str:
    """PASS, FAIL, or n/a where the row did not run at the bar's sizes."""
    return "n/a" if ok is None else "[green]PASS[/]" if ok else "[red]FAIL[/]"


def run(policies: dict[str, str], sizes: Sizes) -> dict[str, Any]:
    """All four rows, as the JSON --json writes."""
    load_start = os.getloadavg()
    for encoding in ENCODINGS:
        warm_up(policies[encoding])

    times: dict[str, list[float]] = {encoding: [] for encoding in ENCODINGS}
    for seed in range(sizes.repeats):
        for encoding in ENCODINGS:
            seconds = sample_seconds(
                policies[encoding], "erdos_renyi", sizes.ops, sizes.samples, seed
            )
            times[encoding].append(seconds)
    medians = {encoding: statistics.median(times[encoding]) for encoding in ENCODINGS}
    row_a: dict[str, Any] = {"ops": sizes.ops, "samples": sizes.samples}
    for encoding in ENCODINGS:
        row_a[encoding] = {
            "seconds": times[encoding],
            "median": medians[encoding],
            "batch": batch(policies[encoding], sizes.ops),
        }
    row_a["ratio"] = medians["per-state"] / medians["per-graph"]
    row_a["bar_seconds"] = 2.0
    at_bar = (sizes.ops, sizes.samples) == (100, 1000)
    row_a["pass"] = medians["per-graph"] <= 2.0 if at_bar else None

    row_b: dict[str, Any] = {"ops": sizes.large_ops}
    for encoding, samples in zip(
        ENCODINGS, (sizes.large_samples, sizes.large_fast_samples), strict=True
    ):
        seconds = sample_seconds(policies[encoding], "erdos_renyi", sizes.large_ops, samples, 0)
        row_b[encoding] = {
            "samples": samples,
            "seconds": seconds,
            "seconds_per_schedule": seconds / samples,
            "batch": batch(policies[encoding], sizes.large_ops),
        }
    row_b["ratio"] = (
        row_b["per-state"]["seconds_per_schedule"] / row_b["per-graph"]["seconds_per_schedule"]
    )

    row_c: dict[str, Any] = {"ops": sizes.huge_ops, "samples": sizes.huge_samples}
    row_c.update({"bar_seconds": 30.0, "bar_bytes": 4 * GB})
    at_bar = (sizes.huge_ops, sizes.huge_samples) == (5000, 100)
    for family in HUGE_FAMILIES:
        figures = huge_row(policies["per-graph"], family, sizes)
        ok = figures["seconds"] <= 30.0 and figures["peak_rss_bytes"] <= 4 * GB
        row_c[family] = {**figures, "pass": ok if at_bar else None}

    with tempfile.TemporaryDirectory() as folder:
        graph = Path(folder) / "g.json"
        graphopt = str(Path(sys.executable).parent / "graphopt")
        generated = [graphopt, "generate", "layered", "-n", str(sizes.cli_ops), "--seed", "0"]
        subprocess.run([*generated, "-o", str(graph)], check=True, capture_output=True)
        row_d: dict[str, Any] = {"ops": sizes.cli_ops, "budget": sizes.cli_budget}
        for encoding in ENCODINGS:
            row_d[encoding] = cli_row(policies[encoding], graph, Path(folder), sizes.cli_budget)
    row_d["ratio"] = row_d["per-state"]["wall_seconds"] / row_d["per-graph"]["wall_seconds"]
    row_d["bar_seconds"] = 5.0
    at_bar = sizes.cli_ops == 200 and sizes.cli_budget is None
    row_d["pass"] = row_d["per-graph"]["wall_seconds"] <= 5.0 if at_bar else None

    return {
        "sizes": asdict(sizes),
        "devices": DEVICES,
        "threads": torch.get_num_threads(),
        "load_average": {"start": load_start, "end": os.getloadavg()},
        "row_a": row_a,
        "row_b": row_b,
        "row_c": row_c,
        "row_d": row_d,
    }


def table(results: dict[str, Any]) -> Table:
    """The rich table of `run`'s results, with each bar beside its figure."""
    a, b, c, d = (results[f"row_{row}"] for row in "abcd")
    load = results["load_average"]
    title = (
        f"GFlowNet sampling, {results['devices']} devices (load average "
        f"{load['start'][0]:.1f} -> {load['end'][0]:.1f})"
    )
    out = Table(title=title)
    for name, justify in (
        ("row: graph", "left"),
        ("encoding", "left"),
        ("schedules", "right"),
        ("seconds", "right"),
        ("per schedule", "right"),
        ("peak memory", "right"),
        ("state / graph", "right"),
        ("bar", "left"),
    ):
        out.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for encoding in ENCODINGS:
        figures = a[encoding]
        each = ", ".join(f"{s:.2f}" for s in figures["seconds"])
        fast = encoding == "per-graph"
        out.add_row(
            f"A: ER, {a['ops']:,} ops",
            encoding,
            f"{a['samples']:,}",
            f"{figures['median']:.2f} ({each})",
            f"{1000 * figures['median'] / a['samples']:.2f} ms",
            "",
            "" if fast else f"{a['ratio']:.1f}x",
            f"<= 2 s: {verdict(a['pass'])}" if fast else "",
        )
    for encoding in ENCODINGS:
        figures = b[encoding]
        out.add_row(
            f"B: ER, {b['ops']:,} ops",
            encoding,
            f"{figures['samples']:,}",
            f"{figures['seconds']:.2f}",
            f"{figures['seconds_per_schedule']:.3g} s",
            "",
            "" if encoding == "per-graph" else f"{b['ratio']:.0f}x",
            "",
        )
    for family in HUGE_FAMILIES:
        figures = c[family]
        out.add_row(
            f"C: {'ER' if family == 'erdos_renyi' else family}, {c['ops']:,} ops",
            "per-graph",
            f"{c['samples']:,}",
            f"{figures['seconds']:.2f}",
            f"{figures['seconds'] / c['samples']:.3g} s",
            f"{figures['peak_rss_bytes'] / GB:.2f} GB",
            "",
            f"<= 30 s, 4 GB: {verdict(figures['pass'])}",
        )
    for encoding in ENCODINGS:
        figures = d[encoding]
        fast = encoding == "per-graph"
        out.add_row(
            f"D: CLI, layered, {d['ops']:,} ops",
            encoding,
            f"{figures['evaluations']:,} evals",
            f"{figures['wall_seconds']:.2f} wall, {figures['seconds']:.2f} solver",
            "",
            "",
            "" if fast else f"{d['ratio']:.1f}x",
            f"<= 5 s: {verdict(d['pass'])}" if fast else "",
        )
    return out


def main(argv: list[str] | None = None) -> None:
    """Parses the arguments and runs the benchmark (or, with --huge-only, row C's child)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", help="per-state checkpoint (default: untrained, shipped shape)")
    parser.add_argument("--fast-policy", help="per-graph checkpoint (default: untrained)")
    parser.add_argument("--repeats", type=int, help="row A's repeats (default 3)")
    parser.add_argument("--samples", type=int, help="row A's schedules (default 1,000)")
    parser.add_argument("--large-samples", type=int, help="row B's per-state schedules (4)")
    parser.add_argument("--huge-samples", type=int, help="row C's schedules (default 100)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke test")
    parser.add_argument("--json", type=Path, help="write every figure here")
    parser.add_argument("--huge-only", action="store_true", help="internal: row C's child")
    parser.add_argument("--huge-family", default="erdos_renyi", help="internal: row C's graph")
    parser.add_argument("--huge-ops", type=int, help="internal: row C's ops")
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    overrides = {
        "repeats": args.repeats,
        "samples": args.samples,
        "large_samples": args.large_samples,
        "huge_samples": args.huge_samples,
        "huge_ops": args.huge_ops,
    }
    sizes = replace(sizes, **{key: value for key, value in overrides.items() if value is not None})
    if args.huge_only:
        if args.fast_policy is None:
            parser.error("--huge-only needs --fast-policy")
        figures = huge_only(args.fast_policy, args.huge_family, sizes.huge_ops, sizes.huge_samples)
        print(json.dumps(figures))
        return
    with tempfile.TemporaryDirectory() as folder:
        untrained = untrained_policies(Path(folder))
        policies = {
            "per-state": args.policy or untrained["per-state"],
            "per-graph": args.fast_policy or untrained["per-graph"],
        }
        results = run(policies, sizes)
    results["quick"] = args.quick
    results["policies"] = {
        "per-state": args.policy or "untrained",
        "per-graph": args.fast_policy or "untrained",
    }
    # piped (a log, a test), rich would squeeze the table into 80 columns
    Console(width=None if sys.stdout.isatty() else 200).print(table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
