"""GO's fig. 5 (paper 002) for GDP placement: pre-train without a family, test on it (`gdp-fig5`).

For each model family, a GDP policy is pre-trained with the shipped training config on the
shipped training set's zoo graphs minus that family's, then evaluated on the family's table-1
graphs (`gdp.MODELS`) on 2, 4 and 8 devices under the table-1 machine and capacity:
zero-shot (its most likely placement and samples), fine-tuned for `gdp.FINETUNE_STEPS`
PPO steps, and beside them GDP-one (trained on the graph alone), the human expert, `gp-metis`
and the hint, and the shipped policy's zero-shot (pre-trained on every family,
the held-out one included): the gap between the two zero-shots is what holding a family out
costs. Families are held out whole: the transformer family is gpt2, bert and vit; the RNN
family, both LSTM models. Pre-training runs are kept in `folder/runs/` and resumed, so a rerun
only evaluates; their logs are copied to `folder/logs/`. Every solution is re-scored
(`gdp.run_table1`). A pre-training run or a method that fails is recorded and the suite goes
on without it (a family whose pre-training failed keeps only the shipped policy's rows).
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from graphopt.errors import GraphoptError
from graphopt.evaluation import reports
from graphopt.evaluation.fusion_bench import zoo_training_graphs
from graphopt.evaluation.suite import BenchSettings, Failures, Progress, Report, check_counts
from graphopt.ir.graph import Graph
from graphopt.ir.io import write_graph
from graphopt.papers.gdp import (
    CAPACITY_FRACTION,
    DEVICES,
    FINETUNE_STEPS,
    GDP_ONE_STEPS,
    expert_bars,
    geomean_gain,
    makespan_table,
    mean_cell,
    run_table1,
)

if TYPE_CHECKING:
    from graphopt.learning.systems.gdp.config import TrainConfig

PRETRAINING = (
    "gpt2-tiny",
    "bert-tiny",
    "resnet-tiny",
    "inception-tiny",
    "wavenet-tiny",
    "lstm-lm-tiny",
    "gnmt-tiny",
    "vit-tiny",
)
"""The shipped policy's training graphs (model card)."""
FAMILIES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "transformer": (("gpt2-tiny", "bert-tiny", "vit-tiny"), ("gpt2-tiny",)),
    "inception": (("inception-tiny",), ("inception-small",)),
    "wavenet": (("wavenet-tiny",), ("wavenet",)),
    "rnn": (("lstm-lm-tiny", "gnmt-tiny"), ("gnmt-tiny", "lstm-lm-unrolled-32")),
}
"""Family -> (pre-training graphs left out, table-1 graphs it is tested on)."""
PRETRAIN_STEPS = 150
"""PPO steps of each pre-training run (the shipped run's best validation was at step 100)."""
METHODS = ("expert", "metis", "hint", "gdp-one", "gdp-zero-shot", "gdp-finetune")
"""Methods run with the held-out policy; 'shipped-zero-shot' is added beside them."""
SHIPPED = "shipped-zero-shot"
"""The shipped policy's zero-shot rows (pre-trained on every family)."""
COLUMNS = ("expert", "metis", "hint", "gdp-one", "gdp-zero-shot", "gdp-finetune", SHIPPED)
"""Table columns, in order."""
FIGURE = ("gdp-one", "gdp-zero-shot", "gdp-finetune", SHIPPED)
"""The figure's bars, in order."""


def pretrain(
    base: TrainConfig,
    name: str,
    paths: Sequence[Path],
    run_dir: Path,
    steps: int,
    progress: Progress,
) -> Path:
    """Pre-trains (or resumes) `base` on the graph files at `paths`; returns its best.pt."""
    from graphopt.learning.runs import GRAPH_PREFIX
    from graphopt.learning.training import train

    config = dataclasses.replace(
        base,
        name=name,
        dataset=GRAPH_PREFIX + ",".join(str(path) for path in paths),
        run=dataclasses.replace(base.run, steps=steps),
    )
    progress(0, steps, name)
    train(
        "gdp",
        config,
        run_dir,
        resume=(run_dir / "last.pt").exists(),
        progress=lambda row: progress(int(row["step"]), steps, name),
    )
    return run_dir / "best.pt"


def run_fig5(
    folder: Path,
    pretraining: Sequence[Graph],
    families: Mapping[str, tuple[Sequence[str], Sequence[Graph]]],
    base: TrainConfig,
    devices: Sequence[int] = DEVICES,
    steps: int = PRETRAIN_STEPS,
    seeds: int = 1,
    gdp_one_steps: int = GDP_ONE_STEPS,
    finetune: int = FINETUNE_STEPS,
    samples: int = 32,
    shipped: str | None = None,
    progress: Progress | None = None,
    failures: Failures | None = None,
) -> list[dict[str, Any]]:
    """Rows of `gdp.run_table1` for every family, each with a `family` field.

    Args:
        folder: graph files (graphs/) and pre-training runs (runs/, resumed when present).
        pretraining: every family's pre-training graphs, named `<model>.<kind>`.
        families: family -> (models whose pre-training graphs it leaves out, graphs tested).
        base: the pre-training config (its dataset and steps are replaced).
        devices: device counts of the table-1 machines.
        steps: PPO steps of each pre-training run.
        seeds: runs of each method per cell.
        gdp_one_steps: GDP-one's PPO steps.
        finetune: fine-tuning's PPO steps.
        samples: placements sampled per GDP-one step and per zero-shot solve.
        shipped: the policy pre-trained on every family ('shipped-zero-shot'; None: shipped).
        progress: told (done, total, what runs now).
        failures: where a failed pre-training run or method is recorded, the others going on
            (None: it raises).
    """
    report: Progress = progress or (lambda done, total, label: None)
    failures = Failures.or_raising(failures)
    paths: dict[str, Path] = {}
    (folder / "graphs").mkdir(parents=True, exist_ok=True)
    for graph in pretraining:
        paths[graph.name] = folder / "graphs" / f"{graph.name}.npz"
        if not paths[graph.name].exists():
            write_graph(graph, paths[graph.name])
    rows: list[dict[str, Any]] = []
    for family, (left_out, tested) in families.items():
        kept = [path for name, path in paths.items() if name.split(".")[0] not in left_out]
        name = f"without-{family}"
        run = partial(pretrain, base, name, kept, folder / "runs" / name, steps, report)
        policy = failures.run(f"pre-training {name}", run)
        runs = [(None, str(policy), METHODS)] if policy is not None else []
        for renamed, policy_path, methods in [*runs, (SHIPPED, shipped, ("gdp-zero-shot",))]:
            found = run_table1(
                tested,
                devices,
                methods,
                seeds,
                CAPACITY_FRACTION,
                gdp_one_steps,
                finetune,
                samples,
                policy=policy_path,
                progress=report,
                failures=failures,
            )
            for row in found:
                row["family"] = family
                row["method"] = renamed or row["method"]
            rows += found
    return rows


def _cells(rows: Sequence[dict[str, Any]]) -> list[tuple[str, str, int]]:
    """(family, graph, devices) of each cell, in run order."""
    return list(dict.fromkeys((r["family"], r["graph"], r["devices"]) for r in rows))


def _ratios(
    rows: Sequence[dict[str, Any]], method: str, against: str
) -> list[tuple[str, str, int, float]]:
    """(family, graph, devices, method's makespan / against's - 1) where both ran and fit."""
    found = []
    for family, graph, devices in _cells(rows):
        ours, theirs = (mean_cell(rows, graph, devices, m) for m in (method, against))
        if ours and theirs and not ours["excess"] and not theirs["excess"]:
            found.append((family, graph, devices, ours["makespan"] / theirs["makespan"] - 1))
    return found


def markdown(rows: Sequence[dict[str, Any]]) -> str:
    """Every cell's makespans, then the bars' ratios per family and on average over families."""
    columns = [m for m in COLUMNS if any(r["method"] == m for r in rows)]
    heads = (("family", "---"), ("graph", "---"), ("d", "---:"))
    shown = [((f, g, str(d)), g, d) for f, g, d in _cells(rows)]
    lines = [
        "Makespan in ms (* over capacity). gdp-zero-shot and gdp-finetune use the policy "
        "pre-trained without the graph's family; shipped-zero-shot, the one pre-trained on all.",
        "",
        *makespan_table(rows, heads, shown, columns),
    ]
    comparisons = (
        ("gdp-zero-shot", "gdp-finetune", "zero-shot vs fine-tuned (bar: within +5%)"),
        ("gdp-finetune", "gdp-one", "fine-tuned vs GDP-one (bar: within +2%)"),
        ("gdp-zero-shot", SHIPPED, "held-out zero-shot vs shipped zero-shot"),
        ("gdp-zero-shot", "expert", "held-out zero-shot vs expert"),
        ("gdp-zero-shot", "metis", "held-out zero-shot vs gp-metis"),
    )
    families = list(dict.fromkeys(r["family"] for r in rows))
    lines += [
        "",
        "Makespan ratio - 1 (negative: the first is faster), geomean over each family's cells "
        "that fit, then the mean over families:",
        "",
        "| comparison | " + " | ".join(families) + " | mean over families |",
        "| --- | " + " | ".join("---:" for _ in families) + " | ---: |",
    ]
    for method, against, label in comparisons:
        found = _ratios(rows, method, against)
        per_family = [geomean_gain([v for f, *_, v in found if f == family]) for family in families]
        known = [v for v in per_family if np.isfinite(v)]
        mean = f"{np.mean(known):+.2%}" if known else "-"
        cells = [f"{v:+.2%}" if np.isfinite(v) else "-" for v in per_family]
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {mean} |")
    return "\n".join(lines)


def plot(rows: Sequence[dict[str, Any]], path: Path) -> Path:
    """GO fig. 5's shape: makespan / expert's per held-out graph and device count."""
    plt = reports.pyplot()

    methods = [m for m in FIGURE if any(r["method"] == m for r in rows)]
    cells = list(dict.fromkeys((r["graph"], r["devices"]) for r in rows))
    figure, ax = plt.subplots(figsize=(max(6, 0.7 * len(cells)), 4))
    expert_bars(ax, rows, cells, methods, [f"{g.split('.')[0]} d={d}" for g, d in cells])
    ax.set_title("Held-out families: GDP-one, zero-shot and fine-tuned")
    ax.legend(fontsize=7)
    return reports.save_figure(figure, path)


@dataclasses.dataclass(frozen=True)
class GDPFig5Bench(reports.PaperSuite):
    """The settings of a `graphopt bench gdp-fig5` run.

    Attributes:
        families: names in `FAMILIES`, each held out in turn.
        devices: device counts.
        steps: PPO steps of each pre-training run.
        seeds: runs of each method per cell (mean reported).
    """

    families: tuple[str, ...] = tuple(FAMILIES)
    devices: tuple[int, ...] = DEVICES
    steps: int = PRETRAIN_STEPS
    seeds: int = 1

    def __post_init__(self) -> None:
        unknown = sorted(set(self.families) - set(FAMILIES))
        if unknown or not self.families:
            raise GraphoptError(
                f"gdp-fig5: unknown or no families {unknown}; valid: {', '.join(FAMILIES)}"
            )
        check_counts("gdp-fig5", self.devices, (2, 8), steps=self.steps, seeds=self.seeds)

    def title(self) -> str:
        """The report's title: what ran, at which budgets."""
        return (
            f"GO fig. 5 shape for GDP placement: {len(self.families)} families held out in "
            f"turn, {self.steps} PPO pre-training steps each, on "
            f"{', '.join(map(str, self.devices))} devices (capacity {CAPACITY_FRACTION:g} x "
            f"the one-device peak); fine-tuning {FINETUNE_STEPS} steps, GDP-one "
            f"{GDP_ONE_STEPS}; {self.seeds} seed(s)"
        )

    def table(self, folder: Path, progress: Progress, failures: Failures) -> list[dict[str, Any]]:
        """Pre-trains (or resumes) and evaluates each family (`run_fig5`).

        The pre-training logs are copied to `folder`/logs.
        """
        from graphopt.learning.systems.gdp.config import TrainConfig

        families = {
            family: (left_out, zoo_training_graphs(tested))
            for family, (left_out, tested) in FAMILIES.items()
            if family in self.families
        }
        rows = run_fig5(
            folder, zoo_training_graphs(PRETRAINING), families, TrainConfig.load("gdp"),
            self.devices, self.steps, self.seeds, progress=progress, failures=failures,
        )  # fmt: skip
        (folder / "logs").mkdir(exist_ok=True)
        for family in self.families:
            log = folder / "runs" / f"without-{family}" / "log.csv"
            if log.is_file():
                shutil.copy(log, folder / "logs" / f"without-{family}.csv")
        return rows

    def report(
        self, rows: list[dict[str, Any]], folder: Path, command: str, failures: Failures
    ) -> Report:
        """The tables, runs.json, runs.csv, the bars (fig5.png) and the pre-training logs."""
        logs = [
            log
            for family in self.families
            if (log := folder / "logs" / f"without-{family}.csv").is_file()
        ]
        files = [
            reports.write_json(folder / "runs.json", rows),
            reports.write_csv(folder / "runs.csv", rows),
            plot(rows, folder / "fig5.png"),
            *logs,
        ]
        return reports.paper_report(folder, self.title(), command, markdown(rows), failures, files)


def run_suite(settings: BenchSettings, progress: Progress) -> Report:
    """`graphopt bench gdp-fig5`: `--models` names the families held out in turn."""
    bench = GDPFig5Bench(**settings.given("devices", "steps", "seeds", models="families"))
    return bench.run(settings.output_dir / settings.suite, settings.command, progress)
