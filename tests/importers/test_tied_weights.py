"""Tied and shared weights: a storage is one persistent tensor, counted once, in every importer.

A model whose output head is its embedding (GPT-2, BERT, T5) holds that matrix once; a buffer
that views another holds no bytes of its own. Every check compares the graph's persistent bytes
with the sum of the distinct storages (by `untyped_storage().data_ptr()`) of what the graph's
sources stand for: the module's parameters and buffers and the example inputs.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from onnx import TensorProto, helper
from test_zoo import TINY, by_size
from torch import nn

from graphopt.execution.apply import outputs_identical
from graphopt.execution.measure import measure
from graphopt.execution.replay import replay
from graphopt.importers.onnx import import_onnx
from graphopt.importers.torch_export import (
    capture_module,
    capture_training_step,
    import_module,
    import_training_step,
)
from graphopt.importers.zoo import ZOO, get_model
from graphopt.importers.zoo_sizes import zoo_sizes
from graphopt.ir.graph import Graph
from graphopt.ir.solution import random_schedule


class TiedHead(nn.Module):
    """An embedding tied to the output head, and a buffer that views a row of another."""

    def __init__(self, views: bool = True) -> None:
        super().__init__()
        self.embed = nn.Embedding(50, 16)
        self.head = nn.Linear(16, 50, bias=False)
        self.head.weight = self.embed.weight
        self.views = views
        if views:
            self.register_buffer("table", torch.randn(4, 16))
            self.register_buffer("row", self.table[1])

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        hidden = self.embed(tokens)
        if self.views:
            hidden = hidden * self.row + self.table.sum(0)
        return self.head(torch.tanh(hidden))


def _build(views: bool = True) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    return TiedHead(views).eval(), (torch.randint(0, 50, (2, 5)),)


def unique_storage_bytes(module: nn.Module, inputs: tuple[torch.Tensor, ...] = ()) -> int:
    """Bytes of the distinct storages of the module's parameters and buffers and of `inputs`."""
    tensors = [
        *(p for _, p in module.named_parameters(remove_duplicate=False)),
        *(b for _, b in module.named_buffers(remove_duplicate=False)),
        *inputs,
    ]
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors}
    return sum(storages.values())


def persistent_bytes(graph: Graph) -> int:
    return int(graph.tensor_size[graph.tensor_persistent].sum())


def test_the_model_really_shares_storages() -> None:
    module, inputs = _build()
    named = sum(p.nbytes for _, p in module.named_parameters(remove_duplicate=False))
    assert unique_storage_bytes(module) < named + module.table.nbytes + module.row.nbytes


@pytest.mark.parametrize("method", ["export", "fx"])
def test_inference_graph_counts_each_storage_once(method: str) -> None:
    module, inputs = _build(views=method == "export")  # fx keeps only the buffers it reads
    graph = import_module(module, inputs, method=method)
    assert persistent_bytes(graph) == unique_storage_bytes(module, inputs)


def test_training_step_counts_each_storage_once() -> None:
    module, inputs = _build()
    graph = import_training_step(module, inputs)
    assert persistent_bytes(graph) == unique_storage_bytes(module, inputs)


def test_the_shared_weight_is_one_tensor_read_by_both_of_its_users() -> None:
    for method in ("export", "fx"):
        module, inputs = _build(views=False)
        graph = import_module(module, inputs, method=method)
        weights = [t for t in range(graph.n_tensors) if graph.tensor_size[t] == 50 * 16 * 4]
        assert len(weights) == 1 and graph.tensor_persistent[weights[0]]
        readers = {graph.op_attrs[j].get("type") for j in graph.consumers(weights[0])}
        assert len(readers) == 2, (method, readers)  # the embedding lookup and the head
        assert graph.op_attrs[graph.tensor_producer[weights[0]]]["aliases"] == ["head.weight"]


@pytest.mark.parametrize("training", [False, True])
def test_replay_of_a_tied_model_measures_what_the_graph_predicts(training: bool) -> None:
    module, inputs = _build()
    capture = (capture_training_step if training else capture_module)(module, inputs)
    reference = measure(capture.program, capture.args, repeats=1, profile=False)
    rng = np.random.default_rng(0)
    graph = capture.graph
    for _ in range(2):
        placement = rng.integers(0, 2, graph.n_ops).astype(np.int32)
        result = replay(capture, random_schedule(graph, placement, 2, rng))
        expected = tuple(p - q for p, q in zip(result.predicted, result.persistent, strict=True))
        assert result.measured == expected
        assert outputs_identical(reference.outputs, result.outputs)


@pytest.mark.parametrize("name", by_size(set(ZOO), TINY))
def test_recorded_zoo_sizes_count_each_storage_once(name: str) -> None:
    """The committed sizes equal a fresh export (test_zoo_sizes), so this pins the export too.

    Both graphs' sources are the module's parameters and buffers and the example inputs.
    """
    module, inputs = get_model(name).build()
    expected = unique_storage_bytes(module, tuple(inputs))
    assert {kind: sizes["persistent_bytes"] for kind, sizes in zoo_sizes(name).items()} == {
        "inference": expected,
        "train": expected,
    }


def test_the_zoo_has_tied_models() -> None:
    for name in ("gpt2-tiny", "bert-tiny", "t5-tiny"):
        module, _ = get_model(name).build()
        named = sum(p.nbytes for _, p in module.named_parameters(remove_duplicate=False))
        assert unique_storage_bytes(module) < named, name


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gpt2-tiny", "t5-tiny"])
def test_zoo_export_counts_tied_embeddings_once(name: str) -> None:
    module, inputs = get_model(name).build()
    expected = unique_storage_bytes(module, tuple(inputs))
    assert persistent_bytes(import_module(module, inputs, name=name)) == expected


def _initializer(name: str, offset: int) -> TensorProto:
    weight = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=[8, 4])
    weight.data_location = TensorProto.EXTERNAL
    for key, value in (("location", "weights.bin"), ("offset", str(offset)), ("length", "128")):
        weight.external_data.add(key=key, value=value)
    return weight


def test_onnx_initializers_on_the_same_external_bytes_are_one_tensor() -> None:
    """Two initializer names for one stretch of the weights file, as a tied model saves them."""
    nodes = [
        helper.make_node("MatMul", ["x", "embed"], ["h"]),
        helper.make_node("Transpose", ["head"], ["head_t"]),
        helper.make_node("MatMul", ["h", "head_t"], ["y"]),
        helper.make_node("MatMul", ["y", "other"], ["z"]),
    ]
    graph = helper.make_graph(
        nodes,
        "tied",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 4])],
        initializer=[_initializer("embed", 0), _initializer("head", 0), _initializer("other", 128)],
    )
    imported = import_onnx(helper.make_model(graph))
    assert persistent_bytes(imported) == 2 * 128 + 2 * 8 * 4
    shared = imported.tensor_ids["embed"]
    assert "head" not in imported.tensor_ids
    assert imported.op_attrs[imported.tensor_producer[shared]]["aliases"] == ["head"]
    assert len(imported.consumers(shared)) == 2  # the first MatMul and the Transpose


def test_onnx_identity_of_a_weight_is_the_weight() -> None:
    weight = helper.make_tensor("w", TensorProto.FLOAT, [4, 4], vals=[0.0] * 16)
    nodes = [
        helper.make_node("Identity", ["w"], ["w_tied"]),
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node("MatMul", ["h", "w_tied"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "identity",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
        initializer=[weight],
    )
    imported = import_onnx(helper.make_model(graph))
    assert persistent_bytes(imported) == 16 * 4 + 2 * 4 * 4
    assert "w_tied" not in imported.tensor_ids
