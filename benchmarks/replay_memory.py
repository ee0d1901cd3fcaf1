"""Multi-device replays on the zoo: each device's measured peak against the cost model's.

    .venv/bin/python benchmarks/replay_memory.py [--models a,b,c] [--devices 2] [--seconds 10]
        [--out docs/results/execution/replay.md]

For each model, inference and training step, 2-device solutions from three solvers (METIS
partitions with compiler orders, `auto` for peak memory, and a random placement with a random
valid order) are replayed event by event on logical CPU devices (`graphopt.execution.replay`):
transfers are copies made at their events and dropped after their last reader, and a live-bytes
tracker attributes every new storage to the device it is made on. Each device's measured peak
is compared with the cost model's peak minus that device's persistent bytes, and the outputs
with the captured program's (bit for bit) and with eager PyTorch's on the model itself (within
float reassociation, `measure.EAGER_RTOL` and `EAGER_ATOL`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from graphopt.costmodels.machine import Machine
from graphopt.execution.apply import outputs_identical
from graphopt.execution.measure import measure
from graphopt.execution.replay import replay
from graphopt.importers import capture_model
from graphopt.ir.solution import random_schedule
from graphopt.optimize import optimize

MODELS = ("resnet-tiny", "inception-tiny", "gpt2-tiny", "wavenet-tiny")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=str, default=",".join(MODELS))
    parser.add_argument("--devices", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--out", type=Path, default=Path("docs/results/execution/replay.md"))
    args = parser.parse_args()
    d = args.devices
    lines = [
        f"# Replays of {d}-device solutions: measured against predicted peak per device",
        "",
        "Made by `benchmarks/replay_memory.py` (its docstring says what it runs). Bytes above",
        "each device's persistent tensors; `exact` when every device's measured live peak equals",
        "the prediction; `same` when the outputs equal the captured program's bit for bit;",
        "`eager` when they equal eager PyTorch's on the model within float reassociation (rtol",
        "1e-4, atol 1e-5).",
        "",
        "| graph | solution | predicted per device | measured per device | exact | same | eager |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    exact = total = close = 0
    for model in args.models.split(","):
        for training in (False, True):
            capture = capture_model(model, training=training)
            graph = capture.graph
            machine = Machine(n_devices=d)
            reference = measure(capture.program, capture.args, repeats=1, profile=False).outputs
            rng = np.random.default_rng(0)
            solutions = {
                "gp-metis": optimize(
                    graph, machine, solver="gp-metis", objective="peak-memory", seconds=args.seconds
                ).solution,
                "auto": optimize(
                    graph, machine, solver="auto", objective="peak-memory", seconds=args.seconds
                ).solution,
                "random": random_schedule(
                    graph, rng.integers(0, d, graph.n_ops).astype(np.int32), d, rng
                ),
            }
            for label, solution in solutions.items():
                result = replay(capture, solution)
                predicted = [
                    p - q for p, q in zip(result.predicted, result.persistent, strict=True)
                ]
                match = list(result.measured) == predicted
                same = outputs_identical(reference, result.outputs)
                eager = result.eager is not None and result.eager.close
                exact += match and same
                close += eager
                total += 1
                lines.append(
                    f"| {graph.name} | {label} | {', '.join(f'{p:,}' for p in predicted)} | "
                    f"{', '.join(f'{m:,}' for m in result.measured)} | "
                    f"{'yes' if match else 'NO'} | {'yes' if same else 'NO'} | "
                    f"{'yes' if eager else 'NO'} |"
                )
                print(lines[-1], flush=True)
    lines += [
        "",
        f"Exact on every device with identical outputs: {exact} of {total} replays; outputs "
        f"equal eager PyTorch's: {close} of {total}.",
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
