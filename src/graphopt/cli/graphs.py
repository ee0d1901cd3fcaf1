"""Commands that make, import or describe graphs: generate, info, import, zoo, dataset."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich import box
from rich.table import Column, Table

from graphopt.cli.common import (
    BandwidthOption,
    CapacityOption,
    DeviceOption,
    GraphArgument,
    GraphOutput,
    JsonFlag,
    check_output,
    console,
    print_json,
    user_errors,
)
from graphopt.cli.solve import (
    DevicesOption,
    LatencyOption,
    ModeOption,
    PolicyOption,
    SeedOption,
    SolverOption,
)
from graphopt.costmodels.defaults import DEFAULT_DEVICE
from graphopt.errors import GraphoptError

if TYPE_CHECKING:
    from graphopt.ir.graph import Graph

zoo_app = typer.Typer(help="Built-in model zoo: list and export real graphs.", no_args_is_help=True)
dataset_app = typer.Typer(
    help="Build and inspect training datasets of graphs.", no_args_is_help=True
)


def _parse_param(text: str) -> tuple[str, Any]:
    """`--param KEY=VALUE` as (key, value): the value is JSON when it parses, else a string."""
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise GraphoptError(f"--param must look like KEY=VALUE, got '{text}'")
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):  # not JSON (or too deep, or too many digits): a string
        value = raw
    return key.strip(), value


@user_errors
def generate(
    family: Annotated[
        str, typer.Argument(help="erdos_renyi, layered, sbm, watts_strogatz or barabasi_albert.")
    ],
    output: GraphOutput,
    n: Annotated[int, typer.Option("-n", help="Number of ops.")] = 50,
    seed: Annotated[
        int, typer.Option(min=0, help="Random seed; the same seed gives the same graph.")
    ] = 0,
    param: Annotated[
        list[str] | None,
        typer.Option("--param", "-p", help="Family parameter KEY=VALUE, repeatable."),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Generate a synthetic computation graph (paper 004 E.5 families)."""
    check_output(output, "-o")
    from graphopt.ir.generators import generate as generate_graph
    from graphopt.ir.io import write_graph

    params = dict(_parse_param(p) for p in param or [])
    graph = generate_graph(family, n, seed=seed, **params)
    write_graph(graph, output)
    summary = {"path": str(output), "name": graph.name, **_counts(graph)}
    if as_json:
        print_json(summary)
    else:
        console.print(
            f"wrote {output}: {graph.n_ops} ops, {graph.n_tensors} tensors, {graph.n_edges} edges"
        )


def _counts(graph: Graph) -> dict[str, Any]:
    return {"ops": graph.n_ops, "tensors": graph.n_tensors, "edges": graph.n_edges}


@user_errors
def info(graph_path: GraphArgument, as_json: JsonFlag = False) -> None:
    """Summarize a graph: sizes, runtime, critical path, memory."""
    from graphopt.ir.io import read_graph

    graph = read_graph(graph_path)
    persistent = graph.tensor_persistent
    summary: dict[str, Any] = {
        "name": graph.name,
        **_counts(graph),
        "sources": int(graph.sources.shape[0]),
        "sinks": int(graph.sinks.shape[0]),
        "total_runtime": graph.total_runtime,
        "critical_path": graph.critical_path_length,
        "critical_path_ops": int(graph.critical_path.shape[0]),
        "max_speedup": graph.total_runtime / graph.critical_path_length
        if graph.critical_path_length > 0
        else 1.0,
        "total_tensor_size": graph.total_tensor_size,
        "persistent_tensor_size": int(graph.tensor_size[persistent].sum()),
        "output_tensor_size": int(graph.tensor_size[graph.tensor_output].sum()),
        "max_tensor_size": int(graph.tensor_size.max(initial=0)),
        "op_types": dict(Counter(t for t in graph.op_types if t).most_common()),
    }
    if as_json:
        print_json(summary)
        return
    table = Table(title=f"graph {graph.name or graph_path.name}", show_header=False)
    labels = {
        "ops": "ops",
        "tensors": "tensors",
        "edges": "edges (producer, tensor, consumer)",
        "sources": "source ops",
        "sinks": "sink ops",
        "total_runtime": "total runtime (s)",
        "critical_path": "critical path (s)",
        "critical_path_ops": "ops on the critical path",
        "max_speedup": "speedup bound (total / critical path)",
        "total_tensor_size": "sum of tensor sizes (bytes)",
        "persistent_tensor_size": "persistent tensors (bytes)",
        "output_tensor_size": "graph outputs (bytes)",
        "max_tensor_size": "largest tensor (bytes)",
    }
    for key, label in labels.items():
        value = summary[key]
        table.add_row(label, f"{value:,.6g}" if isinstance(value, float) else f"{value:,}")
    if summary["op_types"]:
        top = list(summary["op_types"].items())[:8]
        table.add_row("op types", ", ".join(f"{k} {v}" for k, v in top))
    console.print(table)


@user_errors
def import_(
    source: Annotated[
        str,
        typer.Argument(
            help="model.onnx, graph.pbtxt (TensorFlow CostGraphDef), graph.json/.npz, or a "
            "Python factory package.module:function returning (nn.Module, example inputs); "
            "the module is looked up in the current directory first, as `python -m` does."
        ),
    ],
    output: GraphOutput,
    device: DeviceOption = DEFAULT_DEVICE,
    profile: Annotated[
        Path | None,
        typer.Option(help="Measured runtimes (CSV op,seconds or JSON) overriding the estimates."),
    ] = None,
    train: Annotated[
        bool, typer.Option("--train", help="PyTorch: the training step, not inference.")
    ] = False,
    method: Annotated[
        str,
        typer.Option(
            help="PyTorch inference: export (torch.export) or fx (symbolic_trace); a training "
            "step is always traced with make_fx."
        ),
    ] = "export",
    strict: Annotated[
        bool, typer.Option(help="PyTorch inference with --method export: strict mode.")
    ] = False,
    name: Annotated[str | None, typer.Option(help="Graph name.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Import a real graph (PyTorch, ONNX, CostGraphDef) with per-op costs."""
    check_output(output, "-o")
    from graphopt.costmodels.roofline import apply_profile, device_spec, read_profile
    from graphopt.importers import import_graph

    device_spec(device)
    graph = import_graph(
        source, device=device, training=train, method=method, strict=strict, name=name
    )
    if profile is not None:
        graph = apply_profile(graph, read_profile(profile))
    _write_summary(graph, output, as_json)


def _write_summary(graph: Graph, output: Path, as_json: bool) -> None:
    """Writes an imported or exported graph and prints what it holds."""
    from graphopt.ir.io import write_graph

    write_graph(graph, output)
    summary = {"path": str(output), "name": graph.name, **_counts(graph)}
    summary["total_tensor_size"] = graph.total_tensor_size
    summary["total_runtime"] = graph.total_runtime
    if as_json:
        print_json(summary)
    else:
        console.print(
            f"wrote {output}: {graph.n_ops:,} ops, {graph.n_tensors:,} tensors, "
            f"{graph.n_edges:,} edges, {graph.total_tensor_size:,} tensor bytes, "
            f"{graph.total_runtime:.6g} s of op runtime"
        )


@zoo_app.command("list")
@user_errors
def zoo_list(as_json: JsonFlag = False) -> None:
    """List the zoo's models with their measured graph sizes (inference and training step).

    Read from the sizes recorded with the zoo, without importing torch. Two tables, sizes and
    what each model is, so that both stay readable at 80 columns.
    """
    from graphopt.importers.zoo_sizes import read_sizes, zoo_catalogue

    rows = zoo_catalogue()
    torch_version = read_sizes()["torch_version"]
    if as_json:
        print_json({"models": rows, "torch_version": torch_version})
        return
    sizes = Table(
        Column("model", no_wrap=True),
        *(
            Column(header, justify="right", no_wrap=True)
            for header in ("ops", "MB", "train ops", "train MB", "params MB")
        ),
        box=box.SIMPLE_HEAD,
        caption=f"MB: tensor bytes / 1e6; train: one training step; measured with torch "
        f"{torch_version}",
    )
    described = Table(
        Column("model", no_wrap=True),
        "family",
        Column("what it is", overflow="fold"),
        box=box.SIMPLE_HEAD,
    )
    for row in rows:
        inference, train = row["sizes"]["inference"], row["sizes"]["train"]
        sizes.add_row(
            row["name"],
            f"{inference['ops']:,}",
            f"{inference['tensor_bytes'] / 1e6:,.1f}",
            f"{train['ops']:,}",
            f"{train['tensor_bytes'] / 1e6:,.1f}",
            f"{train['persistent_bytes'] / 1e6:,.1f}",
        )
        described.add_row(row["name"], row["family"], row["description"])
    console.print(sizes)
    console.print(described)


@zoo_app.command("export")
@user_errors
def zoo_export(
    name: Annotated[str, typer.Argument(help="Zoo model name (see `graphopt zoo list`).")],
    output: GraphOutput,
    train: Annotated[
        bool, typer.Option("--train", help="The training step instead of inference.")
    ] = False,
    device: DeviceOption = DEFAULT_DEVICE,
    as_json: JsonFlag = False,
) -> None:
    """Export a zoo model's inference or training-step graph with per-op costs."""
    check_output(output, "-o")
    from graphopt.costmodels.roofline import device_spec
    from graphopt.importers.zoo import export_graph

    device_spec(device)
    _write_summary(export_graph(name, training=train, device=device), output, as_json)


@dataset_app.command("build")
@user_errors
def dataset_build(
    config: Annotated[
        str,
        typer.Argument(help="Dataset config JSON, or a built-in one: 'default' or 'regal'."),
    ],
    output: Annotated[Path, typer.Option("--output", "-o", help="Directory to write.")],
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Replace an existing dataset in the directory.")
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Build a dataset: gather, split by topology (3-1-1), augment, store with a manifest."""
    check_output(output, "-o", folder=True)
    from graphopt.datasets import DEFAULT_CONFIG, DatasetConfig, build_dataset

    shipped = DEFAULT_CONFIG.parent / f"{config}.json"
    path = shipped if not Path(config).exists() and shipped.is_file() else Path(config)
    manifest = build_dataset(
        DatasetConfig.from_json(path), output, progress=not as_json, overwrite=overwrite
    )
    if as_json:
        print_json(
            {
                "path": str(output),
                "graphs": manifest["graphs"],
                "topologies": manifest["topologies"],
                "splits": {k: v["graphs"] for k, v in manifest["splits"].items()},
            }
        )
        return
    table = Table("split", "graphs", "topologies", "ops")
    for split, entry in manifest["splits"].items():
        table.add_row(
            split, f"{entry['graphs']:,}", f"{entry['topologies']:,}", f"{entry['ops']:,}"
        )
    console.print(table)
    console.print(f"wrote {output} (manifest.json, README.md)")


@dataset_app.command("label")
@user_errors
def dataset_label(
    dataset: Annotated[
        str, typer.Argument(help="A built dataset's directory, or graph:PATH[,PATH...].")
    ],
    output: Annotated[
        Path, typer.Option("--output", "-o", help="Labels directory (extended when it exists).")
    ],
    splits: Annotated[str, typer.Option(help="Splits to label, comma-separated.")] = "train",
    devices: DevicesOption = 4,
    capacity: CapacityOption = None,
    latency: LatencyOption = 1e-5,
    bandwidth: BandwidthOption = 1e10,
    mode: ModeOption = "sync",
    solver: SolverOption = "auto",
    policy: PolicyOption = None,
    evaluations: Annotated[
        int, typer.Option(min=1, help="The search's evaluations per graph.")
    ] = 20_000,
    seed: SeedOption = 0,
    workers: Annotated[
        int, typer.Option(min=0, help="Local worker processes (0: this process).")
    ] = 0,
    ray: Annotated[
        str | None,
        typer.Option(help="Solve on the Ray cluster at this address ('local': in-process)."),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Label a dataset's graphs with a search's placements (makespan), for imitation."""
    check_output(output, "-o", folder=True)
    from graphopt.costmodels.machine import Machine
    from graphopt.learning.labels import LabelConfig, build_labels
    from graphopt.solvers.base import Objective
    from graphopt.solvers.registry import make_solver

    machine = Machine.from_options(devices, capacity, latency, bandwidth, mode)
    if Objective.MAKESPAN not in make_solver(solver, policy).objectives:
        raise GraphoptError(f"--solver {solver}: does not optimize makespan")
    config = LabelConfig(
        dataset, tuple(split.strip() for split in splits.split(",")), devices, latency,
        bandwidth, machine.capacity, mode, solver, policy, evaluations, seed,
    )  # fmt: skip
    with _progress_bar(not as_json) as bar:
        task = bar.add_task("labelling", total=None)
        labels = build_labels(
            config, output, workers, ray, lambda done, total: bar.update(task, completed=done,
                                                                         total=total)
        )  # fmt: skip
    summary = {"path": str(output), "labels": len(labels), "headroom": labels.headroom()}
    if as_json:
        print_json(summary)
        return
    headroom = summary["headroom"]
    console.print(
        f"wrote {output}: {len(labels)} labels; the search is ahead of the best hint on "
        f"{headroom['ahead']} of {headroom['graphs']} graphs, by "
        f"{headroom['mean_gain_percent']:+.2f}% on average (README.md)"
    )


def _progress_bar(enabled: bool) -> Any:
    """A bar with a count and the elapsed time, on stderr (hidden off a terminal)."""
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn

    from graphopt.progress import progress_bar

    return progress_bar(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        quiet=not enabled,
    )  # fmt: skip
