"""The `bench` command: solvers compared on a suite with the papers' metrics, and zoo-real."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Protocol

import typer

from graphopt.cli.common import (
    EXIT_FAILED_RUNS,
    CapacityOption,
    JsonFlag,
    check_output,
    count,
    print_json,
    user_errors,
)
from graphopt.errors import GraphoptError
from graphopt.progress import progress_bar

SHOWN_FAILURES = 5
"""Failed runs named on stderr; summary.md lists every one."""

GFLOWNET_SUITES = (
    "gflownet-robustness",
    "gflownet-generalization",
    "gflownet-real",
    "gflownet-temperature",
    "gflownet-losses",
)
"""Paper 004's tables 1-3 and figures 3-4 (`graphopt.papers.gflownet`)."""
FUSION_SUITE = "fusion-table3"
"""Paper 002's table 3: fusion policies over no fusion (`graphopt.evaluation.fusion_bench`)."""
GDP_SUITE = "gdp-table1"
"""Paper 003's tables 1-2: placement (`graphopt.papers.gdp`)."""
GDP_FIG5_SUITE = "gdp-fig5"
GO_SUITES = ("go-fig6", "go-table3")
"""Paper 002's fig. 6 (modes) and table 3 (fusion) for GO (`graphopt.papers.go`)."""
"""Paper 002's fig. 5 for placement: held-out families (`graphopt.papers.gdp_fig5`)."""


def _names(text: str) -> tuple[str, ...]:
    """A comma-separated list of names, blanks dropped."""
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _parse_budgets(text: str) -> list[int]:
    """`--budgets 1000,2000,5000` as evaluation limits."""
    parts = [part.strip() for part in text.split(",")]
    if not all(part.isdigit() and int(part) > 0 for part in parts):
        raise GraphoptError(
            f"--budgets must be comma-separated positive evaluation counts, got '{text}'"
        )
    return [int(part) for part in parts]


@user_errors
def bench(
    suite: Annotated[
        str,
        typer.Argument(
            help="Suite name (tiny-20, small-100, zoo-held-out, zoo-real, fusion-table3, "
            "gdp-table1, gdp-fig5, gflownet-*, ...), dataset:DIR:SPLIT[:N] (N graphs of a built "
            "dataset's split) or a folder of graphs."
        ),
    ],
    solvers: Annotated[
        str, typer.Option(help="Comma-separated solver names; brkga is always included.")
    ] = "brkga,compiler-best,gp-metis",
    objective: Annotated[
        str | None,
        typer.Option(help="peak-memory or makespan \\[default: peak-memory; zoo-real: both]."),
    ] = None,
    devices: Annotated[
        int | None,
        typer.Option(
            help="Number of devices \\[default: 2; zoo-real, gdp-*: 2, 4 and 8; "
            "fusion-table3: 1, 2, 4]."
        ),
    ] = None,
    capacity: CapacityOption = None,
    capacity_fraction: Annotated[
        float | None,
        typer.Option(
            min=0.0,
            help="gdp-table1: each device's memory as a fraction of the graph's one-device peak "
            "\\[default: 0.6; 0: no capacity].",
        ),
    ] = None,
    budget: Annotated[
        int, typer.Option(min=1, help="Evaluations per solver run (fusion-table3: SA's).")
    ] = 5000,
    time_limit: Annotated[
        float | None,
        typer.Option("--time", help="zoo-real: seconds for auto per problem \\[default: 10]."),
    ] = None,
    budgets: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated evaluation limits, e.g. 1000,2000,5000,10000,20000,50000: "
            "every solver but cp-sat also runs at each, for the budget curve (paper 001 fig. 5)."
        ),
    ] = None,
    histogram: Annotated[
        str | None,
        typer.Option(
            help="Solver whose per-graph improvement over brkga the histogram shows (paper 001 "
            "fig. 4), added to --solvers if missing; default: every solver but brkga."
        ),
    ] = None,
    seeds: Annotated[
        int | None,
        typer.Option(min=1, help="Seeds per graph and solver \\[default: 1; fusion-table3: 3]."),
    ] = None,
    exact_time: Annotated[
        float, typer.Option("--exact-time", help="CP-SAT seconds per graph (> 0).")
    ] = 10.0,
    exact_max_ops: Annotated[
        int | None,
        typer.Option(
            "--exact-max-ops",
            help="Run cp-sat only on graphs of at most this many ops; the others' best known "
            "value comes from the other solvers. Default: no limit.",
        ),
    ] = None,
    output_dir: Annotated[
        Path, typer.Option("--output-dir", "--out", "-o", help="Folder for the reports.")
    ] = Path("out/bench"),
    policy: Annotated[
        str | None,
        typer.Option(
            help="gflownet-* suites: GFlowNet checkpoint; gdp-table1: the pre-trained GDP "
            "checkpoint \\[default: the shipped one]."
        ),
    ] = None,
    ppo_policy: Annotated[
        str | None,
        typer.Option(help="gflownet-generalization: also sample this PPO checkpoint."),
    ] = None,
    steps: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="gflownet-robustness/-real/-losses: training steps per run \\[default: 200]; "
            "gdp-table1: GDP-one's PPO steps \\[default: 100]; gdp-fig5: PPO steps of each "
            "pre-training run \\[default: 150].",
        ),
    ] = None,
    ppo_steps: Annotated[
        int,
        typer.Option(min=0, help="gflownet-robustness/-real: PPO's training steps (0: no PPO)."),
    ] = 0,
    samples: Annotated[
        int, typer.Option(min=1, help="gflownet-* suites: schedules sampled per policy.")
    ] = 1000,
    graphs_per_family: Annotated[
        int, typer.Option(min=1, help="gflownet-generalization: test graphs per family.")
    ] = 4,
    models: Annotated[
        str | None,
        typer.Option(
            help="fusion-table3, gdp-table1: comma-separated zoo models whose training graphs "
            "run \\[default: fusion-table3: gpt2-tiny,bert-tiny,t5-tiny,gnmt-tiny,"
            "lstm-lm-unrolled-32; gdp-table1: gpt2-tiny,inception-small,wavenet,gnmt-tiny,"
            "lstm-lm-unrolled-32 and the held-out llama-tiny,t5-tiny]; gdp-fig5: families "
            "held out in turn \\[default: transformer,inception,wavenet,rnn]."
        ),
    ] = None,
    policies: Annotated[
        str | None,
        typer.Option(
            help="fusion-table3: comma-separated fusion policies (none, default, xla-priority, "
            "greedy, sa); gdp-table1: comma-separated methods (one-device, expert, metis, "
            "hint, heft, brkga, regal, hdp, gdp-one, gdp-zero-shot, gdp-finetune) \\[default: all]."
        ),
    ] = None,
    sa_time: Annotated[
        bool,
        typer.Option(
            "--sa-time",
            help="go-table3: SA gets 20x GO-one's wall time (GO's condition), not its "
            "evaluations; go-fig6: so does the annealing over GO's three decisions.",
        ),
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Compare solvers on a suite with the papers' metrics; write markdown, CSV and plots.

    summary.md records the command line, so published results say how they were made. A run
    that fails is recorded there with its error and the suite goes on; the command then exits 1.
    """
    check_output(output_dir, "-o", folder=True)
    from graphopt.costmodels.machine import Machine
    from graphopt.evaluation.bench import BASELINE, markdown_table, run_bench, write_reports
    from graphopt.evaluation.suites import load_suite, report_name
    from graphopt.solvers.base import Objective
    from graphopt.solvers.registry import check_solver

    if sa_time and suite not in GO_SUITES:
        raise GraphoptError(f"--sa-time applies to the {' and '.join(GO_SUITES)} suites")
    if suite == FUSION_SUITE:
        _bench_fusion(models, policies, devices, budget, seeds, output_dir, as_json)
        return
    if suite == GDP_FIG5_SUITE:
        _bench_gdp_fig5(models, devices, seeds, steps, output_dir, as_json)
        return
    if suite in GO_SUITES:
        _bench_go(suite, models, devices, seeds, steps, sa_time, output_dir, as_json)
        return
    if suite == GDP_SUITE:
        _bench_gdp(
            models,
            policies,
            devices,
            seeds,
            steps,
            capacity,
            capacity_fraction,
            policy,
            output_dir,
            as_json,
        )
        return
    if capacity_fraction is not None:
        raise GraphoptError("--capacity-fraction applies to the gdp-table1 suite")
    if models is not None or policies is not None:
        raise GraphoptError(
            "--models and --policies apply to the fusion-table3 and gdp-table1 suites"
        )
    if suite == "zoo-real":
        _bench_zoo_real(objective, devices, time_limit, output_dir, as_json)
        return
    seeds = 1 if seeds is None else seeds
    if suite in GFLOWNET_SUITES:
        from graphopt.papers.gflownet import GFlowNetBench

        settings = GFlowNetBench(
            seeds,
            200 if steps is None else steps,
            ppo_steps,
            samples,
            budget,
            graphs_per_family,
            policy,
            ppo_policy,
        )
        with progress_bar(quiet=as_json) as bar:
            task = bar.add_task(f"bench {suite}", total=None)
            lines, written = settings.run(
                suite,
                output_dir / suite,
                _command_line(),
                lambda label: bar.update(task, description=label[:40]),
            )
        if as_json:
            print_json({"suite": suite, "summary": lines, "files": [str(p) for p in written]})
        else:
            typer.echo("\n".join(lines))
            typer.echo(f"wrote {', '.join(str(p) for p in written)}")
        return
    if time_limit is not None:
        raise GraphoptError("--time applies to the zoo-real suite; other suites take --budget")
    objective = objective or "peak-memory"
    devices = 2 if devices is None else devices
    names = [name.strip() for name in solvers.split(",") if name.strip()]
    if histogram is not None:
        if histogram == BASELINE:
            raise GraphoptError(f"--histogram shows a solver against {BASELINE}, not {BASELINE}")
        names = list(dict.fromkeys([*names, histogram]))
    for name in names:
        check_solver(name)
    limits = _parse_budgets(budgets) if budgets is not None else None
    if not (math.isfinite(exact_time) and exact_time > 0):
        raise GraphoptError(f"--exact-time must be finite seconds > 0, got {exact_time}")
    if exact_max_ops is not None and exact_max_ops < 1:
        raise GraphoptError(
            f"--exact-max-ops must be a positive number of ops, got {exact_max_ops}"
        )
    goal = Objective.parse(objective)
    graphs = load_suite(suite)
    machine = Machine.from_options(devices, capacity)
    with progress_bar(quiet=as_json) as bar:
        task = bar.add_task(f"bench {suite}", total=None)
        result = run_bench(
            graphs,
            machine,
            goal,
            names,
            seeds=range(seeds),
            evaluations=budget,
            exact_seconds=exact_time,
            budgets=limits,
            exact_max_ops=exact_max_ops,
            progress=lambda done, total, label: bar.update(
                task, completed=done, total=total, description=label[:40]
            ),
        )
    title = (
        f"{suite}: {goal.value}, {count(devices, 'device')}, {count(len(graphs), 'graph')}, "
        f"{count(seeds, 'seed')}"
    )
    folder = output_dir / report_name(suite)
    written = write_reports(result, folder, title, _command_line(), histogram)
    failed = [run.failure() for run in result.failures]
    if as_json:
        print_json(
            {
                "suite": suite,
                "summary": result.summary,
                "files": [str(p) for p in written],
                "failed": failed,
            }
        )
    else:
        typer.echo(title)
        typer.echo(markdown_table(result.summary, budget))
        typer.echo(f"wrote {', '.join(str(p) for p in written)}")
    if failed:
        distinct = list(dict.fromkeys(failed))  # a failing cell fails again at every budget
        for line in distinct[:SHOWN_FAILURES]:
            typer.echo(f"failed: {line}", err=True)
        if len(distinct) > SHOWN_FAILURES:
            typer.echo(f"failed: ... and {len(distinct) - SHOWN_FAILURES} more", err=True)
        others = "the others finished and " if len(failed) < result.n_runs else ""
        typer.echo(
            f"error: {len(failed)} of {result.n_runs} runs failed; {others}"
            f"{folder / 'summary.md'} lists each failure",
            err=True,
        )
        raise typer.Exit(EXIT_FAILED_RUNS)


def _bench_fusion(
    models: str | None,
    policies: str | None,
    devices: int | None,
    budget: int,
    seeds: int | None,
    output_dir: Path,
    as_json: bool,
) -> None:
    """`bench fusion-table3`: each fusion policy's speedup over no fusion on zoo training graphs."""
    from graphopt.evaluation.fusion_bench import FusionBench

    defaults = FusionBench()
    settings = FusionBench(
        models=defaults.models if models is None else _names(models),
        devices=defaults.devices if devices is None else (devices,),
        budget=budget,
        seeds=defaults.seeds if seeds is None else seeds,
        policies=defaults.policies if policies is None else _names(policies),
    )
    _run_suite(FUSION_SUITE, settings, output_dir, as_json)


def _bench_gdp(
    models: str | None,
    methods: str | None,
    devices: int | None,
    seeds: int | None,
    steps: int | None,
    capacity: str | None,
    fraction: float | None,
    policy: str | None,
    output_dir: Path,
    as_json: bool,
) -> None:
    """`bench gdp-table1`: GDP-one, fine-tuned and zero-shot GDP against the placement baselines."""
    from graphopt.papers.gdp import GDPBench

    defaults = GDPBench()
    if capacity is not None:
        raise GraphoptError(
            "gdp-table1 sets each graph's capacity with --capacity-fraction, not --capacity"
        )
    if fraction is None:
        fraction = defaults.capacity_fraction
    settings = GDPBench(
        models=defaults.models if models is None else _names(models),
        held_out=defaults.held_out if models is None else (),
        devices=defaults.devices if devices is None else (devices,),
        methods=defaults.methods if methods is None else _names(methods),
        seeds=1 if seeds is None else seeds,
        capacity_fraction=fraction or None,
        steps=defaults.steps if steps is None else steps,
        policy=policy,
    )
    _run_suite(GDP_SUITE, settings, output_dir, as_json)


def _bench_go(
    suite: str,
    models: str | None,
    devices: int | None,
    seeds: int | None,
    steps: int | None,
    sa_time: bool,
    output_dir: Path,
    as_json: bool,
) -> None:
    """`bench go-fig6` and `bench go-table3`: GO's modes, and its fusion against SA's."""
    from graphopt.papers.go import GOFig6Bench, GOTable3Bench

    kind = GOFig6Bench if suite == "go-fig6" else GOTable3Bench
    defaults = kind()
    settings = kind(
        models=defaults.models if models is None else _names(models),
        devices=defaults.devices if devices is None else (devices,),
        steps=defaults.steps if steps is None else steps,
        seeds=1 if seeds is None else seeds,
        sa_time=sa_time,
    )
    _run_suite(suite, settings, output_dir, as_json)


def _bench_gdp_fig5(
    families: str | None,
    devices: int | None,
    seeds: int | None,
    steps: int | None,
    output_dir: Path,
    as_json: bool,
) -> None:
    """`bench gdp-fig5`: pre-train without each family, then zero-shot and fine-tune on it."""
    from graphopt.papers.gdp_fig5 import GDPFig5Bench

    defaults = GDPFig5Bench()
    settings = GDPFig5Bench(
        families=defaults.families if families is None else _names(families),
        devices=defaults.devices if devices is None else (devices,),
        steps=defaults.steps if steps is None else steps,
        seeds=1 if seeds is None else seeds,
    )
    _run_suite(GDP_FIG5_SUITE, settings, output_dir, as_json)


class _Suite(Protocol):
    """A suite's settings that run it into a folder (`FusionBench`, `GDPBench`)."""

    def run(
        self, folder: Path, command: str, progress: Callable[[int, int, str], None]
    ) -> tuple[list[str], list[Path]]:
        """Runs the suite; returns its summary lines and the files written."""


def _run_suite(name: str, settings: _Suite, output_dir: Path, as_json: bool) -> None:
    """Runs a suite into output_dir/name with a progress bar; prints its summary."""
    with progress_bar(quiet=as_json) as bar:
        task = bar.add_task(f"bench {name}", total=None)
        lines, written = settings.run(
            output_dir / name,
            _command_line(),
            lambda done, total, label: bar.update(
                task, completed=done, total=total or None, description=label[:40]
            ),
        )
    if as_json:
        print_json({"suite": name, "summary": lines, "files": [str(p) for p in written]})
    else:
        typer.echo("\n".join(lines))
        typer.echo(f"wrote {', '.join(str(p) for p in written)}")


def _bench_zoo_real(
    objective: str | None,
    devices: int | None,
    seconds: float | None,
    output_dir: Path,
    as_json: bool,
) -> None:
    """`bench zoo-real`: real models on several devices, every baseline, auto, REGAL, bounds."""
    from graphopt.costmodels.machine import Machine
    from graphopt.evaluation.zoo_real import (
        comparisons,
        run_zoo_real,
        summary_lines,
        write_zoo_real,
        zoo_graphs,
    )
    from graphopt.optimize import DEFAULT_SECONDS
    from graphopt.solvers.base import Objective

    if seconds is not None and not (math.isfinite(seconds) and seconds > 0):
        raise GraphoptError(f"--time must be finite seconds > 0, got {seconds}")
    if devices is not None:
        Machine.from_options(devices)
    objectives = [Objective.parse(objective)] if objective else list(Objective)
    with progress_bar(quiet=as_json) as bar:
        task = bar.add_task("bench zoo-real: exporting graphs", total=None)
        graphs = zoo_graphs()
        runs = run_zoo_real(
            graphs,
            (2, 4, 8) if devices is None else (devices,),
            objectives,
            seconds or DEFAULT_SECONDS,
            progress=lambda done, total, label: bar.update(
                task, completed=done, total=total, description=label[:40]
            ),
        )
    written = write_zoo_real(runs, output_dir / "zoo-real", _command_line())
    lines = summary_lines(comparisons(runs))
    if as_json:
        print_json({"suite": "zoo-real", "summary": lines, "files": [str(p) for p in written]})
    else:
        for line in lines:
            typer.echo(line)
        typer.echo(f"wrote {', '.join(str(p) for p in written)}")


def _command_line() -> str:
    """This run's command line, recorded in the reports so that results say how they were made."""
    import shlex

    return shlex.join(["graphopt", *sys.argv[1:]])
