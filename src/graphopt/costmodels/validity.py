"""The rules a solution must satisfy (COST_MODEL.md section 3), as codes shared by both scorers.

Both the reference scorer and the numba kernels report the first rule broken as
(violation, where, detail), checking events in schedule order and, within an event, in the same
fixed order, so the two can be compared exactly; `violation_message` turns that into one line.
A missing transfer needs no rule of its own: the consumer that needs it fails first.
"""

from __future__ import annotations

from enum import IntEnum

from graphopt.ir.graph import Graph
from graphopt.ir.solution import Solution, decode_event


class Violation(IntEnum):
    """First rule a solution breaks. `where` is an op, a schedule position or an event code."""

    NONE = 0
    PLACEMENT_OUT_OF_RANGE = 1  # where: op
    UNKNOWN_EVENT = 2  # where: position
    OP_REPEATED = 3  # where: position
    TRANSFER_NOT_IMPLIED = 4  # where: position
    TRANSFER_REPEATED = 5  # where: position
    TRANSFER_BEFORE_PRODUCER = 6  # where: position
    INPUT_NOT_AVAILABLE = 7  # where: position, detail: input tensor
    OP_MISSING = 8  # where: op


def violation_message(
    graph: Graph, solution: Solution, violation: int, where: int, detail: int
) -> str:
    """One line naming the event (or op) that breaks the rule, and the rule."""
    d = solution.n_devices
    names, tensors = graph.op_names, graph.tensor_names

    def event(position: int) -> str:
        kind, item, device = decode_event(graph, int(solution.order[position]), d)
        if kind == "op":
            return f"schedule[{position}] (op '{names[item]}' on device {solution.placement[item]})"
        return f"schedule[{position}] (transfer of '{tensors[item]}' to device {device})"

    v = Violation(violation)
    if v is Violation.PLACEMENT_OUT_OF_RANGE:
        device = solution.placement[where]
        return f"placement: op '{names[where]}' is on device {device}, not in [0, {d})"
    if v is Violation.UNKNOWN_EVENT:
        code = int(solution.order[where])
        return f"schedule[{where}]: event code {code} is neither an op nor a transfer"
    if v is Violation.OP_REPEATED:
        return f"{event(where)}: the op was already scheduled; each op runs exactly once"
    if v is Violation.TRANSFER_NOT_IMPLIED:
        return (
            f"{event(where)}: not implied by the placement (a transfer goes only to a device, "
            "other than the producer's, where a consumer is placed)"
        )
    if v is Violation.TRANSFER_REPEATED:
        return f"{event(where)}: the transfer was already scheduled; each happens exactly once"
    if v is Violation.TRANSFER_BEFORE_PRODUCER:
        return f"{event(where)}: comes before its producer op runs"
    if v is Violation.INPUT_NOT_AVAILABLE:
        op = int(solution.order[where])
        producer = int(graph.tensor_producer[detail])
        source = int(solution.placement[producer])
        if source == solution.placement[op]:
            why = f"its producer '{names[producer]}' has not run yet"
        else:
            why = f"its transfer from device {source} is not earlier in the schedule"
        return f"{event(where)}: input '{tensors[detail]}' is not available on the device: {why}"
    if v is Violation.OP_MISSING:
        return f"schedule: op '{names[where]}' is missing; every op must appear exactly once"
    raise ValueError(f"not a violation: {violation}")
