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
"""

from __future__ import annotations

import numba
import numpy as np

from graphopt.costmodels.machine import MachineArrays
from graphopt.ir.arrays import GraphArrays

PINNED = 1 << 30
"""Extra readers given to a persistent tensor's home copy: it is never freed (section 4)."""


_u = np.uint64
"""Array indices are cast to unsigned so that numba skips negative-index wraparound; shared with
the random-key decoder's kernel. Only for indices already known to be in range."""


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
        (violation, where, detail, makespan): violation 0 when valid (see `validity.Violation`).
    """
    n_ops = placement.shape[0]
    n_tensors = g.tensor_size.shape[0]
    d = m.n_devices
    peak[:] = 0
    for j in range(n_ops):
        if placement[_u(j)] < 0 or placement[_u(j)] >= d:
            return 1, j, -1, 0.0

    # Readers of each copy: its consumers on that device, plus the transfers for the home copy.
    # A persistent home copy gets PINNED extra readers so that it is never freed.
    n_consumers = np.zeros(n_tensors * d, dtype=np.int32)
    home_readers = np.empty(n_tensors, dtype=np.int32)
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
        home_readers[_u(t)] = n_consumers[_u(base + home)] + n_transfers
        if g.tensor_persistent[_u(t)]:
            home_readers[_u(t)] += PINNED
            memory[_u(home)] += g.tensor_size[_u(t)]

    readers_left = np.empty(n_tensors * d, dtype=np.int32)
    ready = np.full(n_tensors * d, -1.0)  # time the copy is available; < 0 until it exists
    op_done = np.zeros(n_ops, dtype=np.uint8)
    device_free = np.zeros(d, dtype=np.float64)
    makespan = 0.0
    n_codes = n_ops + n_tensors * d

    for position in range(order.shape[0]):
        code = order[_u(position)]
        if code < 0 or code >= n_codes:
            return 2, position, -1, 0.0
        if code < n_ops:
            if op_done[_u(code)]:
                return 3, position, -1, 0.0
            op_done[_u(code)] = 1
            device = placement[_u(code)]
            start = device_free[_u(device)]
            freed = 0  # bytes freed right after this step: inputs and outputs without readers
            for e in range(g.op_input_ptr[_u(code)], g.op_input_ptr[_u(code + 1)]):
                t = g.op_input_tensor[_u(e)]
                copy = t * d + device
                available = ready[_u(copy)]
                if available < 0.0:
                    return 7, position, t, 0.0
                if available > start:
                    start = available
                left = readers_left[_u(copy)] - 1
                readers_left[_u(copy)] = left
                if left == 0:
                    freed += g.tensor_size[_u(t)]
            finish = start + g.op_runtime[_u(code)]
            device_free[_u(device)] = finish
            if finish > makespan:
                makespan = finish
            resident = memory[_u(device)]
            for e in range(g.op_output_ptr[_u(code)], g.op_output_ptr[_u(code + 1)]):
                t = g.op_output_tensor[_u(e)]
                copy = t * d + device
                ready[_u(copy)] = finish
                left = home_readers[_u(t)]
                readers_left[_u(copy)] = left
                if not g.tensor_persistent[_u(t)]:
                    resident += g.tensor_size[_u(t)]
                if left == 0:
                    freed += g.tensor_size[_u(t)]
            current = resident + g.op_temp_memory[_u(code)]
            if current > peak[_u(device)]:
                peak[_u(device)] = current
            memory[_u(device)] = resident - freed
        else:
            t = (code - n_ops) // d
            device = code - n_ops - t * d
            home = placement[_u(g.tensor_producer[_u(t)])]
            copy = t * d + device
            if device == home or n_consumers[_u(copy)] == 0:
                return 4, position, -1, 0.0
            if ready[_u(copy)] >= 0.0:
                return 5, position, -1, 0.0
            source = t * d + home
            produced = ready[_u(source)]
            if produced < 0.0:
                return 6, position, -1, 0.0
            duration = m.latency + g.tensor_size[_u(t)] / m.bandwidth
            if m.sync:
                start = device_free[_u(device)]
                if produced > start:
                    start = produced
                finish = start + duration
                device_free[_u(device)] = finish
            else:
                finish = produced + duration
            if finish > makespan:
                makespan = finish
            ready[_u(copy)] = finish
            readers_left[_u(copy)] = n_consumers[_u(copy)]
            memory[_u(device)] += g.tensor_size[_u(t)]
            if memory[_u(device)] > peak[_u(device)]:
                peak[_u(device)] = memory[_u(device)]
            if memory[_u(home)] > peak[_u(home)]:
                peak[_u(home)] = memory[_u(home)]
            left = readers_left[_u(source)] - 1
            readers_left[_u(source)] = left
            if left == 0:
                memory[_u(home)] -= g.tensor_size[_u(t)]

    for j in range(n_ops):
        if op_done[_u(j)] == 0:
            return 8, j, -1, 0.0
    return 0, -1, -1, makespan


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
