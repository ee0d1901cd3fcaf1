"""REGAL training runs' learning curves: validation gain over uniform BRKGA and over step 0.

    .venv/bin/python benchmarks/regal_learning_curves.py RUN [RUN ...] -o docs/results/DIR

Every validation of a run (`graphopt train regal`) keeps each validation graph's reward in
RUN/validations/step-N.npz. A reward is -objective / objective of uniform BRKGA at the same
budget, so 100 (1 + r) is the % improvement over uniform BRKGA, and 100 (r_s - r_0) on the same
graph is the gain of step s's greedy policy over the step-0 policy's, paired by graph (both run
with the same search seed). This prints both per validation with 95% CIs over the graphs, with
the training reward's mean over the steps since the previous validation and the policy's
entropy, and draws them (curves.png); curves.csv holds the numbers.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import numpy as np

from graphopt.evaluation.metrics import mean_with_ci
from graphopt.evaluation.reports import pyplot


def validations(run: Path) -> dict[int, np.ndarray]:
    """Step -> each validation graph's reward, in graph order (ids checked equal)."""
    found: dict[int, np.ndarray] = {}
    first: np.ndarray | None = None
    for path in sorted((run / "validations").glob("step-*.npz")):
        with np.load(path) as stored:
            index, reward = stored["index"], stored["reward"]
        if first is None:
            first = index
        elif not np.array_equal(first, index):
            raise SystemExit(f"{path}: validated on other graphs than step 0")
        found[int(path.stem.removeprefix("step-"))] = reward
    if 0 not in found:
        raise SystemExit(f"{run}: no validations/step-0000000.npz (run before per-graph records)")
    return found


def training_log(run: Path) -> list[dict[str, float]]:
    """The run's log rows that record a training step."""
    with (run / "log.csv").open() as file:
        return [
            {k: float(v) for k, v in row.items() if v}
            for row in csv.DictReader(file)
            if row["reward"]
        ]


def curve(run: Path) -> list[dict[str, float]]:
    """One row per validation: gains with CIs, and the training reward and entropy before it."""
    found = validations(run)
    log = training_log(run)
    rows = []
    previous = 0
    for step in sorted(found):
        over_uniform = mean_with_ci(100.0 * (1.0 + found[step]))
        over_start = mean_with_ci(100.0 * (found[step] - found[0]))
        window = [r for r in log if previous < r["step"] <= step]
        rows.append(
            {
                "step": step,
                "graphs": len(found[step]),
                "over_uniform_pct": over_uniform[0],
                "over_uniform_low": over_uniform[1],
                "over_uniform_high": over_uniform[2],
                "over_step0_pct": over_start[0],
                "over_step0_low": over_start[1],
                "over_step0_high": over_start[2],
                "train_reward": float(np.mean([r["reward"] for r in window])) if window else np.nan,
                "entropy": float(np.mean([r["entropy"] for r in window])) if window else np.nan,
            }
        )
        previous = step
    return rows


def plot(curves: dict[str, list[dict[str, float]]], path: Path) -> Path:
    """Gain over uniform BRKGA and over step 0 (with 95% CIs) per run, and training reward."""
    plt = pyplot()
    figure, axes = plt.subplots(1, 3, figsize=(15, 4))
    for name, rows in curves.items():
        steps = np.array([r["step"] for r in rows])
        for ax, key in zip(axes[:2], ("over_uniform", "over_step0"), strict=True):
            mean = np.array([r[f"{key}_pct"] for r in rows])
            low = np.array([r[f"{key}_low"] for r in rows])
            high = np.array([r[f"{key}_high"] for r in rows])
            ax.plot(steps, mean, marker="o", label=name)
            ax.fill_between(steps, low, high, alpha=0.2)
        axes[2].plot(steps[1:], [r["train_reward"] for r in rows[1:]], marker=".", label=name)
    axes[0].set_title("validation: % over uniform BRKGA (95% CI)")
    axes[1].set_title("validation: % over the step-0 policy, paired (95% CI)")
    axes[2].set_title("training reward (mean since the previous validation)")
    for ax in axes:
        ax.set_xlabel("step")
        ax.axhline(0.0, color="black", linewidth=0.6)
        ax.legend(fontsize=7)
    axes[2].axhline(-1.0, color="grey", linewidth=0.6)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("-o", "--output", type=Path, required=True)
    args = parser.parse_args()
    curves = {run.name: curve(run) for run in args.runs}
    args.output.mkdir(parents=True, exist_ok=True)
    with (args.output / "curves.csv").open("w", newline="") as file:
        writer = csv.DictWriter(file, ["run", *next(iter(curves.values()))[0]])
        writer.writeheader()
        for name, rows in curves.items():
            writer.writerows({"run": name, **row} for row in rows)
    for name, rows in curves.items():
        print(f"{name}: step | % over uniform [95% CI] | % over step 0 [95% CI] | train | entropy")
        for r in rows:
            print(
                f"  {r['step']:>6} | {r['over_uniform_pct']:+.2f} [{r['over_uniform_low']:+.2f}, "
                f"{r['over_uniform_high']:+.2f}] | {r['over_step0_pct']:+.2f} "
                f"[{r['over_step0_low']:+.2f}, {r['over_step0_high']:+.2f}] | "
                f"{r['train_reward']:.4f} | {r['entropy']:.3f}"
            )
    print(f"wrote {plot(curves, args.output / 'curves.png')}, {args.output / 'curves.csv'}")


if __name__ == "__main__":
    main()
