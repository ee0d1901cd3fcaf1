"""What every suite's reports are made of: summary.md, CSV and JSON tables, figures.

The paper suites write one layout: summary.md (title, the command that made it, the tables,
then any failed run), the rows as runs.csv and runs.json or the summary as summary.csv and
summary.json, and their figures; `paper_report` writes the summary and says what was written.
Figures are drawn on matplotlib's file-only Agg backend and saved alike (`save_figure`).
"""

from __future__ import annotations

import abc
import csv
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from graphopt.evaluation.suite import Failures, Progress, Report


def _columns(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Every key of the rows, in first-seen order (a failed run's row may lack some)."""
    return list(dict.fromkeys(key for row in rows for key in row))


def write_csv(path: Path, rows: Sequence[dict[str, Any]]) -> Path:
    """Rows as CSV, columns in first-seen order; a row without a column leaves it empty."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=_columns(rows))
        writer.writeheader()
        writer.writerows(rows)
    return path


def rows_table(rows: Sequence[dict[str, Any]]) -> str:
    """The rows as a markdown table, floats to 4 decimals, '-' where a row lacks a column."""
    columns = _columns(rows)
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        cells = [
            "-" if c not in row else f"{row[c]:.4f}" if isinstance(row[c], float) else str(row[c])
            for c in columns
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_json(path: Path, data: Any, indent: int = 1) -> Path:
    """`data` as JSON, numpy numbers as floats."""
    path.write_text(json.dumps(data, indent=indent, default=float) + "\n")
    return path


def failure_section(failed: Sequence[str], runs: int) -> str:
    """The summary's list of failed runs, each on its own line; "" when none failed."""
    if not failed:
        return ""
    listed = "".join(f"- {line}\n" for line in failed)
    return f"\n{len(failed)} of {runs} runs failed, left out of the metrics:\n\n{listed}"


def paper_report(
    folder: Path,
    title: str,
    command: str,
    body: str,
    failures: Failures,
    files: Sequence[Path] = (),
    lines: Sequence[str] | None = None,
) -> Report:
    """Writes summary.md (title, command, body, failed runs) and returns the suite's report.

    Args:
        folder: the suite's report folder.
        title: the report's heading: what ran, at which budgets.
        command: the command line that made it.
        body: the tables or summary lines under the command.
        failures: the suite's failed cells.
        files: the other files written, listed after summary.md.
        lines: what the command prints and `--json` gives as its summary; default: the title
            and the body.
    """
    folder.mkdir(parents=True, exist_ok=True)
    summary = folder / "summary.md"
    text = f"# {title}\n\nCommand: `{command}`\n\n{body}\n"
    summary.write_text(text + failure_section(failures.lines, failures.runs))
    shown = [title, body] if lines is None else list(lines)
    return Report("\n".join(shown), shown, [summary, *files], folder, failures.lines, failures.runs)


class PaperSuite(abc.ABC):
    """A paper suite's settings, which run its table into a report folder.

    The skeleton every paper suite shares: the table's rows with failed cells recorded, then
    the reports, or summary.md alone (the title, the command, the failed cells) where no cell
    finished.
    """

    @abc.abstractmethod
    def title(self) -> str:
        """The report's title: what ran, at which budgets."""

    @abc.abstractmethod
    def table(self, folder: Path, progress: Progress, failures: Failures) -> list[dict[str, Any]]:
        """The suite's rows, none for a failed cell; runs it resumes are kept in `folder`."""

    @abc.abstractmethod
    def report(
        self, rows: list[dict[str, Any]], folder: Path, command: str, failures: Failures
    ) -> Report:
        """Writes the reports of the rows into `folder` (`paper_report` and the files)."""

    def run(self, folder: Path, command: str, progress: Progress) -> Report:
        """Runs the suite into `folder`; failed cells are recorded and listed."""
        progress(0, 0, "exporting graphs")
        failures = Failures()
        rows = self.table(folder, progress, failures)
        if not rows:
            return paper_report(folder, self.title(), command, "No run finished.", failures)
        folder.mkdir(parents=True, exist_ok=True)
        return self.report(rows, folder, command, failures)


def pyplot() -> Any:
    """Matplotlib's pyplot on the file-only Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(figure: Any, path: Path) -> Path:
    """Lays the figure out, writes it to `path` at the reports' resolution and closes it."""
    plt = pyplot()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def grouped_bars(
    axes: Any,
    series: Mapping[str, Sequence[float]],
    labels: Sequence[str],
    errors: Mapping[str, Sequence[float]] | None = None,
    centred: bool = False,
) -> np.ndarray:
    """One bar per series at each label, side by side, with optional error bars.

    `centred` centres each group on its tick (else the group starts at it, ticks at its
    middle). Returns the ticks' positions.
    """
    width = 0.8 / max(len(series), 1)
    x = np.arange(len(labels))
    for k, (name, values) in enumerate(series.items()):
        offset = (k - (len(series) - 1) / 2) * width if centred else k * width
        yerr = None if errors is None else errors[name]
        axes.bar(x + offset, values, width, yerr=yerr, label=name, color=f"C{k}")
    ticks = x if centred else x + 0.4 - width / 2
    return ticks
