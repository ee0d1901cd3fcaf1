"""A torch.compile backend that runs each captured graph in the order graphopt optimizes.

`torch.compile(model, backend=graphopt.backend(objective="peak-memory"))`: TorchDynamo hands the
backend a torch-level graph; AOT autograd lowers it to core ATen (functionalized, parameters
lifted to inputs, a forward and, when gradients are needed, a backward graph); each becomes a
graphopt graph (`capture_graph_module`), is optimized on one device, and its nodes are reordered
to the solution (`apply.reorder`). The result runs eagerly, node by node, as FX code that frees
every value after its last use, so the order's peak is the one the cost model predicts. The
decompositions are the importer's training table (core ATen less those autograd cannot trace
through, `training_decompositions`: CPU flash attention and its backward stay fused ops), so the
gradients are eager autograd's.

With `inductor=True` the reordered ATen graph goes to Inductor (`compile_fx_inner`) instead. What
Inductor keeps and what it re-schedules: it lowers the nodes in the order it is given and that is
its scheduler's starting order, but it then fuses nodes into kernels (which changes lifetimes:
fused intermediates are never allocated), may move nodes for locality
(`config.reorder_for_locality`) and, when `config.reorder_for_peak_memory` is on (the default in
this torch), re-orders the fused nodes by its own peak-memory heuristics. Memory planning then
reuses buffers. So graphopt's order is a hint Inductor may override; the eager backend is the one
whose order is exactly graphopt's.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import torch

from graphopt.costmodels.machine import Machine
from graphopt.execution.apply import op_order, reorder
from graphopt.importers.torch_export import capture_graph_module, training_decompositions
from graphopt.optimize import optimize


def backend(
    objective: str = "peak-memory",
    *,
    solver: str = "auto",
    evaluations: int | None = None,
    seconds: float | None = 5.0,
    seed: int = 0,
    inductor: bool = False,
) -> Callable[[torch.fx.GraphModule, list[Any]], Callable[..., Any]]:
    """A torch.compile backend: optimize each ATen graph's order with `solver`, then run it.

    Args:
        objective: what the order minimizes ("peak-memory" or "makespan").
        solver: a graphopt solver name (`graphopt solvers`).
        evaluations: the solver's evaluation budget (None: no count limit).
        seconds: the solver's time budget per graph (None: no time limit).
        seed: the solver's seed; the same seed gives the same order.
        inductor: hand the reordered graph to Inductor instead of running it eagerly.

    Returns:
        The backend callable (`torch.compile(model, backend=...)`); its `solutions` list
        records each compiled graph's (name, graph, solution) for inspection.
    """
    from torch._functorch.aot_autograd import aot_module_simplified

    counter = itertools.count()
    solutions: list[tuple[str, Any, Any]] = []

    def compile_part(module: torch.fx.GraphModule, inputs: list[Any]) -> Callable[..., Any]:
        name = f"graph{next(counter)}"
        capture = capture_graph_module(module, name=name)
        threads = torch.get_num_threads()  # numba's OpenMP pool may move it; dynamo checks it
        try:
            result = optimize(
                capture.graph,
                Machine(n_devices=1),
                objective=objective,
                solver=solver,
                evaluations=evaluations,
                seconds=seconds,
                seed=seed,
            )
        finally:
            torch.set_num_threads(threads)
        solutions.append((name, capture.graph, result.solution))
        reordered = reorder(capture, op_order(capture, result.solution))
        if inductor:
            from torch._inductor.compile_fx import compile_fx_inner

            return compile_fx_inner(reordered, inputs)
        return reordered.forward

    if inductor:  # Inductor lowers some ops itself and refuses graphs where they are decomposed
        from torch._inductor.decomposition import select_decomp_table

        decompositions = select_decomp_table()
    else:  # the training step's table: AOT autograd decomposes below autograd as make_fx does
        decompositions = training_decompositions()

    def compile_graph(module: torch.fx.GraphModule, inputs: list[Any]) -> Callable[..., Any]:
        return aot_module_simplified(
            module,
            inputs,
            fw_compiler=compile_part,
            bw_compiler=compile_part,
            decompositions=decompositions,
        )

    compile_graph.solutions = solutions  # type: ignore[attr-defined]
    return compile_graph
