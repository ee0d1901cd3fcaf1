"""Plain, literal implementation of the scoring rules: the oracle the numba kernels are tested on.

It follows docs/format.md sections 2, 5, 6, 13 and 15 word by word (graph outputs, fusion groups
and recomputation included), with Python sets and dicts, and measures the memory of every device
at every step. A step is one event, or the consecutive op events of one fusion group. Slow by
design; never call it on a hot path.
"""

from __future__ import annotations

import numpy as np

from graphopt.costmodels.machine import Machine
from graphopt.costmodels.score import (
    Score,
    check_kernel,
    check_shapes,
    raise_violation,
    speedup,
)
from graphopt.costmodels.validity import Violation
from graphopt.ir.graph import FUSION_CLASSES, Graph
from graphopt.ir.solution import MAX_GROUP_OPS, Solution


def reference_validate(graph: Graph, solution: Solution, machine: Machine) -> None:
    """Raises SolutionError unless the solution fits the machine and keeps every rule.

    Groups need the graph's kernel fields (`check_kernel`).
    """
    check_shapes(graph, solution, machine)
    if solution.n_groups:
        check_kernel(graph)
    violation, where, detail = reference_check(graph, solution)
    if violation is not Violation.NONE:
        raise_violation(graph, solution, violation, where, detail)


def reference_check(graph: Graph, solution: Solution) -> tuple[Violation, int, int]:
    """First rule of sections 4 and 13 the solution breaks, as (violation, where, detail)."""
    d = solution.n_devices
    place = [int(p) for p in solution.placement]
    for op, device in enumerate(place):
        if not 0 <= device < d:
            return Violation.PLACEMENT_OUT_OF_RANGE, op, -1
    groups = reference_groups(solution)
    broken = reference_group_check(graph, solution, groups)
    if broken[0] is not Violation.NONE:
        return broken
    group_of = {op: gid for gid, members in enumerate(groups) for op in members}
    internal = internal_tensors(graph, groups)
    implied = set()
    for t in range(graph.n_tensors):
        source = place[graph.tensor_producer[t]]
        for consumer in graph.consumers(t):
            if place[consumer] != source:
                implied.add((t, place[consumer]))
    ran: set[int] = set()
    moved: set[tuple[int, int]] = set()
    open_group, left = -1, 0
    for position, code in enumerate(int(c) for c in solution.order):
        if not 0 <= code < graph.n_ops + graph.n_tensors * d:
            return Violation.UNKNOWN_EVENT, position, -1
        if code < graph.n_ops:
            if code in ran and not (solution.remat and graph.op_recomputable[code]):
                return Violation.OP_REPEATED, position, -1
            ran.add(code)
            gid = group_of.get(code, -1)
            if left:
                if gid != open_group:
                    return Violation.GROUP_NOT_CONTIGUOUS, position, open_group
                left -= 1
                continue
            step = groups[gid] if gid >= 0 else [code]
            if gid >= 0:
                open_group, left = gid, len(step) - 1
            for t in external_inputs(graph, step, internal):
                producer = int(graph.tensor_producer[t])
                if place[producer] == place[code]:
                    available = producer in ran
                else:
                    available = (t, place[code]) in moved
                if not available:
                    return Violation.INPUT_NOT_AVAILABLE, position, t
        else:
            if left:
                return Violation.GROUP_NOT_CONTIGUOUS, position, open_group
            t, device = divmod(code - graph.n_ops, d)
            if (t, device) not in implied:
                return Violation.TRANSFER_NOT_IMPLIED, position, -1
            if (t, device) in moved and not solution.remat:
                return Violation.TRANSFER_REPEATED, position, -1
            if int(graph.tensor_producer[t]) not in ran:
                return Violation.TRANSFER_BEFORE_PRODUCER, position, -1
            moved.add((t, device))
    for op in range(graph.n_ops):
        if op not in ran:
            return Violation.OP_MISSING, op, -1
    return Violation.NONE, -1, -1


def reference_groups(solution: Solution) -> list[list[int]]:
    """The ops of each fusion group, ascending, in group order (none without fusion)."""
    groups: list[list[int]] = [[] for _ in range(solution.n_groups)]
    for op, gid in enumerate([] if solution.fusion is None else solution.fusion):
        if gid >= 0:
            groups[gid].append(op)
    return groups


def internal_tensors(graph: Graph, groups: list[list[int]]) -> set[int]:
    """Tensors whose producer and (at least one) consumers are all in one group, not persistent."""
    internal = set()
    for members in groups:
        inside = set(members)
        for op in members:
            for t in graph.outputs(op):
                consumers = set(int(c) for c in graph.consumers(t))
                if consumers and consumers <= inside and not graph.tensor_persistent[t]:
                    internal.add(int(t))
    return internal


def external_inputs(graph: Graph, step: list[int], internal: set[int]) -> list[int]:
    """Distinct tensors the step's ops consume that are produced outside it, ascending."""
    made = {int(t) for op in step for t in graph.outputs(op)}
    return sorted({int(t) for op in step for t in graph.inputs(op)} - made - internal)


def step_outputs(graph: Graph, step: list[int], internal: set[int]) -> list[int]:
    """The tensors a step's ops produce that are not internal to it, ascending."""
    return sorted(int(t) for op in step for t in graph.outputs(op) if int(t) not in internal)


def reference_group_check(
    graph: Graph, solution: Solution, groups: list[list[int]]
) -> tuple[Violation, int, int]:
    """First rule of section 13 a group breaks, group by group in the order the section lists."""
    classes = graph.op_fusion
    place = solution.placement
    successors: dict[int, set[int]] = {op: set() for op in range(graph.n_ops)}
    predecessors: dict[int, set[int]] = {op: set() for op in range(graph.n_ops)}
    for producer, consumer in graph.edge_index.T.tolist():
        successors[producer].add(consumer)
        predecessors[consumer].add(producer)
    for gid, members in enumerate(groups):
        if not members:
            continue
        inside = set(members)
        if len(members) < 2:
            return Violation.GROUP_TOO_SMALL, gid, members[0]
        unfusable = [op for op in members if FUSION_CLASSES[classes[op]] == "none"]
        if unfusable:
            return Violation.GROUP_UNFUSABLE, gid, unfusable[0]
        contractions = [op for op in members if FUSION_CLASSES[classes[op]] == "contraction"]
        if len(contractions) > 1:
            return Violation.GROUP_CONTRACTIONS, gid, contractions[1]
        if len(members) > MAX_GROUP_OPS:
            return Violation.GROUP_TOO_LARGE, gid, -1
        elsewhere = [op for op in members if place[op] != place[members[0]]]
        if elsewhere:
            return Violation.GROUP_DEVICES, gid, elsewhere[0]
        links: dict[int, set[int]] = {op: set() for op in members}
        for t in range(graph.n_tensors):
            producer = int(graph.tensor_producer[t])
            for consumer in graph.consumers(t):
                if producer in inside and int(consumer) in inside:
                    links[producer].add(int(consumer))
                    links[int(consumer)].add(producer)
        apart = sorted(inside - _reach([members[0]], links) - {members[0]})
        if apart:
            return Violation.GROUP_DISCONNECTED, gid, apart[0]
        below = _reach(members, successors) - inside
        above = _reach(members, predecessors) - inside
        if below & above:
            return Violation.GROUP_NOT_CONVEX, gid, min(below & above)
    return Violation.NONE, -1, -1


def _reach(starts: list[int], near: dict[int, set[int]]) -> set[int]:
    """Every op reachable from `starts` by one or more steps through `near` (starts only if so)."""
    found: set[int] = set()
    frontier = [n for op in starts for n in near[op]]
    while frontier:
        op = frontier.pop()
        if op not in found:
            found.add(op)
            frontier.extend(near[op])
    return found


def reference_steps(graph: Graph, solution: Solution) -> list[list[int]]:
    """The event codes of each step of a valid solution: one event, or one group's op events."""
    group_of = {op: gid for gid, ops in enumerate(reference_groups(solution)) for op in ops}
    steps: list[list[int]] = []
    for code in (int(c) for c in solution.order):
        gid = group_of.get(code, -1) if code < graph.n_ops else -1
        if gid >= 0 and steps and group_of.get(steps[-1][0], -2) == gid:
            steps[-1].append(code)
        else:
            steps.append([code])
    return steps


def reference_releases(graph: Graph, solution: Solution) -> dict[int, list[tuple[int, int]]]:
    """Step -> the copies (tensor, device) freed right after it (sections 5, 13 and 15).

    Steps are those of `reference_steps` of a valid solution (one per event without fusion).
    Every step that makes a copy makes a new instance of it, and every read is of the most
    recent instance on the reader's device (a transfer reads its tensor's home device). An
    instance is freed after the step of its last reader, or after the step that made it when
    nothing reads it; a persistent tensor's, and the last instance of a graph output's home
    copy, never are, and a tensor internal to a group is never resident. The memory walk below
    and the replay of a solution on the real program (`execution.replay`) both free by it.
    """
    d = solution.n_devices
    place = [int(p) for p in solution.placement]
    internal = internal_tensors(graph, reference_groups(solution))
    current: dict[tuple[int, int], int] = {}  # copy -> its most recent instance
    made: list[tuple[tuple[int, int], int]] = []  # instance -> (copy, the step that made it)
    last_read: dict[int, int] = {}  # instance -> the last step that read it
    for index, step in enumerate(reference_steps(graph, solution)):
        if step[0] < graph.n_ops:
            device = place[step[0]]
            for t in external_inputs(graph, step, internal):
                last_read[current[(t, device)]] = index
            created = [(t, device) for t in step_outputs(graph, step, internal)]
        else:
            t, device = divmod(step[0] - graph.n_ops, d)
            last_read[current[(t, place[graph.tensor_producer[t]])]] = index
            created = [(t, device)]
        for copy in created:
            current[copy] = len(made)
            made.append((copy, index))
    held = {
        current.get((t, place[graph.tensor_producer[t]]))
        for t in range(graph.n_tensors)
        if graph.tensor_persistent[t] or graph.tensor_output[t]
    }
    releases: dict[int, list[tuple[int, int]]] = {}
    for instance, (copy, index) in enumerate(made):
        if instance not in held:
            releases.setdefault(last_read.get(instance, index), []).append(copy)
    return releases


def reference_memory_steps(graph: Graph, solution: Solution) -> list[list[int]]:
    """Memory of every device at every step (sections 5 and 13) of a valid solution.

    Row t holds step t's bytes per device: resident copies plus the running ops' temp memory.
    """
    d = solution.n_devices
    place = [int(p) for p in solution.placement]
    internal = internal_tensors(graph, reference_groups(solution))
    releases = reference_releases(graph, solution)
    memory = [int(m) for m in persistent_per_device(graph, solution.placement, d)]
    rows = []
    for index, step in enumerate(reference_steps(graph, solution)):
        temp = [0] * d
        if step[0] < graph.n_ops:
            device = place[step[0]]
            for t in step_outputs(graph, step, internal):
                if not graph.tensor_persistent[t]:  # persistent bytes count from the start
                    memory[device] += int(graph.tensor_size[t])
            temp[device] = sum(int(graph.op_temp_memory[op]) for op in step)
        else:
            t, device = divmod(step[0] - graph.n_ops, d)
            memory[device] += int(graph.tensor_size[t])
        rows.append([memory[device] + temp[device] for device in range(d)])
        for t, device in releases.get(index, ()):
            memory[device] -= int(graph.tensor_size[t])
    return rows


def persistent_per_device(graph: Graph, placement: np.ndarray, n_devices: int) -> np.ndarray:
    """[n_devices] int64 bytes of the persistent tensors homed on each device.

    Every step of a device stands on them (section 5).
    """
    persistent = np.zeros(n_devices, dtype=np.int64)
    home = np.asarray(placement, dtype=np.int64)[graph.tensor_producer]
    np.add.at(
        persistent,
        home[graph.tensor_persistent],
        graph.tensor_size[graph.tensor_persistent].astype(np.int64),
    )
    return persistent


def reference_peak_memory(graph: Graph, solution: Solution) -> list[int]:
    """Peak memory of each device (section 5) of a valid solution: its largest step."""
    peak = [0] * solution.n_devices
    for step in reference_memory_steps(graph, solution):
        peak = [max(p, m) for p, m in zip(peak, step, strict=True)]
    return peak


def reference_event_times(
    graph: Graph, solution: Solution, machine: Machine
) -> list[tuple[float, float]]:
    """(start, finish) of every step (sections 6 and 13) of a valid solution, in schedule order.

    An async transfer occupies no device: it starts when its tensor is produced. A group lasts
    its roofline time: the larger of its members' compute and its memory traffic, plus a launch.
    """
    d = solution.n_devices
    place = [int(p) for p in solution.placement]
    internal = internal_tensors(graph, reference_groups(solution))
    device_free = [0.0] * d
    available: dict[tuple[int, int], float] = {}  # (tensor, device) -> time the copy is there
    times = []
    for step in reference_steps(graph, solution):
        code = step[0]
        if code < graph.n_ops:
            device = place[code]
            inputs = external_inputs(graph, step, internal)
            outputs = step_outputs(graph, step, internal)
            start = max([device_free[device]] + [available[(t, device)] for t in inputs])
            if len(step) == 1:
                duration = float(graph.op_runtime[code])
            else:
                bandwidth, launch = graph.kernel or (float("nan"), float("nan"))
                traffic = sum(int(graph.tensor_size[t]) for t in inputs + outputs)
                compute = sum(float(graph.op_compute_time[op]) for op in sorted(step))
                duration = max(compute, traffic / bandwidth) + launch
            finish = start + duration
            device_free[device] = finish
            for t in outputs:
                available[(t, device)] = finish
        else:
            t, device = divmod(code - graph.n_ops, d)
            produced = available[(t, place[graph.tensor_producer[t]])]
            duration = machine.transfer_duration(int(graph.tensor_size[t]))
            if machine.mode == "sync":
                start = max(device_free[device], produced)
                finish = start + duration
                device_free[device] = finish
            else:
                start = produced
                finish = produced + duration
            available[(t, device)] = finish
        times.append((start, finish))
    return times


def reference_makespan(graph: Graph, solution: Solution, machine: Machine) -> float:
    """Makespan (section 6) of a valid solution: the latest finish of any event."""
    return max([0.0] + [finish for _, finish in reference_event_times(graph, solution, machine)])


def reference_score(graph: Graph, solution: Solution, machine: Machine) -> Score:
    """Validity, peak memory, makespan, speedup and feasibility of one solution.

    Raises:
        SolutionError: naming the first event that breaks a rule of section 3.
    """
    reference_validate(graph, solution, machine)
    peaks = reference_peak_memory(graph, solution)
    makespan = reference_makespan(graph, solution, machine)
    return Score(
        peak_memory_per_device=tuple(peaks),
        makespan=makespan,
        speedup=speedup(graph.total_runtime, makespan),
        capacity=machine.capacity,
    )
