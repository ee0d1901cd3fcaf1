"""Paper 004's experiments in the shape of its tables 1-3 and figures 3-4 (`graphopt bench`).

Every method gives a set of candidate schedules of one graph, ranked by the proxy (contract
section 6, free transfers, 4 devices); the top K (100) are re-scored on three target models and
their diversity measured (`evaluation.candidates`):

- list scheduling: critical-path list scheduling, one schedule;
- HEFT: plain HEFT (upward ranks, earliest finish), one schedule;
- BRKGA: the best K of its final population after `evaluations` evaluations (paper 004 E.1);
- GFlowNet and PPO: `samples` (1,000) schedules drawn from a trained policy at its temperature.

The target models are set per graph, since the papers' graphs and ours differ in scale:
runtimes noisy with S = 0.5; a bandwidth at which moving the mean tensor costs the mean op
runtime; a latency of one mean op runtime (both async, paper 004 E.3's linear model a m + b with
one term dominating).

Suites: `robustness` (table 1: one real zoo graph, a policy trained on it per seed),
`generalization` (table 2: a policy trained on 50-op Erdos-Renyi and layered graphs, tested on
held-out graphs of five families), `real` (table 3: policies trained on 8 real zoo graphs,
tested on 4 unseen ones), `zero-shot` (table 1's columns for the shipped policy on 4 unseen
real zoo graphs that are not chains), `temperature` (fig. 3: speedups sampled at several sigma)
and `losses` (fig. 4: mean sampled speedup during training, log-partition variance against
trajectory balance). A method that fails on a graph (or a training run, a temperature) is
recorded and the suite goes on without it.
"""

from __future__ import annotations

import csv
import dataclasses
import json
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from graphopt.costmodels.machine import Machine
from graphopt.costmodels.targets import TargetModel
from graphopt.datasets import ZooSource
from graphopt.evaluation import reports
from graphopt.evaluation.candidates import CandidateReport, candidate_report
from graphopt.evaluation.metrics import mean_and_half_width, mean_with_ci
from graphopt.evaluation.suite import BenchSettings, Failures, Progress, Report
from graphopt.evaluation.zoo_real import zoo_graphs
from graphopt.ir.generators import generate
from graphopt.ir.graph import Graph
from graphopt.ir.io import write_graph
from graphopt.learning.runs import resolve_dataset
from graphopt.learning.systems.gflownet.config import PLAIN, TrainConfig
from graphopt.learning.systems.gflownet.solver import GFlowNet, GFlowNetSamplerConfig
from graphopt.learning.systems.gflownet.train import GRAPH_PREFIX
from graphopt.learning.training import train
from graphopt.solvers.base import Budget, Objective, Problem, SolverError, Tracker
from graphopt.solvers.brkga import BRKGA
from graphopt.solvers.list_scheduling import heft_events
from graphopt.solvers.random_keys import RandomKeyDecoder
from graphopt.solvers.registry import make_solver

DEVICES = 4
"""Paper 004's device count."""
TOP_K = 100
"""Candidates kept per method (paper 004: the top 100)."""
FAMILIES = ("erdos_renyi", "layered", "sbm", "watts_strogatz", "barabasi_albert")
"""Table 2's test families: the two trained on, then three unseen ones."""
TEST_SEED = 1_000_000
"""Test graphs are generated from seeds at and above this, which no dataset config uses."""
ROBUSTNESS_GRAPH = "vit-tiny"
"""Table 1's real graph: the zoo's ViT inference graph (93 ops)."""
REAL_TRAIN = (
    ZooSource("vit-tiny"),
    ZooSource("bert-tiny"),
    ZooSource("llama-tiny"),
    ZooSource("lstm-lm-tiny", training=True),
    ZooSource("t5-tiny"),
    ZooSource("vit-tiny", training=True),
    ZooSource("lstm-lm-tiny"),
    ZooSource("gnmt-tiny"),
)
"""Table 3's 8 training graphs (89-586 ops; critical-path list scheduling's speedup on 4 devices
1.24-2.92): six model families, inference and training steps."""
REAL_VALIDATION = 4
"""Table 3 validates on the 4 smallest training graphs, whole (89-149 ops): sampling the larger
ones (up to 586 ops) 32 times would cost minutes per validation."""
REAL_TEST = (
    ZooSource("resnet-tiny"),
    ZooSource("inception-tiny"),
    ZooSource("wavenet-tiny"),
    ZooSource("gpt2-tiny"),
)
"""Table 3's 4 test graphs (69-127 ops, list scheduling's speedup 1.18-2.29), of four families
no training graph is from (paper 004 E.6: 4 unseen graphs of a dozen to 128 ops)."""
ZERO_SHOT_TEST = (
    ZooSource("inception-small"),
    ZooSource("bert-tiny", training=True),
    ZooSource("llama-tiny", training=True),
    ZooSource("gnmt-tiny"),
)
"""The zero-shot table's graphs: zoo graphs that neither the shipped policy's dataset
(`gflownet-graph`) nor table 3's training holds, none a chain (239-586 ops; total runtime over
the critical path 2.2-3.1)."""

Schedules = list[tuple[np.ndarray, np.ndarray]]
Announce = Callable[[str], None]
"""Told what runs now."""


def target_models(graph: Graph) -> list[TargetModel]:
    """The three targets of a graph, scaled to its mean op runtime and mean tensor size."""
    runtime = graph.total_runtime / max(graph.n_ops, 1)
    sizes = graph.tensor_size[graph.tensor_size > 0]
    size = float(sizes.mean()) if sizes.size else 1.0
    bandwidth = size / runtime if runtime > 0 else 1.0
    return [
        TargetModel("noisy", 0.5),
        TargetModel("bandwidth", bandwidth),
        TargetModel("latency", runtime),
    ]


def list_scheduling_schedules(problem: Problem) -> Schedules:
    """Critical-path list scheduling's one schedule."""
    result = make_solver("critical-path").solve(problem, Budget(evaluations=1), seed=0)
    return [(result.solution.placement, result.solution.order)]


def heft_schedules(problem: Problem) -> Schedules:
    """HEFT's one schedule (plain, lazy transfers: the one the GFlowNet solver also scores)."""
    return [heft_events(problem.graph, problem.machine, problem.pinned)]


def brkga_schedules(problem: Problem, evaluations: int, seed: int) -> Schedules:
    """The final population of BRKGA (paper 001 defaults, population 100) after `evaluations`."""
    brkga = BRKGA()
    tracker = Tracker(problem, Budget(evaluations=evaluations))
    final = brkga.evolve(problem, tracker, np.random.default_rng(seed))
    decoder = RandomKeyDecoder(problem, brkga.config_for(problem).symmetry_breaking)
    decoded = [decoder.decode(keys) for keys in final.keys]
    return [(solution.placement, solution.order) for solution in decoded]


def policy_schedules(problem: Problem, policy: str | None, samples: int, seed: int) -> Schedules:
    """`samples` schedules drawn from a checkpoint at its sampling temperature.

    `policy` None samples the shipped policy (the solver finds it, or says none fits).
    """
    sampler = GFlowNet(GFlowNetSamplerConfig(policy, samples=samples))
    rng = np.random.default_rng(seed)
    return [schedule for batch in sampler.batches(problem, rng) for schedule in batch]


def report_row(
    method: str, seed: int, graph: Graph, problem: Problem, schedules: Schedules
) -> dict[str, Any]:
    """One method's top-K report on one graph as a flat CSV row."""
    report: CandidateReport = candidate_report(
        problem, schedules, min(TOP_K, len(schedules)), target_models(graph), seed
    )
    row: dict[str, Any] = {
        "method": method,
        "seed": seed,
        "graph": graph.name,
        "ops": graph.n_ops,
        "k": report.k,
        "proxy_best": report.proxy[0],
        "proxy_mean": report.proxy[1],
    }
    kinds = ("noisy", "bandwidth", "latency")
    for name, (best, mean) in zip(kinds, report.targets.values(), strict=True):
        row[f"{name}_best"], row[f"{name}_mean"] = best, mean
    row.update(report.diversity._asdict())
    return row


def train_policy(base: TrainConfig, run_dir: Path, progress: Announce, **changes: Any) -> str:
    """Trains (or resumes) a run of `base` with `changes` to its sections; returns best.pt."""
    config = base
    for section, values in changes.items():
        if isinstance(values, dict):
            values = dataclasses.replace(getattr(config, section), **values)
        config = dataclasses.replace(config, **{section: values})
    progress(f"training {run_dir.name}")
    train("gflownet", config, run_dir, resume=(run_dir / "last.pt").exists())
    return str(run_dir / "best.pt")


def _trainer(
    base: TrainConfig, run_dir: Path, progress: Announce, method: str, dataset: str, **run: Any
) -> Callable[[], str]:
    """`train_policy` of `method` on `dataset` with `run`'s settings, to call.

    'gflownet' trains with the log-partition variance loss, 'ppo' with PPO's.
    """
    loss = "variance" if method == "gflownet" else method
    return partial(train_policy, base, run_dir, progress, dataset=dataset, loss=loss, run=run)


def robustness(
    base: TrainConfig,
    output: Path,
    seeds: int,
    steps: int,
    ppo_steps: int,
    samples: int,
    evaluations: int,
    progress: Announce,
    failures: Failures | None = None,
) -> list[dict[str, Any]]:
    """Table 1: list scheduling, BRKGA, PPO and GFlowNet on one real graph, `seeds` seeds.

    The policies are trained on the graph itself (paper 004 5.1), each seed from scratch for
    `steps` steps (PPO: `ppo_steps`) with the `base` config (the shipped one), on its random
    connected 25-75-op sub-graphs (section 3.3: a step on the whole 93-op graph costs about six
    times one on 50 ops) and validated on the whole graph. A method that fails for a seed is
    recorded in `failures` and has no row (None: it raises).
    """
    from graphopt.importers.zoo import export_graph

    failures = Failures.or_raising(failures)
    graph = export_graph(ROBUSTNESS_GRAPH, training=False)
    path = output / f"{ROBUSTNESS_GRAPH}.json"
    output.mkdir(parents=True, exist_ok=True)
    write_graph(graph, path)
    problem = Problem(graph, Machine(DEVICES), Objective.MAKESPAN)
    methods = ["list-scheduling", "brkga", *(["ppo"] if ppo_steps else []), "gflownet"]
    rows = []
    for seed in range(seeds):
        for method in methods:
            progress(f"{method}, seed {seed}")
            if method == "list-scheduling":
                schedules = partial(list_scheduling_schedules, problem)
            elif method == "brkga":
                schedules = partial(brkga_schedules, problem, evaluations, seed)
            else:
                train = _trainer(
                    base, output / "runs" / f"{method}-seed{seed}", progress, method,
                    f"{GRAPH_PREFIX}{path}", steps=steps if method == "gflownet" else ppo_steps,
                    seed=seed, validate_every=max(steps // 4, 1),
                )  # fmt: skip
                schedules = partial(_trained_schedules, train, problem, samples, seed)
            what = f"{method} on {graph.name} (seed {seed})"
            row = failures.run(what, partial(_report_row, method, seed, graph, problem, schedules))
            if row is not None:
                rows.append(row)
    return rows


def _trained_schedules(
    train: Callable[[], str], problem: Problem, samples: int, seed: int
) -> Schedules:
    """Trains a policy, then samples its schedules."""
    return policy_schedules(problem, train(), samples, seed)


def _report_row(
    method: str, seed: int, graph: Graph, problem: Problem, schedules: Callable[[], Schedules]
) -> dict[str, Any]:
    """A method's schedules, then their top-K report as a row (`report_row`)."""
    return report_row(method, seed, graph, problem, schedules())


def test_graphs(per_family: int, n_ops: int) -> list[Graph]:
    """`per_family` held-out graphs of `n_ops` ops from each family of `FAMILIES`."""
    return [
        generate(family, n_ops, seed=TEST_SEED + index)
        for family in FAMILIES
        for index in range(per_family)
    ]


def generalization(
    policies: dict[str, str | None],
    per_family: int,
    n_ops: int,
    samples: int,
    evaluations: int,
    progress: Announce,
    failures: Failures | None = None,
) -> list[dict[str, Any]]:
    """Table 2: each method on held-out graphs of the five families (one seed per graph).

    Args:
        policies: method name ('gflownet', 'ppo') -> trained checkpoint (None: the shipped
            one), zero-shot here.
        per_family: test graphs per family.
        n_ops: ops per test graph (paper 004: 50, the training size).
        samples: schedules drawn from each policy.
        evaluations: BRKGA's budget.
        progress: told which graph runs.
        failures: where a method that fails on a graph is recorded (None: it raises).
    """
    graphs = test_graphs(per_family, n_ops)
    rows = compare(graphs, policies, samples, evaluations, progress, failures)
    for row in rows:
        row["family"] = row["graph"].split("_n")[0]
    return rows


def compare(
    graphs: Sequence[Graph],
    policies: dict[str, str | None],
    samples: int,
    evaluations: int,
    progress: Announce,
    failures: Failures | None = None,
) -> list[dict[str, Any]]:
    """List scheduling, HEFT, BRKGA (seeded by the graph's position) and each policy on each graph.

    A method that fails on a graph is recorded in `failures` and has no row (None: it raises).
    """
    failures = Failures.or_raising(failures)
    rows = []
    for index, graph in enumerate(graphs):
        problem = Problem(graph, Machine(DEVICES), Objective.MAKESPAN)
        progress(f"{graph.name}")
        makers = {
            "list-scheduling": partial(list_scheduling_schedules, problem),
            "heft": partial(heft_schedules, problem),
            "brkga": partial(brkga_schedules, problem, evaluations, index),
        }
        for method, policy in policies.items():
            makers[method] = partial(policy_schedules, problem, policy, samples, index)
        sets = {
            method: failures.run(f"{method} on {graph.name}", make)
            for method, make in makers.items()
        }
        rows += [
            report_row(method, 0, graph, problem, found)
            for method, found in sets.items()
            if found is not None
        ]
    return rows


def real_world(
    base: TrainConfig,
    output: Path,
    steps: int,
    ppo_steps: int,
    samples: int,
    evaluations: int,
    progress: Announce,
    zero_shot: str | None = None,
    failures: Failures | None = None,
) -> list[dict[str, Any]]:
    """Table 3: policies trained on `REAL_TRAIN` zoo graphs, tested on the unseen `REAL_TEST`.

    The GFlowNet (`steps`) and PPO (`ppo_steps`, 0: no PPO) train with the `base` config on
    random connected 25-75-op sub-graphs of the training graphs (section 3.3), validated on the
    `REAL_VALIDATION` smallest whole ones; `zero_shot` (None: the shipped GFlowNet, trained on
    synthetic graphs only) samples beside them as 'gflownet-synthetic'. Existing runs in
    `output`/runs are resumed, so a rerun only evaluates. A training run or a method on a
    graph that fails is recorded in `failures` and has no rows (None: it raises).
    """
    failures = Failures.or_raising(failures)
    output.mkdir(parents=True, exist_ok=True)
    paths = []
    for graph in zoo_graphs(REAL_TRAIN):
        paths.append(output / f"{graph.name}.json")
        write_graph(graph, paths[-1])
    trained: dict[str, str | None] = {}
    for method, method_steps in (("gflownet", steps), ("ppo", ppo_steps)):
        if method_steps:
            dataset = GRAPH_PREFIX + ",".join(str(path) for path in paths)
            train = _trainer(
                base, output / "runs" / method, progress, method, dataset, steps=method_steps,
                validate_every=max(method_steps // 6, 1), validation_graphs=REAL_VALIDATION,
            )  # fmt: skip
            policy = failures.run(f"training {method}", train)
            if policy is not None:
                trained[method] = policy
    trained["gflownet-synthetic"] = zero_shot
    return compare(zoo_graphs(REAL_TEST), trained, samples, evaluations, progress, failures)


def temperature_sweep(
    policy: str | None,
    sigmas: Sequence[float],
    samples: int,
    n_ops: int,
    failures: Failures | None = None,
) -> dict[float, np.ndarray]:
    """Fig. 3: the speedups of `samples` schedules of a held-out Erdos-Renyi graph per sigma.

    A temperature whose sampling fails is recorded in `failures` and left out (None: it raises).
    """
    failures = Failures.or_raising(failures)
    graph = generate("erdos_renyi", n_ops, seed=TEST_SEED)
    problem = Problem(graph, Machine(DEVICES), Objective.MAKESPAN)
    speedups = {}
    for sigma in sigmas:
        what = f"gflownet on {graph.name} (sigma {sigma:g})"
        found = failures.run(what, partial(_speedups, problem, policy, samples, sigma))
        if found is not None:
            speedups[sigma] = found
    return speedups


def _speedups(problem: Problem, policy: str | None, samples: int, sigma: float) -> np.ndarray:
    """The proxy speedups of `samples` schedules sampled at temperature `sigma`.

    From the GFlowNet's own distribution (plain `Decoding`), as the figure compares sigmas.
    """
    config = GFlowNetSamplerConfig(
        policy, samples, sigma, logit_temperature=PLAIN.logit_temperature, locality=PLAIN.locality
    )
    sampler = GFlowNet(config)
    schedules = [s for batch in sampler.batches(problem, np.random.default_rng(0)) for s in batch]
    total = problem.graph.total_runtime
    return np.array([total / problem.scorer.evaluate(p, e)[1] for p, e in schedules])


def loss_curves(
    base: TrainConfig,
    output: Path,
    seeds: int,
    steps: int,
    progress: Announce,
    failures: Failures | None = None,
) -> dict[str, list[np.ndarray]]:
    """Fig. 4: per loss, each seed's mean sampled speedup at every training step of `base`.

    The dataset is built once, into `output`/runs/dataset, and shared by the runs. A run that
    fails is recorded in `failures` and left out (None: it raises).
    """
    failures = Failures.or_raising(failures)
    if not base.dataset.startswith(GRAPH_PREFIX):
        built = resolve_dataset(base.dataset, output / "runs")
        base = dataclasses.replace(base, dataset=str(built))
    curves: dict[str, list[np.ndarray]] = {"variance": [], "balance": []}
    for loss, runs in curves.items():
        for seed in range(seeds):
            run_dir = output / "runs" / f"{loss}-seed{seed}"
            what = f"training with {loss} (seed {seed})"
            curve = failures.run(what, partial(_curve, base, run_dir, progress, loss, seed, steps))
            if curve is not None:
                runs.append(curve)
    return curves


def _curve(
    base: TrainConfig, run_dir: Path, progress: Announce, loss: str, seed: int, steps: int
) -> np.ndarray:
    """Trains `base` with `loss`; its mean sampled speedup at every step."""
    train_policy(
        base,
        run_dir,
        progress,
        loss=loss,
        run={"steps": steps, "seed": seed, "validate_every": steps},
    )
    with (run_dir / "log.csv").open() as file:
        logged = [row for row in csv.DictReader(file) if row["speedup"]]
    return np.array([float(row["speedup"]) for row in logged])


def summarize(rows: Sequence[dict[str, Any]], by: str = "method") -> list[dict[str, Any]]:
    """Mean and 95% CI half-width of every numeric column per `by` value, in first-seen order."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(row[by], []).append(row)
    numeric = [
        key
        for key, value in rows[0].items()
        if isinstance(value, float) and key not in ("seed", "ops")
    ]
    summary = []
    for name, members in groups.items():
        line: dict[str, Any] = {by: name, "n": len(members)}
        for key in numeric:
            line[key], line[f"{key}_ci"] = mean_and_half_width([m[key] for m in members])
        summary.append(line)
    return summary


def markdown(summary: Sequence[dict[str, Any]], columns: Sequence[str], by: str = "method") -> str:
    """A markdown table of `columns` (mean +- CI half-width) per row of `summary`."""
    lines = [
        "| " + " | ".join([by, *columns]) + " |",
        "| --- |" + " ---: |" * len(columns),
    ]
    for row in summary:
        cells = [f"{row[c]:.3f} ± {row[f'{c}_ci']:.3f}" for c in columns]
        lines.append("| " + " | ".join([str(row[by]), *cells]) + " |")
    return "\n".join(lines)


def plot_temperatures(path: Path, speedups: dict[float, np.ndarray], title: str) -> Path:
    """Fig. 3: one histogram of sampled speedups per temperature."""
    figure, axes = reports.pyplot().subplots(figsize=(7, 4))
    low = min(float(v.min()) for v in speedups.values())
    high = max(float(v.max()) for v in speedups.values())
    bins = np.linspace(low, high, 40)
    for sigma, values in sorted(speedups.items(), reverse=True):
        axes.hist(values, bins=bins, alpha=0.5, label=f"sigma = {sigma:g}")
    axes.set_xlabel("speedup (proxy)")
    axes.set_ylabel("schedules")
    axes.set_title(title)
    axes.legend()
    return reports.save_figure(figure, path)


def plot_curves(path: Path, curves: dict[str, list[np.ndarray]], window: int, title: str) -> Path:
    """Fig. 4: each loss's mean sampled speedup per step, over a moving `window` of steps.

    The mean over seeds is drawn as a line, each seed faintly; a loss without a run is left out.
    """
    figure, axes = reports.pyplot().subplots(figsize=(7, 4))
    kernel = np.ones(window) / window
    for (loss, runs), colour in zip(curves.items(), ("C0", "C1"), strict=False):
        if not runs:
            continue
        smooth = [np.convolve(run, kernel, mode="valid") for run in runs]
        steps = np.arange(window, window + len(smooth[0]))
        for line in smooth:
            axes.plot(steps, line, color=colour, alpha=0.25, linewidth=0.8)
        axes.plot(steps, np.mean(smooth, axis=0), color=colour, label=LOSS_LABELS[loss])
    axes.set_xlabel("training step")
    axes.set_ylabel(f"mean sampled speedup ({window}-step average)")
    axes.set_title(title)
    axes.legend()
    return reports.save_figure(figure, path)


LOSS_LABELS = {"variance": "log-partition variance", "balance": "trajectory balance"}
"""How fig. 4 names the losses."""


TABLE_COLUMNS = (
    "proxy_best",
    "proxy_mean",
    "noisy_mean",
    "bandwidth_mean",
    "latency_mean",
    "ged",
    "d_inv",
    "d_sen",
)
"""Tables 1 and 2's columns: proxy speedup of the best and of the top K, each target's mean
speedup over the top K, and the diversity of the top K."""
SIGMAS = (1.0, 0.1, 0.05, 0.01, 0.005, 0.002)
"""Fig. 3's temperatures: paper 004's training range [0.01, 1] and the shipped policy's
[0.002, 0.05] with the inference one, 0.005, inside it."""


@dataclasses.dataclass(frozen=True)
class GFlowNetBench:
    """The settings of a `graphopt bench gflownet-*` run.

    Attributes:
        seeds: table 1's seeds (a policy trained per seed) and fig. 4's runs per loss.
        steps: training steps per run (tables 1 and 3, fig. 4).
        ppo_steps: PPO's training steps in tables 1 and 3 (0: no PPO row; a PPO step costs
            about four GFlowNet steps).
        samples: schedules sampled per policy (paper 004: 1,000).
        evaluations: BRKGA's budget.
        per_family: table 2's test graphs per family.
        policy: the GFlowNet checkpoint of table 2, fig. 3 and table 3's synthetic-trained row
            (None: the shipped one).
        ppo_policy: a PPO checkpoint table 2 also samples (None: no PPO row).
        config: the training config of tables 1 and 3 and fig. 4 (a file or a shipped name).
    """

    seeds: int = 3
    steps: int = 200
    ppo_steps: int = 0
    samples: int = 1000
    evaluations: int = 20000
    per_family: int = 4
    policy: str | None = None
    ppo_policy: str | None = None
    config: str = "gflownet"

    def run(self, suite: str, folder: Path, command: str, progress: Announce) -> Report:
        """Runs one suite into `folder`; failed runs are recorded."""
        name = suite.removeprefix("gflownet-")
        failures = Failures()
        folder.mkdir(parents=True, exist_ok=True)
        if name in ("robustness", "generalization", "real", "zero-shot"):
            return self._table(name, folder, command, progress, failures)
        if name == "temperature":
            return self._temperatures(folder, command, failures)
        if name == "losses":
            return self._losses(folder, command, progress, failures)
        raise SolverError(f"unknown gflownet suite {suite!r}")

    def _table(
        self, name: str, folder: Path, command: str, progress: Announce, failures: Failures
    ) -> Report:
        """Table 1 (robustness), 2 (generalization) or 3 (real): a row per method and graph."""
        if name == "real":
            rows = real_world(
                TrainConfig.load(self.config), folder, self.steps, self.ppo_steps,
                self.samples, self.evaluations, progress, self.policy, failures,
            )  # fmt: skip
            title = (
                f"Table 3 shape: trained on {len(REAL_TRAIN)} real zoo graphs, tested on "
                f"{len(REAL_TEST)} unseen ones, top {TOP_K} (mean ± 95% CI over graphs)"
            )
        elif name == "zero-shot":
            graphs = zoo_graphs(ZERO_SHOT_TEST)
            policies = {"gflownet": self.policy}
            rows = compare(graphs, policies, self.samples, self.evaluations, progress, failures)
            title = (
                f"Zero-shot: the shipped policy on {len(graphs)} unseen real zoo graphs, "
                f"{DEVICES} devices, top {TOP_K} (mean ± 95% CI over graphs)"
            )
        elif name == "robustness":
            rows = robustness(
                TrainConfig.load(self.config), folder, self.seeds, self.steps, self.ppo_steps,
                self.samples, self.evaluations, progress, failures,
            )  # fmt: skip
            title = (
                f"Table 1 shape: {ROBUSTNESS_GRAPH} ({DEVICES} devices), top {TOP_K}, "
                f"{self.seeds} seeds (mean ± 95% CI half-width over seeds)"
            )
        else:
            policies: dict[str, str | None] = {"gflownet": self.policy}
            if self.ppo_policy is not None:
                policies["ppo"] = self.ppo_policy
            rows = generalization(
                policies, self.per_family, 50, self.samples, self.evaluations, progress, failures
            )
            title = (
                f"Table 2 shape: {self.per_family} held-out 50-op graphs of each of "
                f"{len(FAMILIES)} families, top {TOP_K} (mean ± 95% CI over graphs)"
            )
        if not rows:
            return reports.paper_report(folder, title, command, "No run finished.", failures)
        summary = summarize(rows)
        files = [
            reports.write_csv(folder / "runs.csv", rows),
            reports.write_json(folder / "summary.json", summary, 2),
        ]
        return reports.paper_report(
            folder, title, command, markdown(summary, TABLE_COLUMNS), failures, files
        )

    def _temperatures(self, folder: Path, command: str, failures: Failures) -> Report:
        """Fig. 3: the sampled speedups' spread per temperature."""
        speedups = temperature_sweep(self.policy, SIGMAS, self.samples, 25, failures)
        rows = [
            {
                "sigma": sigma,
                "mean": float(v.mean()),
                "p10": float(np.quantile(v, 0.1)),
                "p90": float(np.quantile(v, 0.9)),
                "best": float(v.max()),
                "distinct": len(np.unique(v)),
            }
            for sigma, v in speedups.items()
        ]
        title = f"Fig. 3 shape: {self.samples} schedules of a held-out 25-op ER graph per sigma"
        lines = [json.dumps(row) for row in rows]
        files = [reports.write_json(folder / "summary.json", rows, 2)]
        if rows:
            files += [
                reports.write_csv(folder / "temperatures.csv", rows),
                plot_temperatures(
                    folder / "temperatures.png", speedups, f"{self.samples} schedules per sigma"
                ),
            ]
        body = "\n".join(lines)
        return reports.paper_report(folder, title, command, body, failures, files, [title, *lines])

    def _losses(self, folder: Path, command: str, progress: Announce, failures: Failures) -> Report:
        """Fig. 4: each loss's mean sampled speedup over the last tenth of training."""
        curves = loss_curves(
            TrainConfig.load(self.config), folder, self.seeds, self.steps, progress, failures
        )
        window = max(self.steps // 10, 1)
        rows = []
        for loss, runs in curves.items():
            if not runs:
                continue
            finals = np.array([run[-window:].mean() for run in runs])
            mean, low, high = mean_with_ci(finals)
            rows.append(
                {
                    "loss": loss,
                    "final_mean": mean,
                    "ci_low": low,
                    "ci_high": high,
                    "per_seed": finals.tolist(),
                }
            )
        title = (
            f"Fig. 4 shape: mean sampled speedup over the last {window} of {self.steps} "
            f"steps, {self.seeds} seeds per loss"
        )
        lines = [json.dumps(row) for row in rows]
        files = [reports.write_json(folder / "summary.json", rows, 2)]
        if rows:
            title_of_plot = f"{self.seeds} seeds per loss (faint)"
            files.append(plot_curves(folder / "curves.png", curves, window, title_of_plot))
        body = "\n".join(lines)
        return reports.paper_report(folder, title, command, body, failures, files, [title, *lines])


def run_suite(settings: BenchSettings, progress: Progress) -> Report:
    """`graphopt bench gflownet-*`: the suite named, with the options it takes."""
    bench = GFlowNetBench(
        seeds=1 if settings.seeds is None else settings.seeds,
        steps=200 if settings.steps is None else settings.steps,
        ppo_steps=settings.ppo_steps,
        samples=settings.samples,
        evaluations=settings.budget,
        per_family=settings.graphs_per_family,
        policy=settings.policy,
        ppo_policy=settings.ppo_policy,
    )
    folder = settings.output_dir / settings.suite
    return bench.run(settings.suite, folder, settings.command, lambda label: progress(0, 0, label))
