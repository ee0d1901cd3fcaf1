"""Random-key decoding: a chromosome in [0, 1]^n to a placement and a valid event order.

Paper 001 section 3.2.1 and paper 000 appendix A.2. The chromosome has three parts, laid out
one after another:

1. ``n_ops * d`` op-to-device affinities (op ``j``, device ``b`` at ``j * d + b``);
2. ``n_ops`` op scheduling priorities;
3. ``n_tensors * d`` transfer priorities (tensor ``t`` to device ``b`` at ``t * d + b``);
4. when the problem may fuse ops (`Problem.fusion`), ``n_ops`` fusion priorities, which GO's
   decoder (`fusion.priority_groups`) turns into fusion groups on the decoded placement and
   order; the order is then re-derived with each group contiguous and scored again.

Each op goes to its device of highest affinity (pinned ops to their pin; ties to the lowest
device). The schedule is a topological sort of the ops and the implied transfers that always runs
the ready event of highest priority (ties to the lower event code). Every valid order is reachable
this way, and `encode` gives the keys that reproduce any given solution exactly, which is how
BRKGA seeds its population with known solutions.

The numba kernel decodes and scores in the same pass (the walk that sorts is the walk that
scores), which is what makes a fitness evaluation cost about as much as scoring alone. Its
plain twin is `graphopt.solvers._reference.reference_decode`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np
from numba.cpython.unsafe.numbers import leading_zeros

from graphopt.costmodels._kernels import op_step, transfer_step
from graphopt.costmodels.machine import MachineArrays
from graphopt.ir.arrays import GraphArrays, _u
from graphopt.ir.graph import Graph
from graphopt.ir.ready import initial_waiting, release_capacity, release_copy, release_op
from graphopt.ir.solution import Solution
from graphopt.solvers._heap import pop, push
from graphopt.solvers.base import Problem, SolverError, Tracker, check_memory
from graphopt.solvers.bounds import op_step_memory


@dataclass(frozen=True)
class ChromosomeLayout:
    """Where each part of a chromosome starts (section 3.2.1's three parts)."""

    n_ops: int
    n_tensors: int
    n_devices: int
    fusion: bool = False

    @property
    def op_priority(self) -> int:
        """Offset of the op priorities."""
        return self.n_ops * self.n_devices

    @property
    def transfer_priority(self) -> int:
        """Offset of the transfer priorities."""
        return self.n_ops * (self.n_devices + 1)

    @property
    def fusion_priority(self) -> int:
        """Offset of the fusion priorities (present when `fusion`)."""
        return self.transfer_priority + self.n_tensors * self.n_devices

    @property
    def size(self) -> int:
        """Number of genes."""
        return self.fusion_priority + (self.n_ops if self.fusion else 0)


@dataclass(frozen=True)
class DecodedPopulation:
    """Decoded and scored chromosomes.

    Shapes:
        placements: [B, n_ops] int32; orders: [B, L] int64 (row b holds lengths[b] events);
        lengths: [B] int64; peaks: [B, n_devices] int64; makespans: [B] float64;
        excess: [B] int64 bytes over capacity; value: [B] float64 objective (see base.Problem);
        groups: None, or [B, n_ops] int32 fusion groups when the problem may fuse ops.
    """

    placements: np.ndarray
    orders: np.ndarray
    lengths: np.ndarray
    peaks: np.ndarray
    makespans: np.ndarray
    excess: np.ndarray
    value: np.ndarray
    groups: np.ndarray | None = None


def offer_decoded(tracker: Tracker, decoded: DecodedPopulation) -> None:
    """Offers a decoded batch to the tracker (raises BudgetExhausted once the budget is spent)."""
    tracker.offer_population(
        decoded.placements,
        decoded.orders,
        decoded.lengths,
        decoded.excess,
        decoded.value,
        decoded.groups,
    )


def symmetry_pins(graph: Graph, n_devices: int) -> np.ndarray:
    """Pins that break device symmetry: the op with the most memory goes to device 0.

    Paper 001 appendix A.1; the memory of an op is what its step holds (`op_step_memory`).

    Returns:
        [n_ops] int32 pins, -1 where free.
    """
    pins = np.full(graph.n_ops, -1, dtype=np.int32)
    if graph.n_ops == 0 or n_devices == 1:
        return pins
    pins[int(np.argmax(op_step_memory(graph)))] = 0
    return pins


class RandomKeyDecoder:
    """Decodes and scores chromosomes of one problem, one at a time or as a population.

    Args:
        problem: graph, machine, objective and pins.
        symmetry_breaking: pin the op with the most memory to device 0 when no op is pinned
            (paper 001 A.1); it removes the d! relabellings of every solution.
    """

    def __init__(self, problem: Problem, symmetry_breaking: bool = True) -> None:
        graph, machine = problem.graph, problem.machine
        self.problem = problem
        fusion = problem.fusion and bool(graph.op_fusion.any())
        self.layout = ChromosomeLayout(graph.n_ops, graph.n_tensors, machine.n_devices, fusion)
        if problem.pinned is not None:
            pins = np.asarray(problem.pinned, dtype=np.int32)
        elif symmetry_breaking:
            pins = symmetry_pins(graph, machine.n_devices)
        else:
            pins = np.full(graph.n_ops, -1, dtype=np.int32)
        self.pins = np.ascontiguousarray(pins)
        self.max_events = graph.n_ops + graph.n_tensors * (machine.n_devices - 1)
        self._buffers: dict[int, tuple[np.ndarray, ...]] = {}

    @property
    def n_genes(self) -> int:
        """Chromosome length."""
        return self.layout.size

    def check_population(self, size: int) -> None:
        """Refuses a population whose chromosomes and decoded solutions would not fit in memory.

        A member holds its genes (twice: BRKGA keeps two generations), its placement and its
        order, which on d devices can hold up to n_ops + n_tensors * (d - 1) events.
        """
        layout = self.layout
        member = 16 * self.n_genes + 8 * self.max_events + 4 * layout.n_ops + 8 * layout.n_devices
        check_memory(f"a population of {size} chromosomes of {self.n_genes:,} genes", size * member)

    def check_keys(self, keys: np.ndarray) -> np.ndarray:
        """Keys as contiguous float64; SolverError when their last axis is not n_genes long."""
        keys = np.ascontiguousarray(keys, dtype=np.float64)
        if keys.shape[-1] != self.n_genes:
            raise SolverError(
                f"chromosomes have {keys.shape[-1]} genes; this problem needs {self.n_genes} "
                f"({self.layout.n_ops} ops x {self.layout.n_devices} devices affinities, "
                f"{self.layout.n_ops} op priorities, {self.layout.n_tensors} tensors x "
                f"{self.layout.n_devices} devices transfer priorities"
                + (f", {self.layout.n_ops} fusion priorities)" if self.layout.fusion else ")")
            )
        return keys

    def decode(self, keys: np.ndarray) -> Solution:
        """The solution one chromosome encodes.

        Args:
            keys: [n_genes] chromosome.
        """
        population = self.evaluate(self.check_keys(keys)[None])
        length = int(population.lengths[0])
        groups = population.groups
        return Solution(
            population.placements[0],
            population.orders[0, :length],
            self.layout.n_devices,
            fusion=None if groups is None or groups[0].max(initial=-1) < 0 else groups[0],
        )

    def evaluate(self, keys: np.ndarray, reuse: bool = False) -> DecodedPopulation:
        """Decodes and scores a population, in parallel over its members.

        Args:
            keys: [B, n_genes] chromosomes.
            reuse: write into arrays the decoder keeps per batch size (the next call with
                `reuse` overwrites them) instead of new ones; BRKGA's loop uses it, since fresh
                [B, events] arrays every generation cost page faults on large graphs.
        """
        keys = self.check_keys(keys)
        if keys.ndim != 2:
            raise SolverError(f"a population is a [B, genes] array, got shape {keys.shape}")
        n = keys.shape[0]
        buffers = self._buffers.get(n) if reuse else None
        if buffers is None:
            self.check_population(n)
            buffers = (
                np.empty((n, self.layout.n_ops), dtype=np.int32),
                np.empty((n, self.max_events), dtype=np.int64),
                np.empty(n, dtype=np.int64),
                np.empty((n, self.layout.n_devices), dtype=np.int64),
                np.empty(n, dtype=np.float64),
                np.empty((n, self.layout.n_ops if self.layout.fusion else 0), dtype=np.int32),
            )
            if reuse:
                self._buffers[n] = buffers
        placements, orders, lengths, peaks, makespans, groups = buffers
        decode_population(
            self.problem.graph.arrays,
            self.problem.machine.arrays,
            self.pins,
            keys,
            placements,
            orders,
            lengths,
            peaks,
            makespans,
        )
        if self.layout.fusion:
            self._fuse(keys, buffers)
        excess, value = self.problem.fitness(peaks, makespans)
        return DecodedPopulation(
            placements,
            orders,
            lengths,
            peaks,
            makespans,
            excess,
            value,
            groups if self.layout.fusion else None,
        )

    def _fuse(self, keys: np.ndarray, buffers: tuple[np.ndarray, ...]) -> None:
        """Groups from the fusion priorities, orders re-derived around them, scores redone.

        `buffers` are `evaluate`'s (placements, orders, lengths, peaks, makespans, groups), the
        order in which `fuse_population` takes them, rewritten in place.
        """
        from graphopt.solvers.fusion import fuse_population

        graph = self.problem.graph
        failed = fuse_population(
            graph.arrays,
            graph.fusion_arrays,
            self.problem.machine.arrays,
            np.ascontiguousarray(keys[:, self.layout.fusion_priority :]),
            *buffers,
        )
        if failed >= 0:
            raise SolverError(f"fusion decoding made an invalid solution (member {failed})")

    def seeds(self, solution: Solution) -> list[np.ndarray]:
        """Chromosomes a search starts from for a known solution.

        Its keys (`encode`) and, when the problem may fuse and the solution does not, the same
        keys with every fusion priority at 1, which GO's decoder turns into every merge it can
        make: on the zoo's training graphs as good as Inductor-like greedy fusion, which the
        search then improves on.
        """
        keys = self.encode(solution)
        if not self.layout.fusion or solution.n_groups:
            return [keys]
        fused = keys.copy()
        fused[self.layout.fusion_priority :] = 1.0
        return [keys, fused]

    def encode(self, solution: Solution) -> np.ndarray:
        """Keys that decode to exactly `solution` (up to pins, which the decoder enforces).

        The placed device gets affinity 1 (others 0) and each event a priority falling with its
        position, so the highest-priority ready event is always the next one in the order.

        Returns:
            [n_genes] float64 chromosome.
        """
        layout = self.layout
        d = layout.n_devices
        if solution.n_devices != d or solution.placement.shape[0] != layout.n_ops:
            raise SolverError(
                f"cannot encode a solution for {solution.placement.shape[0]} ops on "
                f"{solution.n_devices} devices into a {layout.n_ops}-op, {d}-device problem"
            )
        keys = np.zeros(layout.size, dtype=np.float64)
        keys[np.arange(layout.n_ops) * d + solution.placement] = 1.0
        n_events = solution.order.shape[0]
        priority = 1.0 - (np.arange(n_events, dtype=np.float64) + 1.0) / (n_events + 1.0)
        codes = solution.order
        is_op = codes < layout.n_ops
        keys[layout.op_priority + codes[is_op]] = priority[is_op]
        keys[layout.transfer_priority + codes[~is_op] - layout.n_ops] = priority[~is_op]
        if layout.fusion and solution.fusion is not None:
            # Fused ops above the decoder's threshold, the rest below: the decoder regroups
            # them, not always into the same groups, so a fused seed is approximate.
            keys[layout.fusion_priority :] = np.where(solution.fusion >= 0, 0.75, 0.25)
        return keys


BUCKETS = 4096
"""Buckets of the decoder's ready set: one per value of bits 50-61 of a packed entry."""
BUCKET_SHIFT = 62 - 12


def code_bits(n_codes: int) -> int:
    """Bits that hold any event code below `n_codes` in a packed heap entry."""
    return max(int(n_codes).bit_length(), 1)


@numba.njit(cache=True, nogil=True, inline="always")
def pack(priority: float, event: int, bits: int) -> int:
    """One int64 that orders events as the decoder does: higher priority first, then lower code.

    The priority in [0, 1] is quantized to 2^(62 - bits) levels (at least 2^40 for any graph
    below 2^22 event codes; the top level still fits in 63 bits); the low bits hold the
    complement of the event code.
    """
    level = np.int64(min(max(priority, 0.0), 1.0) * ((1 << (62 - bits)) - 1))
    return (level << bits) | (((1 << bits) - 1) - event)


@numba.njit(cache=True, nogil=True, inline="always")
def _larger(first: None, second: None, u: int, v: int) -> bool:
    """The ready heap's order: packed entries order themselves, the larger first (`pack`)."""
    return u > v


@numba.njit(cache=True, nogil=True, inline="always")
def _enqueue(
    buckets: np.ndarray, leaves: np.ndarray, summary: int, heap: np.ndarray, size: int, entry: int
) -> tuple[int, int]:
    """Queues `entry`; returns the new (summary, size).

    A bucket per value of bits 50-61 of the entry (priority 1.0 rounds up to 2^62 and shares
    the top bucket) holds one entry; bit b & 63 of leaves[b >> 6] marks bucket b taken and bit
    w of `summary` marks leaves[w] non-zero, so the top bucket is two leading-zero counts away.
    An entry whose bucket is taken goes to the heap: rare for spread priorities, every entry
    when all keys are equal. Inlined, so that the arrays cost no reference counting in the
    decoder's loop.
    """
    slot = min(entry >> BUCKET_SHIFT, BUCKETS - 1)
    word = slot >> 6
    bit = np.int64(1) << (slot & 63)
    leaf = leaves[_u(word)]
    if leaf & bit == 0:
        buckets[_u(slot)] = entry
        leaves[_u(word)] = leaf | bit
        return summary | (np.int64(1) << word), size
    return summary, push(heap, None, _larger, None, None, size, entry)


@numba.njit(cache=True, nogil=True)
def decode_and_score(
    g: GraphArrays,
    m: MachineArrays,
    pins: np.ndarray,
    keys: np.ndarray,
    placement: np.ndarray,
    order: np.ndarray,
    peak: np.ndarray,
) -> tuple[int, float]:
    """Decodes one chromosome into `placement` and `order` and scores it (steps of _kernels).

    Returns:
        (number of events written to `order`, makespan); peaks are written into `peak`.
    """
    n_ops = placement.shape[0]
    n_tensors = g.tensor_size.shape[0]
    d = m.n_devices
    op_priority = n_ops * d
    transfer_priority = n_ops * (d + 1)

    for j in range(n_ops):
        if pins[_u(j)] >= 0:
            placement[_u(j)] = pins[_u(j)]
        else:
            best = 0
            for b in range(1, d):
                if keys[_u(j * d + b)] > keys[_u(j * d + best)]:
                    best = b
            placement[_u(j)] = best

    memory = np.zeros(d, dtype=np.int64)
    for t in range(n_tensors):
        if g.tensor_persistent[_u(t)]:
            memory[placement[_u(g.tensor_producer[_u(t)])]] += g.tensor_size[_u(t)]
    peak[:] = 0

    n_codes = n_ops + n_tensors * d
    bits = 1
    while (1 << bits) <= n_codes:
        bits += 1
    mask = (1 << bits) - 1
    # Queue entries of the ops, packed in one sequential pass over the keys (the walk below then
    # reads this compact array instead of scattered keys); a transfer's entry is packed when it
    # is queued, since most of the d copies of a tensor never happen.
    entries = np.empty(n_ops, dtype=np.int64)
    for j in range(n_ops):
        entries[_u(j)] = pack(keys[_u(op_priority + j)], j, bits)
    # The ready set: a bucket queue (see `_enqueue`) with the max-heap heap[:size] for the
    # entries whose bucket is taken. A pop takes the larger of the top bucket's entry and the
    # heap's root, so events leave in the same order as from one heap.
    buckets = np.empty(BUCKETS, dtype=np.int64)
    leaves = np.zeros(BUCKETS >> 6, dtype=np.int64)
    summary = np.int64(0)
    heap = np.empty(n_codes, dtype=np.int64)
    size = 0
    waiting = initial_waiting(g)
    for j in range(n_ops):
        if waiting[_u(j)] == 0:
            summary, size = _enqueue(buckets, leaves, summary, heap, size, entries[_u(j)])
    newly = np.empty(release_capacity(g), dtype=np.int64)

    # Per copy (tensor * d + device): readers left (counted when the producer runs) and the
    # time the copy is available.
    readers_left = np.zeros(n_tensors * d, dtype=np.int32)
    ready = np.empty(n_tensors * d, dtype=np.float64)
    device_free = np.zeros(d, dtype=np.float64)
    makespan = 0.0
    length = 0

    while True:
        if summary != 0:
            word = 63 - leading_zeros(summary)
            leaf = leaves[_u(word)]
            bit = 63 - leading_zeros(leaf)
            entry = buckets[_u((word << 6) | bit)]
            if size > 0 and heap[_u(0)] > entry:
                entry, size = pop(heap, None, _larger, None, None, size)
            else:
                leaf ^= np.int64(1) << bit
                leaves[_u(word)] = leaf
                if leaf == 0:
                    summary ^= np.int64(1) << word
        elif size > 0:
            entry, size = pop(heap, None, _larger, None, None, size)
        else:
            break
        event = mask - (entry & mask)
        order[_u(length)] = event
        length += 1
        if event < n_ops:
            # Queue what this op makes ready; the ready step also counts its outputs' readers
            # into readers_left, where the event step reads them.
            device = placement[_u(event)]
            count = release_op(g, event, device, d, placement, waiting, readers_left, newly)
            for i in range(count):
                code = newly[_u(i)]
                if code < n_ops:
                    entry = entries[_u(code)]
                else:
                    entry = pack(keys[_u(transfer_priority + code - n_ops)], code, bits)
                summary, size = _enqueue(buckets, leaves, summary, heap, size, entry)
            finish, current, _ = op_step(
                g,
                m,
                event,
                device,
                ready,
                readers_left,
                device_free,
                memory,
            )
            peak[_u(device)] = max(peak[_u(device)], current)
        else:
            base = event - n_ops
            t = base // d
            device = base - t * d
            home = placement[_u(g.tensor_producer[_u(t)])]
            finish, arrived, held = transfer_step(
                m,
                g.tensor_size[_u(t)],
                t,
                device,
                home,
                readers_left[_u(base)],  # counted when the producer ran
                ready,
                readers_left,
                device_free,
                memory,
            )
            peak[_u(device)] = max(peak[_u(device)], arrived)
            peak[_u(home)] = max(peak[_u(home)], held)
            count = release_copy(g, t, device, placement, waiting, newly)
            for i in range(count):
                summary, size = _enqueue(
                    buckets, leaves, summary, heap, size, entries[_u(newly[_u(i)])]
                )
        makespan = max(makespan, finish)
    return length, makespan


@numba.njit(cache=True, parallel=True)
def decode_population(
    g: GraphArrays,
    m: MachineArrays,
    pins: np.ndarray,
    keys: np.ndarray,
    placements: np.ndarray,
    orders: np.ndarray,
    lengths: np.ndarray,
    peaks: np.ndarray,
    makespans: np.ndarray,
) -> None:
    """Decodes and scores keys [B, n_genes] in parallel; outputs as `DecodedPopulation`."""
    for b in numba.prange(keys.shape[0]):
        length, makespan = decode_and_score(
            g,
            m,
            pins,
            keys[b],
            placements[b],
            orders[b],
            peaks[b],
        )
        lengths[b] = length
        makespans[b] = makespan
