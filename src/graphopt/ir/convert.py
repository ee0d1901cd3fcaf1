"""Conversions at the edges of the IR: networkx graphs in and out, torch tensors out.

networkx is for interchange and tests only; nothing on a hot path goes through it. The torch view
shares memory with the graph's arrays (no copies, no per-node Python loops).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import networkx as nx
import numpy as np

from graphopt.errors import GraphError
from graphopt.ir.graph import Graph

if TYPE_CHECKING:
    import torch


def to_networkx(graph: Graph) -> nx.MultiDiGraph:
    """Op-level multigraph: one node per op, one edge per (producer, tensor, consumer).

    Nodes carry `runtime`, `temp_memory`, the op's extra fields and `outputs` (every tensor the op
    produces, consumed or not, with `size`, `persistent`, `output` and its extra fields); each
    edge is keyed by its tensor's name and carries `size`, so networkx algorithms can weigh
    edges by bytes.
    """
    result = nx.MultiDiGraph(name=graph.name, **graph.attrs)
    for j, name in enumerate(graph.op_names):
        outputs = {
            graph.tensor_names[t]: {
                "size": int(graph.tensor_size[t]),
                "persistent": bool(graph.tensor_persistent[t]),
                "output": bool(graph.tensor_output[t]),
                **graph.tensor_attrs[t],
            }
            for t in graph.outputs(j)
        }
        result.add_node(
            name,
            runtime=float(graph.op_runtime[j]),
            temp_memory=int(graph.op_temp_memory[j]),
            outputs=outputs,
            **graph.op_attrs[j],
        )
    for t, tensor in enumerate(graph.tensor_names):
        producer = graph.op_names[graph.tensor_producer[t]]
        for consumer in graph.consumers(t):
            result.add_edge(
                producer, graph.op_names[consumer], key=tensor, size=int(graph.tensor_size[t])
            )
    return result


def from_networkx(source: nx.DiGraph) -> Graph:
    """Builds a graph from a networkx DiGraph or MultiDiGraph of ops.

    Node names become op names (as strings). Node attributes `runtime` and `temp_memory` set the
    op's costs (default 0). Tensors come from the node attribute `outputs` when present (the form
    `to_networkx` writes); otherwise every op produces one tensor `'<op>:0'` of node attribute
    `size` bytes (default 0) consumed by all of its successors (none for a sink: a graph output).

    Raises:
        GraphError: for an undirected graph, clashing names, or any rule of the contract.
    """
    if not source.is_directed():
        raise GraphError("from_networkx: the graph must be directed (ops -> consumers)")
    nodes = list(source.nodes)
    names = [str(node) for node in nodes]
    index = {node: i for i, node in enumerate(nodes)}
    core = {"runtime", "temp_memory", "outputs", "size"}
    runtime = [source.nodes[node].get("runtime", 0.0) for node in nodes]
    temp = [source.nodes[node].get("temp_memory", 0) for node in nodes]
    op_attrs = [{k: v for k, v in source.nodes[node].items() if k not in core} for node in nodes]
    tensor_names: list[str] = []
    sizes: list[Any] = []
    producers: list[int] = []
    persistent: list[bool] = []
    output: list[bool] = []
    tensor_attrs: list[dict[str, Any]] = []
    consumers: list[list[int]] = []
    explicit = any("outputs" in source.nodes[node] for node in nodes)
    for node in nodes:
        data = source.nodes[node]
        if explicit:
            for tensor, fields in data.get("outputs", {}).items():
                tensor_names.append(str(tensor))
                sizes.append(fields.get("size", 0))
                persistent.append(fields.get("persistent", False))
                output.append(fields.get("output", False))
                tensor_attrs.append(
                    {k: v for k, v in fields.items() if k not in ("size", "persistent", "output")}
                )
                producers.append(index[node])
                consumers.append([])
        else:
            tensor_names.append(f"{node}:0")
            sizes.append(data.get("size", 0))
            persistent.append(False)
            output.append(False)
            tensor_attrs.append({})
            producers.append(index[node])
            consumers.append(sorted({index[v] for v in source.successors(node)}))
    if explicit:
        tensor_ids = {name: t for t, name in enumerate(tensor_names)}
        edges = source.edges(keys=True) if source.is_multigraph() else source.edges(data="tensor")
        for u, v, key in edges:
            if key not in tensor_ids:
                raise GraphError(
                    f"from_networkx: edge {u!r} -> {v!r} names no output tensor of {u!r}: {key!r}"
                )
            consumers[tensor_ids[key]].append(index[v])
    ptr = np.zeros(len(tensor_names) + 1, dtype=np.int64)
    np.cumsum([len(c) for c in consumers], out=ptr[1:])
    return Graph.from_arrays(
        source.graph.get("name", ""),
        names,
        runtime,
        tensor_names,
        sizes,
        producers,
        ptr,
        [c for group in consumers for c in group],
        op_temp_memory=temp,
        tensor_persistent=persistent,
        tensor_output=output,
        op_attrs=op_attrs,
        tensor_attrs=tensor_attrs,
        attrs={k: v for k, v in source.graph.items() if k != "name"},
    )


def to_torch(graph: Graph) -> dict[str, torch.Tensor]:
    """Zero-copy torch views of the graph's arrays, for GNN encoders.

    Returns:
        edge_index [2, n_edges] int64 (producer -> consumer op), edge_tensor [n_edges],
        op_runtime [n_ops], op_temp_memory [n_ops], tensor_size [n_tensors],
        tensor_producer [n_tensors], consumer_ptr [n_tensors + 1], consumer_op [n_edges].
        They share memory with the (read-only) graph: treat them as read-only.
    """
    import warnings

    import torch

    names = (
        "edge_index",
        "edge_tensor",
        "op_runtime",
        "op_temp_memory",
        "tensor_size",
        "tensor_producer",
        "consumer_ptr",
        "consumer_op",
    )
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        return {name: torch.from_numpy(getattr(graph, name)) for name in names}
