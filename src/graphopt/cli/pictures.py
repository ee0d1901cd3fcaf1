"""Commands that draw solutions: plot (one solution's Gantt chart and memory) and compare."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from graphopt._messages import count
from graphopt.cli.common import (
    BandwidthOption,
    CapacityOption,
    GraphArgument,
    JsonFlag,
    SolutionArgument,
    SolutionDevicesOption,
    SolutionLatencyOption,
    SolutionModeOption,
    check_output,
    print_json,
    user_errors,
)

if TYPE_CHECKING:
    from graphopt.costmodels.profile import MemoryProfile
    from graphopt.ir.graph import Graph

PictureOutput = Annotated[
    Path,
    typer.Option(
        "--output", "-o", help="Picture to write; its suffix picks the format: .png, .svg or .pdf."
    ),
]


def _profile(
    graph: Graph,
    path: Path,
    devices: int | None,
    capacity: str | None,
    latency: float | None,
    bandwidth: float | None,
    mode: str | None,
) -> MemoryProfile:
    """One solution file's profile on the machine `score` would use for it.

    Raises:
        SolutionError: prefixed with the file name, as its loader's errors are.
    """
    from graphopt.costmodels.machine import Machine
    from graphopt.costmodels.profile import memory_profile
    from graphopt.errors import SolutionError
    from graphopt.ir.io import read_solution

    solution = read_solution(path, graph, n_devices=devices)
    machine = Machine.from_options(
        solution.n_devices, capacity, latency, bandwidth, mode, recorded=solution.machine
    )
    try:
        return memory_profile(graph, solution, machine)
    except SolutionError as error:
        raise SolutionError(f"{path}: {error}") from None


def _summary(profile: MemoryProfile) -> dict[str, Any]:
    return {
        "devices": profile.n_devices,
        "peak_memory": profile.peak_memory,
        "peak_memory_per_device": list(profile.peak_memory_per_device),
        "persistent_per_device": [int(p) for p in profile.persistent],
        "makespan": profile.makespan,
    }


@user_errors
def plot(
    graph_path: GraphArgument,
    solution_path: SolutionArgument,
    output: PictureOutput,
    devices: SolutionDevicesOption = None,
    capacity: CapacityOption = None,
    latency: SolutionLatencyOption = None,
    bandwidth: BandwidthOption = None,
    mode: SolutionModeOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Draw a solution: a Gantt chart per device over each device's memory at every step.

    The machine is the one `score` uses (the options, else the solution's `machine` field, else
    the defaults), so the bars' times add up to the makespan `score` reports and the memory
    peaks are its peaks. In async mode transfers occupy no device and get lanes of their own; a
    fusion group is one bar, labelled with its op count, and one memory step.
    """
    check_output(output, "-o")
    from graphopt.ir.io import read_graph
    from graphopt.pictures import picture_format, plot_solution, seconds_text

    picture_format(output)
    graph = read_graph(graph_path)
    profile = _profile(graph, solution_path, devices, capacity, latency, bandwidth, mode)
    n_transfers = int((profile.events >= graph.n_ops).sum())
    again = profile.n_events - n_transfers - graph.n_ops
    n_groups = int((profile.ops > 1).sum())
    fused = f" ({n_groups:,} fusion groups)" if n_groups else ""
    rerun = f" ({again:,} run again)" if again else ""
    title = (
        f"{solution_path.name} on {graph.name or graph_path.name}: {graph.n_ops:,} ops{fused}"
        f"{rerun} and {n_transfers:,} transfers on {count(profile.n_devices, 'device')}; makespan "
        f"{seconds_text(profile.makespan)}, peak memory {profile.peak_memory:,} bytes"
    )
    plot_solution(graph, profile, output, title)
    if as_json:
        print_json({"written": str(output), "graph": graph.name, **_summary(profile)})
    else:
        typer.echo(
            f"wrote {output}: peak memory {profile.peak_memory:,} bytes, makespan "
            f"{profile.makespan:.9g} s"
        )


@user_errors
def compare(
    graph_path: GraphArgument,
    solution_paths: Annotated[
        list[Path],
        typer.Argument(help="Solution files to overlay (graphopt.solution/1).", metavar="SOLUTION"),
    ],
    output: PictureOutput,
    devices: SolutionDevicesOption = None,
    latency: SolutionLatencyOption = None,
    bandwidth: BandwidthOption = None,
    mode: SolutionModeOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Overlay solutions' memory per step: one panel per device, one line per solution.

    The x axis is the fraction of each schedule, so schedules with different numbers of
    transfers line up; the legend gives each file's peak memory and makespan (machine as in
    `score`).
    """
    check_output(output, "-o")
    from graphopt.ir.io import read_graph
    from graphopt.pictures import compare_solutions, picture_format

    picture_format(output)
    graph = read_graph(graph_path)
    profiles = [
        _profile(graph, path, devices, None, latency, bandwidth, mode) for path in solution_paths
    ]
    names = [path.name for path in solution_paths]
    labels = names if len(set(names)) == len(names) else [str(path) for path in solution_paths]
    title = f"memory of {len(profiles)} solutions of {graph.name or graph_path.name}"
    compare_solutions(list(zip(labels, profiles, strict=True)), output, title)
    if as_json:
        solutions = [
            {"file": str(path), **_summary(profile)}
            for path, profile in zip(solution_paths, profiles, strict=True)
        ]
        print_json({"written": str(output), "graph": graph.name, "solutions": solutions})
    else:
        peaks = ", ".join(
            f"{label} {profile.peak_memory:,}"
            for label, profile in zip(labels, profiles, strict=True)
        )
        typer.echo(f"wrote {output}: peak memory (bytes) {peaks}")
