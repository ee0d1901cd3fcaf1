"""Tiny hand-made graphs and solutions for unit tests, written as in the JSON contract."""

from __future__ import annotations

from typing import Any

import numpy as np

from graphopt.ir.graph import Graph
from graphopt.ir.io import graph_from_json, solution_from_json


def graph(ops: list[dict[str, Any]], tensors: list[dict[str, Any]], name: str = "g") -> Graph:
    """A graph from contract-style op and tensor dicts."""
    return graph_from_json(
        {"format": "graphopt.graph/1", "name": name, "ops": ops, "tensors": tensors}
    )


def op(name: str, runtime: float = 1.0, **extra: Any) -> dict[str, Any]:
    return {"name": name, "runtime": runtime, **extra}


def tensor(name: str, size: int, producer: str, *consumers: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "size": size, "producer": producer, "consumers": list(consumers), **extra}


def solution(g: Graph, placement: dict[str, int], schedule: list[str], devices: int = 1):
    """A solution from a placement and a schedule written as 'op' or 'tensor>device'."""
    events = []
    for item in schedule:
        if ">" in item:
            name, device = item.split(">")
            events.append({"transfer": name, "to": int(device)})
        else:
            events.append({"op": item})
    document = {
        "format": "graphopt.solution/1",
        "graph": g.name,
        "devices": devices,
        "placement": placement,
        "schedule": events,
    }
    return solution_from_json(document, g)


def tiny() -> Graph:
    """The contract's example graph (docs/format.md section 1)."""
    return graph(
        [
            op("a", 2.0, type="MatMul", temp_memory=0),
            op("b", 1.0, type="Relu"),
            op("c", 1.0, type="Add"),
        ],
        [tensor("a:0", 400, "a", "b", "c"), tensor("b:0", 100, "b", "c"), tensor("c:0", 100, "c")],
        name="tiny",
    )


def assert_same_graph(a: Graph, b: Graph) -> None:
    """Every array, name and extra field of two graphs is equal."""
    assert a.name == b.name
    assert a.op_names == b.op_names and a.tensor_names == b.tensor_names
    for field in (
        "op_runtime",
        "op_temp_memory",
        "tensor_size",
        "tensor_producer",
        "tensor_persistent",
        "tensor_output",
        "consumer_ptr",
        "consumer_op",
    ):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    assert a.op_attrs == b.op_attrs and a.tensor_attrs == b.tensor_attrs
    assert dict(a.attrs) == dict(b.attrs)


def with_outputs() -> Graph:
    """A chain w -> a -> b -> c and a lone x, where a:0 (read by b) and x:0 (read by none) are
    graph outputs: once made, each stays on its producer's device to the end."""
    return graph(
        [op("w"), op("a"), op("b"), op("c"), op("x")],
        [
            tensor("w:0", 5, "w", "a"),
            tensor("a:0", 100, "a", "b", output=True),
            tensor("b:0", 10, "b", "c"),
            tensor("c:0", 1, "c"),
            tensor("x:0", 50, "x", output=True),
        ],
    )
