"""The one progress bar every command draws: on stderr, on a terminal only, erased when done.

Erased, so that an error message after it is the only line left on the screen; not drawn where
stderr is a log or a pipe, in which a bar cannot redraw and would leave its last frame before
that message (the one-line rule of docs/format.md).

A command that goes through phases of many seconds each (training: imports, a dataset build,
reference runs, validations, then the steps) draws `Phases`: the same bar on a terminal, and
elsewhere, where no bar is drawn, a line as each phase begins (and at most every `LINE_SECONDS`
within one), so that a log never stays silent for minutes. The lines go to stdout, beside the
command's results: stderr keeps the one-line rule, an error the only line on it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.progress import Progress

LINE_SECONDS = 30.0
"""Off a terminal, the longest a phase goes without a line telling how far it is."""


def progress_bar(*columns: Any, quiet: bool = False) -> Progress:
    """A rich `Progress` with `columns` (rich's defaults when none), hidden when `quiet`."""
    from rich.console import Console
    from rich.progress import Progress

    console = Console(stderr=True)
    return Progress(
        *columns, console=console, transient=True, disable=quiet or not console.is_terminal
    )


class Phases:
    """One command's phases, one after another, shown in one bar (stderr) or as lines (stdout).

    Args:
        title: what the command does: the bar's description and every line's prefix.
    """

    def __init__(self, title: str) -> None:
        from rich.progress import BarColumn, TextColumn, TimeElapsedColumn

        self.title = title
        columns = (
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[info]}"),
            TimeElapsedColumn(),
        )
        self.bar = progress_bar(*columns)
        self.task = self.bar.add_task(title, total=None, info="")
        self.lines = self.bar.disable
        self.last_line = time.monotonic()

    def __enter__(self) -> Phases:
        self.bar.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.bar.stop()

    def phase(self, what: str, total: int = 0) -> Callable[[int], None]:
        """Begins a phase: `what` it does, and how many items it counts (0: none).

        Returns:
            The call that says how many of the items are done.
        """
        self.update(0, total, what)
        self.line(what)

        def count(done: int) -> None:
            self.update(done, total, f"{what} {done:,}/{total:,}")
            self.line(f"{what}: {done:,}/{total:,}", always=False)

        return count

    def update(self, done: int, total: int, info: str) -> None:
        """Shows `done` of `total` (0: not counted) and `info` in the bar, printing nothing."""
        self.bar.update(self.task, completed=done, total=total or None, info=info)

    def line(self, text: str, always: bool = True) -> None:
        """Prints `title: text` on stdout when stderr is no terminal (where no bar is drawn).

        Unless `always`, only when no line was printed within `LINE_SECONDS`.
        """
        now = time.monotonic()
        if self.lines and (always or now - self.last_line >= LINE_SECONDS):
            print(f"{self.title}: {text}", flush=True)
            self.last_line = now
