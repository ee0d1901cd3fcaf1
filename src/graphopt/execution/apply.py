"""Applying a 1-device solution to a captured PyTorch program: its fx nodes in the order.

FX's generated code drops each value right after its last use, so the order of a `GraphModule`'s
nodes sets the real lifetime of every intermediate tensor, as section 5 of the contract sets it in
the cost model. `apply` rebuilds the program's graph with its call nodes in the schedule's order:
- a node that became a graph op goes where the schedule puts that op;
- a node the importer merged away (a view, a tuple `getitem`, a dropped runtime check) has no op
  of its own: a view goes right before its first user, a `getitem` right after its producer, and
  a node with no users (a check, an unused view) as soon as its inputs exist, so none of them
  extends a lifetime the cost model does not see;
- placeholders keep their place at the start and the output node its place at the end;
- an op the solution runs again (docs/format.md section 15) is its node copied once more, reading
  the latest copies of its inputs, with the merged nodes that hang off it copied again for the
  readers after it, so that an older copy lives exactly as long as the contract says.
The rebuilt graph is checked with `Graph.lint()` and compiled; it computes the same values as the
captured program because the importer's edges (data, in-place reads, random-op order) hold in
every valid order.
"""

from __future__ import annotations

import copy
import operator
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from torch.fx import Node

from graphopt._messages import describe
from graphopt.costmodels.machine import Machine
from graphopt.costmodels.score import Score, Scorer
from graphopt.errors import SolutionError
from graphopt.importers.torch_export import Capture
from graphopt.ir.io import read_json, solution_from_json
from graphopt.ir.solution import Solution


def read_solution_for(path: str | Path, capture: Capture) -> Solution:
    """The solution at `path`, checked against the captured graph by op names first.

    Raises:
        SolutionError: a solution for another graph or capture (naming the first op of the
            capture it lacks, or the first op it names that the capture lacks), or any rule of
            the solution format; prefixed with the file name.
    """
    path = Path(path)
    if not path.is_file():
        raise SolutionError(f"{path}: no such file")
    try:
        document = read_json(path, SolutionError)
    except SolutionError as error:
        raise SolutionError(f"{path}: {error}") from None
    placement = document.get("placement") if isinstance(document, dict) else None
    if isinstance(placement, dict):
        graph = capture.graph
        missing = next((op for op in graph.op_names if op not in placement), None)
        if missing is not None:
            raise SolutionError(
                f"{path}: op '{missing}' of the captured model is not in the solution: it was "
                "made for another graph or another capture of the model (re-import the model "
                "the same way, --train included, and solve that graph)"
            )
        extra = next((op for op in placement if op not in graph.op_ids), None)
        if extra is not None:
            raise SolutionError(
                f"{path}: op {describe(extra)} of the solution is not in the captured model: "
                "it was made for another graph or another capture of the model"
            )
    try:
        return solution_from_json(document, capture.graph)
    except SolutionError as error:
        raise SolutionError(f"{path}: {error}") from None


def check_one_device(solution: Solution, model: str = "MODEL", path: str = "SOLUTION") -> None:
    """Refuses a multi-device solution, naming the command that runs one.

    Raises:
        SolutionError: the solution places ops on more than one device.
    """
    if solution.n_devices != 1:
        raise SolutionError(
            f"the solution uses {solution.n_devices} devices; apply runs 1-device schedules "
            f"(replay a multi-device one with: graphopt replay {model} {path})"
        )


def op_order(capture: Capture, solution: Solution) -> list[str]:
    """The graph ops in the order the solution runs them (a 1-device solution's events)."""
    names = capture.graph.op_names
    return [names[code] for code in solution.order.tolist() if code < len(names)]


def apply(capture: Capture, solution: Solution) -> torch.fx.GraphModule:
    """The captured program with its nodes in the order of `solution` (1 device).

    The solution is scored first, so an order that breaks a rule of the contract is refused
    with the scorer's message rather than turned into a program that fails at run time.

    Raises:
        SolutionError: a multi-device or invalid solution.
    """
    check_one_device(solution)
    predict(capture, solution)
    return reorder(capture, op_order(capture, solution))


def predict(capture: Capture, solution: Solution) -> Score:
    """The cost model's score of `solution` on the captured graph, as the program runs it.

    Without its fusion groups: the reordered program runs its ops one by one (fusing is left to
    the compiler), so the prediction to hold it to is the order's alone.
    """
    unfused = replace(solution, fusion=None)
    return Scorer(capture.graph, Machine(n_devices=solution.n_devices)).score(unfused)


def reorder(capture: Capture, ops: list[str]) -> torch.fx.GraphModule:
    """The captured program with its op nodes in the order `ops` (every graph op at least once).

    An op named again is recomputed (docs/format.md section 15): its node is copied once more,
    reading the most recent copies of its inputs, and every later reader reads the new copy.
    The nodes merged into ops (views, getitems) that hang off a recomputed op are copied again
    too, when a reader next needs them, so that no reader keeps the older copy alive. Python
    frees a value after its last use in the generated code, which is the contract's freeing.

    Raises:
        SolutionError: `ops` leaves out an op, so some node would have no place.
    """
    program = capture.program
    by_name = {node.name: node for node in program.graph.nodes}
    own = set(capture.op_nodes.values())
    placed: set[Node] = set()
    steps: list[Node] = []  # nodes in program order, a recomputed one more than once
    pending = [  # nodes no other node uses and that became no op: checks, unused view chains
        node
        for node in program.graph.nodes
        if node.op == "call_function" and not node.users and node.name not in own
    ]

    def ready(node: Node) -> bool:
        """Whether `node` can run now: its inputs are placed or merged nodes that can run."""
        return all(
            source in placed
            or (source.name not in own and source.op != "placeholder" and ready(source))
            for source in node.all_input_nodes
        )

    def place(node: Node) -> None:
        if node in placed:
            return
        for source in node.all_input_nodes:
            place(source)  # only merged nodes and placeholders can still be missing here
        placed.add(node)
        steps.append(node)
        for user in node.users:
            if user.target is operator.getitem:
                place(user)

    def merged_readers(node: Node) -> set[Node]:
        """The merged nodes that read `node`, directly or through other merged nodes."""
        found: set[Node] = set()
        frontier = [node]
        while frontier:
            for user in frontier.pop().users:
                if user.name not in own and user.op == "call_function" and user not in found:
                    found.add(user)
                    frontier.append(user)
        return found

    for node in program.graph.nodes:
        if node.op == "placeholder":
            place(node)
    ran: set[str] = set()
    for op in ops:
        node = by_name[capture.op_nodes[op]]
        if op in ran:  # run again: it and what hangs off it are placed anew
            placed.difference_update({node, *merged_readers(node)})
        ran.add(op)
        place(node)
        for waiting in [n for n in pending if ready(n)]:
            pending.remove(waiting)
            place(waiting)
    output = next(node for node in program.graph.nodes if node.op == "output")
    for node in [*pending, output]:
        place(node)
    if len(set(steps)) != len(program.graph.nodes):
        lost = next(node for node in program.graph.nodes if node not in placed)
        raise SolutionError(f"fx node '{lost.name}' has no place in the order")

    graph = torch.fx.Graph()
    graph._codegen = copy.deepcopy(program.graph._codegen)
    latest: dict[Node, Node] = {}  # each node's most recent copy
    for node in steps:
        latest[node] = graph.node_copy(node, lambda n: latest[n])
    graph.lint()
    module = torch.fx.GraphModule(program, graph)
    module.recompile()
    return module


def save_code(module: torch.fx.GraphModule, path: str | Path) -> None:
    """Writes the reordered program's Python code, for reading or diffing against the original."""
    Path(path).write_text(module.code, encoding="utf-8")


def outputs_identical(first: Any, second: Any) -> bool:
    """Whether two programs' outputs are equal bit for bit (same structure, dtypes and bytes)."""
    a, spec_a = torch.utils._pytree.tree_flatten(first)
    b, spec_b = torch.utils._pytree.tree_flatten(second)
    if spec_a != spec_b:
        return False
    for x, y in zip(a, b, strict=True):
        if isinstance(x, torch.Tensor) != isinstance(y, torch.Tensor):
            return False
        if isinstance(x, torch.Tensor):
            if x.dtype != y.dtype or x.shape != y.shape:
                return False
            if not torch.equal(_bytes(x), _bytes(y)):
                return False
        elif x != y:
            return False
    return True


def _bytes(tensor: torch.Tensor) -> torch.Tensor:
    """The tensor's elements as raw bytes: equal bytes, not equal values (NaN, -0.0)."""
    return tensor.detach().contiguous().reshape(-1).view(torch.uint8)
