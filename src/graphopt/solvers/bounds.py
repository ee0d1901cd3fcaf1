"""Lower bounds every solution obeys, quoted next to search results (and used to stop early).

Peak memory (COST_MODEL.md section 4). At an op's step its distinct inputs, its outputs and its
scratch memory are all resident on its device, on any placement (`op_step_memory`). Persistent
tensors add more: the device x running op j also holds, at j's step and at every other, all the
persistent bytes P_x produced on x. So x's memory at j's step is at least
max(P_x, B_j) + A_j, where B_j is j's persistent input and output bytes (resident on x as
originals or copies) and A_j the rest of j's step. The other d - 1 devices hold the remaining
P - P_x persistent bytes, so one of them holds at least (P - P_x) / (d - 1). Whatever P_x is,
the peak is at least min over P_x of the larger of the two, which `peak_memory_lower_bound`
takes for every op j, and the largest over j. With d = 1 it is P + A_j: every persistent byte
plus an op's activations, which the one-device bound used to leave out.

Makespan (section 5): no schedule beats the critical path, nor the total runtime spread
perfectly over the devices.
"""

from __future__ import annotations

import numpy as np

from graphopt.costmodels.machine import Machine
from graphopt.ir.graph import Graph


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


def peak_memory_lower_bound(graph: Graph, n_devices: int = 1) -> int:
    """Bytes that some device holds at some step in every solution on `n_devices` devices.

    See the module docstring; never below the largest `op_step_memory`.
    """
    if graph.n_ops == 0:
        return 0
    step = op_step_memory(graph)
    held = _persistent_step_bytes(graph)
    rest = step - held
    total = int(graph.tensor_size[graph.tensor_persistent].sum())
    if n_devices == 1:
        return int(max(step.max(), total + rest.max()))
    # P_x at which x + A_j meets (P - x) / (d - 1), in integers (sizes stay below 2**53, d below
    # 2**10); below B_j the first term is B_j + A_j, the op's whole step.
    balanced = total - (n_devices - 1) * rest >= n_devices * held
    bound = np.where(balanced, -((-(total + rest)) // n_devices), step)
    return int(max(step.max(), bound.max()))


def makespan_lower_bound(graph: Graph, machine: Machine) -> float:
    """Seconds no schedule on `machine` can beat: max(critical path, total runtime / d)."""
    return max(graph.critical_path_length, graph.total_runtime / machine.n_devices)
