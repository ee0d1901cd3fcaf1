"""The ready set of a partial schedule: which events running one event makes ready.

Every walk that builds or checks a schedule event by event (the random-key decoder, the event
builder that inserts a placement's transfers into an op order, a GFlowNet environment stepping
partial schedules) keeps the same state and calls these steps, so the dependency rule of the
contract (section 2) is written once. An op is ready when each of its inputs has a copy on its
device: the home copy when the producer shares its device, else the transfer to its device,
which is ready as soon as the producer has run. The state is

- ``waiting[op]``: inputs of the op whose copy on its device is not there yet
  (`initial_waiting` starts it); the op is ready when it reaches 0;
- ``readers_left[t * d + device]``: readers of each copy of tensor t, counted when t's producer
  runs (the consumers on that device, plus on the home device one per transfer), so a copy
  with a count above 0 exists or has a ready transfer; the scorer's step (`costmodels._kernels`)
  then counts them down.

A walk that places ops as it goes (a GFlowNet adds (op, device) pairs and derives transfers
from the finished placement) asks for op readiness alone: it passes d = 1 and an all-zero
placement, so every consumer shares its producer's device and no transfer is made ready.

The steps write the events they make ready into ``newly`` (event codes, contract order: op j,
transfer n_ops + t * d + device) in the order of the graph's CSR arrays, and return how many;
callers that queue them by priority therefore queue them in a fixed order. They are inlined,
and their loops read and store unconditionally and let a select decide what counts: numba then
keeps its reference counting (of the `GraphArrays` tuple too) out of their callers' loops,
which an array used only inside a branch prevents; the branch-free loop also made the random-key
decoder 1.12x faster than its branching one (`bench_brkga.py`).
"""

from __future__ import annotations

import numba
import numpy as np

from graphopt.ir.arrays import GraphArrays, _u


@numba.njit(cache=True, nogil=True, inline="always")
def initial_waiting(g: GraphArrays) -> np.ndarray:
    """[n_ops] int32: each op's number of inputs, which the release steps count down.

    Inlined into the kernels that call it: a cached kernel returning an array, loaded first as
    another kernel's callee, cannot then be called from Python (numba fails to box the array:
    "NRT_adapt_ndarray_to_python: descr is NULL"), and the environments call it from both.
    """
    n_ops = g.op_input_ptr.shape[0] - 1
    waiting = np.empty(n_ops, dtype=np.int32)
    for j in range(n_ops):
        waiting[j] = g.op_input_ptr[j + 1] - g.op_input_ptr[j]
    return waiting


@numba.njit(cache=True, nogil=True, inline="always")
def release_capacity(g: GraphArrays) -> int:
    """Size of a ``newly`` buffer: what one step makes ready, plus the slot it writes past."""
    return g.consumer_op.shape[0] + 1


@numba.njit(cache=True, nogil=True, inline="always")
def release_op(
    g: GraphArrays,
    op: int,
    device: int,
    d: int,
    placement: np.ndarray,
    waiting: np.ndarray,
    readers_left: np.ndarray,
    newly: np.ndarray,
) -> int:
    """Runs `op` (placed on `device`): counts its outputs' readers and writes what it makes ready.

    Consumers on `device` get one input closer to ready (those it completes go to `newly`);
    the first consumer on each other device makes that transfer ready (its code goes to
    `newly`). Returns the number of events written.
    """
    n_ops = placement.shape[0]
    count = 0
    for e in range(g.op_output_ptr[_u(op)], g.op_output_ptr[_u(op + 1)]):
        t = g.op_output_tensor[_u(e)]
        base = t * d
        readers = 0
        for c in range(g.consumer_ptr[_u(t)], g.consumer_ptr[_u(t + 1)]):
            consumer = g.consumer_op[_u(c)]
            target = placement[_u(consumer)]
            copy = base + target
            here = target == device
            left = waiting[_u(consumer)] - here
            waiting[_u(consumer)] = left
            first = readers_left[_u(copy)] == 0
            readers_left[_u(copy)] += 1  # the home copy's count is overwritten below
            newly[_u(count)] = consumer if here else n_ops + copy
            made = left == 0 if here else first
            count += made
            readers += here or first
        readers_left[_u(base + device)] = readers
    return count


@numba.njit(cache=True, nogil=True, inline="always")
def release_copy(
    g: GraphArrays,
    t: int,
    device: int,
    placement: np.ndarray,
    waiting: np.ndarray,
    newly: np.ndarray,
) -> int:
    """Runs the transfer of tensor `t` to `device`: writes the consumers there it makes ready.

    Returns the number of ops written to `newly`.
    """
    count = 0
    for c in range(g.consumer_ptr[_u(t)], g.consumer_ptr[_u(t + 1)]):
        consumer = g.consumer_op[_u(c)]
        here = placement[_u(consumer)] == device
        left = waiting[_u(consumer)] - here
        waiting[_u(consumer)] = left
        newly[_u(count)] = consumer
        count += here and left == 0
    return count


@numba.njit(cache=True, nogil=True, inline="always")
def inputs_run(
    g: GraphArrays,
    op: int,
    done: np.ndarray,
) -> bool:
    """Whether the producer of each of `op`'s inputs has run (``done[producer]`` set).

    The same rule asked the other way round, for walks that check a given order: asking each
    op once, at its turn, reads its inputs only, where counting down readiness also walks
    every output's consumers. (The copy on the op's device then exists or can be sent.)
    """
    for e in range(g.op_input_ptr[_u(op)], g.op_input_ptr[_u(op + 1)]):
        if not done[_u(g.tensor_producer[_u(g.op_input_tensor[_u(e)])])]:
            return False
    return True


@numba.njit(cache=True, nogil=True, inline="always")
def order_window(
    g: GraphArrays,
    op: int,
    device: int,
    d: int,
    placement: np.ndarray,
    position: np.ndarray,
    n_events: int,
) -> tuple[int, int]:
    """The steps of a full order between which `op` (on `device`) may run.

    The same rule, for walks that move an op within an order (local search) rather than
    build one.

    ``position[code]`` is each event's step (-1 for a transfer the placement does not make).
    Returns (low, high): the step of the last event that makes an input available on `device`
    (-1 when none) and of the first event that reads an output there or sends it (`n_events`
    when none); the op may go anywhere strictly between them.
    """
    n_ops = placement.shape[0]
    low = -1
    for e in range(g.op_input_ptr[_u(op)], g.op_input_ptr[_u(op + 1)]):
        t = g.op_input_tensor[_u(e)]
        producer = g.tensor_producer[_u(t)]
        if placement[_u(producer)] == device:
            low = max(low, position[_u(producer)])
        else:
            low = max(low, position[_u(n_ops + t * d + device)])
    high = n_events
    for e in range(g.op_output_ptr[_u(op)], g.op_output_ptr[_u(op + 1)]):
        t = g.op_output_tensor[_u(e)]
        for c in range(g.consumer_ptr[_u(t)], g.consumer_ptr[_u(t + 1)]):
            u = g.consumer_op[_u(c)]
            if placement[_u(u)] == device:
                high = min(high, position[_u(u)])
        for x in range(d):
            p = position[_u(n_ops + t * d + x)]
            if p >= 0:
                high = min(high, p)
    return low, high
