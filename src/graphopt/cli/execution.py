"""Commands that run solutions on the model itself: apply, measure and replay.

MODEL is a zoo model name or a factory `package.module:function`, captured the way `graphopt zoo
export` or `graphopt import` imports it (`--train` for the training step), so a solution of that
graph names the same ops. Each command checks the values twice: bit for bit against the captured
program, and within float reassociation against eager PyTorch on the model itself (its own
kernels and autograd), which is what catches a capture that computes the wrong thing.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from graphopt.cli.common import (
    JsonFlag,
    SolutionArgument,
    check_output,
    console,
    print_json,
    user_errors,
)

if TYPE_CHECKING:
    from rich.table import Table

    from graphopt.execution.measure import EagerComparison, OrderMeasurement
    from graphopt.importers.torch_export import Capture
    from graphopt.ir.solution import Solution

ModelArgument = Annotated[
    str,
    typer.Argument(
        help="Zoo model name (graphopt zoo list) or factory package.module:function.",
        metavar="MODEL",
    ),
]
TrainFlag = Annotated[
    bool, typer.Option("--train", help="The training step (as imported with --train).")
]
SeedOption = Annotated[int, typer.Option(min=0, help="Seed of the random inputs.")]
F = TypeVar("F", bound=Callable[..., Any])


def _without_leafspec_warning(command: F) -> F:
    """Runs `command` without torch's FutureWarning on `LeafSpec`, and only that warning.

    Copying a captured training step makes torch's own pytree code warn that `LeafSpec` is
    deprecated, on every run; nothing a user of graphopt can act on.
    """

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with warnings.catch_warnings():
            warnings.filterwarnings(
                "ignore",
                message=r"`isinstance\(treespec, LeafSpec\)` is deprecated",
                category=FutureWarning,
            )
            return command(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def _load(model: str, training: bool, paths: list[Path]) -> tuple[Capture, list[Solution]]:
    """The captured model and its solutions."""
    from graphopt.execution.apply import read_solution_for
    from graphopt.importers import capture_model

    capture = capture_model(model, training=training)
    return capture, [read_solution_for(path, capture) for path in paths]


def _note_unapplied_fusion(paths: list[Path], solutions: list[Solution]) -> None:
    """A note for each solution whose fusion groups the run did not apply.

    Printed once the command has run, so that a command refused (exit 2) prints one line.
    """
    for path, solution in zip(paths, solutions, strict=True):
        if solution.n_groups:
            typer.echo(
                f"note: {path}: its {solution.n_groups:,} fusion groups are not applied: the "
                "order is, and fusing is left to the compiler (predictions are the order's "
                "without them)",
                err=True,
            )


def _eager_fields(comparison: EagerComparison | None) -> dict[str, Any]:
    """The JSON fields of a comparison with eager PyTorch; null without one.

    A non-finite difference (a shape or NaN mismatch) is null too: JSON has no infinity.
    """
    if comparison is None:
        return {"eager_close": None, "eager_difference": None}
    finite = math.isfinite(comparison.difference)
    return {
        "eager_close": comparison.close,
        "eager_difference": comparison.difference if finite else None,
    }


def _eager_words(comparison: EagerComparison | None) -> str:
    """How the outputs compare with eager PyTorch's, with the tolerance, in a few words."""
    from graphopt.execution.measure import EAGER_ATOL, EAGER_RTOL

    if comparison is None:
        return "no eager reference"
    verdict = "close to" if comparison.close else "DIFFER from"
    return (
        f"{verdict} eager PyTorch's (max difference {comparison.difference:.1e}; tolerance "
        f"rtol {EAGER_RTOL:g}, atol {EAGER_ATOL:g})"
    )


def _one_device(solutions: list[Solution], model: str, paths: list[Path], train: bool) -> None:
    from graphopt.execution.apply import check_one_device

    flag = " --train" if train else ""
    for solution, path in zip(solutions, paths, strict=True):
        check_one_device(solution, f"{model}{flag}", str(path))


@user_errors
@_without_leafspec_warning
def apply(
    model: ModelArgument,
    solution_path: SolutionArgument,
    train: TrainFlag = False,
    code: Annotated[
        Path | None, typer.Option(help="Write the reordered program's Python code here.")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Run a 1-device solution's order on the model: reorder its captured fx program.

    Checks that the reordered program's outputs equal the captured program's bit for bit on
    the example inputs and eager PyTorch's within float reassociation (exit 1 when either
    fails), and prints the cost model's peak (persistent bytes apart). A solution's fusion
    groups are not applied (a note says so): fusing is the compiler's.
    """
    if code is not None:
        check_output(code, "--code")
    from graphopt.execution.apply import apply as apply_solution
    from graphopt.execution.apply import outputs_identical, predict, save_code
    from graphopt.execution.measure import compare_with_eager, eager_outputs, measure

    capture, (solution,) = _load(model, train, [solution_path])
    _one_device([solution], model, [solution_path], train)
    module = apply_solution(capture, solution)
    reference = eager_outputs(capture, capture.args)
    original = measure(capture.program, capture.args, repeats=1, profile=False)
    reordered = measure(module, capture.args, repeats=1, profile=False)
    identical = outputs_identical(original.outputs, reordered.outputs)
    eager = compare_with_eager(reordered.outputs, reference)
    if code is not None:
        save_code(module, code)
    graph = capture.graph
    persistent = int(graph.tensor_size[graph.tensor_persistent].sum())
    predicted = predict(capture, solution).peak_memory
    result = {
        "model": model,
        "graph": graph.name,
        "ops": graph.n_ops,
        "predicted_peak": predicted,
        "persistent": persistent,
        "measured_live_peak": reordered.live_peak,
        "outputs_identical": identical,
        **_eager_fields(eager),
        "code": None if code is None else str(code),
    }
    _note_unapplied_fusion([solution_path], [solution])
    if as_json:
        print_json(result)
    else:
        typer.echo(
            f"{graph.name}: {graph.n_ops:,} ops reordered; outputs "
            f"{'identical to' if identical else 'DIFFER from'} the captured program's, "
            f"{_eager_words(eager)}; predicted peak {predicted:,} bytes "
            f"({persistent:,} persistent), measured live peak {reordered.live_peak:,} bytes"
            + (f"; code written to {code}" if code is not None else "")
        )
    if not identical or (eager is not None and not eager.close):
        raise typer.Exit(1)


@user_errors
@_without_leafspec_warning
def measure(
    model: ModelArgument,
    solution_paths: Annotated[
        list[Path] | None,
        typer.Argument(help="1-device solution files to measure.", metavar="[SOLUTION]..."),
    ] = None,
    train: TrainFlag = False,
    repeats: Annotated[int, typer.Option(min=1, help="Timed runs per order (median).")] = 5,
    seed: SeedOption = 0,
    as_json: JsonFlag = False,
) -> None:
    """Measure real peak memory and time of the model in its captured order and each solution's.

    Per order: the cost model's peak (persistent bytes apart), the live bytes of the storages
    the program creates (a TorchDispatchMode tracker), the allocator's peak from torch.profiler
    (it also sees kernels' scratch buffers), CUDA's max_memory_allocated when present, and the
    median time, on random inputs of the exported shapes; whether the outputs equal the
    captured program's bit for bit, and eager PyTorch's within float reassociation.
    """
    from graphopt.execution.measure import measure_orders

    paths = list(solution_paths or [])
    capture, solutions = _load(model, train, paths)
    _one_device(solutions, model, paths, train)
    labels = [path.name for path in paths]
    if len(set(labels)) != len(labels):
        labels = [str(path) for path in paths]
    rows = measure_orders(
        capture, dict(zip(labels, solutions, strict=True)), seed=seed, repeats=repeats
    )
    records = [_measured_record(row) for row in rows]
    _note_unapplied_fusion(paths, solutions)
    if as_json:
        print_json({"model": model, "graph": capture.graph.name, "orders": records})
    else:
        console.print(_measure_table(capture.graph.name, rows, records))


def _measured_record(row: OrderMeasurement) -> dict[str, Any]:
    """One order's JSON fields: predicted and measured peaks, time, and the output checks."""
    return {
        "order": row.label,
        "predicted_peak": row.predicted,
        "persistent": row.persistent,
        "predicted_live_peak": row.predicted_live,
        "measured_live_peak": row.measurement.live_peak,
        "allocator_peak": row.measurement.allocator_peak,
        "cuda_peak": row.measurement.cuda_peak,
        "seconds": row.measurement.seconds,
        "outputs_identical": row.identical,
        **_eager_fields(row.eager),
    }


def _measure_table(
    graph: str, rows: Sequence[OrderMeasurement], records: Sequence[dict[str, Any]]
) -> Table:
    """`measure`'s table: an order a row, numbers never folded (a narrow terminal folds words)."""
    from rich.table import Table

    from graphopt.execution.measure import EAGER_ATOL, EAGER_RTOL

    table = Table(
        title=f"{graph}: memory in bytes, persistent {rows[0].persistent:,}",
        caption=f"vs eager: max difference to eager PyTorch's outputs (rtol {EAGER_RTOL:g}, "
        f"atol {EAGER_ATOL:g})",
    )
    cells = [
        (
            str(record["order"]),
            f"{record['predicted_live_peak']:,}",
            f"{record['measured_live_peak']:,}",
            "-" if record["allocator_peak"] is None else f"{record['allocator_peak']:,}",
            f"{1e3 * record['seconds']:.2f}",
            "identical" if record["outputs_identical"] else "DIFFER",
            "-"
            if row.eager is None
            else f"{'close' if row.eager.close else 'DIFFER'} {row.eager.difference:.1e}",
        )
        for row, record in zip(rows, records, strict=True)
    ]
    numbers = ("predicted\n- persistent", "measured\nlive", "allocator", "time\n(ms)")
    table.add_column("order", overflow="fold")
    for k, column in enumerate(numbers, start=1):  # a narrow terminal folds words, not numbers
        width = max(len(line[k]) for line in cells)
        table.add_column(column, justify="right", no_wrap=True, min_width=width)
    table.add_column("vs captured", overflow="fold")
    table.add_column("vs eager", overflow="fold")
    for line in cells:
        table.add_row(*line)
    return table


@user_errors
@_without_leafspec_warning
def replay(
    model: ModelArgument,
    solution_path: SolutionArgument,
    train: TrainFlag = False,
    devices: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated torch devices, one per solution device (e.g. cuda:0,cuda:1) "
            "\\[default: a logical CPU device each]."
        ),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Replay a solution on the model event by event, on several devices, with per-device peaks.

    Transfers are copies made at the schedule's transfer events and dropped after their last
    reader; each device's measured peak of live storages stands beside the cost model's peak
    minus that device's persistent bytes. The outputs are compared with the captured program's
    bit for bit and with eager PyTorch's within float reassociation; exits 1 when either fails.
    """
    from graphopt.execution.apply import outputs_identical
    from graphopt.execution.measure import measure
    from graphopt.execution.replay import replay as replay_solution

    capture, (solution,) = _load(model, train, [solution_path])
    names = None if devices is None else [name.strip() for name in devices.split(",")]
    result = replay_solution(capture, solution, names)
    original = measure(capture.program, capture.args, repeats=1, profile=False)
    identical = outputs_identical(original.outputs, result.outputs)
    per_device = [
        {
            "device": name,
            "predicted_peak": predicted,
            "persistent": persistent,
            "predicted_live_peak": predicted - persistent,
            "measured_live_peak": measured,
        }
        for name, predicted, persistent, measured in zip(
            result.devices, result.predicted, result.persistent, result.measured, strict=True
        )
    ]
    _note_unapplied_fusion([solution_path], [solution])
    if as_json:
        print_json(
            {
                "model": model,
                "graph": capture.graph.name,
                "devices": per_device,
                "outputs_identical": identical,
                **_eager_fields(result.eager),
            }
        )
    else:
        for k, row in enumerate(per_device):
            typer.echo(
                f"device {k} ({row['device']}): predicted {row['predicted_live_peak']:,} bytes "
                f"above {row['persistent']:,} persistent, measured {row['measured_live_peak']:,}"
            )
        typer.echo(
            f"outputs {'identical to' if identical else 'DIFFER from'} the captured program's, "
            f"{_eager_words(result.eager)}"
        )
    if not identical or (result.eager is not None and not result.eager.close):
        raise typer.Exit(1)
