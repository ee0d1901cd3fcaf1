"""Commands that solve and score: optimize, score, solvers, and warmup (the solvers' kernels)."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.table import Table

from graphopt.cli.common import (
    EXIT_INFEASIBLE,
    BandwidthOption,
    CapacityOption,
    GraphArgument,
    JsonFlag,
    SolutionArgument,
    SolutionDevicesOption,
    SolutionLatencyOption,
    SolutionModeOption,
    check_output,
    console,
    percent,
    print_json,
    shown,
    user_errors,
)
from graphopt.errors import GraphoptError, one_line
from graphopt.progress import progress_bar
from graphopt.solvers.registry import (
    FINETUNERS,
    FUSION_SEARCHERS,
    LEARNED,
    SOLVERS,
    default_fusion,
)

if TYPE_CHECKING:
    from graphopt.costmodels.machine import Machine
    from graphopt.costmodels.score import Score
    from graphopt.costmodels.targets import TargetModel
    from graphopt.ir.graph import Graph
    from graphopt.ir.solution import Solution
    from graphopt.optimize import OptimizeResult


ReferenceFlag = Annotated[bool, typer.Option(help="Use the plain reference scorer (slow oracle).")]
ScoreTargetOption = Annotated[
    list[str] | None,
    typer.Option(
        help="Also score on a target model: noisy:S, bandwidth:B or latency:L (repeatable)."
    ),
]
ScoreSeedOption = Annotated[int, typer.Option(help="Seed of the noisy target's runtimes.")]


@user_errors
def score(
    graph_path: GraphArgument,
    solution_path: SolutionArgument,
    devices: SolutionDevicesOption = None,
    capacity: CapacityOption = None,
    latency: SolutionLatencyOption = None,
    bandwidth: BandwidthOption = None,
    mode: SolutionModeOption = None,
    reference: ReferenceFlag = False,
    target: ScoreTargetOption = None,
    seed: ScoreSeedOption = 0,
    as_json: JsonFlag = False,
) -> None:
    """Check a solution and compute its peak memory and makespan (docs/format.md sections 5-6).

    Machine settings come from the options, else from the solution's `machine` field, else the
    defaults. Exits 1 when the solution's claimed objective disagrees with the computed one (checked
    only on the solution's own machine, i.e. when no machine option is given).
    """
    from graphopt.costmodels.machine import Machine
    from graphopt.costmodels.score import Scorer
    from graphopt.ir.io import read_graph, read_solution

    graph = read_graph(graph_path)
    solution = read_solution(solution_path, graph, n_devices=devices)
    machine = Machine.from_options(
        solution.n_devices, capacity, latency, bandwidth, mode, recorded=solution.machine
    )
    if reference:
        from graphopt.costmodels._reference import reference_score

        result = reference_score(graph, solution, machine)
    else:
        result = Scorer(graph, machine).score(solution)
    targets = _target_scores(graph, machine, solution, target or [], seed)
    claimed = dict(solution.objective)
    # Claims describe the solution's own machine; with another machine they are not comparable.
    overridden = any(v is not None for v in (devices, capacity, latency, bandwidth, mode))
    disagreements = [] if overridden else result.disagreements(claimed)
    if as_json:
        document = {
            "graph": graph.name,
            "devices": machine.n_devices,
            "valid": True,
            **_shown_score(result.to_json()),
            "fusion_groups": solution.n_groups,
            "machine": machine.to_json(),
            "claimed": claimed,
            "claims_agree": None if overridden else not disagreements,
        }
        print_json(document | ({"targets": targets} if targets else {}))
    else:
        title = f"{solution_path.name} on {graph.name or graph_path.name}"
        console.print(_score_table(title, result, machine, solution, targets))
        for line in disagreements:
            typer.echo(f"claim disagrees: {line}", err=True)
    if disagreements:
        raise typer.Exit(1)


def _target_scores(
    graph: Graph, machine: Machine, solution: Solution, texts: Sequence[str], seed: int
) -> list[dict[str, Any]]:
    """The solution's makespan and speedup on each `--target` model."""
    from graphopt.costmodels.score import Scorer
    from graphopt.costmodels.targets import TargetModel

    targets = []
    for text in texts:
        model = TargetModel.parse(text)
        target_graph, target_machine = model.apply(graph, machine, seed)
        scored = Scorer(target_graph, target_machine).score(solution)
        targets.append(
            {"target": str(model), "makespan": scored.makespan, "speedup": shown(scored.speedup)}
        )
    return targets


def _score_table(
    title: str,
    result: Score,
    machine: Machine,
    solution: Solution,
    targets: Sequence[dict[str, Any]],
) -> Table:
    """`score`'s table: validity, peaks, makespan, speedup, fusion and each target's numbers."""
    table = Table(title=title, show_header=False)
    table.add_row("valid", "yes")
    table.add_row("peak memory (bytes)", f"{result.peak_memory:,}")
    table.add_row("per device", ", ".join(f"{p:,}" for p in result.peak_memory_per_device))
    if machine.capacity is not None:
        table.add_row(
            "fits capacity",
            f"{'yes' if result.feasible else 'no'} ({machine.capacity:,} per device)",
        )
    table.add_row("makespan (s)", f"{result.makespan:.9g}")
    table.add_row("speedup", f"{result.speedup:.4f}")
    if solution.n_groups:
        fused = int((solution.fusion >= 0).sum())
        table.add_row("fusion", f"{solution.n_groups:,} groups of {fused:,} ops")
    for row in targets:
        table.add_row(
            f"on target {row['target']}",
            f"makespan {row['makespan']:.9g} s, speedup {row['speedup']:.4f}",
        )
    return table


def _shown_score(document: dict[str, Any]) -> dict[str, Any]:
    """A score's JSON with its speedup rounded for display (`shown`); files keep it exact."""
    return {**document, "speedup": shown(document["speedup"])}


_DEFAULT_FUSION = ", ".join(
    f"{entry.fusion} for {name}" for name, entry in SOLVERS.items() if entry.fusion != "none"
)


def _parse_pins(texts: list[str]) -> dict[str, int]:
    """`--pin OP=DEVICE` options as {op: device}; an op pinned to two devices is refused."""
    pins: dict[str, int] = {}
    for text in texts:
        name, sep, device = text.rpartition("=")
        if not sep or not name or not device.strip().isdigit():
            raise GraphoptError(
                f"--pin must look like OP=DEVICE with DEVICE an integer >= 0, got '{text}'"
            )
        if pins.get(name, int(device)) != int(device):
            raise GraphoptError(
                f"--pin: op '{name}' is pinned to device {pins[name]} and to device {int(device)}"
            )
        pins[name] = int(device)
    return pins


SolutionOutput = Annotated[
    Path, typer.Option("--output", "-o", help="Solution file to write (graphopt.solution/1).")
]
ObjectiveOption = Annotated[str, typer.Option(help="What to minimize: peak-memory or makespan.")]
DevicesOption = Annotated[int, typer.Option(help="Number of devices.")]
LatencyOption = Annotated[float, typer.Option(help="Seconds added to each transfer.")]
ModeOption = Annotated[str, typer.Option(help="Transfer mode: sync or async.")]
SolverOption = Annotated[str, typer.Option(help="Solver name (see `graphopt solvers`).")]
PolicyOption = Annotated[
    str | None,
    typer.Option(help=f"Policy checkpoint of a learned solver ({', '.join(LEARNED)})."),
]
FinetuneOption = Annotated[
    int,
    typer.Option(
        min=0, help=f"PPO steps on the graph before solving it ({', '.join(FINETUNERS)})."
    ),
]
BudgetOption = Annotated[
    int | None,
    typer.Option(help="Evaluations (repeatable with --seed) \\[default: --time 10 if neither]."),
]
TimeOption = Annotated[float | None, typer.Option("--time", help="Seconds of search.")]
SeedOption = Annotated[int, typer.Option(min=0, help="Random seed.")]
PinOption = Annotated[
    list[str] | None,
    typer.Option(help="Fix an op's device: OP=DEVICE, repeatable."),
]
CandidatesOption = Annotated[
    Path | None,
    typer.Option(
        help="Also write the top-K distinct schedules of a sampling solver (gflownet) here, "
        "with report.json: their speedups on the proxy and each --target, and diversity."
    ),
]
TopKOption = Annotated[int, typer.Option(min=1, help="K of --candidates.")]
CandidateTargetOption = Annotated[
    list[str] | None,
    typer.Option(
        help="Re-score the candidates on a target model: noisy:S, bandwidth:B or latency:L "
        "(repeatable; seeded by --seed)."
    ),
]
FusionOption = Annotated[
    str | None,
    typer.Option(
        help=f"Fuse ops: search (with placement and order: {', '.join(FUSION_SEARCHERS)}), "
        "or after the search, on its best placement and order: default (XLA-like), "
        "xla-priority, greedy (Inductor-like), anneal (over fusion priorities); or none "
        f"\\[default: {_DEFAULT_FUSION} on a graph with fusion classes, else none].",
        show_default=False,
    ),
]

RematFlag = Annotated[
    bool,
    typer.Option(
        "--remat",
        help="Then recompute ops (and transfer copies again) instead of keeping them "
        "(docs/format.md section 15; no fusion): for peak memory the lowest peak within "
        "--max-overhead, for makespan the least recomputation that fits --capacity.",
    ),
]
MaxOverheadOption = Annotated[
    float | None,
    typer.Option(
        min=0.0,
        help="With --remat: most extra makespan, in percent of the search's "
        "\\[default: 20 for peak memory, no limit for makespan].",
        show_default=False,
    ),
]


@user_errors
def optimize(
    graph_path: GraphArgument,
    output: SolutionOutput,
    objective: ObjectiveOption = "peak-memory",
    devices: DevicesOption = 2,
    capacity: CapacityOption = None,
    latency: LatencyOption = 0.0,
    bandwidth: BandwidthOption = None,
    mode: ModeOption = "sync",
    solver: SolverOption = "auto",
    policy: PolicyOption = None,
    finetune: FinetuneOption = 0,
    budget: BudgetOption = None,
    time_limit: TimeOption = None,
    seed: SeedOption = 0,
    pin: PinOption = None,
    candidates: CandidatesOption = None,
    top_k: TopKOption = 100,
    target: CandidateTargetOption = None,
    fusion: FusionOption = None,
    remat: RematFlag = False,
    max_overhead: MaxOverheadOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Find a placement and schedule; write the best solution and print a summary.

    Ctrl-C stops the search and still writes the best solution found so far. Exits 3 (after
    writing it) when no solution found fits the capacity. The output paths are checked before
    the search, so that a wrong one costs no search.
    """
    check_output(output, "-o")
    if candidates is not None:
        check_output(candidates, "--candidates", folder=True)
    from graphopt.costmodels.machine import Machine
    from graphopt.costmodels.targets import TargetModel
    from graphopt.ir.io import read_graph, write_solution
    from graphopt.optimize import optimize as run_optimize

    graph = read_graph(graph_path)
    if fusion is None:
        fusion = default_fusion(solver, bool(graph.op_fusion.any()))
    machine = Machine.from_options(devices, capacity, latency, bandwidth, mode)
    pins = _parse_pins(pin or [])
    targets = [TargetModel.parse(text) for text in target or []]
    if targets and candidates is None:
        raise GraphoptError("--target re-scores the candidates: give --candidates DIR too")
    search = functools.partial(
        run_optimize, graph, machine, objective, solver, budget, time_limit, seed, pins,
        policy=policy, candidates=top_k if candidates is not None else 0, fusion=fusion,
        finetune=finetune, remat=remat,
        max_overhead=None if max_overhead is None else max_overhead / 100,
    )  # fmt: skip
    result = _search(search, solver, budget, objective, as_json)
    write_solution(graph, result.solution, output)
    report = None
    if candidates is not None:
        report = _write_candidates(
            graph, machine, objective, result.candidates, top_k, candidates, targets, seed
        )
    summary = _summary(graph, solver, result, output, report)
    if as_json:
        print_json(summary)
    else:
        title = f"{solver} on {graph.name or graph_path.name}"
        console.print(_optimize_table(title, summary, result, fusion, top_k, candidates))
        for note in summary["notes"]:
            typer.echo(f"note: {one_line(note)}", err=True)
    if not result.feasible:
        _refuse_infeasible(result, machine, output)


def _search(
    search: Callable[..., OptimizeResult],
    solver: str,
    budget: int | None,
    objective: str,
    quiet: bool,
) -> OptimizeResult:
    """Runs `search(progress=...)` under a bar of the best value so far.

    Ctrl-C before any solution was found is exit 130 (after one, `optimize` returns the best).
    """
    from rich.progress import BarColumn, TextColumn, TimeElapsedColumn

    unit = "bytes" if objective == "peak-memory" else "s"
    columns = [
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[best]}"),
    ]
    with progress_bar(*columns, TimeElapsedColumn(), quiet=quiet) as bar:
        task = bar.add_task(solver, total=budget, best="")

        def progress(evaluations: int, value: float, excess: int) -> None:
            over = f", {excess:,} bytes over capacity in total" if excess else ""
            bar.update(task, completed=evaluations, best=f"best {value:,.6g} {unit}{over}")

        try:
            result = search(progress=progress)
        except KeyboardInterrupt:
            typer.echo("error: interrupted before any solution was found", err=True)
            raise typer.Exit(130) from None
        bar.update(task, completed=result.evaluations)
    return result


def _summary(
    graph: Graph,
    solver: str,
    result: OptimizeResult,
    output: Path,
    report: dict[str, Any] | None,
) -> dict[str, Any]:
    """What `optimize --json` prints: the result, its score and notes, and the candidates'."""
    solution = result.solution
    exact = int if result.objective.value == "peak-memory" else float  # bytes are integers
    summary = {
        "graph": graph.name,
        "solver": solver,
        "objective": result.objective.value,
        "value": exact(result.value),
        "lower_bound": exact(result.bound),
        "gap": shown(result.gap),
        "status": result.status,
        "stopped": solution.solver.get("stopped"),
        "feasible": result.feasible,
        "evaluations": result.evaluations,
        "seconds": result.seconds,
        "fusion_groups": solution.n_groups,
        **_shown_score(result.score.to_json()),
        "notes": list(solution.solver.get("notes", [])),
        "output": str(output),
    }
    if report is not None:
        summary["candidates"] = report
    return summary


def _optimize_table(
    title: str,
    summary: dict[str, Any],
    result: OptimizeResult,
    fusion: str,
    top_k: int,
    candidates: Path | None,
) -> Table:
    """`optimize`'s table: the value and its bound, status, score, and the candidates' report."""
    unit = "bytes" if result.objective.value == "peak-memory" else "s"
    table = Table(title=title, show_header=False)
    table.add_row("objective", f"{result.objective.value} ({unit})")
    table.add_row("best", f"{summary['value']:,.9g}")
    table.add_row(
        "lower bound",
        f"{summary['lower_bound']:,.9g} (best is {percent(result.gap)} above it)",
    )
    status = result.status
    if summary["stopped"] == "stalled":
        status += ", stopped early: the search stalled (see the note)"
    table.add_row("status", status)
    table.add_row("peak memory (bytes)", f"{result.score.peak_memory:,}")
    table.add_row("makespan (s)", f"{result.score.makespan:.9g}")
    if result.solution.n_groups:
        table.add_row("fusion groups", f"{result.solution.n_groups:,} ({fusion})")
    table.add_row("evaluations", f"{result.evaluations:,}")
    table.add_row("seconds", f"{result.seconds:.3f}")
    table.add_row("written to", str(summary["output"]))
    report = summary.get("candidates")
    if report is not None:
        table.add_row(
            f"top {report['k']} candidates"
            + (f" (K = {top_k} asked; see the note)" if report["k"] < top_k else ""),
            f"proxy speedup best {report['proxy']['best']:.4f}, "
            f"mean {report['proxy']['mean']:.4f}; written to {candidates}",
        )
        for name, row in report["targets"].items():
            table.add_row(
                f"on target {name}", f"speedup best {row['best']:.4f}, mean {row['mean']:.4f}"
            )
        diversity = report["diversity"]
        table.add_row(
            "diversity",
            f"GED {diversity['ged']:.4f}, d_inv {diversity['d_inv']:.4g}, "
            f"d_sen {diversity['d_sen']:.4g}",
        )
    return table


def _refuse_infeasible(result: OptimizeResult, machine: Machine, output: Path) -> NoReturn:
    """Exit 3 with one line: no solution fits the capacity (the best one was written)."""
    proof = f" No placement can meet it: {result.proof}." if result.proof else ""
    typer.echo(
        f"error: no solution found fits the capacity of {machine.capacity:,} bytes per "
        f"device; the best needs {result.score.peak_memory:,} bytes on its fullest device, "
        f"{result.excess:,} bytes over capacity in total; it was written to {output}.{proof}",
        err=True,
    )
    raise typer.Exit(EXIT_INFEASIBLE)


def _write_candidates(
    graph: Graph,
    machine: Machine,
    objective: str,
    kept: Sequence[Solution],
    asked: int,
    directory: Path,
    targets: Sequence[TargetModel],
    seed: int,
) -> dict[str, Any]:
    """Writes each candidate as candidate-NNNN.json and their report as report.json.

    The report's `k` is the number written and `asked` the K of `--top-k`: fewer are written
    when fewer distinct schedules were sampled (the solution's notes say why).
    """
    from graphopt.evaluation.candidates import score_candidates
    from graphopt.ir.io import write_solution
    from graphopt.solvers.base import Problem

    directory.mkdir(parents=True, exist_ok=True)
    for rank, candidate in enumerate(kept, start=1):
        write_solution(graph, candidate, directory / f"candidate-{rank:04d}.json")
    report = score_candidates(Problem(graph, machine, objective), kept, targets, seed)
    document = {
        "graph": graph.name,
        "k": report.k,
        "asked": asked,
        "proxy": dict(zip(("best", "mean"), report.proxy, strict=True)),
        "targets": {
            name: dict(zip(("best", "mean"), values, strict=True))
            for name, values in report.targets.items()
        },
        "diversity": report.diversity._asdict(),
        "seed": seed,
    }
    (directory / "report.json").write_text(json.dumps(document, indent=2) + "\n")
    return document


def solvers() -> None:
    """List the solvers `optimize --solver` and `bench --solvers` accept."""
    table = Table("solver", "what it does")
    for name, entry in SOLVERS.items():
        table.add_row(name, entry.description)
    console.print(table)


def warmup(
    workers: Annotated[
        int, typer.Option(min=1, help="Processes compiling side by side (1: this one only).")
    ] = 2,
) -> None:
    """Compile the numba kernels the commands use, so that no later run compiles them.

    The compiled code is cached beside the sources (or under NUMBA_CACHE_DIR) until they change.
    """
    from graphopt.warmup import warmup as run_warmup

    report = run_warmup(workers, progress=lambda line: typer.echo(line, err=True))
    typer.echo(
        f"warmup: {report.compiled} kernel signatures compiled, {report.loaded} loaded, "
        f"{report.solves} solves, {report.seconds:.1f} s"
    )
    if report.overlap:
        typer.echo(
            "warning: graphopt.warmup.STAGES is out of date: groups of one stage compile "
            "kernels side by side that they share (move those runs into one group, or a "
            "later stage): " + ", ".join(report.overlap),
            err=True,
        )
