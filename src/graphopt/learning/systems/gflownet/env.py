"""The GFlowNet scheduling MDP (paper 004 section 2.3, E.1): partial schedules, stepped in batches.

A state is a partial schedule: the ops added so far, each with its device, in the order they
were added. An action adds one ready op (every producer of its inputs already added) on one
device, so every complete schedule keeps the precedence constraints; each device runs its ops in
the order they were added. After n steps the schedule is complete and becomes a contract
solution (`solutions`: the placement and the addition order, with the transfers it implies
inserted before their first reader), scored by the project's scorer; its speedup is
U = sum of runtimes / makespan and its log-reward (U - m) / sigma, m the number of devices
(paper 004 section 3.3).

A backward action removes an op whose removal gives a state from which adding it back returns
here: it must have no added consumer and be the last op added on its device.

`PartialSchedules` holds B partial schedules of one graph and steps all of them in one numba
call; readiness is the shared ready step of `graphopt.ir.ready` with d = 1 (devices are chosen
as ops are added, so only producers matter). Each added op gets the proxy's start time (paper 004
eq. 2): the latest of its device's last finish and its inputs' arrival, which is the producer's
finish plus, across devices, the transfer's duration. That is the contract's makespan (section 6)
exactly with free transfers or in async mode; in sync mode, where receives occupy devices, the
start times are the policy's estimate and the scorer decides the reward.
"""

from __future__ import annotations

from functools import cached_property

import numba
import numpy as np

from graphopt.costmodels.machine import Machine
from graphopt.costmodels.score import Scorer
from graphopt.errors import GraphoptError
from graphopt.ir.arrays import GraphArrays
from graphopt.ir.graph import Graph
from graphopt.ir.ready import initial_waiting, release_capacity, release_op
from graphopt.solvers.events import events_from_op_order
from graphopt.solvers.list_scheduling import bottom_levels

STATE_FEATURES = ("start", "can_add", "can_remove", "scheduled")
"""Per-op state features besides the device one-hot (paper 004 E.1), after the op's runtime."""


class ActionError(GraphoptError):
    """An action that is not valid in its state (an op not ready, or a device out of range)."""


def feature_names(n_devices: int) -> list[str]:
    """Names of the columns of `PartialSchedules.features`."""
    devices = [f"device_{k}" for k in range(n_devices)]
    return ["runtime", "start", *devices, "can_add", "can_remove", "scheduled"]


class PartialSchedules:
    """B partial schedules of one graph on one machine, all starting empty and stepped together.

    Args:
        graph: the graph.
        machine: devices and transfer model of the proxy.
        batch: number of schedules B.

    Attributes (arrays, row b is schedule b):
        added: [B, n] bool, whether each op is in the schedule.
        device: [B, n] int32 device of each added op, -1 before.
        start: [B, n] float64 proxy start time of each added op, -1 before.
        finish: [B, n] float64 proxy finish of each added op.
        order: [B, n] int64 the ops in the order they were added (the first `steps` columns).
        steps: ops added to every schedule so far.
    """

    def __init__(self, graph: Graph, machine: Machine, batch: int) -> None:
        if batch < 1:
            raise ActionError(f"batch must be >= 1, got {batch}")
        self.graph = graph
        self.machine = machine
        n, d = graph.n_ops, machine.n_devices
        self.added = np.zeros((batch, n), dtype=np.bool_)
        self.device = np.full((batch, n), -1, dtype=np.int32)
        self.start = np.full((batch, n), -1.0)
        self.finish = np.zeros((batch, n))
        self.order = np.full((batch, n), -1, dtype=np.int64)
        self.steps = 0
        self._waiting = np.tile(initial_waiting(graph.arrays), (batch, 1))
        self._readers = np.zeros((batch, graph.n_tensors), dtype=np.int32)
        self._reads_added = np.zeros((batch, n), dtype=np.int32)  # inputs read by added ops
        self._device_free = np.zeros((batch, d))
        self._last_on_device = np.full((batch, d), -1, dtype=np.int64)
        self._load = np.zeros((batch, d))
        self._latest = np.zeros(batch)
        self._durations = machine.latency + graph.tensor_size / machine.bandwidth
        mean = graph.total_runtime / max(n, 1)
        self._unit = mean if mean > 0 else 1.0  # the mean op runtime: features' time unit
        first = np.flatnonzero(self._waiting[0] == 0)
        first = first[np.argsort(-self._bottom[first], kind="stable")][::-1]
        self._ready = np.zeros((batch, max(n, 1)), dtype=np.int64)  # the next candidate last
        self._ready[:, : first.size] = first
        self._ready_count = np.full(batch, first.size, dtype=np.int64)

    @property
    def batch(self) -> int:
        """Number of schedules B."""
        return self.added.shape[0]

    @property
    def done(self) -> bool:
        """Whether every schedule is complete."""
        return self.steps == self.graph.n_ops

    def forward_mask(self) -> np.ndarray:
        """[B, n] bool: the ops that may be added next (on any device)."""
        return (self._waiting == 0) & ~self.added

    def backward_mask(self) -> np.ndarray:
        """[B, n] bool: the ops a backward action may remove (no added reader, last on device)."""
        last = np.zeros_like(self.added)
        rows, devices = np.nonzero(self._last_on_device >= 0)
        last[rows, self._last_on_device[rows, devices]] = True
        return last & (self._reads_added == 0)

    def step(self, ops: np.ndarray, devices: np.ndarray) -> None:
        """Adds op ops[b] on device devices[b] to schedule b, for every b.

        Raises:
            ActionError: naming the first schedule whose action is not valid; nothing changes.
        """
        ops = np.ascontiguousarray(ops, dtype=np.int64)
        devices = np.ascontiguousarray(devices, dtype=np.int64)
        if ops.shape != (self.batch,) or devices.shape != (self.batch,):
            raise ActionError(
                f"actions must be two arrays of {self.batch} entries, got shapes "
                f"{ops.shape} and {devices.shape}"
            )
        bad = _first_invalid(ops, devices, self.added, self._waiting, self.machine.n_devices)
        if bad >= 0:
            raise ActionError(
                f"schedule {bad}: op {int(ops[bad])} on device {int(devices[bad])} is not a valid "
                "action (the op must exist, be ready and not yet added; the device in "
                f"[0, {self.machine.n_devices}))"
            )
        _step(
            self.graph.arrays,
            self._durations,
            ops,
            devices,
            self.steps,
            self.added,
            self.device,
            self.start,
            self.finish,
            self.order,
            self._waiting,
            self._readers,
            self._reads_added,
            self._device_free,
            self._last_on_device,
            self._load,
            self._latest,
            self._bottom,
            self._ready,
            self._ready_count,
        )
        self.steps += 1

    def features(self) -> np.ndarray:
        """[B, n, 2 + d + 3] float32 per-op features (`feature_names`; paper 004 E.1).

        The runtime is divided by the graph's mean runtime and start times by its total runtime
        over d (the makespan of a perfect split), so that graphs of any scale look alike; a start
        is -1 before its op is added.
        """
        graph, d = self.graph, self.machine.n_devices
        total = graph.total_runtime
        scale = total / d if total > 0 else 1.0
        out = np.empty((self.batch, graph.n_ops, 5 + d), dtype=np.float32)
        out[:, :, 0] = graph.op_runtime / self._unit
        out[:, :, 1] = np.where(self.added, self.start / scale, -1.0)
        out[:, :, 2 : 2 + d] = self.device[:, :, None] == np.arange(d)
        out[:, :, 2 + d] = self.forward_mask()
        out[:, :, 3 + d] = self.backward_mask()
        out[:, :, 4 + d] = self.added
        return out

    def earliest_starts(self, ready: np.ndarray | None = None) -> np.ndarray:
        """[B, n, d] the proxy start each ready op would get on each device if added next.

        Entries of ops that are not ready are 0. `ready` is `forward_mask()`, when the caller
        has it.
        """
        out = np.zeros((self.batch, self.graph.n_ops, self.machine.n_devices))
        _earliest_starts(
            self.graph.arrays,
            self._durations,
            self.forward_mask() if ready is None else ready,
            self.finish,
            self.device,
            self._device_free,
            out,
        )
        return out

    @cached_property
    def _bottom(self) -> np.ndarray:
        """[n] bottom levels in units of the mean op runtime (list scheduling's priority)."""
        return bottom_levels(self.graph) / self._unit

    def list_prior(self) -> np.ndarray:
        """[B, n, d, 2] float32 list scheduling's two preferences for each (ready op, device).

        Column 0 is the op's bottom level (the critical-path priority), column 1 minus how much
        later than the earliest possible start of any ready action it would start; both in units
        of the graph's mean op runtime, 0 where the op is not ready. A policy adding positive
        multiples of them to its logits starts as a randomized critical-path list scheduler
        (paper 004's conclusion: scheduling heuristics to speed up training).
        """
        ready = self.forward_mask()
        out = np.zeros((self.batch, self.graph.n_ops, self.machine.n_devices, 2), np.float32)
        _list_prior(ready, self.earliest_starts(ready), self._bottom, self._unit, out)
        return out

    def candidates(self, window: int) -> tuple[np.ndarray, np.ndarray]:
        """([B, R] the candidates of each schedule, padded with -1; [B] how many), R <= window.

        A schedule's candidates are its ready ops (those of `forward_mask`), at most `window`
        of them: those with the largest bottom levels, the ones list scheduling would pick
        first (ties: the op that became ready first). A step then costs O(window) per
        schedule, however wide the graph.
        """
        counts = np.minimum(self._ready_count, window)
        rank = np.arange(max(int(counts.max()), 1))[None, :]
        at = np.maximum(self._ready_count[:, None] - 1 - rank, 0)
        ops = np.take_along_axis(self._ready, at, axis=1)
        ops[rank >= counts[:, None]] = -1
        return ops, counts

    def pair_features(self, ops: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """([C, d, len(PAIR_FEATURES)] float32, [C, d, 2] float32 `list_prior`'s columns).

        For the C = sum(counts) real entries of `candidates` (row by row) on each device; all
        times in units of the graph's mean op runtime, so graphs and machines of any scale
        look alike.
        """
        total, d = int(counts.sum()), self.machine.n_devices
        features = np.empty((total, d, len(PAIR_FEATURES)), np.float32)
        prior = np.empty((total, d, 2), np.float32)
        _pair_features(
            self.graph.arrays,
            self._durations,
            ops,
            counts,
            self.finish,
            self.device,
            self._device_free,
            self._last_on_device,
            self._load,
            self._bottom,
            self._unit,
            *self._scales,
            self.steps / max(self.graph.n_ops, 1),
            features,
            prior,
        )
        return features, prior

    @cached_property
    def _scales(self) -> tuple[float, float]:
        """(critical path in mean op runtimes, a device's fair share of the runtime), once."""
        return _scales(self.graph.op_runtime, self._bottom, self.machine.n_devices)

    def removable(self) -> np.ndarray:
        """[B, d] int64 the op a backward action may remove from each device, or -1.

        The same ops as `backward_mask`: the last op of a device, when no added op reads it.
        """
        last = self._last_on_device
        rows = np.arange(self.batch)[:, None]
        ok = (last >= 0) & (self._reads_added[rows, np.maximum(last, 0)] == 0)
        return np.where(ok, last, -1)

    def removable_features(self, ops: np.ndarray) -> np.ndarray:
        """[B, d, 1, 1] float32: what a backward head sees of each of `removable`'s ops.

        log1p of how long before the schedule's latest finish the op ends, in mean op
        runtimes (0 for -1).
        """
        rows = np.arange(self.batch)[:, None]
        latest = self.proxy_makespans()[:, None]
        gap = (latest - self.finish[rows, np.maximum(ops, 0)]) / self._unit
        return np.where(ops >= 0, np.log1p(np.maximum(gap, 0.0)), 0.0).astype(np.float32)[
            :, :, None, None
        ]

    def proxy_makespans(self) -> np.ndarray:
        """[B] latest proxy finish of each schedule (complete or not)."""
        return self._latest.copy()

    def solutions(self) -> tuple[np.ndarray, list[np.ndarray]]:
        """The complete schedules as contract solutions: ([B, n] int32 placements, event orders).

        Raises:
            ActionError: when the schedules are not complete yet.
        """
        if not self.done:
            raise ActionError(
                f"the schedules hold {self.steps} of {self.graph.n_ops} ops; finish them first"
            )
        placements = self.device.copy()
        d = self.machine.n_devices
        events = [
            events_from_op_order(self.graph, placements[b], self.order[b], d, "lazy")
            for b in range(self.batch)
        ]
        return placements, events

    def speedups(self, scorer: Scorer) -> np.ndarray:
        """[B] float64 speedups U = sum of runtimes / makespan of the complete schedules.

        `scorer` is the proxy's, or a target machine's (the candidate pipeline re-scores the
        same schedules on targets).
        """
        placements, events = self.solutions()
        total = float(self.graph.op_runtime.sum())
        makespans = np.array(
            [scorer.evaluate(placements[b], events[b])[1] for b in range(self.batch)]
        )
        return np.divide(total, makespans, out=np.ones_like(makespans), where=makespans > 0)


PAIR_FEATURES = (
    "bottom_level",
    "delay",
    "device_wait",
    "inputs_here",
    "device_empty",
    "load",
    "progress",
)
"""What a per-graph policy sees of a (ready op, device) candidate (`pair_features`).

The op's bottom level over the critical path; log1p of how much later than the earliest ready
action it would start there; log1p of how long after the first free device that device frees;
the share of the op's input bytes already on it; whether it runs nothing yet; its busy time over
the total runtime / d; the share of ops added.
"""

STATIC_FEATURES = ("runtime", "bottom_level", "top_level", "inputs", "outputs", "send", "receive")
"""What a per-graph policy's encoder sees of each op (`static_features`), once per graph."""


def static_features(graph: Graph, machine: Machine) -> np.ndarray:
    """[n, len(STATIC_FEATURES)] float32: per-op features that no partial schedule changes.

    log1p of the runtime in mean op runtimes; bottom and top levels over the critical path;
    log1p of the input and output counts; log1p of the transfer time of the op's outputs and
    of its inputs on this machine, in mean op runtimes (the only machine dependence, so the
    encoder sees what a cut costs).
    """
    n = graph.n_ops
    mean = graph.total_runtime / max(n, 1)
    unit = mean if mean > 0 else 1.0
    bottom = bottom_levels(graph)
    top = _top_levels(graph.arrays, graph.topological_order)
    critical = max(float(bottom.max(initial=0.0)), 1e-30)
    durations = (machine.latency + graph.tensor_size / machine.bandwidth) / unit
    out = np.empty((n, len(STATIC_FEATURES)), np.float32)
    out[:, 0] = np.log1p(graph.op_runtime / unit)
    out[:, 1] = bottom / critical
    out[:, 2] = top / critical
    inputs = np.diff(graph.op_input_ptr)
    outputs = np.diff(graph.op_output_ptr)
    out[:, 3] = np.log1p(inputs)
    out[:, 4] = np.log1p(outputs)
    out[:, 5] = np.log1p(_per_op(durations[graph.op_output_tensor], outputs))
    out[:, 6] = np.log1p(_per_op(durations[graph.op_input_tensor], inputs))
    return out


def _per_op(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """[n] sums of `values` in CSR rows of `counts` entries each."""
    return np.bincount(np.repeat(np.arange(counts.size), counts), values, minlength=counts.size)


def log_reward(speedup: np.ndarray, n_devices: int, sigma: float | np.ndarray) -> np.ndarray:
    """The log-reward (U(x) - m) / sigma of paper 004 section 3.3, m the device count."""
    sigma = np.asarray(sigma, dtype=np.float64)
    if np.any(~(sigma > 0)):
        raise ActionError(f"temperature sigma must be > 0, got {sigma.min()}")
    return (np.asarray(speedup, dtype=np.float64) - n_devices) / sigma


@numba.njit(cache=True)
def _first_invalid(
    ops: np.ndarray, devices: np.ndarray, added: np.ndarray, waiting: np.ndarray, d: int
) -> int:
    """The first schedule whose action is not valid, or -1."""
    n = added.shape[1]
    for b in range(ops.shape[0]):
        op, device = ops[b], devices[b]
        if op < 0 or op >= n or device < 0 or device >= d or added[b, op] or waiting[b, op] > 0:
            return b
    return -1


@numba.njit(cache=True)
def _start_on(
    g: GraphArrays,
    durations: np.ndarray,
    op: int,
    device: int,
    finish: np.ndarray,
    device_of: np.ndarray,
    device_free: np.ndarray,
) -> float:
    """The proxy start of `op` added next on `device` to one schedule (its rows of the arrays).

    It starts when the device is free and every input has arrived: at its producer's finish on
    the same device, a transfer duration later from another.
    """
    begin = device_free[device]
    for e in range(g.op_input_ptr[op], g.op_input_ptr[op + 1]):
        t = g.op_input_tensor[e]
        producer = g.tensor_producer[t]
        arrival = finish[producer]
        if device_of[producer] != device:
            arrival += durations[t]
        begin = max(begin, arrival)
    return begin


@numba.njit(cache=True)
def _earliest_starts(
    g: GraphArrays,
    durations: np.ndarray,
    ready: np.ndarray,
    finish: np.ndarray,
    device_of: np.ndarray,
    device_free: np.ndarray,
    out: np.ndarray,
) -> None:
    """Fills out[b, op, k] with `_start_on` of every ready op of every schedule on every device."""
    for b in range(ready.shape[0]):
        for op in range(ready.shape[1]):
            if ready[b, op]:
                for k in range(out.shape[2]):
                    out[b, op, k] = _start_on(
                        g, durations, op, k, finish[b], device_of[b], device_free[b]
                    )


@numba.njit(cache=True)
def _list_prior(
    ready: np.ndarray, starts: np.ndarray, bottom: np.ndarray, unit: float, out: np.ndarray
) -> None:
    """Fills `PartialSchedules.list_prior`'s array from the starts, without numpy temporaries."""
    n, d = ready.shape[1], out.shape[2]
    for b in range(ready.shape[0]):
        earliest = np.inf
        for op in range(n):
            if ready[b, op]:
                for k in range(d):
                    earliest = min(earliest, starts[b, op, k])
        for op in range(n):
            if ready[b, op]:
                for k in range(d):
                    out[b, op, k, 0] = bottom[op]
                    out[b, op, k, 1] = (earliest - starts[b, op, k]) / unit


@numba.njit(cache=True)
def _step(
    g: GraphArrays,
    durations: np.ndarray,
    ops: np.ndarray,
    devices: np.ndarray,
    step: int,
    added: np.ndarray,
    device_of: np.ndarray,
    start: np.ndarray,
    finish: np.ndarray,
    order: np.ndarray,
    waiting: np.ndarray,
    readers: np.ndarray,
    reads_added: np.ndarray,
    device_free: np.ndarray,
    last_on_device: np.ndarray,
    load: np.ndarray,
    latest: np.ndarray,
    bottom: np.ndarray,
    ready: np.ndarray,
    ready_count: np.ndarray,
) -> None:
    """Adds each schedule's op (checked valid) with its proxy times and updates readiness.

    The ready list stays sorted by bottom level, largest last, and on ties by when an op
    became ready, the first last (the graph's CSR order within a step), so candidates are its
    last entries. An added op is one of them and a newly ready op usually ranks high, so both
    move few entries: a wide graph's step costs O(window), not O(ready ops).
    """
    n = added.shape[1]
    one_device = np.zeros(n, dtype=np.int32)
    newly = np.empty(release_capacity(g), dtype=np.int64)
    for b in range(ops.shape[0]):
        op, device = ops[b], devices[b]
        begin = _start_on(g, durations, op, device, finish[b], device_of[b], device_free[b])
        for e in range(g.op_input_ptr[op], g.op_input_ptr[op + 1]):
            reads_added[b, g.tensor_producer[g.op_input_tensor[e]]] += 1
        end = begin + g.op_runtime[op]
        added[b, op] = True
        device_of[b, op] = device
        start[b, op] = begin
        finish[b, op] = end
        order[b, step] = op
        device_free[b, device] = end
        last_on_device[b, device] = op
        load[b, device] += g.op_runtime[op]
        latest[b] = max(latest[b], end)
        kept = ready_count[b] - 1
        at = kept
        while ready[b, at] != op:
            at -= 1
        for r in range(at, kept):
            ready[b, r] = ready[b, r + 1]
        made = release_op(g, op, 0, 1, one_device, waiting[b], readers[b], newly)
        for r in range(made):
            new = newly[r]
            at = kept
            while at > 0 and bottom[ready[b, at - 1]] >= bottom[new]:
                ready[b, at] = ready[b, at - 1]
                at -= 1
            ready[b, at] = new
            kept += 1
        ready_count[b] = kept


@numba.njit(cache=True)
def _top_levels(g: GraphArrays, topological: np.ndarray) -> np.ndarray:
    """[n] the longest runtime-weighted path from a source to each op's start."""
    top = np.zeros(g.op_runtime.shape[0])
    for i in range(topological.shape[0]):
        op = topological[i]
        end = top[op] + g.op_runtime[op]
        for e in range(g.op_output_ptr[op], g.op_output_ptr[op + 1]):
            t = g.op_output_tensor[e]
            for c in range(g.consumer_ptr[t], g.consumer_ptr[t + 1]):
                consumer = g.consumer_op[c]
                top[consumer] = max(top[consumer], end)
    return top


@numba.njit(cache=True)
def _scales(runtime: np.ndarray, bottom: np.ndarray, d: int) -> tuple[float, float]:
    """`PartialSchedules._scales`, summed in op order (the same floats on every platform)."""
    critical = 1e-30
    for j in range(bottom.shape[0]):
        critical = max(critical, bottom[j])
    total = 0.0
    for j in range(runtime.shape[0]):
        total += runtime[j]
    return critical, total / d if total > 0 else 1.0


@numba.njit(cache=True)
def _pair_features(
    g: GraphArrays,
    durations: np.ndarray,
    ops: np.ndarray,
    counts: np.ndarray,
    finish: np.ndarray,
    device_of: np.ndarray,
    device_free: np.ndarray,
    last_on_device: np.ndarray,
    load: np.ndarray,
    bottom: np.ndarray,
    unit: float,
    critical: float,
    share: float,
    progress: float,
    features: np.ndarray,
    prior: np.ndarray,
) -> None:
    """Fills `PartialSchedules.pair_features`' packed arrays; `bottom` in mean op runtimes."""
    d = features.shape[1]
    width = ops.shape[1]
    starts = np.empty((width, d))
    here = np.empty((width, d))
    inputs = np.empty(width)
    wait = np.empty(d)
    empty = np.empty(d)
    busy = np.empty(d)
    row = 0
    for b in range(ops.shape[0]):
        earliest = np.inf
        first_free = np.inf
        for k in range(d):
            first_free = min(first_free, device_free[b, k])
        for k in range(d):  # what depends on the device alone
            wait[k] = np.log1p((device_free[b, k] - first_free) / unit)
            empty[k] = 1.0 if last_on_device[b, k] < 0 else 0.0
            busy[k] = load[b, k] / share
        for r in range(counts[b]):
            op = ops[b, r]
            for k in range(d):
                starts[r, k] = _start_on(
                    g, durations, op, k, finish[b], device_of[b], device_free[b]
                )
                earliest = min(earliest, starts[r, k])
                here[r, k] = 0.0
            inputs[r] = 0.0
            for e in range(g.op_input_ptr[op], g.op_input_ptr[op + 1]):
                t = g.op_input_tensor[e]
                size = float(g.tensor_size[t])
                here[r, device_of[b, g.tensor_producer[t]]] += size
                inputs[r] += size
        for r in range(counts[b]):
            op = ops[b, r]
            level = bottom[op] / critical
            scale = 1.0 / inputs[r] if inputs[r] > 0 else 0.0
            for k in range(d):
                delay = (starts[r, k] - earliest) / unit
                features[row, k, 0] = level
                features[row, k, 1] = np.log1p(delay)
                features[row, k, 2] = wait[k]
                features[row, k, 3] = here[r, k] * scale
                features[row, k, 4] = empty[k]
                features[row, k, 5] = busy[k]
                features[row, k, 6] = progress
                prior[row, k, 0] = bottom[op]
                prior[row, k, 1] = -delay
            row += 1


def connected_subgraph(graph: Graph, size: int, rng: np.random.Generator) -> Graph:
    """A random connected induced sub-graph of about `size` ops (paper 004 section 3.3).

    Grows from a random op over edges in either direction, taking a uniformly drawn frontier op
    each time, until `size` ops or the op's whole weakly connected component; tensors keep
    their consumers inside and tensors produced outside are left out (their readers lose that
    input). Training on these is data augmentation for graphs larger than the training size.
    """
    n = graph.n_ops
    if size >= n:
        return graph
    src, dst = graph.edge_index
    neighbours: list[list[int]] = [[] for _ in range(n)]
    for a, b in zip(src.tolist(), dst.tolist(), strict=True):
        neighbours[a].append(b)
        neighbours[b].append(a)
    chosen = {int(rng.integers(n))}
    frontier = sorted(set(neighbours[next(iter(chosen))]) - chosen)
    while len(chosen) < size and frontier:
        op = frontier.pop(int(rng.integers(len(frontier))))
        chosen.add(op)
        frontier = sorted((set(frontier) | set(neighbours[op])) - chosen)
    keep = np.array(sorted(chosen), dtype=np.int64)
    new_index = np.full(n, -1, dtype=np.int64)
    new_index[keep] = np.arange(keep.size)
    tensors = np.flatnonzero(new_index[graph.tensor_producer] >= 0)
    ptr, consumers = [0], []
    for t in tensors.tolist():
        readers = graph.consumer_op[graph.consumer_ptr[t] : graph.consumer_ptr[t + 1]]
        consumers.extend(int(new_index[c]) for c in readers if new_index[c] >= 0)
        ptr.append(len(consumers))
    return Graph.from_arrays(
        f"{graph.name}[{keep.size} of {n} ops]",
        [graph.op_names[j] for j in keep.tolist()],
        graph.op_runtime[keep],
        [graph.tensor_names[t] for t in tensors.tolist()],
        graph.tensor_size[tensors],
        new_index[graph.tensor_producer[tensors]],
        ptr,
        consumers,
        op_temp_memory=graph.op_temp_memory[keep],
        tensor_persistent=graph.tensor_persistent[tensors],
        tensor_output=graph.tensor_output[tensors],
    )
