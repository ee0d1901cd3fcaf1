"""numba kernels: validity, peak memory and makespan of array-encoded solutions in one pass.

The twin of `_reference.py` (same rules, same first-violation order), linear in events + edges.
Memory of a device only rises at steps that involve it (an op placed on it, a transfer from or to
it), so peaks are measured there; copies carry a count of their remaining readers and are freed
when it reaches zero. Per-copy state lives in flat arrays indexed by ``tensor * d + device``.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def score_solution(
    tensor_size: np.ndarray,
    tensor_producer: np.ndarray,
    tensor_persistent: np.ndarray,
    consumer_ptr: np.ndarray,
    consumer_op: np.ndarray,
    op_input_ptr: np.ndarray,
    op_input_tensor: np.ndarray,
    op_output_ptr: np.ndarray,
    op_output_tensor: np.ndarray,
    op_runtime: np.ndarray,
    op_temp_memory: np.ndarray,
    placement: np.ndarray,
    order: np.ndarray,
    n_devices: int,
    latency: float,
    bandwidth: float,
    sync: bool,
    peak: np.ndarray,
) -> tuple[int, int, int, float]:
    """Scores one solution; writes per-device peaks into `peak` ([n_devices], overwritten).

    Returns:
        (violation, where, detail, makespan): violation 0 when valid (see `validity.Violation`).
    """
    n_ops = placement.shape[0]
    n_tensors = tensor_size.shape[0]
    d = n_devices
    peak[:] = 0
    for j in range(n_ops):
        if placement[j] < 0 or placement[j] >= d:
            return 1, j, -1, 0.0

    # Consumers per (tensor, device) and transfers per tensor, from the placement.
    n_consumers = np.zeros(n_tensors * d, dtype=np.int32)
    n_transfers = np.zeros(n_tensors, dtype=np.int32)
    total_transfers = 0
    for t in range(n_tensors):
        home = placement[tensor_producer[t]]
        for e in range(consumer_ptr[t], consumer_ptr[t + 1]):
            device = placement[consumer_op[e]]
            copy = t * d + device
            if n_consumers[copy] == 0 and device != home:
                n_transfers[t] += 1
                total_transfers += 1
            n_consumers[copy] += 1

    made = np.zeros(n_tensors * d, dtype=np.uint8)  # copy made resident at some step
    readers_left = np.zeros(n_tensors * d, dtype=np.int32)
    ready = np.zeros(n_tensors * d, dtype=np.float64)  # time the copy is available
    op_done = np.zeros(n_ops, dtype=np.uint8)
    memory = np.zeros(d, dtype=np.int64)
    device_free = np.zeros(d, dtype=np.float64)
    for t in range(n_tensors):
        if tensor_persistent[t]:
            memory[placement[tensor_producer[t]]] += tensor_size[t]
    makespan = 0.0
    transfers_done = 0
    n_codes = n_ops + n_tensors * d

    for position in range(order.shape[0]):
        code = order[position]
        if code < 0 or code >= n_codes:
            return 2, position, -1, 0.0
        if code < n_ops:
            j = code
            if op_done[j]:
                return 3, position, -1, 0.0
            device = placement[j]
            start = device_free[device]
            for e in range(op_input_ptr[j], op_input_ptr[j + 1]):
                copy = op_input_tensor[e] * d + device
                if made[copy] == 0:
                    return 7, position, op_input_tensor[e], 0.0
                if ready[copy] > start:
                    start = ready[copy]
            finish = start + op_runtime[j]
            device_free[device] = finish
            if finish > makespan:
                makespan = finish
            op_done[j] = 1
            for e in range(op_output_ptr[j], op_output_ptr[j + 1]):
                t = op_output_tensor[e]
                copy = t * d + device
                made[copy] = 1
                ready[copy] = finish
                readers_left[copy] = n_consumers[copy] + n_transfers[t]
                if not tensor_persistent[t]:
                    memory[device] += tensor_size[t]
            current = memory[device] + op_temp_memory[j]
            if current > peak[device]:
                peak[device] = current
            for e in range(op_input_ptr[j], op_input_ptr[j + 1]):
                t = op_input_tensor[e]
                copy = t * d + device
                readers_left[copy] -= 1
                if readers_left[copy] == 0 and not (
                    tensor_persistent[t] and placement[tensor_producer[t]] == device
                ):
                    memory[device] -= tensor_size[t]
            for e in range(op_output_ptr[j], op_output_ptr[j + 1]):
                t = op_output_tensor[e]
                if readers_left[t * d + device] == 0 and not tensor_persistent[t]:
                    memory[device] -= tensor_size[t]
        else:
            t = (code - n_ops) // d
            device = (code - n_ops) % d
            home = placement[tensor_producer[t]]
            copy = t * d + device
            if device == home or n_consumers[copy] == 0:
                return 4, position, -1, 0.0
            if made[copy]:
                return 5, position, -1, 0.0
            source = t * d + home
            if made[source] == 0:
                return 6, position, -1, 0.0
            duration = latency + tensor_size[t] / bandwidth
            if sync:
                start = device_free[device]
                if ready[source] > start:
                    start = ready[source]
                finish = start + duration
                device_free[device] = finish
            else:
                finish = ready[source] + duration
            if finish > makespan:
                makespan = finish
            made[copy] = 1
            ready[copy] = finish
            readers_left[copy] = n_consumers[copy]
            memory[device] += tensor_size[t]
            if memory[device] > peak[device]:
                peak[device] = memory[device]
            if memory[home] > peak[home]:
                peak[home] = memory[home]
            readers_left[source] -= 1
            if readers_left[source] == 0 and not tensor_persistent[t]:
                memory[home] -= tensor_size[t]
            transfers_done += 1

    for j in range(n_ops):
        if op_done[j] == 0:
            return 8, j, -1, 0.0
    if transfers_done != total_transfers:
        for t in range(n_tensors):
            home = placement[tensor_producer[t]]
            for device in range(d):
                copy = t * d + device
                if device != home and n_consumers[copy] > 0 and made[copy] == 0:
                    return 9, n_ops + copy, -1, 0.0
    return 0, -1, -1, makespan


@numba.njit(cache=True, parallel=True)
def score_population(
    tensor_size: np.ndarray,
    tensor_producer: np.ndarray,
    tensor_persistent: np.ndarray,
    consumer_ptr: np.ndarray,
    consumer_op: np.ndarray,
    op_input_ptr: np.ndarray,
    op_input_tensor: np.ndarray,
    op_output_ptr: np.ndarray,
    op_output_tensor: np.ndarray,
    op_runtime: np.ndarray,
    op_temp_memory: np.ndarray,
    placements: np.ndarray,
    orders: np.ndarray,
    lengths: np.ndarray,
    n_devices: int,
    latency: float,
    bandwidth: float,
    sync: bool,
    peaks: np.ndarray,
    status: np.ndarray,
    makespans: np.ndarray,
) -> None:
    """Scores a population in parallel over its members.

    Shapes:
        placements: [B, n_ops]; orders: [B, L] padded rows, of which the first lengths[b] count.
        peaks: [B, n_devices] out; status: [B, 3] out (violation, where, detail); makespans: [B] out.
    """
    for b in numba.prange(placements.shape[0]):
        violation, where, detail, makespan = score_solution(
            tensor_size,
            tensor_producer,
            tensor_persistent,
            consumer_ptr,
            consumer_op,
            op_input_ptr,
            op_input_tensor,
            op_output_ptr,
            op_output_tensor,
            op_runtime,
            op_temp_memory,
            placements[b],
            orders[b, : lengths[b]],
            n_devices,
            latency,
            bandwidth,
            sync,
            peaks[b],
        )
        status[b, 0] = violation
        status[b, 1] = where
        status[b, 2] = detail
        makespans[b] = makespan
