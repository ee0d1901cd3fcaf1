"""The `graphopt` command line: the typer app and the one-line error contract.

Commands: generate, import, zoo, dataset, info, score, optimize, plot, compare, apply, measure,
replay, train, bench.

Every command that prints results also takes `--json` and then prints exactly one JSON object on
stdout. Invalid input ends with one line on stderr naming the item and the rule, and exit
status 2; never a stack trace.

The commands live by concern (`graphs`, `solve`, `pictures`, `execution`, `bench`, `train`, with
what they share in `common`); this module builds the app from them and runs it. Each command imports
what it needs inside its body: importing numpy, numba and the cost models at module level cost every
call, `graphopt --help` included, about 0.4 s before it started work. Names that command signatures
use (typer reads them when these modules are imported) come from modules that import nothing heavy.
"""

from __future__ import annotations

import gc
import sys
from typing import Annotated

import typer

from graphopt import __version__
from graphopt.cli import bench, execution, graphs, pictures, solve, train
from graphopt.cli.common import EXIT_INTERNAL, EXIT_INVALID
from graphopt.errors import GraphoptError, one_line

app = typer.Typer(
    help="Optimize placement and scheduling of ML computation graphs.",
    epilog="File formats, scoring rules, limits and exit codes: docs/format.md in the "
    "graphopt repository.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
# Registered here, in the order `graphopt --help` lists them, rather than beside each command:
# typer lists a group's own commands before those of the groups it merges.
app.command()(graphs.generate)
app.command()(graphs.info)
app.command("import")(graphs.import_)
app.command()(solve.score)
app.command()(solve.optimize)
app.command()(pictures.plot)
app.command()(pictures.compare)
app.command()(execution.apply)
app.command()(execution.measure)
app.command()(execution.replay)
app.command(epilog=bench.SUITES_HELP)(bench.bench)
app.command()(solve.solvers)
app.command()(solve.warmup)
app.add_typer(graphs.zoo_app, name="zoo")
app.add_typer(graphs.dataset_app, name="dataset")
app.add_typer(train.app, name="train")


def _print_version(value: bool) -> None:
    """Prints `graphopt X.Y.Z` and exits, before any command is parsed (an eager option)."""
    if value:
        typer.echo(f"graphopt {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
    debug: Annotated[
        bool,
        typer.Option("--debug", help="On an unexpected internal error, print the whole traceback."),
    ] = False,
) -> None:
    """Options that come before the command."""


def main() -> None:
    """Entry point of the `graphopt` script (see `run`).

    The collector runs every 100,000 allocations instead of every 700: importing numba and
    typer makes about 100,000 long-lived objects, which the default collected over 250 times
    (0.1 s of a 0.8 s `optimize`); young cycles are still collected. The objects a command
    leaves behind are frozen out of the collection at interpreter exit, which otherwise took 0.2
    to 0.5 s after the command had finished. Exit handlers still run.
    """
    gc.set_threshold(100_000, 50, 100)
    try:
        code = run(sys.argv[1:])
    finally:
        gc.freeze()
    sys.exit(code)


def run(args: list[str]) -> int:
    """Runs one command line and returns its exit status; every way it ends is one line at most.

    Usage errors (an unknown option, a value out of range) come from click and are printed as
    one `error:` line with exit status 2, as invalid input is. Any other exception escaping a
    command is a bug: one line with exit status 70, and the traceback only with `--debug`.
    """
    try:
        code = app(args, prog_name="graphopt", standalone_mode=False)
    except typer.Abort:
        typer.echo("error: aborted", err=True)
        code = 130
    except typer.TyperException as error:  # click's usage errors (typer's copy of click)
        message = error.format_message()
        if not message:  # a command group run bare: its help was shown, as asked
            return 0
        typer.echo(f"error: {one_line(message)}", err=True)
        code = error.exit_code
    except GraphoptError as error:  # raised while parsing options, outside any command
        typer.echo(f"error: {error}", err=True)
        code = EXIT_INVALID
    except Exception as error:  # the last resort that keeps the one-line promise
        if _debugging(args):
            raise
        typer.echo(
            f"error: internal error, a bug in graphopt: {type(error).__name__}: "
            f"{one_line(str(error))[:300]} (run with --debug for the traceback)",
            err=True,
        )
        code = EXIT_INTERNAL
    return code if isinstance(code, int) else 0


def _debugging(args: list[str]) -> bool:
    """Whether `--debug` came before the command name."""
    for argument in args:
        if argument == "--debug":
            return True
        if not argument.startswith("-"):
            return False
    return False
