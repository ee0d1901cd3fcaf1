"""Commands that run solutions on the model itself: apply, measure and replay.

MODEL is a zoo model name or a factory `package.module:function`, captured the way `graphopt zoo
export` or `graphopt import` imports it (`--train` for the training step), so a solution of that
graph names the same ops.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from graphopt.cli.common import JsonFlag, SolutionArgument, console, print_json, user_errors

if TYPE_CHECKING:
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


def _load(model: str, training: bool, paths: list[Path]) -> tuple[Capture, list[Solution]]:
    from graphopt.execution.apply import read_solution_for
    from graphopt.importers import capture_model

    capture = capture_model(model, training=training)
    return capture, [read_solution_for(path, capture) for path in paths]


def _one_device(solutions: list[Solution], model: str, paths: list[Path], train: bool) -> None:
    from graphopt.execution.apply import check_one_device

    flag = " --train" if train else ""
    for solution, path in zip(solutions, paths, strict=True):
        check_one_device(solution, f"{model}{flag}", str(path))


@user_errors
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
    the example inputs, and prints the cost model's peak (persistent bytes apart).
    """
    from graphopt.execution.apply import apply as apply_solution
    from graphopt.execution.apply import outputs_identical, predict, save_code
    from graphopt.execution.measure import measure

    capture, (solution,) = _load(model, train, [solution_path])
    _one_device([solution], model, [solution_path], train)
    module = apply_solution(capture, solution)
    original = measure(capture.program, capture.args, repeats=1, profile=False)
    reordered = measure(module, capture.args, repeats=1, profile=False)
    identical = outputs_identical(original.outputs, reordered.outputs)
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
        "code": None if code is None else str(code),
    }
    if as_json:
        print_json(result)
    else:
        typer.echo(
            f"{graph.name}: {graph.n_ops:,} ops reordered; outputs "
            f"{'identical' if identical else 'DIFFER'}; predicted peak {predicted:,} bytes "
            f"({persistent:,} persistent), measured live peak {reordered.live_peak:,} bytes"
            + (f"; code written to {code}" if code is not None else "")
        )
    if not identical:
        raise typer.Exit(1)


@user_errors
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
    median time, on random inputs of the exported shapes.
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
    records = [
        {
            "order": row.label,
            "predicted_peak": row.predicted,
            "persistent": row.persistent,
            "predicted_live_peak": row.predicted_live,
            "measured_live_peak": row.measurement.live_peak,
            "allocator_peak": row.measurement.allocator_peak,
            "cuda_peak": row.measurement.cuda_peak,
            "seconds": row.measurement.seconds,
            "outputs_identical": row.identical,
        }
        for row in rows
    ]
    if as_json:
        print_json({"model": model, "graph": capture.graph.name, "orders": records})
        return
    from rich.table import Table

    table = Table(title=f"{capture.graph.name}: memory in bytes, persistent {rows[0].persistent:,}")
    for column in ("order", "predicted - persistent", "measured live", "allocator", "time (ms)"):
        table.add_column(column, justify="left" if column == "order" else "right")
    table.add_column("outputs")
    for record in records:
        allocator = record["allocator_peak"]
        table.add_row(
            str(record["order"]),
            f"{record['predicted_live_peak']:,}",
            f"{record['measured_live_peak']:,}",
            "-" if allocator is None else f"{allocator:,}",
            f"{1e3 * record['seconds']:.2f}",
            "identical" if record["outputs_identical"] else "DIFFER",
        )
    console.print(table)


@user_errors
def replay(
    model: ModelArgument,
    solution_path: SolutionArgument,
    train: TrainFlag = False,
    devices: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated torch devices, one per solution device (e.g. cuda:0,cuda:1) "
            "[default: a logical CPU device each]."
        ),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Replay a solution on the model event by event, on several devices, with per-device peaks.

    Transfers are copies made at the schedule's transfer events and dropped after their last
    reader; each device's measured peak of live storages stands beside the cost model's peak
    minus that device's persistent bytes.
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
    if as_json:
        print_json(
            {
                "model": model,
                "graph": capture.graph.name,
                "devices": per_device,
                "outputs_identical": identical,
            }
        )
    else:
        for k, row in enumerate(per_device):
            typer.echo(
                f"device {k} ({row['device']}): predicted {row['predicted_live_peak']:,} bytes "
                f"above {row['persistent']:,} persistent, measured {row['measured_live_peak']:,}"
            )
        typer.echo(f"outputs {'identical' if identical else 'DIFFER'}")
    if not identical:
        raise typer.Exit(1)
