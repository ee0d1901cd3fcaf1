"""Measured graph sizes of every zoo model, readable without importing torch.

A user choosing a zoo model needs to know how big its graphs are, but exporting the big entries
takes minutes and imports torch. So each entry's inference graph and training step are exported
once, their sizes committed in `zoo/sizes.json` beside the model definitions, and `zoo_sizes`
reads them back. The tracer's decompositions decide the op count, so the file records the torch
and transformers versions it was measured with; regenerate it (56 exports, one at a time: about
six minutes on two cores) after changing a zoo model or upgrading either:

    python -m graphopt.importers.zoo_sizes --write

Without `--write` the same command re-measures and reports where the file differs. The module
lives outside the `zoo` package because that package's `__init__` imports the model definitions,
and with them torch; here torch is imported only to measure.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graphopt.errors import GraphError, GraphoptError
from graphopt.progress import progress_bar

if TYPE_CHECKING:
    from rich.progress import Progress

    from graphopt.ir.graph import Graph

SIZES_PATH = Path(__file__).parent / "zoo" / "sizes.json"
KINDS = ("inference", "train")
"""Graphs measured per model: the inference graph and the training step (`zoo export --train`)."""
FIELDS = ("ops", "tensors", "edges", "tensor_bytes", "persistent_bytes")
"""Figures per graph: ops, tensors, (tensor, consumer) edges, bytes of all tensors, and bytes of
the persistent ones (parameters, buffers, constants and example inputs)."""
MEASURED_WITH = ("torch", "transformers")
"""Packages whose versions decide the traced graphs, recorded as `<package>_version`."""
REGENERATE = "python -m graphopt.importers.zoo_sizes --write"

Sizes = dict[str, dict[str, int]]
"""One model's figures: kind ("inference", "train") -> field (see `FIELDS`) -> value."""
LABELS = ("family", "description")
"""What each model's entry also records from the zoo, so that `graphopt zoo list` needs no
torch."""


def read_sizes(path: Path = SIZES_PATH) -> dict[str, Any]:
    """The sizes document: `<package>_version` per `MEASURED_WITH`, and `models`: name -> Sizes."""
    return json.loads(path.read_text())


@functools.cache
def _shipped_sizes() -> dict[str, Any]:
    """The committed document, read once per process (a listing asks for every model)."""
    return read_sizes()


def zoo_sizes(name: str) -> Sizes:
    """The measured sizes of zoo model `name`'s inference graph and training step.

    Returns:
        {"inference": {...}, "train": {...}}, each with the integer figures named in `FIELDS`;
        a fresh copy, so the caller may change it.

    Raises:
        GraphError: No sizes are recorded for `name`; the message lists the recorded names.
    """
    models = _shipped_sizes()["models"]
    if name not in models:
        raise GraphError(
            f"no recorded sizes for zoo model {name!r} (recorded: {', '.join(models)}); "
            f"measure it with `{REGENERATE} {name}`"
        )
    return {kind: dict(models[name][kind]) for kind in KINDS}


def zoo_catalogue() -> list[dict[str, Any]]:
    """Every recorded zoo model in the zoo's order: name, family, description and its sizes."""
    return [
        {"name": name, **{label: entry[label] for label in LABELS}, "sizes": zoo_sizes(name)}
        for name, entry in _shipped_sizes()["models"].items()
    ]


def graph_sizes(graph: Graph) -> dict[str, int]:
    """The figures named in `FIELDS` for one graph."""
    return {
        "ops": graph.n_ops,
        "tensors": graph.n_tensors,
        "edges": graph.n_edges,
        "tensor_bytes": graph.total_tensor_size,
        "persistent_bytes": int(graph.tensor_size[graph.tensor_persistent].sum()),
    }


def measure(name: str, kind: str) -> dict[str, int]:
    """Exports zoo model `name`'s graph of `kind` ("inference" or "train") and measures it.

    Sizes do not depend on the cost model's device, so the default device is used.
    """
    from graphopt.importers.zoo import export_graph

    return graph_sizes(export_graph(name, training=kind == "train"))


def installed_versions() -> dict[str, str]:
    """`<package>_version` of each package in `MEASURED_WITH`, without a local build label.

    The label ("+cpu", "+cu128") is dropped: CPU and CUDA builds trace the same graphs on CPU.
    """
    from importlib.metadata import version

    return {f"{package}_version": version(package).split("+")[0] for package in MEASURED_WITH}


def measure_sizes(names: Sequence[str], *, progress: Progress | None = None) -> dict[str, Sizes]:
    """Exports every kind of every named model, one at a time, and measures the graphs.

    Args:
        names: Zoo model names, measured in this order.
        progress: Advanced by one per export, and told each export's figures and time on its
            console; none to measure silently.

    Returns:
        name -> Sizes, in the order of `names`.
    """
    task = (
        None if progress is None else progress.add_task("exporting", total=len(names) * len(KINDS))
    )
    sizes: dict[str, Sizes] = {}
    for name in names:
        sizes[name] = {}
        for kind in KINDS:
            if progress is not None:
                progress.update(task, item=f"{name} ({kind})")
            start = time.perf_counter()
            figures = sizes[name][kind] = measure(name, kind)
            seconds = time.perf_counter() - start
            if progress is not None:
                progress.console.print(
                    f"{name} {kind}: {figures['ops']:,} ops, {figures['tensors']:,} tensors, "
                    f"{figures['tensor_bytes']:,} tensor bytes ({seconds:.1f} s)",
                    soft_wrap=True,
                )
                progress.advance(task)
    return sizes


def format_sizes(versions: dict[str, str], models: dict[str, dict[str, Any]]) -> str:
    """The sizes document as JSON text, one line per model, label and kind: readable diffs.

    Each model's entry holds its `LABELS` and its Sizes.
    """
    lines = ["{"]
    lines += [f"  {json.dumps(key)}: {json.dumps(value)}," for key, value in versions.items()]
    lines += [f'  "regenerate": {json.dumps(REGENERATE)},', '  "models": {']
    for index, (name, sizes) in enumerate(models.items()):
        lines.append(f"    {json.dumps(name)}: {{")
        lines += [f"      {json.dumps(label)}: {json.dumps(sizes[label])}," for label in LABELS]
        lines += [
            f"      {json.dumps(kind)}: {json.dumps({f: sizes[kind][f] for f in FIELDS})}"
            + ("," if kind != KINDS[-1] else "")
            for kind in KINDS
        ]
        lines.append("    }," if index < len(models) - 1 else "    }")
    lines += ["  }", "}"]
    return "\n".join(lines) + "\n"


def differences(
    recorded: dict[str, Any], versions: dict[str, str], measured: dict[str, Sizes]
) -> list[str]:
    """One line per version or figure where `measured` disagrees with the `recorded` document."""
    lines = [
        f"{key}: recorded {recorded.get(key)}, installed {value}"
        for key, value in versions.items()
        if recorded.get(key) != value
    ]
    for name, sizes in measured.items():
        known = recorded["models"].get(name)
        if known is None:
            lines.append(f"{name}: not recorded")
            continue
        lines.extend(
            f"{name} {kind} {field}: recorded {known[kind][field]:,}, measured {value:,}"
            for kind in KINDS
            for field, value in sizes[kind].items()
            if known[kind][field] != value
        )
    return lines


def _progress_bar() -> Progress:
    """A bar on stderr (drawn only on a terminal), whose console logs each export either way."""
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn

    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[item]}"),
    )
    return progress_bar(*columns)


def main(argv: Sequence[str] | None = None) -> int:
    """Measures zoo models and writes the sizes file (`--write`) or reports where it differs.

    Returns:
        The exit status: 0 when written or matching, 1 when the file differs, 2 on bad input.
    """
    import argparse  # here, not at the top: listing sizes must not pay for it

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", help="zoo models to measure (default: all)")
    parser.add_argument("--write", action="store_true", help="write the file, do not compare")
    parser.add_argument(
        "--file", type=Path, default=SIZES_PATH, help="sizes file (default: %(default)s)"
    )
    args = parser.parse_args(argv)

    from graphopt.importers.zoo import ZOO, get_model

    try:
        names = [get_model(name).name for name in args.models] or list(ZOO)
        recorded = read_sizes(args.file) if args.file.exists() else {"models": {}}
        versions = installed_versions()
        stale_versions = any(recorded.get(key) != value for key, value in versions.items())
        kept = (set(recorded["models"]) & set(ZOO)) - set(names)
        if args.write and stale_versions and kept:
            raise GraphoptError(
                f"{args.file}: measured with other versions than those installed "
                f"({', '.join(f'{k} {v}' for k, v in versions.items())}); measure every model "
                "so that one file does not mix versions"
            )
    except GraphoptError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    start = time.perf_counter()
    with _progress_bar() as progress:
        measured = measure_sizes(names, progress=progress)
    took = f"{len(names) * len(KINDS)} exports in {time.perf_counter() - start:.0f} s"
    if args.write:
        labelled = {
            name: {**{label: getattr(ZOO[name], label) for label in LABELS}, **sizes}
            for name, sizes in measured.items()
        }
        known = {**recorded["models"], **labelled}
        partial = args.file.with_name(args.file.name + ".partial")
        partial.write_text(format_sizes(versions, {n: known[n] for n in ZOO if n in known}))
        os.replace(partial, args.file)
        print(f"wrote {args.file}: {took}")
        return 0
    lines = differences(recorded, versions, measured)
    lines += [
        f"{name}: recorded but not in the zoo" for name in recorded["models"] if name not in ZOO
    ]
    print("\n".join(lines) if lines else f"{args.file} matches: {took}")
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())
