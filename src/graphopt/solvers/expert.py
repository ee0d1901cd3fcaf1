"""The human-expert placement of GDP's table 1 (paper 003 section 5): whole modules, split in order.

A person placing a model on d devices keeps each module (a layer, a block) on one device, and
cuts the model's module sequence into d contiguous runs of about equal work. `expert_placement`
does that from the importers' `module` op attribute (the innermost `nn.Module` path of each op):
modules in the order their first op appears in the topological order, each weighted by the
runtime of its ops, cut by `pipeline.stage_cuts`. Ops without a module (a training graph's
backward and optimizer ops, which torch.export leaves without a module stack) join the module of
the nearest op that has one, counting edges in either direction, as a person places a layer's
gradient computation with the layer. A graph with no module at all is cut along its topological
order, op by op. The order is GO's per-device ready-queue schedule with critical-path priorities
(`ready_queue`), the default the learned placers are compared under.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from graphopt.ir.graph import Graph
from graphopt.solvers.base import Initial, Problem, Rng, Solver, Tracker
from graphopt.solvers.pipeline import stage_cuts
from graphopt.solvers.ready_queue import offer_placement


def op_modules(graph: Graph) -> np.ndarray:
    """[n_ops] int64 module index of each op, numbered by first appearance in topological order.

    Ops without a module take their nearest op's (breadth-first over edges in both directions
    from every op with a module, sources in topological order); all -1 when no op has one.
    """
    names = [attrs.get("module") for attrs in graph.op_attrs]
    module = np.full(graph.n_ops, -1, dtype=np.int64)
    index: dict[str, int] = {}
    queue: deque[int] = deque()
    for op in graph.topological_order.tolist():
        name = names[op]
        if isinstance(name, str) and name:
            module[op] = index.setdefault(name, len(index))
            queue.append(op)
    if not queue:
        return module
    src, dst = graph.edge_index
    ends = np.concatenate([src, dst])
    others = np.concatenate([dst, src])
    by_end = np.argsort(ends, kind="stable")
    ptr = np.searchsorted(ends[by_end], np.arange(graph.n_ops + 1))
    near = others[by_end]
    while queue:
        op = queue.popleft()
        for other in near[ptr[op] : ptr[op + 1]].tolist():
            if module[other] < 0:
                module[other] = module[op]
                queue.append(other)
    # Ops in a part of the graph that no module reaches go with the first module.
    module[module < 0] = 0
    return module


def expert_placement(graph: Graph, n_devices: int) -> np.ndarray:
    """[n_ops] int32 device of each op: modules in order, cut into runs of about equal runtime."""
    module = op_modules(graph)
    runtime = np.asarray(graph.op_runtime, dtype=np.float64)
    if graph.n_ops and module.max() < 0:
        order = graph.topological_order
        cuts = stage_cuts(runtime[order], n_devices)
        placement = np.empty(graph.n_ops, dtype=np.int32)
        placement[order] = np.searchsorted(cuts, np.arange(graph.n_ops), side="right")
        return placement
    weights = np.bincount(module, weights=runtime, minlength=int(module.max(initial=-1)) + 1)
    cuts = stage_cuts(weights, n_devices)
    stage = np.searchsorted(cuts, np.arange(weights.shape[0]), side="right")
    return stage[module].astype(np.int32)


class ExpertPlacement(Solver):
    """GDP's human-expert baseline: `expert_placement`, ordered by GO's ready-queue scheduler."""

    name = "expert"

    def run(self, problem: Problem, tracker: Tracker, rng: Rng, initial: Initial) -> None:
        """Offers the one expert placement (pins override it)."""
        offer_placement(
            problem, tracker, expert_placement(problem.graph, problem.machine.n_devices)
        )
