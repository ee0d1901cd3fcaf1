"""numba scorer of solutions that recompute (docs/format.md section 15): the twin of `_reference`.

With recomputation an op may run more than once and a transfer may be repeated; every run makes
a new instance of each copy it writes, and every read is of the most recent instance on the
reader's device. Two passes over the schedule:

1. validity (sections 4 and 15, in the reference's first-violation order) and attribution: each
   read is counted against the instance it reads, which gives every instance its readers;
2. the walk of `_kernels.score_solution`, through the same `op_step` and `transfer_step`, with a
   copy's `readers_left` set to the new instance's readers when it is made.

At most one instance of a copy is resident at a time: an instance's reads all come before the
next instance of its copy is made (later reads are of the newer one), so it is freed by then.
That is why the per-copy state of `_kernels` serves instances unchanged. `op_step` holds every
run's graph-output copy to the end; only the last instance is held (section 15), so an earlier
one is given PINNED fewer readers, which `op_step`'s PINNED cancels. A transfer always has a
reader in `_kernels`; a repeated one may have none, and is freed here right after its step.
"""

from __future__ import annotations

import numba
import numpy as np

from graphopt.costmodels._kernels import PINNED, count_readers, op_step, transfer_step
from graphopt.costmodels.machine import MachineArrays
from graphopt.costmodels.validity import Violation
from graphopt.ir.arrays import GraphArrays, _u


@numba.njit(cache=True, nogil=True)
def _instance_readers(
    g: GraphArrays,
    placement: np.ndarray,
    order: np.ndarray,
    recomputable: np.ndarray,
    n_consumers: np.ndarray,
    d: int,
) -> tuple[int, int, int, np.ndarray, np.ndarray]:
    """Pass 1: the first violation, and the readers of every instance in the order made.

    Returns:
        (violation, where, detail, readers [n_instances] int64, last instance of each copy
        [n_tensors * d] int64, -1 where none was made).
    """
    n_ops = placement.shape[0]
    n_tensors = g.tensor_size.shape[0]
    n_codes = n_ops + n_tensors * d
    made = 0
    for position in range(order.shape[0]):
        code = order[_u(position)]
        if 0 <= code < n_ops:
            made += g.op_output_ptr[_u(code + 1)] - g.op_output_ptr[_u(code)]
        elif n_ops <= code < n_codes:
            made += 1
    readers = np.zeros(made, dtype=np.int64)
    current = np.full(n_tensors * d, -1, dtype=np.int64)
    runs = np.zeros(n_ops, dtype=np.int64)
    instance = 0
    for position in range(order.shape[0]):
        code = order[_u(position)]
        if code < 0 or code >= n_codes:
            return Violation.UNKNOWN_EVENT.value, position, -1, readers, current
        if code < n_ops:
            if runs[_u(code)] > 0 and not recomputable[_u(code)]:
                return Violation.OP_REPEATED.value, position, -1, readers, current
            runs[_u(code)] += 1
            device = placement[_u(code)]
            for e in range(g.op_input_ptr[_u(code)], g.op_input_ptr[_u(code + 1)]):
                t = g.op_input_tensor[_u(e)]
                read = current[_u(t * d + device)]
                if read < 0:
                    return Violation.INPUT_NOT_AVAILABLE.value, position, t, readers, current
                readers[_u(read)] += 1
            for e in range(g.op_output_ptr[_u(code)], g.op_output_ptr[_u(code + 1)]):
                current[_u(g.op_output_tensor[_u(e)] * d + device)] = instance
                instance += 1
        else:
            t = (code - n_ops) // d
            device = code - n_ops - t * d
            home = placement[_u(g.tensor_producer[_u(t)])]
            if device == home or n_consumers[_u(t * d + device)] == 0:
                return Violation.TRANSFER_NOT_IMPLIED.value, position, -1, readers, current
            read = current[_u(t * d + home)]
            if read < 0:
                return Violation.TRANSFER_BEFORE_PRODUCER.value, position, -1, readers, current
            readers[_u(read)] += 1
            current[_u(t * d + device)] = instance
            instance += 1
    for op in range(n_ops):
        if runs[_u(op)] == 0:
            return Violation.OP_MISSING.value, op, -1, readers, current
    return Violation.NONE.value, -1, -1, readers, current


@numba.njit(cache=True, nogil=True)
def score_remat(
    g: GraphArrays,
    m: MachineArrays,
    placement: np.ndarray,
    order: np.ndarray,
    recomputable: np.ndarray,
    peak: np.ndarray,
    trace: np.ndarray,
) -> tuple[int, int, int, float]:
    """Scores one solution under section 15; writes per-device peaks into `peak` (overwritten).

    `trace` is empty, or [n_events, 2] int64 that gets each step's memory on the event's device
    (a transfer's destination) in column 0 and, for a transfer, its source's in column 1 (left
    as it was for an op): where a search looks for the peak step.

    Returns:
        (violation, where, detail, makespan), as `_kernels.score_solution`.
    """
    n_ops = placement.shape[0]
    d = m.n_devices
    peak[:] = 0
    misplaced = np.flatnonzero((placement < 0) | (placement >= d))
    if misplaced.shape[0]:
        return Violation.PLACEMENT_OUT_OF_RANGE.value, misplaced[0], -1, 0.0
    n_consumers, _, memory = count_readers(g, placement, d)
    violation, where, detail, readers, last = _instance_readers(
        g, placement, order, recomputable, n_consumers, d
    )
    if violation != Violation.NONE.value:
        return violation, where, detail, 0.0

    copies = g.tensor_size.shape[0] * d
    readers_left = np.zeros(copies, dtype=np.int32)
    ready = np.full(copies, -1.0)
    device_free = np.zeros(d, dtype=np.float64)
    makespan = 0.0
    instance = 0
    for position in range(order.shape[0]):
        code = order[_u(position)]
        if code < n_ops:
            device = placement[_u(code)]
            for e in range(g.op_output_ptr[_u(code)], g.op_output_ptr[_u(code + 1)]):
                t = g.op_output_tensor[_u(e)]
                copy = t * d + device
                left = readers[_u(instance)]
                if g.tensor_output[_u(t)] and last[_u(copy)] != instance:
                    left -= PINNED
                readers_left[_u(copy)] = left
                instance += 1
            finish, current, _ = op_step(
                g, m, code, device, ready, readers_left, device_free, memory
            )
            if current > peak[_u(device)]:
                peak[_u(device)] = current
            if trace.shape[0]:
                trace[_u(position), 0] = current
        else:
            t = (code - n_ops) // d
            device = code - n_ops - t * d
            home = placement[_u(g.tensor_producer[_u(t)])]
            finish, arrived, held = transfer_step(
                m, g.tensor_size[_u(t)], t, device, home, readers[_u(instance)],
                ready, readers_left, device_free, memory,
            )  # fmt: skip
            if readers[_u(instance)] == 0:  # a repeated transfer nobody reads: gone after its step
                memory[_u(device)] -= g.tensor_size[_u(t)]
            instance += 1
            if arrived > peak[_u(device)]:
                peak[_u(device)] = arrived
            if held > peak[_u(home)]:
                peak[_u(home)] = held
            if trace.shape[0]:
                trace[_u(position), 0] = arrived
                trace[_u(position), 1] = held
        if finish > makespan:
            makespan = finish
    return Violation.NONE.value, -1, -1, makespan
