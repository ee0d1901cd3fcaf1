"""Lower bounds every solution obeys, quoted next to search results (and used to stop early).

Peak memory: at an op's step its distinct inputs, its outputs and its scratch memory are all
resident on its device (COST_MODEL.md section 4), on any placement. Makespan: no schedule beats
the critical path, nor the total runtime spread perfectly over the devices (section 5).
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


def peak_memory_lower_bound(graph: Graph) -> int:
    """Bytes that some device holds at some step in every solution on any number of devices."""
    return int(op_step_memory(graph).max(initial=0))


def makespan_lower_bound(graph: Graph, machine: Machine) -> float:
    """Seconds no schedule on `machine` can beat: max(critical path, total runtime / d)."""
    return max(graph.critical_path_length, graph.total_runtime / machine.n_devices)
