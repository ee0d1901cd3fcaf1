"""numba kernels: validity, peak memory and makespan of array-encoded solutions in one pass.

The twin of `_reference.py` (same rules, same first-violation order), linear in events + edges.
Memory of a device only rises at steps that involve it (an op placed on it, a transfer from or to
it), so peaks are measured there; copies carry a count of their remaining readers and are freed
when it reaches zero. Per-copy state lives in flat arrays indexed by ``tensor * d + device``.
Each edge is touched twice per evaluation (counting readers, then reading the input), which is
what keeps a 1,000-op evaluation in the tens of microseconds. Indices are cast to unsigned
(`_u`) because numba otherwise guards every access against negative-index wraparound, which
cost about a quarter of the time; the rules checked first (valid devices and event codes) keep
every index in range.

What one event does to the state (clocks, memory, readers left, ready times) is written once, in
`op_step` and `transfer_step`, which this scorer, the random-key decoder and the incremental
evaluator's profiles all call; each caller keeps only what is its own (checks, queueing, peaks).
The checks around them stay written out in each walk (this one, and `_fusion`'s with groups):
moved into inlined functions, a transfer's checks made this walk 1.8x as slow (the arrays'
reference counting is no longer pruned in the loop) and the end-of-walk check 1.1x.

Violation codes are `validity.Violation`'s, returned as their int values (`.value`): a returned
IntEnum member costs numba about 2 us to box for Python, a few percent of a 1,000-op evaluation.
"""

from __future__ import annotations

import numba
import numpy as np

from graphopt.costmodels.machine import MachineArrays
from graphopt.costmodels.validity import Violation
from graphopt.ir.arrays import GraphArrays, _u

PINNED = 1 << 30
"""Extra readers given to a persistent tensor's or a graph output's home copy: it is never
freed (section 5)."""


@numba.njit(cache=True, nogil=True, inline="always")
def op_step(
    g: GraphArrays,
    m: MachineArrays,
    op: int,
    device: int,
    ready: np.ndarray,
    readers_left: np.ndarray,
    device_free: np.ndarray,
    memory: np.ndarray,
) -> tuple[float, int, float]:
    """Runs `op` on `device`: the one place the scorer, the decoder and the profiles apply an op.

    It starts when the device is free and its inputs' copies there are ready, and releases each
    input copy whose last reader it is. Its outputs' home copies become ready at its finish with
    the readers the caller wrote into `readers_left` (consumers there plus one per transfer),
    and a persistent one gets PINNED more, so it is never freed and its bytes (counted from the
    start) are not added; a graph output's copy also gets PINNED more, after its bytes are added.
    Inputs and outputs without readers leave right after the step.

    Inlined into each walk's loop, where numba prunes its reference counting as long as no
    array's only use sits in a branch or before an early return (`transfer_step` stores
    unconditionally for this); taking the `GraphArrays` tuple rather than its fields costs
    nothing measurable. The branches here stay as they are: reading the output's size before
    them made fresh solutions 3% faster but a repeated one 4% slower. It does not stop at a
    missing input (a branch there made the decoder's loop a quarter slower): it returns the
    earliest ready time of the inputs, negative when one is missing, for the scorer to check;
    the decoder never needs it and LLVM drops it there.

    Returns:
        (finish, memory of the device while the op runs, earliest ready time of its inputs'
        copies); when that is negative the rest is meaningless and the state half updated.
    """
    d = m.n_devices
    start = device_free[_u(device)]
    earliest = np.inf
    freed = 0
    for e in range(g.op_input_ptr[_u(op)], g.op_input_ptr[_u(op + 1)]):
        t = g.op_input_tensor[_u(e)]
        copy = t * d + device
        available = ready[_u(copy)]
        earliest = min(earliest, available)
        if available > start:
            start = available
        left = readers_left[_u(copy)] - 1
        readers_left[_u(copy)] = left
        if left == 0:
            freed += g.tensor_size[_u(t)]
    finish = start + g.op_runtime[_u(op)]
    device_free[_u(device)] = finish
    resident = memory[_u(device)]
    for e in range(g.op_output_ptr[_u(op)], g.op_output_ptr[_u(op + 1)]):
        t = g.op_output_tensor[_u(e)]
        copy = t * d + device
        ready[_u(copy)] = finish
        left = readers_left[_u(copy)]
        if g.tensor_persistent[_u(t)]:
            left += PINNED
        else:
            resident += g.tensor_size[_u(t)]
            if g.tensor_output[_u(t)]:
                left += PINNED
        readers_left[_u(copy)] = left
        if left == 0:
            freed += g.tensor_size[_u(t)]
    memory[_u(device)] = resident - freed
    return finish, resident + g.op_temp_memory[_u(op)], earliest


@numba.njit(cache=True, nogil=True, inline="always")
def transfer_step(
    m: MachineArrays,
    size: int,
    t: int,
    device: int,
    home: int,
    readers: int,
    ready: np.ndarray,
    readers_left: np.ndarray,
    device_free: np.ndarray,
    memory: np.ndarray,
) -> tuple[float, int, int]:
    """Copies tensor `t` from its `home` device to `device`, which has `readers` consumers of it.

    The transfer starts when the home copy is ready (and, in sync mode, when the destination is
    free, which it then occupies); the new copy is resident from the step on, and the home copy
    is released if this transfer was its last reader. Inlined like `op_step` (see there why the
    stores are unconditional), and given the tensor's `size` rather than the graph.

    Returns:
        (finish, memory of `device` with the copy, memory of `home` before its release).
    """
    d = m.n_devices
    source = t * d + home
    copy = t * d + device
    produced = ready[_u(source)]
    duration = m.latency + size / m.bandwidth
    free = device_free[_u(device)]
    start = produced
    if m.sync and free > produced:
        start = free
    finish = start + duration
    device_free[_u(device)] = finish if m.sync else free
    ready[_u(copy)] = finish
    readers_left[_u(copy)] = readers
    arrived = memory[_u(device)] + size
    memory[_u(device)] = arrived
    held = memory[_u(home)]
    left = readers_left[_u(source)] - 1
    readers_left[_u(source)] = left
    memory[_u(home)] = held - size if left == 0 else held
    return finish, arrived, held


@numba.njit(cache=True, nogil=True)
def count_readers(
    g: GraphArrays, placement: np.ndarray, d: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Readers of each copy and the persistent bytes per device, before the walk.

    A copy's readers are its consumers on that device, plus, for the home copy, the transfers,
    whose count `op_step` finds in readers_left.

    Returns:
        (consumers per copy [n_tensors * d], readers of each home copy [n_tensors * d], set
        only at home copies; persistent bytes per device [d]).
    """
    n_tensors = g.tensor_size.shape[0]
    n_consumers = np.zeros(n_tensors * d, dtype=np.int32)
    readers_left = np.empty(n_tensors * d, dtype=np.int32)
    memory = np.zeros(d, dtype=np.int64)
    for t in range(n_tensors):
        home = placement[_u(g.tensor_producer[_u(t)])]
        base = t * d
        n_transfers = 0
        for e in range(g.consumer_ptr[_u(t)], g.consumer_ptr[_u(t + 1)]):
            device = placement[_u(g.consumer_op[_u(e)])]
            count = n_consumers[_u(base + device)]
            n_transfers += (count == 0) & (device != home)
            n_consumers[_u(base + device)] = count + 1
        readers_left[_u(base + home)] = n_consumers[_u(base + home)] + n_transfers
        if g.tensor_persistent[_u(t)]:
            memory[_u(home)] += g.tensor_size[_u(t)]
    return n_consumers, readers_left, memory


@numba.njit(cache=True, nogil=True)
def score_solution(
    g: GraphArrays,
    m: MachineArrays,
    placement: np.ndarray,
    order: np.ndarray,
    peak: np.ndarray,
) -> tuple[int, int, int, float]:
    """Scores one solution; writes per-device peaks into `peak` ([n_devices], overwritten).

    Returns:
        (violation, where, detail, makespan): violation `Violation.NONE` (0) when valid.
    """
    n_ops = placement.shape[0]
    n_tensors = g.tensor_size.shape[0]
    d = m.n_devices
    peak[:] = 0
    for j in range(n_ops):
        if placement[_u(j)] < 0 or placement[_u(j)] >= d:
            return Violation.PLACEMENT_OUT_OF_RANGE.value, j, -1, 0.0

    n_consumers, readers_left, memory = count_readers(g, placement, d)
    ready = np.full(n_tensors * d, -1.0)  # time the copy is available; < 0 until it exists
    op_done = np.zeros(n_ops, dtype=np.uint8)
    device_free = np.zeros(d, dtype=np.float64)
    makespan = 0.0
    n_codes = n_ops + n_tensors * d

    for position in range(order.shape[0]):
        code = order[_u(position)]
        if code < 0 or code >= n_codes:
            return Violation.UNKNOWN_EVENT.value, position, -1, 0.0
        if code < n_ops:
            if op_done[_u(code)]:
                return Violation.OP_REPEATED.value, position, -1, 0.0
            op_done[_u(code)] = 1
            device = placement[_u(code)]
            finish, current, earliest = op_step(
                g,
                m,
                code,
                device,
                ready,
                readers_left,
                device_free,
                memory,
            )
            if earliest < 0.0:
                for e in range(g.op_input_ptr[_u(code)], g.op_input_ptr[_u(code + 1)]):
                    t = g.op_input_tensor[_u(e)]
                    if ready[_u(t * d + device)] < 0.0:
                        return Violation.INPUT_NOT_AVAILABLE.value, position, t, 0.0
            if current > peak[_u(device)]:
                peak[_u(device)] = current
        else:
            t = (code - n_ops) // d
            device = code - n_ops - t * d
            home = placement[_u(g.tensor_producer[_u(t)])]
            copy = t * d + device
            if device == home or n_consumers[_u(copy)] == 0:
                return Violation.TRANSFER_NOT_IMPLIED.value, position, -1, 0.0
            if ready[_u(copy)] >= 0.0:
                return Violation.TRANSFER_REPEATED.value, position, -1, 0.0
            if ready[_u(t * d + home)] < 0.0:
                return Violation.TRANSFER_BEFORE_PRODUCER.value, position, -1, 0.0
            finish, arrived, held = transfer_step(
                m,
                g.tensor_size[_u(t)],
                t,
                device,
                home,
                n_consumers[_u(copy)],
                ready,
                readers_left,
                device_free,
                memory,
            )
            if arrived > peak[_u(device)]:
                peak[_u(device)] = arrived
            if held > peak[_u(home)]:
                peak[_u(home)] = held
        if finish > makespan:
            makespan = finish

    for j in range(n_ops):
        if op_done[_u(j)] == 0:
            return Violation.OP_MISSING.value, j, -1, 0.0
    return Violation.NONE.value, -1, -1, makespan


@numba.njit(cache=True, parallel=True)
def score_population(
    g: GraphArrays,
    m: MachineArrays,
    placements: np.ndarray,
    orders: np.ndarray,
    lengths: np.ndarray,
    peaks: np.ndarray,
    status: np.ndarray,
    makespans: np.ndarray,
) -> None:
    """Scores a population in parallel over its members.

    Shapes:
        placements: [B, n_ops]; orders: [B, L] padded rows, of which the first lengths[b] count.
        peaks: [B, n_devices] out; status: [B, 3] out (violation, where, detail);
        makespans: [B] out.
    """
    for b in numba.prange(placements.shape[0]):
        violation, where, detail, makespan = score_solution(
            g,
            m,
            placements[b],
            orders[b, : lengths[b]],
            peaks[b],
        )
        status[b, 0] = violation
        status[b, 1] = where
        status[b, 2] = detail
        makespans[b] = makespan
