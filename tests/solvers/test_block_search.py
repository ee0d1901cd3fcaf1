"""Block search: module and run moves between devices, from given solutions."""

from __future__ import annotations

import numpy as np
import pytest

from graphopt.costmodels.machine import Machine
from graphopt.ir.graph import Graph
from graphopt.ir.solution import Solution, topological_schedule
from graphopt.solvers.base import Budget, Objective, Problem, SolverError
from graphopt.solvers.block_search import BlockSearch, BlockSearchConfig, module_blocks


def layers(n_layers: int, width: int = 3) -> Graph:
    """`n_layers` modules in a chain, each a weight (persistent) read by `width` ops in a row."""
    op_names, attrs, runtime = [], [], []
    tensor_names, size, producer, consumers = [], [], [], []
    previous = None
    for layer in range(n_layers):
        weight = len(op_names)
        op_names.append(f"net.layer{layer}.weight")
        attrs.append({"kind": "parameter"})
        runtime.append(0.0)
        tensor_names.append(f"w{layer}")
        size.append(10_000)
        producer.append(weight)
        consumers.append([weight + 1 + k for k in range(width)])
        for k in range(width):
            op = len(op_names)
            op_names.append(f"layer{layer}_op{k}")
            attrs.append({"module": f"net.layer{layer}"})
            runtime.append(1.0)
            if previous is not None:
                consumers[previous].append(op)
            tensor_names.append(f"a{layer}_{k}")
            size.append(100)
            producer.append(op)
            consumers.append([])
            previous = len(tensor_names) - 1
    persistent = [name.startswith("w") for name in tensor_names]
    ptr = np.cumsum([0] + [len(c) for c in consumers])
    return Graph.from_arrays(
        name=f"layers{n_layers}",
        op_names=op_names,
        op_runtime=runtime,
        tensor_names=tensor_names,
        tensor_size=size,
        tensor_producer=producer,
        consumer_ptr=ptr,
        consumer_op=[op for c in consumers for op in c],
        tensor_persistent=persistent,
        op_attrs=attrs,
    )


def test_module_blocks_group_every_depth_of_the_module_path() -> None:
    graph = layers(3)
    blocks = {tuple(graph.op_names[op] for op in block) for block in module_blocks(graph)}
    # net.layer1: its weight (by name) and its three ops (by attribute); "net" holds every op,
    # which is no move at all, so it is left out.
    assert ("net.layer1.weight", "layer1_op0", "layer1_op1", "layer1_op2") in blocks
    assert len(blocks) == 3


def test_moves_whole_layers_off_a_crowded_device_to_the_bound() -> None:
    graph = layers(4)
    problem = Problem(graph, Machine(n_devices=2))
    start = topological_schedule(graph, np.zeros(graph.n_ops, dtype=np.int32), 2)
    start_peak = problem.scorer.score(start).peak_memory
    result = BlockSearch().solve(problem, Budget(evaluations=3000), 0, [start])
    # The optimum: two weights per device, plus a step's input and output activations.
    assert start_peak == 40_200 and result.value == 20_200
    placement = result.solution.placement
    for layer in range(4):  # each layer kept whole: no weight copied to another device
        ops = [j for j, name in enumerate(graph.op_names) if f"layer{layer}" in name]
        assert len(set(placement[ops].tolist())) == 1


@pytest.mark.parametrize("objective", list(Objective))
def test_never_worse_than_its_start_rescored_and_pinned(objective: Objective) -> None:
    graph = layers(5)
    pins = np.full(graph.n_ops, -1)
    pins[:4] = 0  # layer 0 and its weight stay on device 0
    problem = Problem(graph, Machine(n_devices=3), objective, pins)
    rng = np.random.default_rng(1)
    placement = np.where(pins >= 0, pins, rng.integers(0, 3, graph.n_ops)).astype(np.int32)
    start = topological_schedule(graph, placement, 3)
    score = problem.scorer.score(start)
    start_value = score.peak_memory if objective is Objective.PEAK_MEMORY else score.makespan
    result = BlockSearch().solve(problem, Budget(evaluations=2000), 3, [start])
    again = BlockSearch().solve(problem, Budget(evaluations=2000), 3, [start])
    assert result.value <= start_value
    assert np.array_equal(result.solution.order, again.solution.order)
    assert np.all(result.solution.placement[:4] == 0)
    rescored = problem.scorer.score(Solution(result.solution.placement, result.solution.order, 3))
    expected = rescored.peak_memory if objective is Objective.PEAK_MEMORY else rescored.makespan
    assert result.value == pytest.approx(expected, rel=1e-12)


def test_one_device_and_bad_options() -> None:
    graph = layers(2)
    result = BlockSearch().solve(Problem(graph, Machine(n_devices=1)), Budget(evaluations=50), 0)
    assert result.evaluations == 1  # nothing to move: the start only
    with pytest.raises(SolverError, match="patience must be an integer >= 1"):
        BlockSearchConfig(patience=0)
    with pytest.raises(SolverError, match="swap_probability must be in"):
        BlockSearchConfig(swap_probability=1.5)
