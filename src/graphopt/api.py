"""The stable Python API: graphs and solutions in and out, scoring, optimizing, running on models.

Import, load and save graphs and solutions, score and optimize them, profile them step by step,
and run them on the PyTorch model they came from.

The functions that need torch (`capture`, `apply`, `measure`, `replay`, `backend`) import it
when called, so importing the API stays as cheap as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from graphopt.costmodels.machine import Machine
from graphopt.costmodels.profile import MemoryProfile, memory_profile
from graphopt.costmodels.score import Score, Scorer, score
from graphopt.importers import import_graph
from graphopt.ir.graph import Graph
from graphopt.ir.io import read_graph as load_graph
from graphopt.ir.io import read_solution as load_solution
from graphopt.ir.io import write_graph as save_graph
from graphopt.ir.io import write_solution as save_solution
from graphopt.ir.solution import Solution, random_schedule, topological_schedule
from graphopt.optimize import optimize
from graphopt.solvers.base import Budget, Objective, Problem, Result
from graphopt.solvers.registry import SOLVERS, make_solver

if TYPE_CHECKING:
    import torch

    from graphopt.execution.measure import OrderMeasurement
    from graphopt.execution.replay import Replay
    from graphopt.importers.torch_export import Capture

__all__ = [
    "SOLVERS",
    "Budget",
    "Graph",
    "Machine",
    "MemoryProfile",
    "Objective",
    "Problem",
    "Result",
    "Score",
    "Scorer",
    "Solution",
    "apply",
    "backend",
    "capture",
    "import_graph",
    "load_graph",
    "load_solution",
    "make_solver",
    "measure",
    "memory_profile",
    "optimize",
    "random_schedule",
    "replay",
    "save_graph",
    "save_solution",
    "score",
    "topological_schedule",
]


def capture(
    model: Any,
    example_inputs: Sequence[Any] | None = None,
    *,
    training: bool = False,
    loss: Any = None,
    name: str | None = None,
) -> Capture:
    """A PyTorch model's graph together with its program, to run solutions on the model.

    Args:
        model: an `nn.Module` (with `example_inputs`), a zoo model name, or a factory
            reference `package.module:function`.
        example_inputs: positional example tensors, for a module.
        training: the training step (forward, loss, backward, SGD update) instead of inference,
            traced in train mode; the module's and its submodules' modes are restored after.
        loss: for a module's training step, the scalar loss from (output, inputs).
        name: graph name, for a module.

    Raises:
        ModelImportError: the exporter's or tracer's reason in one line.
    """
    if isinstance(model, str):
        from graphopt.importers import capture_model

        return capture_model(model, training=training)
    from graphopt.importers.torch_export import capture_module, capture_training_step

    inputs = tuple(example_inputs or ())
    if training:
        return capture_training_step(model, inputs, loss=loss, name=name)
    return capture_module(model, inputs, name=name)


def apply(captured: Capture, solution: Solution) -> torch.fx.GraphModule:
    """The captured program with its nodes in a 1-device solution's order (same outputs)."""
    from graphopt.execution.apply import apply as apply_solution

    return apply_solution(captured, solution)


def measure(
    captured: Capture, solutions: dict[str, Solution], *, seed: int = 0, repeats: int = 5
) -> list[OrderMeasurement]:
    """Real peak memory and time of the captured order and each 1-device solution's.

    Each row also compares the outputs with the captured program's (`identical`) and with eager
    PyTorch's on the model (`eager`).
    """
    from graphopt.execution.measure import measure_orders

    return measure_orders(captured, solutions, seed=seed, repeats=repeats)


def replay(captured: Capture, solution: Solution, devices: Sequence[str] | None = None) -> Replay:
    """Runs any solution event by event on `devices`; per-device measured and predicted peaks."""
    from graphopt.execution.replay import replay as replay_solution

    return replay_solution(captured, solution, devices)


def backend(objective: str = "peak-memory", **options: Any) -> Any:
    """A torch.compile backend running each graph in graphopt's order (see `execution.backend`)."""
    from graphopt.execution.backend import backend as make_backend

    return make_backend(objective, **options)
