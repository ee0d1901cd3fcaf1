"""The `bench` command: a suite from the table of suites, run with the options it takes.

Every suite runs through one protocol (`graphopt.evaluation.suite`): it declares the options it
reads, the command refuses any other one given, and its run function returns a `Report` that the
command prints the same way for all, naming the failed runs and exiting 1 when there are some.
A new suite is a run function and one entry in `SUITES`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from graphopt.cli.common import (
    EXIT_FAILED_RUNS,
    CapacityOption,
    JsonFlag,
    check_output,
    print_json,
    user_errors,
)
from graphopt.errors import GraphoptError
from graphopt.evaluation.suite import BenchSettings, Report, Suite
from graphopt.progress import progress_bar

SHOWN_FAILURES = 5
"""Failed runs named on stderr; summary.md lists every one."""

GRAPH_SUITES = Suite(
    "solvers compared with paper 001's metrics on graphs: a named suite (tiny-20, small-100, "
    "medium-500, layered-1000, large-3000, zoo-held-out), dataset:DIR:SPLIT[:N] or a folder",
    frozenset(
        {"solvers", "objective", "devices", "capacity", "budget", "budgets", "histogram"}
        | {"seeds", "exact_time", "exact_max_ops"}
    ),
    "graphopt.evaluation.bench:run_graph_suite",
)
"""Every suite name that is not in `SUITES`: the graph suites (`evaluation.suites`)."""
_CAPACITY_FRACTION = (
    "gdp-table1 sets each graph's capacity with --capacity-fraction, not --capacity"
)
_GO = frozenset({"models", "devices", "seeds", "steps", "sa_time"})
_GFLOWNET = "graphopt.papers.gflownet:run_suite"
SUITES: dict[str, Suite] = {
    "zoo-real": Suite(
        "real models on 2-8 devices: every baseline, auto and REGAL beside the lower bounds",
        frozenset({"objective", "devices", "time_limit"}),
        "graphopt.evaluation.zoo_real:run_suite",
    ),
    "fusion-table3": Suite(
        "paper 002's table 3: fusion policies over no fusion on zoo training graphs",
        frozenset({"models", "policies", "devices", "budget", "seeds"}),
        "graphopt.evaluation.fusion_bench:run_suite",
    ),
    "gdp-table1": Suite(
        "paper 003's tables 1-2: GDP's placements against the placement baselines",
        frozenset(
            {"models", "policies", "devices", "seeds", "steps", "capacity_fraction", "policy"}
        ),
        "graphopt.papers.gdp:run_suite",
        {"capacity": _CAPACITY_FRACTION},
    ),
    "gdp-fig5": Suite(
        "paper 002's fig. 5 for placement: GDP pre-trained without each family, tested on it",
        frozenset({"models", "devices", "seeds", "steps"}),
        "graphopt.papers.gdp_fig5:run_suite",
    ),
    "go-fig6": Suite(
        "paper 002's fig. 6: GO's modes trained per graph, the compiler default, zero-shot",
        _GO,
        "graphopt.papers.go:run_fig6_suite",
    ),
    "go-table3": Suite(
        "paper 002's table 3 for GO: fusion speedups of the default, SA and GO-one",
        _GO,
        "graphopt.papers.go:run_table3_suite",
    ),
    "gflownet-robustness": Suite(
        "paper 004's table 1: a GFlowNet trained per seed on one real graph",
        frozenset({"seeds", "steps", "ppo_steps", "samples", "budget"}),
        _GFLOWNET,
    ),
    "gflownet-generalization": Suite(
        "paper 004's table 2: a trained GFlowNet on held-out graphs of five families",
        frozenset({"policy", "ppo_policy", "samples", "budget", "graphs_per_family"}),
        _GFLOWNET,
    ),
    "gflownet-real": Suite(
        "paper 004's table 3: GFlowNets trained on real zoo graphs, tested on unseen ones",
        frozenset({"policy", "steps", "ppo_steps", "samples", "budget"}),
        _GFLOWNET,
    ),
    "gflownet-zero-shot": Suite(
        "paper 004's table 1 on unseen real zoo graphs: the shipped policy, zero-shot",
        frozenset({"policy", "samples", "budget"}),
        _GFLOWNET,
    ),
    "gflownet-temperature": Suite(
        "paper 004's fig. 3: sampled speedups per temperature",
        frozenset({"policy", "samples"}),
        _GFLOWNET,
    ),
    "gflownet-losses": Suite(
        "paper 004's fig. 4: sampled speedup while training, per loss",
        frozenset({"seeds", "steps"}),
        _GFLOWNET,
    ),
}
"""The named suites other than the graph suites, each with the options it takes."""
SUITES_HELP = "\n\n".join(
    ["Suites:", f"graph suites: {GRAPH_SUITES.help}"]
    + [f"{name}: {suite.help}" for name, suite in SUITES.items()]
).replace("[", "\\[")
"""`bench --help`'s list of suites, a paragraph each (typer renders help as rich markup)."""
EVERY_SUITE = frozenset({"suite", "output_dir", "as_json"})
"""What every suite takes: its name, the reports' folder, `--json`."""
DEFAULTS = BenchSettings()

# Help texts write `\\[` for a literal bracket: typer renders them as rich markup.
SuiteArgument = Annotated[
    str,
    typer.Argument(
        help="Suite name (tiny-20, small-100, zoo-held-out, zoo-real, fusion-table3, "
        "gdp-table1, gdp-fig5, gflownet-*, ...), dataset:DIR:SPLIT[:N] (N graphs of a built "
        "dataset's split) or a folder of graphs."
    ),
]
SolversOption = Annotated[
    str, typer.Option(help="Comma-separated solver names; brkga is always included.")
]
ObjectiveOption = Annotated[
    str | None,
    typer.Option(help="peak-memory or makespan \\[default: peak-memory; zoo-real: both]."),
]
DevicesOption = Annotated[
    int | None,
    typer.Option(
        help="Number of devices \\[default: 2; zoo-real, gdp-*: 2, 4 and 8; "
        "fusion-table3: 1, 2, 4]."
    ),
]
CapacityFractionOption = Annotated[
    float | None,
    typer.Option(
        min=0.0,
        help="gdp-table1: each device's memory as a fraction of the graph's one-device peak "
        "\\[default: 0.6; 0: no capacity].",
    ),
]
BudgetOption = Annotated[
    int, typer.Option(min=1, help="Evaluations per solver run (fusion-table3: SA's).")
]
TimeOption = Annotated[
    float | None,
    typer.Option("--time", help="zoo-real: seconds for auto per problem \\[default: 10]."),
]
BudgetsOption = Annotated[
    str | None,
    typer.Option(
        help="Comma-separated evaluation limits, e.g. 1000,2000,5000,10000,20000,50000: "
        "every solver but cp-sat also runs at each, for the budget curve (paper 001 fig. 5)."
    ),
]
HistogramOption = Annotated[
    str | None,
    typer.Option(
        help="Solver whose per-graph improvement over brkga the histogram shows (paper 001 "
        "fig. 4), added to --solvers if missing; default: every solver but brkga."
    ),
]
SeedsOption = Annotated[
    int | None,
    typer.Option(min=1, help="Seeds per graph and solver \\[default: 1; fusion-table3: 3]."),
]
ExactTimeOption = Annotated[
    float, typer.Option("--exact-time", help="CP-SAT seconds per graph (> 0).")
]
ExactMaxOpsOption = Annotated[
    int | None,
    typer.Option(
        "--exact-max-ops",
        help="Run cp-sat only on graphs of at most this many ops; the others' best known "
        "value comes from the other solvers. Default: no limit.",
    ),
]
OutputDirOption = Annotated[
    Path, typer.Option("--output-dir", "--out", "-o", help="Folder for the reports.")
]
PolicyOption = Annotated[
    str | None,
    typer.Option(
        help="gflownet-generalization/-real/-zero-shot/-temperature: GFlowNet checkpoint; "
        "gdp-table1: the pre-trained GDP checkpoint \\[default: the shipped one]."
    ),
]
PPOPolicyOption = Annotated[
    str | None,
    typer.Option(help="gflownet-generalization: also sample this PPO checkpoint."),
]
StepsOption = Annotated[
    int | None,
    typer.Option(
        min=1,
        help="gflownet-robustness/-real/-losses: training steps per run \\[default: 200]; "
        "gdp-table1: GDP-one's PPO steps \\[default: 100]; gdp-fig5: PPO steps of each "
        "pre-training run \\[default: 150].",
    ),
]
PPOStepsOption = Annotated[
    int,
    typer.Option(min=0, help="gflownet-robustness/-real: PPO's training steps (0: no PPO)."),
]
SamplesOption = Annotated[
    int,
    typer.Option(min=1, help="gflownet-* suites but -losses: schedules sampled per policy."),
]
GraphsPerFamilyOption = Annotated[
    int, typer.Option(min=1, help="gflownet-generalization: test graphs per family.")
]
ModelsOption = Annotated[
    str | None,
    typer.Option(
        help="fusion-table3, gdp-table1: comma-separated zoo models whose training graphs "
        "run \\[default: fusion-table3: gpt2-tiny,bert-tiny,t5-tiny,gnmt-tiny,"
        "lstm-lm-unrolled-32; gdp-table1: gpt2-tiny,inception-small,wavenet,gnmt-tiny,"
        "lstm-lm-unrolled-32 and the held-out llama-tiny,t5-tiny]; gdp-fig5: families "
        "held out in turn \\[default: transformer,inception,wavenet,rnn]."
    ),
]
PoliciesOption = Annotated[
    str | None,
    typer.Option(
        help="fusion-table3: comma-separated fusion policies (none, default, xla-priority, "
        "greedy, sa); gdp-table1: comma-separated methods (one-device, expert, metis, "
        "hint, heft, brkga, regal, hdp, gdp-one, gdp-zero-shot, gdp-finetune) \\[default: all]."
    ),
]
SaTimeFlag = Annotated[
    bool,
    typer.Option(
        "--sa-time",
        help="go-table3: SA gets 20x GO-one's wall time (GO's condition), not its "
        "evaluations; go-fig6: so does the annealing over GO's three decisions.",
    ),
]


@user_errors
def bench(
    ctx: typer.Context,
    suite: SuiteArgument,
    solvers: SolversOption = DEFAULTS.solvers,
    objective: ObjectiveOption = None,
    devices: DevicesOption = None,
    capacity: CapacityOption = None,
    capacity_fraction: CapacityFractionOption = None,
    budget: BudgetOption = DEFAULTS.budget,
    time_limit: TimeOption = None,
    budgets: BudgetsOption = None,
    histogram: HistogramOption = None,
    seeds: SeedsOption = None,
    exact_time: ExactTimeOption = DEFAULTS.exact_time,
    exact_max_ops: ExactMaxOpsOption = None,
    output_dir: OutputDirOption = DEFAULTS.output_dir,
    policy: PolicyOption = None,
    ppo_policy: PPOPolicyOption = None,
    steps: StepsOption = None,
    ppo_steps: PPOStepsOption = DEFAULTS.ppo_steps,
    samples: SamplesOption = DEFAULTS.samples,
    graphs_per_family: GraphsPerFamilyOption = DEFAULTS.graphs_per_family,
    models: ModelsOption = None,
    policies: PoliciesOption = None,
    sa_time: SaTimeFlag = False,
    as_json: JsonFlag = False,
) -> None:
    """Compare solvers on a suite with the papers' metrics; write markdown, CSV and plots.

    summary.md records the command line, so published results say how they were made. A run
    that fails is recorded there with its error and the suite goes on; the command then exits 1.
    """
    check_output(output_dir, "-o", folder=True)
    chosen = SUITES.get(suite, GRAPH_SUITES)
    _refuse_other_options(ctx, suite, chosen)
    values = {name: value for name, value in ctx.params.items() if name != "as_json"}
    settings = BenchSettings(**values, command=_command_line())
    with progress_bar(quiet=as_json) as bar:
        task = bar.add_task(f"bench {suite}", total=None)
        report = chosen.run(
            settings,
            lambda done, total, label: bar.update(
                task, completed=done, total=total or None, description=label[:40]
            ),
        )
    _print_report(suite, report, as_json)


def _refuse_other_options(ctx: typer.Context, name: str, suite: Suite) -> None:
    """Refuses the first option given that the suite does not take, naming both."""
    for param in ctx.command.params:
        option = param.name or ""
        if option in EVERY_SUITE or option in suite.options:
            continue
        source = ctx.get_parameter_source(option)
        if source is None or source.name == "DEFAULT":  # typer's own click: compare by name
            continue
        flag = param.opts[0]
        raise GraphoptError(suite.refusals.get(option) or _applies(flag, option, name))


def _applies(flag: str, option: str, name: str) -> str:
    """`--x applies to the a and b suites, not c`: which suites take an option."""
    takers = [suite for suite, entry in SUITES.items() if option in entry.options]
    if option in GRAPH_SUITES.options:
        takers.insert(0, "graph")
    listed = takers[0] if len(takers) == 1 else f"{', '.join(takers[:-1])} and {takers[-1]}"
    return f"{flag} applies to the {listed} suite{'s' if len(takers) > 1 else ''}, not {name}"


def _print_report(suite: str, report: Report, as_json: bool) -> None:
    """Prints the report; names the failed runs on stderr and exits 1 when there are some."""
    if as_json:
        files = [str(p) for p in report.files]
        print_json(
            {"suite": suite, "summary": report.summary, "files": files, "failed": report.failed}
        )
    else:
        if report.text:
            typer.echo(report.text)
        typer.echo(f"wrote {', '.join(str(p) for p in report.files)}")
    if not report.failed:
        return
    distinct = list(dict.fromkeys(report.failed))  # a failing cell fails again at every budget
    for line in distinct[:SHOWN_FAILURES]:
        typer.echo(f"failed: {line}", err=True)
    if len(distinct) > SHOWN_FAILURES:
        typer.echo(f"failed: ... and {len(distinct) - SHOWN_FAILURES} more", err=True)
    others = "the others finished and " if len(report.failed) < report.runs else ""
    typer.echo(
        f"error: {len(report.failed)} of {report.runs} runs failed; {others}"
        f"{report.folder / 'summary.md'} lists each failure",
        err=True,
    )
    raise typer.Exit(EXIT_FAILED_RUNS)


def _command_line() -> str:
    """This run's command line, recorded in the reports so that results say how they were made."""
    import shlex

    return shlex.join(["graphopt", *sys.argv[1:]])
