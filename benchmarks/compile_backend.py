"""Peak memory of eager PyTorch, Inductor, and graphopt's torch.compile backend on zoo models.

    .venv/bin/python benchmarks/compile_backend.py [--models a,b] [--seconds 10]
        [--out docs/results/execution/backend.md]

Inference (eval mode, no_grad) of each zoo model small enough to run here (the same list as
`measured_memory.py`), compiled four ways and run on fresh random inputs of the example shapes:
eager (no compilation); Inductor with its own `reorder_for_peak_memory` on; graphopt's backend
(`graphopt.backend(objective="peak-memory")`, the reordered ATen graph run eagerly); and
graphopt's backend with `inductor=True` (the reordered graph handed to Inductor). All four are
measured the same way: the peak of the CPU allocator's memory timeline in torch.profiler during a
call after the first (compilation and Inductor's one-time constant preparation excluded), above
what was allocated before the call. Outputs are compared with eager's (Inductor may differ in the
last bits: its kernels fuse and reassociate).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from graphopt.execution.backend import backend
from graphopt.execution.measure import allocator_peak, random_like
from graphopt.importers.zoo import get_model

sys.path.insert(0, str(Path(__file__).parent))
from measured_memory import MIB, small_models  # noqa: E402


def peaks(model: str, seconds: float) -> dict[str, tuple[int | None, float]]:
    """Allocator peak and max |difference| to eager of each way of running `model`."""
    import torch._inductor.config as inductor_config

    entry = get_model(model)
    module, example = entry.build()
    generator = torch.Generator().manual_seed(1)
    inputs = tuple(random_like(value, generator) for value in example)
    results: dict[str, tuple[int | None, float]] = {}
    with torch.no_grad():
        expected = module(*inputs)
        results["eager"] = (allocator_peak(module, inputs), 0.0)
        ways = {
            "inductor": dict(backend="inductor"),
            "graphopt": dict(backend=backend(seconds=seconds)),
            "graphopt+inductor": dict(backend=backend(seconds=seconds, inductor=True)),
        }
        for name, options in ways.items():
            torch._dynamo.reset()
            inductor_config.reorder_for_peak_memory = True
            try:
                compiled = torch.compile(module, **options)
                compiled(*inputs)  # compiles
                output = compiled(*inputs)
            except Exception as error:  # Inductor cannot compile some models here
                print(f"{model}: {name} failed: {type(error).__name__}", flush=True)
                results[name] = (None, float("nan"))
                continue
            difference = (output.float() - expected.float()).abs().max().item()
            results[name] = (allocator_peak(compiled, inputs), difference)
    torch._dynamo.reset()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=str)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--out", type=Path, default=Path("docs/results/execution/backend.md"))
    args = parser.parse_args()
    models = args.models.split(",") if args.models else small_models()
    ways = ("eager", "inductor", "graphopt", "graphopt+inductor")
    lines = [
        "# Peak memory under torch.compile: eager, Inductor, graphopt's backend",
        "",
        "Made by `benchmarks/compile_backend.py` (its docstring says how each is measured).",
        "Allocator peak in MiB above the memory held before the call; in brackets the largest",
        "difference of the output to eager's.",
        "",
        "| model | " + " | ".join(ways) + " | backend <= Inductor |",
        "| --- | " + " | ".join("---:" for _ in ways) + " | --- |",
    ]
    wins = runs = 0
    for model in models:
        result = peaks(model, args.seconds)
        cells = []
        for way in ways:
            peak, difference = result[way]
            cells.append("failed" if peak is None else f"{peak / MIB:,.3f} ({difference:.1e})")
        ours, theirs = result["graphopt"][0], result["inductor"][0]
        verdict = "-"
        if ours is not None and theirs is not None:
            runs += 1
            wins += ours <= theirs
            verdict = "yes" if ours <= theirs else "NO"
        lines.append(f"| {model} | " + " | ".join(cells) + f" | {verdict} |")
        print(lines[-1], flush=True)
    lines += ["", f"graphopt's backend is at most Inductor's peak on {wins} of {runs} models."]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
