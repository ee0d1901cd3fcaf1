"""Import time and size of zoo models: inference and training-step graphs, scored once.

    .venv/bin/python benchmarks/bench_import.py [--models gpt2 lstm-lm-unrolled-512 ...]
        [--device a100] [--json out.json]

For each model: the time to build it (random weights), to import its inference graph
(torch.export + core ATen decomposition + conversion + roofline) and its training step
(make_fx of forward, backward and SGD update), the op / tensor / edge counts, and the time to
score the single-device topological order (which also proves the graph valid). The import bar of
issue 4: GPT-2 (12 layers) in <= 10 s; a >= 20,000-op training graph imports and scores.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from rich.console import Console
from rich.table import Table

from graphopt.costmodels.score import score
from graphopt.importers.torch_export import import_module, import_training_step
from graphopt.importers.zoo import get_model
from graphopt.ir.graph import Graph
from graphopt.ir.solution import topological_schedule

DEFAULT_MODELS = ["resnet18", "googlenet", "gpt2", "bert-base", "lstm-lm-unrolled-512"]


def timed(call):
    start = time.perf_counter()
    value = call()
    return value, time.perf_counter() - start


def row(name: str, training: bool, device: str) -> dict:
    entry = get_model(name)
    (module, inputs), build = timed(entry.build)
    if training:
        graph, seconds = timed(
            lambda: import_training_step(module, inputs, loss=entry.loss, device=device)
        )
    else:
        graph, seconds = timed(lambda: import_module(module, inputs, name=name, device=device))
    scored, scoring = timed(lambda: score_single_device(graph))
    return {
        "model": name,
        "training": training,
        "ops": graph.n_ops,
        "tensors": graph.n_tensors,
        "edges": graph.n_edges,
        "build_seconds": build,
        "import_seconds": seconds,
        "score_seconds": scoring,
        "peak_memory": scored,
        "tensor_bytes": graph.total_tensor_size,
    }


def score_single_device(graph: Graph) -> int:
    solution = topological_schedule(graph, np.zeros(graph.n_ops, np.int32), 1)
    return score(graph, solution).peak_memory


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=DEFAULT_MODELS)
    parser.add_argument("--device", default="a100")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)
    console = Console(width=140)
    rows = []
    for name in args.models:
        for training in (False, True):
            with console.status(f"importing {name} ({'training' if training else 'inference'})"):
                rows.append(row(name, training, args.device))
    table = Table(title=f"zoo imports ({args.device} roofline)")
    for column in ("model", "graph", "ops", "edges", "build", "import", "score", "peak / bytes"):
        table.add_column(column, justify="right")
    for r in rows:
        table.add_row(
            r["model"],
            "training" if r["training"] else "inference",
            f"{r['ops']:,}",
            f"{r['edges']:,}",
            f"{r['build_seconds']:.2f} s",
            f"{r['import_seconds']:.2f} s",
            f"{r['score_seconds']:.2f} s",
            f"{r['peak_memory'] / r['tensor_bytes']:.2f}",
        )
    console.print(table)
    if args.json:
        with open(args.json, "w") as file:
            json.dump(rows, file, indent=1)


if __name__ == "__main__":
    main()
