"""The one progress bar every command draws: on stderr, on a terminal only, erased when done.

Erased, so that an error message after it is the only line left on the screen; not drawn where
stderr is a log or a pipe, in which a bar cannot redraw and would leave its last frame before
that message (the one-line rule of docs/format.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.progress import Progress


def progress_bar(*columns: Any, quiet: bool = False) -> Progress:
    """A rich `Progress` with `columns` (rich's defaults when none), hidden when `quiet`."""
    from rich.console import Console
    from rich.progress import Progress

    console = Console(stderr=True)
    return Progress(
        *columns, console=console, transient=True, disable=quiet or not console.is_terminal
    )
