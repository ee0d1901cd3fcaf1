"""Lower bounds every solution obeys, quoted next to search results (and used to stop early).

Peak memory (docs/format.md section 5). At an op's step its distinct inputs, its outputs and its
scratch memory are all resident on its device, on any placement (`op_step_memory`). Persistent
tensors add more: the device x running op j also holds, at j's step and at every other, all the
persistent bytes P_x produced on x. So x's memory at j's step is at least
max(P_x, B_j) + A_j, where B_j is j's persistent input and output bytes (resident on x as
originals or copies) and A_j the rest of j's step. The other d - 1 devices hold the remaining
P - P_x persistent bytes, so one of them holds at least (P - P_x) / (d - 1). Whatever P_x is,
the peak is at least min over P_x of the larger of the two, which `peak_memory_lower_bound`
takes for every op j, and the largest over j. With d = 1 it is P + A_j: every persistent byte
plus an op's activations, which the one-device bound used to leave out.

Values that must outlive j's step count too (`forced_live_bytes`): a tensor produced by an
ancestor of j and read by a descendant of j is made before j's step and read after it, so at
j's step some copy of it is resident: its producer's copy until its last reader there, and a
transferred copy from its transfer to its last reader on the other device; one of the two spans
j's step whichever comes first. A graph output produced by an ancestor of j and not read by j
counts too, read later or not: its producer's copy is held from its step to the last (section
4). These F_j bytes sit on some device, so they join the P bytes shared among the devices
above. On a training step, j = the loss holds every activation saved for the backward pass,
which the bound without them missed by half or more.

At the last step every persistent byte and every graph output's producer copy is resident, so
some device holds at least (P + O) / d, O being the graph outputs' bytes.

Makespan (section 6): no schedule beats the critical path, nor the total runtime spread
perfectly over the devices.

Fusion groups (section 13) can beat both: `fused_*` bounds hold for fused solutions too.
"""

from __future__ import annotations

import numba
import numpy as np

from graphopt.costmodels.machine import Machine
from graphopt.ir.arrays import GraphArrays
from graphopt.ir.graph import FUSION_CLASSES, Graph


def op_step_memory(graph: Graph) -> np.ndarray:
    """[n_ops] bytes resident at each op's step whatever the schedule: inputs + outputs + temp."""
    memory = graph.op_temp_memory.astype(np.int64).copy()
    np.add.at(memory, graph.tensor_producer, graph.tensor_size)
    np.add.at(memory, graph.consumer_op, graph.tensor_size[graph.edge_tensor])
    return memory


def _persistent_step_bytes(graph: Graph) -> np.ndarray:
    """[n_ops] persistent bytes among each op's inputs and outputs (B_j of the docstring)."""
    persistent = np.where(graph.tensor_persistent, graph.tensor_size, 0).astype(np.int64)
    memory = np.zeros(graph.n_ops, dtype=np.int64)
    np.add.at(memory, graph.tensor_producer, persistent)
    np.add.at(memory, graph.consumer_op, persistent[graph.edge_tensor])
    return memory


FORCED_LIVE_MAX_OPS = 16_384
"""Largest graph whose forced live bytes are counted: two n x n bit matrices (64 MiB at this
size) find every op's ancestors and descendants. Larger graphs get the bound without them."""


@numba.njit(cache=True)
def _forced_live(
    ancestors: np.ndarray,
    descendants: np.ndarray,
    g: GraphArrays,
) -> np.ndarray:
    """[n_ops] int64 F_j: bytes of non-persistent tensors made before and read after each op.

    A graph output made before an op counts whether read after it or not (held to the end).
    """
    n_ops, words = descendants.shape
    forced = np.zeros(n_ops, dtype=np.int64)
    between = np.zeros(words, dtype=np.uint64)
    for tensor in range(g.tensor_size.shape[0]):
        if g.tensor_persistent[tensor] or g.tensor_size[tensor] == 0:
            continue
        producer = g.tensor_producer[tensor]
        if g.tensor_output[tensor]:
            between[:] = ~np.uint64(0)
        else:
            between[:] = 0
            for k in range(g.consumer_ptr[tensor], g.consumer_ptr[tensor + 1]):
                consumer = g.consumer_op[k]
                for w in range(words):
                    between[w] |= ancestors[consumer, w]
        for k in range(g.consumer_ptr[tensor], g.consumer_ptr[tensor + 1]):
            consumer = g.consumer_op[k]
            between[consumer >> 6] &= ~(np.uint64(1) << np.uint64(consumer & 63))
        for w in range(words):
            word = between[w] & descendants[producer, w]
            bit = 0
            while word:
                if word & np.uint64(1):
                    forced[w * 64 + bit] += g.tensor_size[tensor]
                word >>= np.uint64(1)
                bit += 1
    return forced


def forced_live_bytes(graph: Graph) -> np.ndarray:
    """[n_ops] F_j of the module docstring; zeros above `FORCED_LIVE_MAX_OPS` ops."""
    if graph.n_ops > FORCED_LIVE_MAX_OPS or graph.n_ops == 0:
        return np.zeros(graph.n_ops, dtype=np.int64)
    return _forced_live(
        graph.reachable_bits(forward=False),
        graph.reachable_bits(forward=True),
        graph.arrays,
    )


def peak_memory_lower_bound(graph: Graph, n_devices: int = 1, recompute: bool = False) -> int:
    """Bytes that some device holds at some step in every solution on `n_devices` devices.

    See the module docstring; never below the largest `op_step_memory`. With `recompute` it
    holds for solutions that recompute (section 15) too: the forced-live bytes F_j are left
    out, since a tensor made before j's step and read after it may be freed and made again.
    """
    if graph.n_ops == 0:
        return 0
    step = op_step_memory(graph)
    held = _persistent_step_bytes(graph)
    rest = step - held
    persistent = int(graph.tensor_size[graph.tensor_persistent].sum())
    last_step = -(-(persistent + int(graph.tensor_size[graph.tensor_output].sum())) // n_devices)
    total = persistent + (0 if recompute else forced_live_bytes(graph))
    if n_devices == 1:
        return int(max(step.max(), (total + rest).max(), last_step))
    # P_x at which x + A_j meets (P + F_j - x) / (d - 1), in integers (sizes stay below 2**53, d
    # below 2**10); below B_j the first term is B_j + A_j, the op's whole step.
    balanced = total - (n_devices - 1) * rest >= n_devices * held
    bound = np.where(balanced, -((-(total + rest)) // n_devices), step)
    return int(max(step.max(), bound.max(), last_step))


def makespan_lower_bound(graph: Graph, machine: Machine) -> float:
    """Seconds no schedule on `machine` can beat: max(critical path, total runtime / d)."""
    return max(graph.critical_path_length, graph.total_runtime / machine.n_devices)


CONTRACTION = FUSION_CLASSES.index("contraction")


def fused_makespan_lower_bound(graph: Graph, n_devices: int) -> float:
    """Seconds no schedule beats even with fusion groups (section 13), where the above may fail.

    Every event lasts at least the summed weights of its ops, each op weighing the least it can
    cost: its runtime when it runs alone, else (in a group) its compute time plus, for a
    contraction, the group's launch, which a group pays once and holds at most one contraction
    to share with. Paths and the work per device weighted so bound the makespan; without the
    launch term tiny kernels, whose runtime is mostly launch, would give a bound far below any
    schedule.
    """
    if graph.kernel is None:  # nothing can fuse
        return makespan_lower_bound(graph, Machine(n_devices))
    classes = graph.op_fusion
    grouped = graph.op_compute_time + (classes == CONTRACTION) * graph.kernel[1]
    least = np.where(classes == 0, graph.op_runtime, np.minimum(graph.op_runtime, grouped))
    return max(graph.longest_path_length(least), float(least.sum()) / n_devices)


def fused_peak_memory_lower_bound(graph: Graph, n_devices: int) -> int:
    """Bytes some device holds even with fusion groups, where the above may fail.

    Fusion can keep any tensor but a persistent one out of memory, so only the persistent bytes
    spread over the devices, the largest persistent tensor and the largest temp memory count.
    """
    persistent = graph.tensor_size[graph.tensor_persistent]
    return max(
        -(-int(persistent.sum()) // n_devices),
        int(persistent.max(initial=0)),
        int(graph.op_temp_memory.max(initial=0)),
    )
