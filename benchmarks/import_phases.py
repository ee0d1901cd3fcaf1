"""Where the time of a PyTorch import goes, phase by phase, in one fresh process.

    .venv/bin/python -P benchmarks/import_phases.py SOURCE [--train] [--onnx] [--json out.json]
    cd tests/importers && ../../.venv/bin/python -P ../../benchmarks/import_phases.py \
        user_models:build --onnx        # a user's GPT-style model (tests/importers/user_models.py)

SOURCE is a factory `package.module:function` (looked up in the working directory first, as
`graphopt import` does) or a zoo model name. The script replays `graphopt import SOURCE -o
<tmp>.json` and times each phase: module imports (graphopt's CLI, torch, torch.export's tracer
with torch._dynamo, graphopt's importers with numba), the factory, `torch.export.export`,
`run_decompositions` (or make_fx for `--train`), the conversion to a graph with its FLOP
counting, validation, roofline annotation and writing the JSON file. `--onnx` then times the
route through ONNX in the same process (torch already imported): `torch.onnx.export(dynamo=True)`
and `import_onnx` of the file it wrote. Run it with `-P` so that the working directory is not on
`sys.path` unless the importer puts it there, as for the `graphopt` script.
"""

from __future__ import annotations

import time

START = time.perf_counter()

import argparse  # noqa: E402  (the imports are what the first phases time)
import contextlib  # noqa: E402
import json  # noqa: E402
import tempfile  # noqa: E402
from collections.abc import Callable, Iterator  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402


class Phases:
    """Seconds per phase, from `lap` (time since the last lap) and `around` (time inside calls)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.last = START

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds

    def ordered(self) -> list[str]:
        """Phase names in the order they ran, each "of which" part after its whole."""
        names = list(self.seconds)
        for part in [name for name in names if name.startswith(" ")]:
            names.remove(part)
            names.insert(names.index(PARTS[part]) + 1, part)
        return names

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.add(name, now - self.last)
        self.last = now

    @staticmethod
    @contextlib.contextmanager
    def patched(owner: Any, attribute: str, value: Any) -> Iterator[None]:
        """`owner.attribute` is `value` while the context is open."""
        original = getattr(owner, attribute)
        setattr(owner, attribute, value)
        try:
            yield
        finally:
            setattr(owner, attribute, original)

    @contextlib.contextmanager
    def around(self, owner: Any, attribute: str, name: str) -> Iterator[None]:
        """Adds the time spent in `owner.attribute` to phase `name` while the context is open."""
        original = getattr(owner, attribute)

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.add(name, time.perf_counter() - start)

        with self.patched(owner, attribute, timed):
            yield


INNER = (
    "torch.export.export",
    "run_decompositions",
    "make_fx trace (training step)",
    "conversion to a graph (with FLOP counting)",
    "validation (Graph.from_arrays)",
    "roofline annotation",
)
PARTS = {"  of which FLOP counting": INNER[3]}
"""Phases timed inside another one: shown after it, not counted twice."""


def measure(source: str, training: bool, onnx: bool, phases: Phases) -> dict[str, Any]:
    """Imports `source` as `graphopt import` does, timing each phase into `phases`."""
    import graphopt.cli  # noqa: F401

    phases.lap("import graphopt.cli (typer, rich)")
    import torch

    phases.lap("import torch")
    import torch.export._trace  # noqa: F401  (what torch.export.export imports on first use)

    phases.lap("import torch.export's tracer (torch._dynamo)")
    from graphopt.importers import (
        _check_factory_result,
        _current_directory_first,
        _load_factory,
        builder,
        torch_export,
    )
    from graphopt.ir.io import write_graph

    phases.lap("import graphopt's importers (numpy, numba)")
    if ":" in source:
        with _current_directory_first():
            built = _load_factory(source)()
        module, inputs = _check_factory_result(source, built)
        loss = None
    else:
        from graphopt.importers.zoo import ZOO

        entry = ZOO[source]
        module, inputs = entry.build()
        loss = entry.loss
    phases.lap("factory: its module's import + build()")

    make_fx = torch_export.make_fx

    def timed_make_fx(*args: Any, **kwargs: Any) -> Callable[..., Any]:
        traced = make_fx(*args, **kwargs)

        def trace(*inputs: Any) -> Any:
            start = time.perf_counter()
            try:
                return traced(*inputs)
            finally:
                phases.add(INNER[2], time.perf_counter() - start)

        return trace

    with contextlib.ExitStack() as timers:
        timers.enter_context(phases.around(torch.export, "export", INNER[0]))
        program = torch.export.ExportedProgram
        timers.enter_context(phases.around(program, "run_decompositions", INNER[1]))
        timers.enter_context(phases.patched(torch_export, "make_fx", timed_make_fx))
        timers.enter_context(phases.around(torch_export, "_convert", INNER[3]))
        timers.enter_context(phases.around(torch_export, "_flops", *PARTS))
        timers.enter_context(phases.around(builder.GraphBuilder, "build", INNER[4]))
        timers.enter_context(phases.around(torch_export, "annotate_runtimes", INNER[5]))
        if training:
            graph = torch_export.import_training_step(module, inputs, loss=loss)
        else:
            graph = torch_export.import_module(module, inputs)
    phases.lap("other (our glue, the rest of torch's work)")
    phases.seconds["other (our glue, the rest of torch's work)"] -= sum(
        phases.seconds.get(name, 0.0) for name in INNER
    )
    with tempfile.TemporaryDirectory() as directory:
        write_graph(graph, Path(directory) / "graph.json")
        phases.lap("writing JSON")
        total = phases.last - START
        onnx_seconds = _onnx_route(module, inputs, Path(directory)) if onnx else {}
    return {
        "source": source,
        "training": training,
        "ops": graph.n_ops,
        "total": total,
        "phases": {name: phases.seconds[name] for name in phases.ordered() if phases.seconds[name]},
        "onnx_route": onnx_seconds,
    }


def _onnx_route(module: Any, inputs: tuple[Any, ...], directory: Path) -> dict[str, float]:
    """Seconds of torch.onnx.export (dynamo) and of graphopt's ONNX import of its file."""
    import torch

    from graphopt.importers.onnx import import_onnx
    from graphopt.importers.torch_export import _quiet_torch

    path = directory / "model.onnx"
    seconds: dict[str, float] = {}
    start = time.perf_counter()
    with torch.no_grad(), _quiet_torch():
        torch.onnx.export(module.eval(), tuple(inputs), path, dynamo=True)
    seconds["torch.onnx.export (dynamo; torch imported)"] = time.perf_counter() - start
    start = time.perf_counter()
    import_onnx(path)
    seconds["graphopt import_onnx of its file"] = time.perf_counter() - start
    return seconds


def print_table(result: dict[str, Any]) -> None:
    """The phases as a plain table with each one's share of the total."""
    total = result["total"]
    print(
        f"{result['source']} ({'training step' if result['training'] else 'inference'}), "
        f"{result['ops']:,} ops: {total:.2f} s"
    )
    for name, seconds in result["phases"].items():
        print(f"  {name:50s} {seconds:7.2f} s {100 * seconds / total:5.1f}%")
    for name, seconds in result["onnx_route"].items():
        print(f"  ONNX route: {name:38s} {seconds:7.2f} s")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", help="package.module:function or a zoo model name")
    parser.add_argument("--train", action="store_true", help="the training step (make_fx)")
    parser.add_argument("--onnx", action="store_true", help="also time the route through ONNX")
    parser.add_argument("--json", type=Path, help="write the result as JSON too")
    args = parser.parse_args(argv)
    result = measure(args.source, args.train, args.onnx, Phases())
    print_table(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
