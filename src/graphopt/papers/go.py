"""GO's fig. 6 and table 3 (paper 002) on zoo training graphs: `bench go-fig6`, `bench go-table3`.

Fig. 6 shape (`GOFig6Bench`): per model and device count, the makespan of each mode of GO's
policy (`networks.go_config.MODES`), each trained on the graph alone from an untrained network of
the shipped config's shape (GO-one: `STEPS` PPO steps, then `SAMPLES` samples), beside the
compiler default (`compiler-default`: HEFT's placement, critical-path order, XLA-like default
fusion) and the shipped pre-trained policy zero-shot. Modes without a fusion head keep the
compiler's default fusion (their environment fuses that way while they train); 'sch+fu' takes
the expert placement. The shipped policy was pre-trained without the RNN family
(`HELD_OUT_FAMILY`), so its rows there are zero-shot on a held-out family.

Table 3 shape (`GOTable3Bench`): fusion speedup over no fusion on one placement and order.
GO-one (pl+sch+fu) decides placement, order and fusion together; its solution without groups is
the base that XLA-like default fusion and GO's simulated-annealing baseline over fusion
priorities (`fusion.anneal_fusion`, `SA_FACTOR` x GO-one's evaluations, or with `sa_time` as many
as fit in `SA_FACTOR` x GO-one's wall time, GO's own condition, at SA's rate measured on the graph)
fuse instead; each speedup is the base's makespan over the fused one, and the wall times of GO-one
and SA are reported.

Every solution is re-scored by the scorer and, where small, the plain reference
(`fusion_bench.checked_score`). A run that fails is recorded and the suite goes on: a failed
column of fig. 6 is NaN in its row, a failed row of table 3 is left out.
"""

from __future__ import annotations

import abc
import dataclasses
import math
import tempfile
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from graphopt.costmodels.machine import Machine
from graphopt.errors import GraphoptError
from graphopt.evaluation import reports
from graphopt.evaluation.fusion_bench import checked_score, zoo_training_graphs
from graphopt.evaluation.metrics import gain_line
from graphopt.evaluation.suite import BenchSettings, Failures, Progress, Report, check_counts
from graphopt.ir.graph import Graph
from graphopt.ir.solution import Solution
from graphopt.papers.gdp import BANDWIDTH, LATENCY
from graphopt.solvers.base import Budget, Objective, Problem, Result, Solver
from graphopt.solvers.bounds import fused_makespan_lower_bound
from graphopt.solvers.fusion import anneal_fusion, default_fusion
from graphopt.solvers.registry import make_solver

if TYPE_CHECKING:  # the learning stack (torch) loads only when a GO suite runs
    from graphopt.learning.systems.go.train import CentredGOTrainer

FIG6_MODELS = ("gpt2-tiny", "t5-tiny", "wavenet-tiny", "inception-tiny", "lstm-lm-tiny")
"""Fig. 6's zoo models (89-771 ops): two transformers, WaveNet, Inception and an LSTM LM."""
TABLE3_MODELS = ("gpt2-tiny", "gnmt-tiny", "lstm-lm-tiny")
"""Table 3's zoo models: GO's Transformer-XL, GNMT and RNNLM, small."""
HELD_OUT_FAMILY = ("gnmt-tiny", "lstm-lm-tiny", "lstm-lm-unrolled-32")
"""The RNN family, left out of the shipped policy's pre-training (model card)."""
FIG6_DEVICES = (4,)
TABLE3_DEVICES = (2, 4, 8)
STEPS = 20
"""GO-one's PPO steps."""
SAMPLES = 64
"""Samples offered after training (and zero-shot)."""
SA_FACTOR = 20
"""SA's evaluations (or seconds) per GO-one evaluation (or second): GO compares at 20x."""
BOUND = "bound"
"""Fig. 6's column of the fused makespan lower bound (ms), so the gap that remains shows."""
RATE_PROBE = 10_000
"""Annealing evaluations timed to measure SA's rate on a graph (`sa_evaluations`): a whole
schedule, so the probe pays for the larger groups SA's later candidates form."""
SEARCHES = {"brkga": 1, "go-anneal": SA_FACTOR}
"""Search baselines of fig. 6 and their evaluations per GO-one (pl+sch+fu) evaluation."""
ZERO_SHOT = "zero-shot"
"""The shipped pre-trained policy's column."""
DEFAULT = "compiler-default"
"""The compiler default's column."""


def machine(n_devices: int) -> Machine:
    """The suites' machine: GDP table 1's links, no capacity."""
    return Machine(n_devices=n_devices, latency=LATENCY, bandwidth=BANDWIDTH)


def template(mode: str, folder: Path) -> str:
    """An untrained checkpoint of the shipped GO config in `mode`: what GO-one starts from."""
    from graphopt.learning.runs import RunState
    from graphopt.learning.systems.go.config import GOTrainConfig
    from graphopt.learning.systems.go.network import GOPolicy
    from graphopt.learning.systems.go.train import SYSTEM

    shipped = GOTrainConfig.load("go")
    config = dataclasses.replace(
        shipped, policy=dataclasses.replace(shipped.policy, mode=mode), graphs_per_step=1
    )
    path = folder / f"untrained-{mode.replace('|', '_')}.pt"
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        SYSTEM.save(path, GOPolicy(config.policy), None, config, RunState())
    return str(path)


def go_solver(
    policy: str | None,
    steps: int,
    samples: int,
    scratch: bool,
    explore: float | None = 1.0,
    learn: bool = True,
) -> Solver:
    """GO (one, fine-tuned or zero-shot); a mode without fusion keeps the compiler's.

    `explore` and `learn` as `GOSolverConfig`'s: by default GO-one searches around its incumbent.
    """
    from graphopt.learning.systems.go.solver import GOAlone, GOSolverConfig

    config = GOSolverConfig(
        policy, steps, samples, scratch=scratch, compiler_fusion=True, explore=explore, learn=learn
    )
    return GOAlone(config)


def centred_trainer(
    graph: Graph, devices: int, seed: int, steps: int, explore: float, learn: bool = True
) -> CentredGOTrainer:
    """GO-one's centred search (`train_go.CentredGOTrainer`) from its start, ready to step.

    An untrained network of the shipped config's shape (pl+sch+fu), fusion searched, centred on
    the partition hint with critical-path order and every fusable op fused: what the learning
    benchmarks step by hand to look inside the search.
    """
    import torch

    from graphopt.learning.systems.go.config import GOTrainConfig
    from graphopt.learning.systems.go.env import GOGraphs
    from graphopt.learning.systems.go.network import GOPolicy
    from graphopt.learning.systems.go.train import CentredGOTrainer

    shipped = GOTrainConfig.load("go")
    config = dataclasses.replace(
        shipped, graphs_per_step=1, run=dataclasses.replace(shipped.run, steps=steps, seed=seed)
    )
    torch.manual_seed(seed)
    policy = GOPolicy(config.policy)
    graphs = GOGraphs({"train": [graph]}, machine(devices), True, config.policy.levels, "default")
    task = graphs.get("train", 0)
    start = task.env.default_actions(task.hint.numpy()[None])[0]
    return CentredGOTrainer(
        policy, graphs, np.zeros(1, dtype=np.int64), config, centre=start,
        reward=float(task.env.score(start).reward[0]), explore=explore, learn=learn,
    )  # fmt: skip


def fused_problem(graph: Graph, devices: int) -> Problem:
    """The suites' problem: makespan on `machine(devices)`, fusion searched."""
    return Problem(graph, machine(devices), Objective.MAKESPAN, fusion=True)


def solve(
    graph: Graph, devices: int, solver: Solver, seed: int, evaluations: int = 1 << 30
) -> tuple[Result, float]:
    """A solver's result with fusion allowed, and its wall seconds."""
    problem = fused_problem(graph, devices)
    start = time.perf_counter()
    result = solver.solve(problem, Budget(evaluations=evaluations), seed=seed)
    seconds = time.perf_counter() - start
    checked_score(graph, problem.machine, result.solution)
    return result, seconds


def run_fig6(
    graphs: Sequence[Graph],
    devices: Sequence[int],
    modes: Sequence[str],
    steps: int,
    seeds: int,
    folder: Path,
    progress: Progress,
    sa_time: bool = False,
    failures: Failures | None = None,
) -> list[dict[str, Any]]:
    """One row per (model, devices, seed): each column's makespan (ms) and seconds.

    The searches run after the modes: BRKGA with fusion genes at GO-one's (pl+sch+fu)
    evaluations, and annealing over GO's three decisions at `SA_FACTOR` x them, or with
    `sa_time` as many as it scores in `SA_FACTOR` x GO-one's wall time (at least that). A
    column that fails is recorded in `failures` and NaN in its row (None: it raises); the
    searches fail with GO-one, whose run sets their budget.
    """
    failures = Failures.or_raising(failures)
    templates = {mode: template(mode, folder) for mode in modes}
    columns = (DEFAULT, ZERO_SHOT, *modes, *SEARCHES)
    total = len(graphs) * len(devices) * seeds * len(columns)
    rows, done = [], 0
    for graph in graphs:
        for d in devices:
            for seed in range(seeds):
                row: dict[str, Any] = {"model": graph.name, "ops": graph.n_ops, "devices": d,
                                       "seed": seed, BOUND: 1e3 * fused_makespan_lower_bound(
                                           graph, d)}  # fmt: skip
                for column in columns:
                    progress(done, total, f"{graph.name} d={d} {column}")
                    what = f"{column} on {graph.name} ({d} devices, seed {seed})"
                    ran = failures.run(
                        what,
                        partial(
                            _fig6_column, graph, d, seed, row, column, templates, steps, sa_time
                        ),
                    )
                    result, seconds = (None, math.nan) if ran is None else ran
                    if column == "pl+sch+fu" and result is not None:
                        row["evaluations"] = result.evaluations
                    if column in SEARCHES and result is not None:
                        row[f"{column} evaluations"] = result.evaluations
                    row[column] = math.nan if result is None else 1e3 * result.value
                    row[f"{column} s"] = round(seconds, 2)
                    done += 1
                rows.append(row)
    return rows


def _fig6_column(
    graph: Graph,
    devices: int,
    seed: int,
    row: dict[str, Any],
    column: str,
    templates: dict[str, str],
    steps: int,
    sa_time: bool,
) -> tuple[Result, float]:
    """One fig. 6 column on the graph: its checked result and wall seconds.

    The searches' budgets come from GO-one's (pl+sch+fu) run, earlier in the row.
    """
    budget = 1 << 30
    if column == DEFAULT:
        solver = make_solver(DEFAULT)
    elif column == ZERO_SHOT:
        solver = go_solver(None, 0, SAMPLES, scratch=False)
    elif column not in SEARCHES:
        solver = go_solver(templates[column], steps, SAMPLES, scratch=True)
    elif "evaluations" not in row:
        raise GraphoptError(f"{column} runs at GO-one's (pl+sch+fu) evaluations, and it failed")
    else:
        solver, budget = make_solver(column), SEARCHES[column] * row["evaluations"]
        if sa_time and column == "go-anneal":
            allowed = SA_FACTOR * row["pl+sch+fu s"]
            budget = max(budget, int(search_rate(graph, devices, solver, seed) * allowed))
    return solve(graph, devices, solver, seed, budget)


def sa_evaluations(
    graph: Graph, devices: int, base: Solution, evaluations: int, seconds: float | None, seed: int
) -> int:
    """SA's budget: `evaluations`, or with `seconds` as many as SA scores in them (at least that).

    Annealing's schedule needs its length up front, so SA's rate is measured on the graph by
    a timed run of a whole (shorter) schedule after a one-evaluation run that pays what is paid
    once per graph. Candidates cost more as SA fuses more: on gnmt-tiny (4 devices) SA scores
    500 per second over 1,000 evaluations, 340 over 10,000 and 312 over 40,000.
    """
    if seconds is None:
        return evaluations
    probe = partial(anneal_fusion, graph, machine(devices), base, Objective.MAKESPAN)
    return max(evaluations, int(_rate(lambda k: probe(k, seed)) * seconds))


def search_rate(graph: Graph, devices: int, solver: Solver, seed: int) -> float:
    """Evaluations per second of a search on the suites' problem (`_rate`), unchecked."""
    problem = fused_problem(graph, devices)
    return _rate(lambda k: solver.solve(problem, Budget(evaluations=k), seed=seed))


def _rate(run: Callable[[int], object]) -> float:
    """Evaluations per second of `run(evaluations)`, timed over a whole schedule.

    The schedule is `RATE_PROBE` long, after a one-evaluation run that pays what is paid once
    per graph.
    """
    run(1)
    start = time.perf_counter()
    run(RATE_PROBE)
    return RATE_PROBE / (time.perf_counter() - start)


def run_table3(
    graphs: Sequence[Graph], devices: Sequence[int], steps: int, seeds: int, folder: Path,
    progress: Progress, sa_time: bool = False, failures: Failures | None = None,
) -> list[dict[str, Any]]:  # fmt: skip
    """One row per (model, devices, seed): each fusion's speedup on GO-one's unfused solution.

    SA gets `SA_FACTOR` x GO-one's evaluations, or with `sa_time` x its wall time. A row that
    fails is recorded in `failures` and left out (None: it raises).
    """
    failures = Failures.or_raising(failures)
    policy = template("pl+sch+fu", folder)
    total = len(graphs) * len(devices) * seeds
    rows, done = [], 0
    for graph in graphs:
        for d in devices:
            for seed in range(seeds):
                progress(done, total, f"{graph.name} d={d}")
                what = f"go-one on {graph.name} ({d} devices, seed {seed})"
                row = failures.run(
                    what, partial(_table3_row, graph, d, seed, policy, steps, sa_time)
                )
                if row is not None:
                    rows.append(row)
                done += 1
    return rows


def _table3_row(
    graph: Graph, d: int, seed: int, policy: str, steps: int, sa_time: bool
) -> dict[str, Any]:
    """GO-one on the graph, then the default's and SA's fusion of its unfused solution."""
    result, go_seconds = solve(graph, d, go_solver(policy, steps, SAMPLES, True), seed)
    fused = result.solution
    base = dataclasses.replace(fused, fusion=None, objective={})
    unfused = checked_score(graph, machine(d), base).makespan
    default = checked_score(graph, machine(d), default_fusion(graph, base)).makespan
    budget = sa_evaluations(
        graph, d, base, SA_FACTOR * result.evaluations,
        SA_FACTOR * go_seconds if sa_time else None, seed,
    )  # fmt: skip
    start = time.perf_counter()
    annealed = anneal_fusion(graph, machine(d), base, Objective.MAKESPAN, budget, seed)
    sa_seconds = time.perf_counter() - start
    sa = checked_score(graph, machine(d), annealed).makespan
    return {
        "model": graph.name, "ops": graph.n_ops, "devices": d, "seed": seed,
        "unfused ms": 1e3 * unfused, "default": unfused / default,
        "sa": unfused / sa, "go-one": unfused / result.value,
        "go-one ms": 1e3 * result.value, "go-one evaluations": result.evaluations,
        "go-one s": round(go_seconds, 2),
        "sa evaluations": budget,
        "sa s": round(sa_seconds, 2), "go groups": fused.n_groups,
        "sa groups": annealed.n_groups,
    }  # fmt: skip


def fig6_summary(rows: Sequence[dict[str, Any]], modes: Sequence[str]) -> list[str]:
    """The bars' lines: pl+sch+fu against the other modes and the compiler default.

    Each compares the rows where both columns ran (a failed run is NaN).
    """
    lines = []
    full = np.array([r["pl+sch+fu"] for r in rows]) if "pl+sch+fu" in modes else None
    if full is None:
        return lines
    searches = [s for s in SEARCHES if s in rows[0]]
    for other in (*[m for m in modes if m != "pl+sch+fu"], DEFAULT, ZERO_SHOT, *searches):
        theirs = np.array([r[other] for r in rows])
        ran = np.isfinite(theirs) & np.isfinite(full)
        if ran.any():
            gains = 100 * (theirs[ran] / full[ran] - 1)
            lines.append(
                f"- pl+sch+fu against {other}, per row: {gain_line(gains, digits=1)} "
                f"(min {gains.min():+.1f} %)"
            )
    gap = (full / np.array([r[BOUND] for r in rows]))[np.isfinite(full)]
    if gap.size:
        lines.append(
            f"- pl+sch+fu against the fused lower bound (`bounds.fused_makespan_lower_bound`): "
            f"{gap.mean():.2f}x on average ({gap.min():.2f}x to {gap.max():.2f}x)"
        )
    held = [r for r in rows if r["model"].split(".")[0] in HELD_OUT_FAMILY]
    for r in held:
        gain = 100 * (r[DEFAULT] / r[ZERO_SHOT] - 1)
        if math.isfinite(gain):
            lines.append(
                f"- zero-shot on held-out {r['model']} ({r['devices']} devices): "
                f"{r[ZERO_SHOT]:.4f} ms against the compiler default's {r[DEFAULT]:.4f} ms "
                f"({gain:+.1f} %)"
            )
    return lines


def table3_summary(rows: Sequence[dict[str, Any]]) -> list[str]:
    """GO-one's fusion speedup against SA's and the default's, and their times."""
    go = np.array([r["go-one"] for r in rows])
    sa = np.array([r["sa"] for r in rows])
    default = np.array([r["default"] for r in rows])
    ratio = np.array([r["sa s"] / r["go-one s"] for r in rows])
    evaluations = np.array([r["sa evaluations"] / r["go-one evaluations"] for r in rows])
    return [
        f"- mean fusion speedup over no fusion: default {default.mean():.3f}, SA "
        f"{sa.mean():.3f}, GO-one {go.mean():.3f}",
        f"- GO-one against SA, per row: {gain_line(100 * (go / sa - 1), digits=1)}; SA took "
        f"{np.median(ratio):.2f}x GO-one's wall "
        f"time and {np.median(evaluations):.0f}x its evaluations (medians)",
    ]


def plot_fig6(rows: Sequence[dict[str, Any]], modes: Sequence[str], path: Path) -> Path:
    """Bars per model: each mode's and the zero-shot's speedup over the compiler default."""
    plt = reports.pyplot()
    columns = (ZERO_SHOT, *modes, *(s for s in SEARCHES if s in rows[0]))
    names = [f"{r['model'].split('.')[0]} d={r['devices']}" for r in rows]
    figure, axis = plt.subplots(figsize=(max(6.0, 1.4 * len(rows)), 4))
    speedups = {column: [r[DEFAULT] / r[column] for r in rows] for column in columns}
    ticks = reports.grouped_bars(axis, speedups, names)
    axis.axhline(1.0, color="black", linewidth=0.8)
    axis.set_xticks(ticks, names, rotation=20)
    axis.set_ylabel("speedup over the compiler default")
    axis.legend(fontsize=7, ncol=2)
    return reports.save_figure(figure, path)


@dataclasses.dataclass(frozen=True)
class _GOBench(reports.PaperSuite):
    """What both GO suites take: zoo models, device counts, GO-one's PPO steps, seeds.

    Each runs its own rows (`rows`) and sums them up (`summary`); both write the same reports.
    """

    suite: ClassVar[str]
    """The suite's name, in its messages."""
    models: tuple[str, ...]
    devices: tuple[int, ...]
    steps: int = STEPS
    seeds: int = 1
    sa_time: bool = False
    """The annealing baseline gets `SA_FACTOR` x GO-one's wall time (GO's condition) instead
    of its evaluations."""

    @property
    def sa_budget(self) -> str:
        """What the annealing baseline's `SA_FACTOR` multiplies, in words."""
        return "wall time" if self.sa_time else "evaluations"

    def __post_init__(self) -> None:
        if not self.models:
            raise GraphoptError(f"{self.suite}: name at least one zoo model")
        check_counts(self.suite, self.devices, (1, 8), steps=self.steps, seeds=self.seeds)

    @abc.abstractmethod
    def rows(
        self, graphs: Sequence[Graph], scratch: Path, progress: Progress, failures: Failures
    ) -> list[dict[str, Any]]:
        """The suite's rows on the graphs; the untrained starts go to `scratch`."""

    @abc.abstractmethod
    def summary(self, rows: Sequence[dict[str, Any]]) -> list[str]:
        """The lines that sum the rows up."""

    def figures(self, rows: Sequence[dict[str, Any]], folder: Path) -> list[Path]:
        """The suite's figures, drawn into `folder`."""
        return []

    def table(self, folder: Path, progress: Progress, failures: Failures) -> list[dict[str, Any]]:
        """Exports the graphs and runs the suite's rows."""
        graphs = zoo_training_graphs(self.models)
        with tempfile.TemporaryDirectory() as scratch:  # the untrained starts
            return self.rows(graphs, Path(scratch), progress, failures)

    def report(
        self, rows: list[dict[str, Any]], folder: Path, command: str, failures: Failures
    ) -> Report:
        """summary.md (summary lines, the rows' table), runs.csv, runs.json and the figures."""
        files = [
            reports.write_csv(folder / "runs.csv", rows),
            reports.write_json(folder / "runs.json", rows),
        ]
        files += self.figures(rows, folder)
        lines = self.summary(rows)
        body = "\n".join(lines) + "\n\n" + reports.rows_table(rows)
        title = self.title()
        return reports.paper_report(folder, title, command, body, failures, files, [title, *lines])


@dataclasses.dataclass(frozen=True)
class GOFig6Bench(_GOBench):
    """`bench go-fig6`: GO's modes trained per graph, the compiler default, zero-shot."""

    suite: ClassVar[str] = "go-fig6"
    models: tuple[str, ...] = FIG6_MODELS
    devices: tuple[int, ...] = FIG6_DEVICES

    def title(self) -> str:
        """What ran."""
        return (
            f"GO fig. 6 shape: every mode trained on each graph alone ({self.steps} PPO steps, "
            f"{SAMPLES} samples), the compiler default, the shipped policy zero-shot, BRKGA at "
            f"GO-one's evaluations and annealing at {SA_FACTOR}x its {self.sa_budget}, on "
            f"{', '.join(map(str, self.devices))} devices; {self.seeds} seed(s); makespans in ms"
        )

    def rows(
        self, graphs: Sequence[Graph], scratch: Path, progress: Progress, failures: Failures
    ) -> list[dict[str, Any]]:
        """Every mode, the default, zero-shot and the searches on each graph (`run_fig6`)."""
        from graphopt.learning.systems.go.config import MODES

        return run_fig6(
            graphs, self.devices, MODES, self.steps, self.seeds, scratch, progress,
            self.sa_time, failures,
        )  # fmt: skip

    def summary(self, rows: Sequence[dict[str, Any]]) -> list[str]:
        """pl+sch+fu against the other columns (`fig6_summary`)."""
        from graphopt.learning.systems.go.config import MODES

        return fig6_summary(rows, MODES)

    def figures(self, rows: Sequence[dict[str, Any]], folder: Path) -> list[Path]:
        """fig6.png: the speedups over the compiler default."""
        from graphopt.learning.systems.go.config import MODES

        return [plot_fig6(rows, MODES, folder / "fig6.png")]


@dataclasses.dataclass(frozen=True)
class GOTable3Bench(_GOBench):
    """`bench go-table3`: fusion speedups of the default, SA and GO-one."""

    suite: ClassVar[str] = "go-table3"
    models: tuple[str, ...] = TABLE3_MODELS
    devices: tuple[int, ...] = TABLE3_DEVICES

    def title(self) -> str:
        """What ran."""
        return (
            f"GO table 3 shape: fusion speedup over no fusion on GO-one's placement and order "
            f"(GO-one: {self.steps} PPO steps + {SAMPLES} samples; SA: {SA_FACTOR}x GO-one's "
            f"{self.sa_budget}), on {', '.join(map(str, self.devices))} devices; "
            f"{self.seeds} seed(s)"
        )

    def rows(
        self, graphs: Sequence[Graph], scratch: Path, progress: Progress, failures: Failures
    ) -> list[dict[str, Any]]:
        """GO-one and the fusions of its solution on each graph (`run_table3`)."""
        return run_table3(
            graphs, self.devices, self.steps, self.seeds, scratch, progress, self.sa_time,
            failures,
        )  # fmt: skip

    def summary(self, rows: Sequence[dict[str, Any]]) -> list[str]:
        """GO-one's fusion against SA's and the default's (`table3_summary`)."""
        return table3_summary(rows)


def _settings(kind: type[_GOBench], settings: BenchSettings) -> _GOBench:
    """A GO suite's settings: the options given, the others at its defaults."""
    return kind(**settings.given("models", "devices", "steps", "seeds"), sa_time=settings.sa_time)


def run_fig6_suite(settings: BenchSettings, progress: Progress) -> Report:
    """`graphopt bench go-fig6`."""
    bench = _settings(GOFig6Bench, settings)
    return bench.run(settings.output_dir / settings.suite, settings.command, progress)


def run_table3_suite(settings: BenchSettings, progress: Progress) -> Report:
    """`graphopt bench go-table3`."""
    bench = _settings(GOTable3Bench, settings)
    return bench.run(settings.output_dir / settings.suite, settings.command, progress)
