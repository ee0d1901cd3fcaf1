"""The rules a solution must satisfy (docs/format.md sections 4 and 13), as shared codes.

Both the reference scorer and the numba kernels report the first rule broken as
(violation, where, detail), checking events in schedule order and, within an event, in the same
fixed order, so the two can be compared exactly; `violation_message` turns that into one line.
A missing transfer needs no rule of its own: the consumer that needs it fails first. Fusion
groups' rules come after the placement's and before the schedule's, group by group.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import IntEnum

import numpy as np

from graphopt.ir.graph import FUSION_CLASSES, Graph
from graphopt.ir.solution import MAX_GROUP_OPS, Solution, decode_event


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
    # Fusion groups (section 13), checked after the placement and before the schedule.
    GROUP_TOO_SMALL = 9  # where: group, detail: its op
    GROUP_UNFUSABLE = 10  # where: group, detail: the op of class none
    GROUP_CONTRACTIONS = 11  # where: group, detail: its second contraction
    GROUP_TOO_LARGE = 12  # where: group
    GROUP_DEVICES = 13  # where: group, detail: an op on another device than the group's first
    GROUP_DISCONNECTED = 14  # where: group, detail: an op not connected to the group's first
    GROUP_NOT_CONVEX = 15  # where: group, detail: an op outside it on a path from it back to it
    GROUP_NOT_CONTIGUOUS = 16  # where: position, detail: the unfinished group


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
    if v >= Violation.GROUP_TOO_SMALL:
        return _group_message(graph, solution, v, where, detail, event)
    if v is Violation.PLACEMENT_OUT_OF_RANGE:
        device = solution.placement[where]
        return f"placement: op '{names[where]}' is on device {device}, not in [0, {d})"
    if v is Violation.UNKNOWN_EVENT:
        code = int(solution.order[where])
        return f"schedule[{where}]: event code {code} is neither an op nor a transfer"
    if v is Violation.OP_REPEATED:
        if solution.remat:
            return (
                f"{event(where)}: the op was already scheduled and is not recomputable "
                "(docs/format.md section 15)"
            )
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


def _group_message(
    graph: Graph,
    solution: Solution,
    v: Violation,
    where: int,
    detail: int,
    event: Callable[[int], str],
) -> str:
    """One line naming the fusion group, and the op or event, that breaks a rule of section 7."""
    names = graph.op_names
    ids = np.full(graph.n_ops, -1) if solution.fusion is None else solution.fusion
    if v is Violation.GROUP_NOT_CONTIGUOUS:
        return (
            f"{event(where)}: comes inside fusion[{detail}] ({_members(graph, ids, detail)}), "
            "whose ops must follow one another in the schedule with no other event between them"
        )
    group = f"fusion[{where}] ({_members(graph, ids, where)})"
    if v is Violation.GROUP_TOO_SMALL:
        return f"{group}: a group holds at least two ops"
    if v is Violation.GROUP_UNFUSABLE:
        return (
            f"{group}: op '{names[detail]}' has fusion class 'none' (or none given) and cannot be "
            f"fused; classes that fuse: {', '.join(FUSION_CLASSES[1:])}"
        )
    if v is Violation.GROUP_CONTRACTIONS:
        return f"{group}: op '{names[detail]}' is a second contraction; a group holds at most one"
    if v is Violation.GROUP_TOO_LARGE:
        count = int((ids == where).sum())
        return f"{group}: {count} ops, more than the {MAX_GROUP_OPS} a group may hold"
    if v is Violation.GROUP_DEVICES:
        first = int(np.flatnonzero(ids == where)[0])
        return (
            f"{group}: op '{names[detail]}' is on device {solution.placement[detail]} but "
            f"'{names[first]}' on device {solution.placement[first]}; a group runs on one device"
        )
    if v is Violation.GROUP_DISCONNECTED:
        return (
            f"{group}: op '{names[detail]}' is not connected to the rest through tensors one of "
            "them produces and another consumes; a group is connected"
        )
    if v is Violation.GROUP_NOT_CONVEX:
        return (
            f"{group}: op '{names[detail]}', outside the group, is on a path that leaves it and "
            "comes back; a group is convex"
        )
    raise ValueError(f"not a group violation: {v}")


def _members(graph: Graph, ids: np.ndarray, gid: int, shown: int = 4) -> str:
    """The first names of a group's ops, for a message."""
    ops = np.flatnonzero(ids == gid)
    names = ", ".join(f"'{graph.op_names[op]}'" for op in ops[:shown])
    return names + (f" and {len(ops) - shown} more" if len(ops) > shown else "")
