"""Plain, literal implementation of the scoring rules: the oracle the numba kernels are tested on.

It follows COST_MODEL.md sections 3-5 word by word (graph outputs included), with Python sets
and dicts, and measures the memory of every device at every step. Slow by design; never call
it on a hot path.
"""

from __future__ import annotations

import numpy as np

from graphopt.costmodels.machine import Machine
from graphopt.costmodels.score import Score, check_shapes, raise_violation, speedup
from graphopt.costmodels.validity import Violation
from graphopt.ir.graph import Graph
from graphopt.ir.solution import Solution


def reference_check(graph: Graph, solution: Solution) -> tuple[Violation, int, int]:
    """First rule of section 3 the solution breaks, as (violation, where, detail)."""
    d = solution.n_devices
    place = [int(p) for p in solution.placement]
    for op, device in enumerate(place):
        if not 0 <= device < d:
            return Violation.PLACEMENT_OUT_OF_RANGE, op, -1
    implied = set()
    for t in range(graph.n_tensors):
        source = place[graph.tensor_producer[t]]
        for consumer in graph.consumers(t):
            if place[consumer] != source:
                implied.add((t, place[consumer]))
    ran: set[int] = set()
    moved: set[tuple[int, int]] = set()
    for position, code in enumerate(int(c) for c in solution.order):
        if not 0 <= code < graph.n_ops + graph.n_tensors * d:
            return Violation.UNKNOWN_EVENT, position, -1
        if code < graph.n_ops:
            if code in ran:
                return Violation.OP_REPEATED, position, -1
            for t in graph.inputs(code):
                producer = int(graph.tensor_producer[t])
                if place[producer] == place[code]:
                    available = producer in ran
                else:
                    available = (int(t), place[code]) in moved
                if not available:
                    return Violation.INPUT_NOT_AVAILABLE, position, int(t)
            ran.add(code)
        else:
            t, device = divmod(code - graph.n_ops, d)
            if (t, device) not in implied:
                return Violation.TRANSFER_NOT_IMPLIED, position, -1
            if (t, device) in moved:
                return Violation.TRANSFER_REPEATED, position, -1
            if int(graph.tensor_producer[t]) not in ran:
                return Violation.TRANSFER_BEFORE_PRODUCER, position, -1
            moved.add((t, device))
    for op in range(graph.n_ops):
        if op not in ran:
            return Violation.OP_MISSING, op, -1
    return Violation.NONE, -1, -1


def reference_releases(graph: Graph, solution: Solution) -> dict[int, list[tuple[int, int]]]:
    """Step -> the copies (tensor, device) freed right after it (section 4), of a valid solution.

    A copy is freed after the step of its last reader, or after the step that made it when
    nothing reads it; a persistent or graph output's home copy never is. The memory walk below
    and the replay of a solution on the real program (`execution.replay`) both free by it.
    """
    d = solution.n_devices
    place = [int(p) for p in solution.placement]
    events = [int(c) for c in solution.order]
    last_read: dict[tuple[int, int], int] = {}
    for step, code in enumerate(events):
        if code < graph.n_ops:
            for t in graph.inputs(code):
                last_read[(int(t), place[code])] = step
        else:
            t = (code - graph.n_ops) // d
            last_read[(t, place[graph.tensor_producer[t]])] = step
    releases: dict[int, list[tuple[int, int]]] = {}
    for step, code in enumerate(events):
        if code < graph.n_ops:
            made = [
                (int(t), place[code])
                for t in graph.outputs(code)
                if not graph.tensor_persistent[t] and not graph.tensor_output[t]
            ]
        else:
            made = [divmod(code - graph.n_ops, d)]
        for copy in made:
            releases.setdefault(last_read.get(copy, step), []).append(copy)
    return releases


def reference_memory_steps(graph: Graph, solution: Solution) -> list[list[int]]:
    """Memory of every device at every step (section 4) of a valid solution.

    Row t holds step t's bytes per device: resident copies plus the running op's temp memory.
    """
    d = solution.n_devices
    place = [int(p) for p in solution.placement]
    releases = reference_releases(graph, solution)
    memory = [int(m) for m in persistent_per_device(graph, solution.placement, d)]
    steps = []
    for step, code in enumerate(int(c) for c in solution.order):
        temp = [0] * d
        if code < graph.n_ops:
            device = place[code]
            for t in graph.outputs(code):
                if not graph.tensor_persistent[t]:  # persistent bytes count from the start
                    memory[device] += int(graph.tensor_size[t])
            temp[device] = int(graph.op_temp_memory[code])
        else:
            t, device = divmod(code - graph.n_ops, d)
            memory[device] += int(graph.tensor_size[t])
        steps.append([memory[device] + temp[device] for device in range(d)])
        for t, device in releases.get(step, ()):
            memory[device] -= int(graph.tensor_size[t])
    return steps


def persistent_per_device(graph: Graph, placement: np.ndarray, n_devices: int) -> np.ndarray:
    """[n_devices] int64 bytes of the persistent tensors homed on each device.

    Every step of a device stands on them (section 4).
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
    """Peak memory of each device (section 4) of a valid solution: its largest step."""
    peak = [0] * solution.n_devices
    for step in reference_memory_steps(graph, solution):
        peak = [max(p, m) for p, m in zip(peak, step, strict=True)]
    return peak


def reference_event_times(
    graph: Graph, solution: Solution, machine: Machine
) -> list[tuple[float, float]]:
    """(start, finish) of every event (section 5) of a valid solution, in schedule order.

    An async transfer occupies no device: it starts when its tensor is produced.
    """
    d = solution.n_devices
    place = [int(p) for p in solution.placement]
    device_free = [0.0] * d
    available: dict[tuple[int, int], float] = {}  # (tensor, device) -> time the copy is there
    times = []
    for code in (int(c) for c in solution.order):
        if code < graph.n_ops:
            device = place[code]
            start = max(
                [device_free[device]] + [available[(int(t), device)] for t in graph.inputs(code)]
            )
            finish = start + float(graph.op_runtime[code])
            device_free[device] = finish
            for t in graph.outputs(code):
                available[(int(t), device)] = finish
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
    """Makespan (section 5) of a valid solution: the latest finish of any event."""
    return max([0.0] + [finish for _, finish in reference_event_times(graph, solution, machine)])


def reference_score(graph: Graph, solution: Solution, machine: Machine) -> Score:
    """Validity, peak memory, makespan, speedup and feasibility of one solution.

    Raises:
        SolutionError: naming the first event that breaks a rule of section 3.
    """
    check_shapes(graph, solution, machine)
    violation, where, detail = reference_check(graph, solution)
    if violation is not Violation.NONE:
        raise_violation(graph, solution, violation, where, detail)
    peaks = reference_peak_memory(graph, solution)
    makespan = reference_makespan(graph, solution, machine)
    return Score(
        peak_memory_per_device=tuple(peaks),
        makespan=makespan,
        speedup=speedup(graph.total_runtime, makespan),
        capacity=machine.capacity,
    )
