"""Every zoo model imports in inference and training variants: exact FLOPs, no view counted twice.

The default run imports the tiny entries; `-m slow` imports every entry, including the
>= 20,000-op training graph, and scores each.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_torch_export import REGISTRY_TYPES
from test_zoo import BIG_TRAINING, SLOW_EXPORT, TINY
from torch.utils.flop_counter import FlopCounterMode

from graphopt.costmodels.score import score
from graphopt.importers.zoo import ZOO, export_graph, get_model
from graphopt.ir.graph import Graph
from graphopt.ir.solution import topological_schedule

CNN_FAMILIES = {"resnet", "inception"}
FAST = sorted(TINY - SLOW_EXPORT)
REST = sorted(set(ZOO) - set(FAST) - {BIG_TRAINING})


def check_graph(graph: Graph) -> None:
    """Valid, every kernel costed, and no tensor counted twice through a view."""
    solution = topological_schedule(graph, np.zeros(graph.n_ops, np.int32), 1)
    result = score(graph, solution)
    assert 0 < result.peak_memory <= graph.total_tensor_size
    kernels = np.array(["kind" not in attrs for attrs in graph.op_attrs])
    assert (graph.op_runtime[kernels] > 0).all() and (graph.op_runtime[~kernels] == 0).all()


def check_model(name: str) -> None:
    entry = get_model(name)
    inference = export_graph(name)
    training = export_graph(name, training=True)
    assert inference.attrs["zoo_model"] == name and training.name == f"{name}-train"
    check_graph(inference)
    check_graph(training)
    assert training.n_ops > inference.n_ops or entry.family == "lstm-lm"
    if entry.family in CNN_FAMILIES:  # torch's counter is complete for convolutions and matmuls
        module, inputs = entry.build()
        with FlopCounterMode(display=False) as counter, torch.no_grad():
            module(*inputs)
        flops = inference.op_metadata("flops")
        counted = np.array([t in REGISTRY_TYPES for t in inference.op_types])
        assert flops[counted].sum() == counter.get_total_flops()


@pytest.mark.parametrize("name", FAST)
def test_tiny_zoo_models_import(name: str) -> None:
    check_model(name)


@pytest.mark.slow
@pytest.mark.parametrize("name", REST)
def test_every_zoo_model_imports(name: str) -> None:
    check_model(name)


@pytest.mark.slow
def test_a_training_graph_of_20000_ops_imports_and_scores() -> None:
    graph = export_graph(BIG_TRAINING, training=True)
    assert graph.n_ops >= 20_000
    check_graph(graph)
    check_graph(export_graph(BIG_TRAINING))
