"""What every command group shares: exit statuses, one-line errors, JSON output, option types.

Imports nothing heavy: typer reads the option types when the command modules are imported,
`graphopt --help` included.
"""

from __future__ import annotations

import functools
import json
import math
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import typer
from rich.console import Console

from graphopt.errors import GraphoptError, one_line

console = Console()
F = TypeVar("F", bound=Callable[..., Any])

# Help texts write `\\[` for a literal bracket: typer renders them as rich markup, in which
# "[default: 2]" is a tag and vanishes.
JsonFlag = Annotated[
    bool, typer.Option("--json", help="Print one JSON object on stdout instead of tables.")
]
GraphArgument = Annotated[Path, typer.Argument(help="Graph file (.json or .npz).", metavar="GRAPH")]
GraphOutput = Annotated[
    Path, typer.Option("--output", "-o", help="Graph file to write (.json or .npz).")
]
DeviceOption = Annotated[
    str, typer.Option(help="Roofline device for op runtimes: v100, a100, h100 or cpu.")
]
CapacityOption = Annotated[str | None, typer.Option(help="Memory per device, e.g. 16GiB.")]
BandwidthOption = Annotated[
    float | None, typer.Option(help="Transfer bytes/second \\[default: infinite].")
]
SolutionArgument = Annotated[
    Path, typer.Argument(help="Solution file (graphopt.solution/1).", metavar="SOLUTION")
]
# A solution's own machine, unless overridden: the options of `score`, and of the commands that
# must time a solution as `score` does.
SolutionDevicesOption = Annotated[
    int | None, typer.Option("--devices", help="Devices \\[default: the solution's].")
]
SolutionLatencyOption = Annotated[
    float | None,
    typer.Option("--latency", help="Seconds added to each transfer \\[default: 0]."),
]
SolutionModeOption = Annotated[
    str | None, typer.Option("--mode", help="Transfer mode: sync or async \\[default: sync].")
]

EXIT_FAILED_RUNS = 1
"""`bench`: some runs failed; the others finished and the reports record each failure."""
EXIT_INVALID = 2
"""Invalid input or request: one line naming the item and the rule (docs/format.md)."""
EXIT_INFEASIBLE = 3
"""No solution fits the capacity (found by the search, or proven by a lower bound at once)."""
EXIT_NO_SOLUTION = 4
"""A solver found no solution within its budget."""
EXIT_INTERNAL = 70
"""A bug in graphopt (EX_SOFTWARE): reported in one line, with the traceback under --debug."""


def fail(message: str, code: int) -> NoReturn:
    """Prints `error: message` as one line on stderr and exits with `code`."""
    typer.echo(f"error: {one_line(message)}", err=True)
    raise typer.Exit(code)


def user_errors(command: F) -> F:
    """Turns invalid-input errors into one line on stderr and exit status 2."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except GraphoptError as error:
            fail(str(error), _exit_code(error))
        except OSError as error:
            fail(f"{error.filename or ''}: {error.strerror or error}", EXIT_INVALID)
        except MemoryError as error:
            fail(
                f"not enough memory for this request ({error or 'allocation failed'}); use a "
                "smaller graph, fewer devices or a smaller budget",
                EXIT_INVALID,
            )

    return wrapper  # type: ignore[return-value]


def _exit_code(error: GraphoptError) -> int:
    """Exit status of an error: no solution found, a proven infeasible capacity, or bad input.

    The first two are only possible once a solver module was loaded.
    """
    solvers = sys.modules.get("graphopt.solvers.base")
    if solvers is not None and isinstance(error, solvers.NoSolutionError):
        return EXIT_NO_SOLUTION
    if solvers is not None and isinstance(error, solvers.InfeasibleError):
        return EXIT_INFEASIBLE
    return EXIT_INVALID


def print_json(document: dict[str, Any]) -> None:
    """Writes `document` as the one line of JSON that `--json` promises on stdout.

    JSON has no NaN or infinity, so a value that is not a finite number (a mean over no runs,
    the interval of one value) is written as null.
    """
    sys.stdout.write(json.dumps(_finite(document), allow_nan=False) + "\n")


def _finite(value: Any) -> Any:
    """`value` with every non-finite float, however deep in lists and dicts, replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value


def check_output(path: Path, option: str, folder: bool = False) -> None:
    """Refuses an output path that cannot be written, before any work, naming it as given.

    A file output must not be a directory, and its folder must exist and be writable; a folder
    output (created with its parents when missing) must not be a file, and the nearest existing
    folder above it must be writable. Checked first, so that a long search or export is never
    lost to a path that was wrong from the start.

    Raises:
        GraphoptError: the first rule `path` breaks.
    """
    kind = "folder" if folder else "file"
    if path.exists() and path.is_dir() != folder:
        found = "a file" if folder else "a directory"
        raise GraphoptError(f"{path}: is {found}; {option} names the {kind} to write")
    if path.exists() and not os.access(path, os.W_OK):
        raise GraphoptError(f"{path}: is not writable")
    parent = path.parent
    while folder and not parent.exists() and parent != parent.parent:
        parent = parent.parent
    where = f"{path}: {'the' if folder else 'its'} folder '{parent}'"
    if not parent.exists():
        raise GraphoptError(f"{where} does not exist")
    if not parent.is_dir():
        raise GraphoptError(f"{where} is a file")
    if not path.exists() and not os.access(parent, os.W_OK):
        raise GraphoptError(f"{where} is not writable")


def shown(value: float) -> float:
    """A ratio rounded for display: float noise below 1e-12 is no result (files keep it exact).

    A 1-device speedup computes as 0.9999999999999996, a gap over the bound as -1e-16.
    """
    return round(value, 12) + 0.0


def percent(fraction: float) -> str:
    """`fraction` as a percentage with two decimals, never "-0.00%"."""
    return f"{round(fraction, 4) + 0.0:.2%}"
