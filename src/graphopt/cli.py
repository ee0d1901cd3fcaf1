"""The `graphopt` command line: generate, import, zoo, dataset, info, score, optimize, train, bench.

Every command that prints results also takes `--json` and then prints exactly one JSON object on
stdout. Invalid input ends with one line on stderr naming the item and the rule, and exit
status 2; never a stack trace.

Each command imports what it needs inside its body: importing numpy, numba and the cost models
at module level cost every call, `graphopt --help` included, about 0.4 s before it started work.
Names that command signatures use (typer reads them when this module is imported) come from
modules that import nothing heavy.
"""

from __future__ import annotations

import functools
import gc
import json
import math
import re
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.table import Column, Table

from graphopt import __version__
from graphopt.costmodels.defaults import DEFAULT_DEVICE
from graphopt.errors import GraphoptError, MachineError, one_line
from graphopt.progress import progress_bar

if TYPE_CHECKING:
    from graphopt.costmodels.machine import Machine
    from graphopt.ir.graph import Graph

app = typer.Typer(
    help="Optimize placement and scheduling of ML computation graphs.",
    epilog="File formats, scoring rules, limits and exit codes: docs/format.md in the "
    "graphopt repository.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
console = Console()
F = TypeVar("F", bound=Callable[..., Any])

JsonFlag = Annotated[
    bool, typer.Option("--json", help="Print one JSON object on stdout instead of tables.")
]
GraphOutput = Annotated[
    Path, typer.Option("--output", "-o", help="Graph file to write (.json or .npz).")
]
DeviceOption = Annotated[
    str, typer.Option(help="Roofline device for op runtimes: v100, a100, h100 or cpu.")
]


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


EXIT_INVALID = 2
"""Invalid input or request: one line naming the item and the rule (docs/format.md)."""
EXIT_INFEASIBLE = 3
"""No solution fits the capacity (found by the search, or proven by a lower bound at once)."""
EXIT_NO_SOLUTION = 4
"""A solver found no solution within its budget."""
EXIT_INTERNAL = 70
"""A bug in graphopt (EX_SOFTWARE): reported in one line, with the traceback under --debug."""


def _fail(message: str, code: int) -> NoReturn:
    """Prints `error: message` as one line on stderr and exits with `code`."""
    typer.echo(f"error: {one_line(message)}", err=True)
    raise typer.Exit(code)


def _user_errors(command: F) -> F:
    """Turns invalid-input errors into one line on stderr and exit status 2."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except GraphoptError as error:
            _fail(str(error), _exit_code(error))
        except OSError as error:
            _fail(f"{error.filename or ''}: {error.strerror or error}", EXIT_INVALID)
        except MemoryError as error:
            _fail(
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


def _print_json(document: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(document) + "\n")


_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
_UNITS.update({"kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40})


def parse_bytes(text: str) -> int:
    """Parses '16GiB', '512MB', '1e9' or '4096' into a number of bytes, exactly.

    Whole numbers are read as integers (a float would round 9007199254740993 to ...992);
    decimals and exponents must still come to a whole number of bytes.
    """
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([a-zA-Z]*)\s*", text)
    if not match or match.group(2).lower() not in _UNITS or len(match.group(1)) > 40:
        raise MachineError(
            f"capacity must be a byte count such as 4096, 1e9 or 16GiB, got '{text}'"
        )
    number, unit = match.group(1), _UNITS[match.group(2).lower()]
    if number.isdigit():
        return int(number) * unit
    value = float(number) * unit
    if not math.isfinite(value) or value != int(value):
        raise MachineError(f"capacity must be a whole number of bytes, got '{text}'")
    return int(value)


def _parse_param(text: str) -> tuple[str, Any]:
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise GraphoptError(f"--param must look like KEY=VALUE, got '{text}'")
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):  # not JSON (or too deep, or too many digits): a string
        value = raw
    return key.strip(), value


@app.command()
@_user_errors
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
    from graphopt.ir.generators import generate as generate_graph
    from graphopt.ir.io import write_graph

    params = dict(_parse_param(p) for p in param or [])
    graph = generate_graph(family, n, seed=seed, **params)
    write_graph(graph, output)
    summary = {"path": str(output), "name": graph.name, **_counts(graph)}
    if as_json:
        _print_json(summary)
    else:
        console.print(
            f"wrote {output}: {graph.n_ops} ops, {graph.n_tensors} tensors, {graph.n_edges} edges"
        )


def _counts(graph: Graph) -> dict[str, Any]:
    return {"ops": graph.n_ops, "tensors": graph.n_tensors, "edges": graph.n_edges}


@app.command()
@_user_errors
def info(
    graph_path: Annotated[
        Path, typer.Argument(help="Graph file (.json or .npz).", metavar="GRAPH")
    ],
    as_json: JsonFlag = False,
) -> None:
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
        "max_tensor_size": int(graph.tensor_size.max(initial=0)),
        "op_types": dict(Counter(t for t in graph.op_types if t).most_common()),
    }
    if as_json:
        _print_json(summary)
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
        "max_tensor_size": "largest tensor (bytes)",
    }
    for key, label in labels.items():
        value = summary[key]
        table.add_row(label, f"{value:,.6g}" if isinstance(value, float) else f"{value:,}")
    if summary["op_types"]:
        top = list(summary["op_types"].items())[:8]
        table.add_row("op types", ", ".join(f"{k} {v}" for k, v in top))
    console.print(table)


@app.command("import")
@_user_errors
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
    from graphopt.ir.io import write_graph

    write_graph(graph, output)
    summary = {"path": str(output), "name": graph.name, **_counts(graph)}
    summary["total_tensor_size"] = graph.total_tensor_size
    summary["total_runtime"] = graph.total_runtime
    if as_json:
        _print_json(summary)
    else:
        console.print(
            f"wrote {output}: {graph.n_ops:,} ops, {graph.n_tensors:,} tensors, "
            f"{graph.n_edges:,} edges, {graph.total_tensor_size:,} tensor bytes, "
            f"{graph.total_runtime:.6g} s of op runtime"
        )


zoo_app = typer.Typer(help="Built-in model zoo: list and export real graphs.", no_args_is_help=True)
dataset_app = typer.Typer(
    help="Build and inspect training datasets of graphs.", no_args_is_help=True
)
train_app = typer.Typer(
    help="Train learned optimizers (checkpoints resume exactly).", no_args_is_help=True
)
app.add_typer(zoo_app, name="zoo")
app.add_typer(dataset_app, name="dataset")
app.add_typer(train_app, name="train")


@zoo_app.command("list")
@_user_errors
def zoo_list(as_json: JsonFlag = False) -> None:
    """List the zoo's models with their measured graph sizes (inference and training step)."""
    from graphopt.importers.zoo import ZOO
    from graphopt.importers.zoo_sizes import read_sizes, zoo_sizes

    rows = [
        {
            "name": m.name,
            "family": m.family,
            "description": m.description,
            "sizes": zoo_sizes(m.name),
        }
        for m in ZOO.values()
    ]
    torch_version = read_sizes()["torch_version"]
    if as_json:
        _print_json({"models": rows, "torch_version": torch_version})
        return
    table = Table(
        "model",
        "family",
        Column("ops", justify="right"),
        Column("tensor MB", justify="right"),
        Column("train ops", justify="right"),
        Column("train tensor MB", justify="right"),
        Column("params MB", justify="right"),
        "what it is",
        caption=f"sizes measured with torch {torch_version}; train: one training step",
    )
    for row in rows:
        inference, train = row["sizes"]["inference"], row["sizes"]["train"]
        table.add_row(
            row["name"],
            row["family"],
            f"{inference['ops']:,}",
            f"{inference['tensor_bytes'] / 1e6:,.1f}",
            f"{train['ops']:,}",
            f"{train['tensor_bytes'] / 1e6:,.1f}",
            f"{train['persistent_bytes'] / 1e6:,.1f}",
            row["description"],
        )
    console.print(table)


@zoo_app.command("export")
@_user_errors
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
    from graphopt.costmodels.roofline import device_spec
    from graphopt.importers.zoo import export_graph

    device_spec(device)
    _write_summary(export_graph(name, training=train, device=device), output, as_json)


@dataset_app.command("build")
@_user_errors
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
    from graphopt.datasets import DEFAULT_CONFIG, DatasetConfig, build_dataset

    shipped = DEFAULT_CONFIG.parent / f"{config}.json"
    path = shipped if not Path(config).exists() and shipped.is_file() else Path(config)
    manifest = build_dataset(
        DatasetConfig.from_json(path), output, progress=not as_json, overwrite=overwrite
    )
    if as_json:
        _print_json(
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


@train_app.command("regal")
@_user_errors
def train_regal(
    config: Annotated[
        str,
        typer.Argument(
            help="Training config JSON, or a shipped config name (regal-peak-memory, ...)."
        ),
    ],
    output: Annotated[
        Path,
        typer.Option("--output", "-o", help="Run directory (checkpoints, log.csv, tensorboard/)."),
    ],
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue the run in OUTPUT from last.pt.")
    ] = False,
    ray: Annotated[
        str | None,
        typer.Option(help="Run rollouts on the Ray cluster at this address ('local': in-process)."),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(help="Rollout workers (0: in this process) (default: the config's)."),
    ] = None,
    steps: Annotated[
        int | None, typer.Option(help="Gradient steps (default: the config's).")
    ] = None,
) -> None:
    """Train a REGAL (or GAS, IDRS) policy with REINFORCE; best.pt is the trained policy."""
    import dataclasses

    from rich.progress import BarColumn, TextColumn, TimeElapsedColumn

    from graphopt.learning.train_regal import TrainConfig, train

    settings = TrainConfig.load(config)
    overrides = {k: v for k, v in (("workers", workers), ("steps", steps)) if v is not None}
    settings = dataclasses.replace(settings, **overrides)
    columns = [
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[info]}"),
    ]
    with progress_bar(*columns, TimeElapsedColumn()) as bar:
        task = bar.add_task(f"train {settings.name}", total=settings.steps, info="preparing")
        validation = [""]

        def progress(row: dict[str, float]) -> None:
            if "validation_reward" in row:
                validation[0] = f", validation {row['validation_improvement_pct']:+.2f}%"
            reward = f"reward {row['reward']:.4f}" if "reward" in row else "validated"
            info = f"{reward}{validation[0]}"
            bar.update(task, completed=row["step"], info=info)

        state = train(settings, output, resume=resume, ray_address=ray, progress=progress)
    typer.echo(
        f"trained {state.step} steps in {state.seconds:.0f} s; best validation reward "
        f"{state.best_validation:.4f} ({100 * (1 + state.best_validation):+.2f}% vs uniform "
        f"BRKGA) at step {state.best_step}; policy: {output / 'best.pt'}"
    )


@app.command()
@_user_errors
def score(
    graph_path: Annotated[
        Path, typer.Argument(help="Graph file (.json or .npz).", metavar="GRAPH")
    ],
    solution_path: Annotated[
        Path, typer.Argument(help="Solution file (graphopt.solution/1).", metavar="SOLUTION")
    ],
    devices: Annotated[int | None, typer.Option(help="Devices [default: the solution's].")] = None,
    capacity: Annotated[str | None, typer.Option(help="Memory per device, e.g. 16GiB.")] = None,
    latency: Annotated[
        float | None, typer.Option(help="Seconds added to each transfer [default: 0].")
    ] = None,
    bandwidth: Annotated[
        float | None, typer.Option(help="Transfer bytes/second [default: infinite].")
    ] = None,
    mode: Annotated[
        str | None, typer.Option(help="Transfer mode: sync or async [default: sync].")
    ] = None,
    reference: Annotated[
        bool, typer.Option(help="Use the plain reference scorer (slow oracle).")
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Check a solution and compute its peak memory and makespan (COST_MODEL.md).

    Machine settings come from the options, else from the solution's `machine` field, else the
    defaults. Exits 1 when the solution's claimed objective disagrees with the computed one (checked
    only on the solution's own machine, i.e. when no machine option is given).
    """
    from graphopt.costmodels.machine import Machine
    from graphopt.costmodels.score import Scorer
    from graphopt.ir.io import read_graph, read_solution

    graph = read_graph(graph_path)
    solution = read_solution(solution_path, graph, n_devices=devices)
    recorded = dict(solution.machine)
    machine = Machine(
        n_devices=solution.n_devices,
        capacity=parse_bytes(capacity) if capacity is not None else recorded.get("capacity"),
        latency=latency if latency is not None else recorded.get("latency", 0.0),
        bandwidth=_bandwidth(bandwidth if bandwidth is not None else recorded.get("bandwidth")),
        mode=mode if mode is not None else recorded.get("mode", "sync"),
    )
    if reference:
        from graphopt.costmodels._reference import reference_score

        result = reference_score(graph, solution, machine)
    else:
        result = Scorer(graph, machine).score(solution)
    claimed = dict(solution.objective)
    # Claims describe the solution's own machine; with another machine they are not comparable.
    overridden = any(v is not None for v in (devices, capacity, latency, bandwidth, mode))
    disagreements = [] if overridden else result.disagreements(claimed)
    document = {
        "graph": graph.name,
        "devices": machine.n_devices,
        "valid": True,
        **result.to_json(),
        "machine": machine.to_json(),
        "claimed": claimed,
        "claims_agree": None if overridden else not disagreements,
    }
    if as_json:
        _print_json(document)
    else:
        table = Table(
            title=f"{solution_path.name} on {graph.name or graph_path.name}", show_header=False
        )
        table.add_row("valid", "yes")
        table.add_row("peak memory (bytes)", f"{result.peak_memory:,}")
        table.add_row("per device", ", ".join(f"{p:,}" for p in result.peak_memory_per_device))
        if machine.capacity is not None:
            table.add_row(
                "fits capacity",
                f"{'yes' if result.feasible else 'no'} ({machine.capacity:,} per device)",
            )
        table.add_row("makespan (s)", f"{result.makespan:.9g}")
        table.add_row("speedup", f"{result.speedup:.4f}")
        console.print(table)
        for line in disagreements:
            typer.echo(f"claim disagrees: {line}", err=True)
    if disagreements:
        raise typer.Exit(1)


def _machine_options(
    devices: int, capacity: str | None, latency: float, bandwidth: float | None, mode: str
) -> Machine:
    from graphopt.costmodels.machine import Machine

    return Machine(
        n_devices=devices,
        capacity=parse_bytes(capacity) if capacity is not None else None,
        latency=latency,
        bandwidth=_bandwidth(bandwidth),
        mode=mode,  # type: ignore[arg-type]
    )


def _parse_pins(texts: list[str]) -> dict[str, int]:
    """`--pin OP=DEVICE` options as {op: device}; an op pinned to two devices is refused."""
    pins: dict[str, int] = {}
    for text in texts:
        name, sep, device = text.rpartition("=")
        if not sep or not name or not device.strip().isdigit():
            raise GraphoptError(
                f"--pin must look like OP=DEVICE with DEVICE an integer >= 0, got '{text}'"
            )
        if pins.get(name, int(device)) != int(device):
            raise GraphoptError(
                f"--pin: op '{name}' is pinned to device {pins[name]} and to device {int(device)}"
            )
        pins[name] = int(device)
    return pins


@app.command()
@_user_errors
def optimize(
    graph_path: Annotated[
        Path, typer.Argument(help="Graph file (.json or .npz).", metavar="GRAPH")
    ],
    output: Annotated[
        Path, typer.Option("--output", "-o", help="Solution file to write (graphopt.solution/1).")
    ],
    objective: Annotated[
        str, typer.Option(help="What to minimize: peak-memory or makespan.")
    ] = "peak-memory",
    devices: Annotated[int, typer.Option(help="Number of devices.")] = 2,
    capacity: Annotated[str | None, typer.Option(help="Memory per device, e.g. 16GiB.")] = None,
    latency: Annotated[float, typer.Option(help="Seconds added to each transfer.")] = 0.0,
    bandwidth: Annotated[
        float | None, typer.Option(help="Transfer bytes/second [default: infinite].")
    ] = None,
    mode: Annotated[str, typer.Option(help="Transfer mode: sync or async.")] = "sync",
    solver: Annotated[str, typer.Option(help="Solver name (see `graphopt solvers`).")] = "auto",
    policy: Annotated[
        str | None,
        typer.Option(help="Policy checkpoint for regal, gas or idrs (default: the shipped one)."),
    ] = None,
    budget: Annotated[
        int | None,
        typer.Option(help="Evaluations (repeatable with --seed) [default: --time 10 if neither]."),
    ] = None,
    time_limit: Annotated[float | None, typer.Option("--time", help="Seconds of search.")] = None,
    seed: Annotated[int, typer.Option(min=0, help="Random seed.")] = 0,
    pin: Annotated[
        list[str] | None,
        typer.Option(help="Fix an op's device: OP=DEVICE, repeatable."),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Find a placement and schedule; write the best solution and print a summary.

    Ctrl-C stops the search and still writes the best solution found so far. Exits 3 (after
    writing it) when no solution found fits the capacity.
    """
    from rich.progress import BarColumn, TextColumn, TimeElapsedColumn

    from graphopt.ir.io import read_graph, write_solution
    from graphopt.optimize import optimize as run_optimize
    from graphopt.solvers.bounds import (
        makespan_lower_bound,
        op_step_memory,
        peak_memory_lower_bound,
    )

    graph = read_graph(graph_path)
    machine = _machine_options(devices, capacity, latency, bandwidth, mode)
    pins = _parse_pins(pin or [])
    unit = "bytes" if objective == "peak-memory" else "s"
    total = budget
    columns = [
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[best]}"),
    ]
    with progress_bar(*columns, TimeElapsedColumn(), quiet=as_json) as bar:
        task = bar.add_task(solver, total=total, best="")

        def progress(evaluations: int, value: float, excess: int) -> None:
            over = f", {excess:,} bytes over capacity in total" if excess else ""
            bar.update(task, completed=evaluations, best=f"best {value:,.6g} {unit}{over}")

        try:
            result = run_optimize(
                graph,
                machine,
                objective,
                solver,
                budget,
                time_limit,
                seed,
                pins,
                (),
                progress,
                policy,
            )
        except KeyboardInterrupt:
            typer.echo("error: interrupted before any solution was found", err=True)
            raise typer.Exit(130) from None
        bar.update(task, completed=result.evaluations)
    solution = result.solution
    write_solution(graph, solution, output)
    if result.objective.value == "peak-memory":
        bound: float = peak_memory_lower_bound(graph, machine.n_devices)
    else:
        bound = makespan_lower_bound(graph, machine)
    if result.lower_bound is not None:
        bound = max(bound, result.lower_bound)
    gap = result.value / bound - 1.0 if bound > 0 else 0.0
    summary = {
        "graph": graph.name,
        "solver": solver,
        "objective": result.objective.value,
        "value": result.value,
        "lower_bound": bound,
        "gap": gap,
        "status": result.status,
        "feasible": result.feasible,
        "evaluations": result.evaluations,
        "seconds": result.seconds,
        **result.score.to_json(),
        "notes": list(solution.solver.get("notes", [])),
        "output": str(output),
    }
    if as_json:
        _print_json(summary)
    else:
        table = Table(title=f"{solver} on {graph.name or graph_path.name}", show_header=False)
        table.add_row("objective", f"{result.objective.value} ({unit})")
        table.add_row("best", f"{result.value:,.9g}")
        table.add_row("lower bound", f"{bound:,.9g} (best is {gap:.2%} above it)")
        table.add_row("status", result.status)
        table.add_row("peak memory (bytes)", f"{result.score.peak_memory:,}")
        table.add_row("makespan (s)", f"{result.score.makespan:.9g}")
        table.add_row("evaluations", f"{result.evaluations:,}")
        table.add_row("seconds", f"{result.seconds:.3f}")
        table.add_row("written to", str(output))
        console.print(table)
        for note in summary["notes"]:
            typer.echo(f"note: {one_line(note)}", err=True)
    if not result.feasible:
        peaks = result.score.peak_memory_per_device
        excess = sum(max(peak - machine.capacity, 0) for peak in peaks)
        step = op_step_memory(graph)
        heaviest = int(step.argmax())
        proof = (
            f" No placement can meet it: op {graph.op_names[heaviest]!r} alone holds "
            f"{int(step[heaviest]):,} bytes at its step."
            if step[heaviest] > machine.capacity
            else ""
        )
        typer.echo(
            f"error: no solution found fits the capacity of {machine.capacity:,} bytes per "
            f"device; the best needs {max(peaks):,} bytes on its fullest device, {excess:,} bytes "
            f"over capacity in total; it was written to {output}.{proof}",
            err=True,
        )
        raise typer.Exit(EXIT_INFEASIBLE)


def _parse_budgets(text: str) -> list[int]:
    """`--budgets 1000,2000,5000` as evaluation limits."""
    parts = [part.strip() for part in text.split(",")]
    if not all(part.isdigit() and int(part) > 0 for part in parts):
        raise GraphoptError(
            f"--budgets must be comma-separated positive evaluation counts, got '{text}'"
        )
    return [int(part) for part in parts]


@app.command()
@_user_errors
def bench(
    suite: Annotated[
        str,
        typer.Argument(
            help="Suite name (tiny-20, small-100, zoo-held-out, ...), dataset:DIR:SPLIT[:N] "
            "(N graphs of a built dataset's split) or a folder of graphs."
        ),
    ],
    solvers: Annotated[
        str, typer.Option(help="Comma-separated solver names; brkga is always included.")
    ] = "brkga,compiler-best,gp-metis",
    objective: Annotated[
        str | None,
        typer.Option(help="peak-memory or makespan [default: peak-memory; zoo-real: both]."),
    ] = None,
    devices: Annotated[
        int | None, typer.Option(help="Number of devices [default: 2; zoo-real: 2, 4 and 8].")
    ] = None,
    capacity: Annotated[str | None, typer.Option(help="Memory per device, e.g. 16GiB.")] = None,
    budget: Annotated[int, typer.Option(min=1, help="Evaluations per solver run.")] = 5000,
    time_limit: Annotated[
        float | None,
        typer.Option("--time", help="zoo-real: seconds for auto per problem [default: 10]."),
    ] = None,
    budgets: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated evaluation limits, e.g. 1000,2000,5000,10000,20000,50000: "
            "every solver but cp-sat also runs at each, for the budget curve (paper 001 fig. 5)."
        ),
    ] = None,
    histogram: Annotated[
        str | None,
        typer.Option(
            help="Solver whose per-graph improvement over brkga the histogram shows (paper 001 "
            "fig. 4), added to --solvers if missing; default: every solver but brkga."
        ),
    ] = None,
    seeds: Annotated[int, typer.Option(min=1, help="Seeds per graph and solver.")] = 1,
    exact_time: Annotated[
        float, typer.Option("--exact-time", help="CP-SAT seconds per graph (> 0).")
    ] = 10.0,
    exact_max_ops: Annotated[
        int | None,
        typer.Option(
            "--exact-max-ops",
            help="Run cp-sat only on graphs of at most this many ops; the others' best known "
            "value comes from the other solvers. Default: no limit.",
        ),
    ] = None,
    output_dir: Annotated[
        Path, typer.Option("--output-dir", "-o", help="Folder for the reports.")
    ] = Path("out/bench"),
    as_json: JsonFlag = False,
) -> None:
    """Compare solvers on a suite with the papers' metrics; write markdown, CSV and plots.

    summary.md records the command line, so published results say how they were made.
    """
    import shlex

    from graphopt.evaluation.bench import BASELINE, markdown_table, run_bench, write_reports
    from graphopt.evaluation.suites import load_suite, report_name
    from graphopt.solvers.base import Objective
    from graphopt.solvers.registry import check_solver

    if suite == "zoo-real":
        _bench_zoo_real(objective, devices, time_limit, output_dir, as_json)
        return
    if time_limit is not None:
        raise GraphoptError("--time applies to the zoo-real suite; other suites take --budget")
    objective = objective or "peak-memory"
    devices = 2 if devices is None else devices
    names = [name.strip() for name in solvers.split(",") if name.strip()]
    if histogram is not None:
        if histogram == BASELINE:
            raise GraphoptError(f"--histogram shows a solver against {BASELINE}, not {BASELINE}")
        names = list(dict.fromkeys([*names, histogram]))
    for name in names:
        check_solver(name)
    limits = _parse_budgets(budgets) if budgets is not None else None
    if not (math.isfinite(exact_time) and exact_time > 0):
        raise GraphoptError(f"--exact-time must be finite seconds > 0, got {exact_time}")
    if exact_max_ops is not None and exact_max_ops < 1:
        raise GraphoptError(
            f"--exact-max-ops must be a positive number of ops, got {exact_max_ops}"
        )
    goal = Objective.parse(objective)
    graphs = load_suite(suite)
    machine = _machine_options(devices, capacity, 0.0, None, "sync")
    with progress_bar(quiet=as_json) as bar:
        task = bar.add_task(f"bench {suite}", total=None)
        result = run_bench(
            graphs,
            machine,
            goal,
            names,
            seeds=range(seeds),
            evaluations=budget,
            exact_seconds=exact_time,
            budgets=limits,
            exact_max_ops=exact_max_ops,
            progress=lambda done, total, label: bar.update(
                task, completed=done, total=total, description=label[:40]
            ),
        )
    title = f"{suite}: {goal.value}, {devices} devices, {len(graphs)} graphs, {seeds} seed(s)"
    folder = output_dir / report_name(suite)
    command = shlex.join(["graphopt", *sys.argv[1:]])
    written = write_reports(result, folder, title, command, histogram)
    if as_json:
        _print_json({"suite": suite, "summary": result.summary, "files": [str(p) for p in written]})
    else:
        typer.echo(title)
        typer.echo(markdown_table(result.summary, budget))
        typer.echo(f"wrote {', '.join(str(p) for p in written)}")


def _bench_zoo_real(
    objective: str | None,
    devices: int | None,
    seconds: float | None,
    output_dir: Path,
    as_json: bool,
) -> None:
    """`bench zoo-real`: real models on several devices, every baseline, auto, REGAL, bounds."""
    import shlex

    from graphopt.evaluation.zoo_real import (
        comparisons,
        run_zoo_real,
        summary_lines,
        write_zoo_real,
        zoo_graphs,
    )
    from graphopt.optimize import DEFAULT_SECONDS
    from graphopt.solvers.base import Objective

    if seconds is not None and not (math.isfinite(seconds) and seconds > 0):
        raise GraphoptError(f"--time must be finite seconds > 0, got {seconds}")
    if devices is not None:
        _machine_options(devices, None, 0.0, None, "sync")
    objectives = [Objective.parse(objective)] if objective else list(Objective)
    with progress_bar(quiet=as_json) as bar:
        task = bar.add_task("bench zoo-real: exporting graphs", total=None)
        graphs = zoo_graphs()
        runs = run_zoo_real(
            graphs,
            (2, 4, 8) if devices is None else (devices,),
            objectives,
            seconds or DEFAULT_SECONDS,
            progress=lambda done, total, label: bar.update(
                task, completed=done, total=total, description=label[:40]
            ),
        )
    command = shlex.join(["graphopt", *sys.argv[1:]])
    written = write_zoo_real(runs, output_dir / "zoo-real", command)
    lines = summary_lines(comparisons(runs))
    if as_json:
        _print_json({"suite": "zoo-real", "summary": lines, "files": [str(p) for p in written]})
    else:
        for line in lines:
            typer.echo(line)
        typer.echo(f"wrote {', '.join(str(p) for p in written)}")


@app.command()
def solvers() -> None:
    """List the solvers `optimize --solver` and `bench --solvers` accept."""
    from graphopt.solvers.registry import SOLVERS

    table = Table("solver", "what it does")
    for name, entry in SOLVERS.items():
        table.add_row(name, entry.description)
    console.print(table)


@app.command()
def warmup(
    workers: Annotated[
        int, typer.Option(min=1, help="Processes compiling side by side (1: this one only).")
    ] = 2,
) -> None:
    """Compile the numba kernels the commands use, so that no later run compiles them.

    The compiled code is cached beside the sources (or under NUMBA_CACHE_DIR) until they change.
    """
    from graphopt.warmup import warmup as run_warmup

    report = run_warmup(workers, progress=lambda line: typer.echo(line, err=True))
    typer.echo(
        f"warmup: {report.compiled} kernel signatures compiled, {report.loaded} loaded, "
        f"{report.solves} solves, {report.seconds:.1f} s"
    )
    if report.overlap:
        typer.echo(
            "warning: graphopt.warmup.PARALLEL is out of date: its groups share "
            + ", ".join(report.overlap),
            err=True,
        )


def _bandwidth(value: float | None) -> float:
    """None (a solution's JSON null) is infinite bandwidth."""
    return math.inf if value is None else value


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
