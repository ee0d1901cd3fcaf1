"""What every command group shares: exit statuses, one-line errors, JSON output, option types.

Imports nothing heavy: typer reads the option types when the command modules are imported,
`graphopt --help` included.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import typer
from rich.console import Console

from graphopt.errors import GraphoptError, one_line

console = Console()
F = TypeVar("F", bound=Callable[..., Any])

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
    float | None, typer.Option(help="Transfer bytes/second [default: infinite].")
]
SolutionArgument = Annotated[
    Path, typer.Argument(help="Solution file (graphopt.solution/1).", metavar="SOLUTION")
]
# A solution's own machine, unless overridden: the options of `score`, and of the commands that
# must time a solution as `score` does.
SolutionDevicesOption = Annotated[
    int | None, typer.Option("--devices", help="Devices [default: the solution's].")
]
SolutionLatencyOption = Annotated[
    float | None,
    typer.Option("--latency", help="Seconds added to each transfer [default: 0]."),
]
SolutionModeOption = Annotated[
    str | None, typer.Option("--mode", help="Transfer mode: sync or async [default: sync].")
]

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
    """Writes `document` as the one line of JSON that `--json` promises on stdout."""
    sys.stdout.write(json.dumps(document) + "\n")
