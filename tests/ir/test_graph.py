"""The graph IR: structure, algorithms against networkx, conversions, immutability."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import torch
from hypothesis import given, settings

from builders import assert_same_graph, graph, op, tensor, tiny
from graphopt.errors import GraphError
from graphopt.ir.convert import from_networkx, to_networkx, to_torch
from graphopt.ir.generators import generate
from graphopt.ir.graph import Graph
from graphopt.ir.io import read_graph, write_graph
from strategies import graphs


def test_tiny_structure() -> None:
    g = tiny()
    assert (g.n_ops, g.n_tensors, g.n_edges) == (3, 3, 3)
    assert g.inputs(2).tolist() == [0, 1]
    assert g.outputs(0).tolist() == [0]
    assert g.consumers(0).tolist() == [1, 2]
    assert g.successors(0).tolist() == [1, 2]
    assert g.predecessors(2).tolist() == [0, 1]
    assert g.sources.tolist() == [0] and g.sinks.tolist() == [2]
    assert g.edge_index.tolist() == [[0, 0, 1], [1, 2, 2]]
    assert g.total_runtime == 4.0 and g.total_tensor_size == 600
    assert g.critical_path.tolist() == [0, 1, 2] and g.critical_path_length == 4.0
    assert g.op_ids["c"] == 2 and g.tensor_ids["b:0"] == 1


def test_arrays_are_read_only() -> None:
    g = tiny()
    for array in (g.op_runtime, g.tensor_size, g.consumer_op, g.topological_order, g.edge_index):
        with pytest.raises(ValueError, match="read-only"):
            array[0] = 1
    with pytest.raises(AttributeError):
        g.name = "other"


KERNEL_DTYPES = {
    "tensor_size": np.int64,
    "tensor_producer": np.int32,
    "tensor_persistent": np.bool_,
    "tensor_output": np.bool_,
    "consumer_ptr": np.int64,
    "consumer_op": np.int32,
    "op_input_ptr": np.int64,
    "op_input_tensor": np.int32,
    "op_output_ptr": np.int64,
    "op_output_tensor": np.int32,
    "op_runtime": np.float64,
    "op_temp_memory": np.int64,
}


def test_kernel_arrays_have_one_type_whatever_the_source(tmp_path) -> None:
    """Every graph gives kernels the same array types, so each kernel compiles once."""
    write_graph(generate("layered", 20, seed=0), tmp_path / "g.npz")
    write_graph(tiny(), tmp_path / "g.json")
    sources = [
        tiny(),
        tiny().with_tensor_sizes([1, 2, 3]),
        tiny().with_op_runtimes([1, 2, 3]),
        generate("erdos_renyi", 30, seed=1),
        read_graph(tmp_path / "g.npz"),
        read_graph(tmp_path / "g.json"),
    ]
    for g in sources:
        arrays = g.arrays
        assert arrays is g.arrays
        assert list(arrays._fields) == list(KERNEL_DTYPES)
        for name, array in arrays._asdict().items():
            assert array is getattr(g, name), name
            assert array.dtype == KERNEL_DTYPES[name], name
            assert array.flags.c_contiguous and not array.flags.writeable, name


def _nx_ops(g: Graph) -> nx.DiGraph:
    result = nx.DiGraph()
    result.add_nodes_from(range(g.n_ops))
    result.add_edges_from(g.edge_index.T.tolist())
    return result


@settings(max_examples=300, deadline=None)
@given(graphs(max_ops=40))
def test_topological_order_and_critical_path_match_networkx(g: Graph) -> None:
    order = g.topological_order
    assert sorted(order.tolist()) == list(range(g.n_ops))
    position = np.empty(g.n_ops, dtype=np.int64)
    position[order] = np.arange(g.n_ops)
    src, dst = g.edge_index
    assert np.all(position[src] < position[dst])

    reference = _nx_ops(g)
    # Node-weighted longest path: put each op's runtime on its out-edges to a per-op sink node.
    weighted = nx.DiGraph()
    for u, v in reference.edges:
        weighted.add_edge(u, v, weight=g.op_runtime[u])
    for j in range(g.n_ops):
        weighted.add_edge(j, ("end", j), weight=g.op_runtime[j])
    expected = nx.dag_longest_path_length(weighted, weight="weight", default_weight=0)
    assert g.critical_path_length == pytest.approx(expected, rel=1e-12, abs=0)
    path = g.critical_path.tolist()
    assert all(reference.has_edge(u, v) for u, v in zip(path, path[1:], strict=False))
    assert g.op_runtime[path].sum() == pytest.approx(g.critical_path_length, rel=1e-12, abs=0)

    for j in range(g.n_ops):
        assert g.successors(j).tolist() == sorted(reference.successors(j))
        assert g.predecessors(j).tolist() == sorted(reference.predecessors(j))
    assert g.sources.tolist() == [j for j in range(g.n_ops) if g.inputs(j).size == 0]
    assert g.sinks.tolist() == [j for j in range(g.n_ops) if reference.out_degree(j) == 0]


@settings(max_examples=200, deadline=None)
@given(graphs(max_ops=80))
def test_reachable_bits_match_networkx(g: Graph) -> None:
    reference = _nx_ops(g)
    for forward, expected in ((True, nx.descendants), (False, nx.ancestors)):
        bits = g.reachable_bits(forward)
        assert bits.shape == (g.n_ops, (g.n_ops + 63) // 64) and bits.dtype == np.uint64
        unpacked = np.unpackbits(bits.view(np.uint8), axis=1, bitorder="little")[:, : g.n_ops]
        for j in range(g.n_ops):
            assert np.flatnonzero(unpacked[j]).tolist() == sorted(expected(reference, j))


@settings(max_examples=100, deadline=None)
@given(graphs())
def test_networkx_round_trip(g: Graph) -> None:
    assert_same_graph(from_networkx(to_networkx(g)), g)


def test_from_plain_networkx_dag() -> None:
    dag = nx.DiGraph()
    dag.add_node("x", runtime=2.0, size=64)
    dag.add_node("y", runtime=1.0, size=8)
    dag.add_edge("x", "y")
    dag.add_edge("x", "z")
    g = from_networkx(dag)
    assert g.tensor_names == ("x:0", "y:0", "z:0")
    assert g.consumers(0).tolist() == [g.op_ids["y"], g.op_ids["z"]]
    assert g.tensor_size.tolist() == [64, 8, 0]
    with pytest.raises(GraphError, match="must be directed"):
        from_networkx(nx.Graph([(1, 2)]))
    cyclic = nx.DiGraph([("p", "q"), ("q", "p")])
    with pytest.raises(GraphError, match="cycle: 'p' -> 'q' -> 'p'"):
        from_networkx(cyclic)


def test_to_torch_shares_memory() -> None:
    g = tiny()
    views = to_torch(g)
    assert views["edge_index"].dtype == torch.int64 and tuple(views["edge_index"].shape) == (2, 3)
    assert views["tensor_size"].data_ptr() == g.tensor_size.ctypes.data
    assert views["op_runtime"].tolist() == [2.0, 1.0, 1.0]


def test_with_tensor_sizes_keeps_topology_and_validates() -> None:
    g = tiny()
    bigger = g.with_tensor_sizes([800, 200, 200], name="tiny/x2")
    assert bigger.tensor_size.tolist() == [800, 200, 200] and bigger.name == "tiny/x2"
    assert bigger.consumer_op is g.consumer_op
    with pytest.raises(GraphError, match="tensor 'b:0': size must be an integer >= 0, got -1"):
        g.with_tensor_sizes([1, -1, 1])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"op_runtime": [1.0, -1.0]}, "op 'y': runtime must be a finite number >= 0"),
        ({"op_runtime": [1.0, np.nan]}, "op 'y': runtime must be a finite number >= 0, got nan"),
        ({"op_temp_memory": [0, -3]}, "op 'y': temp_memory must be an integer >= 0"),
        ({"tensor_size": [-1]}, "tensor 'x:0': size must be an integer >= 0"),
        ({"tensor_producer": [5]}, "tensor 'x:0': producer index 5 is not an op"),
        ({"consumer_op": [9]}, "tensor 'x:0': consumer index 9 is not an op"),
        ({"consumer_op": [0]}, "tensor 'x:0': lists its producer 'x' as a consumer"),
        ({"consumer_ptr": [0, 2]}, "consumer_ptr must start at 0"),
        ({"op_names": ["x", "x"]}, "op 'x': name is not unique"),
        ({"op_runtime": [1.0]}, r"op_runtime: expected 2 values, got shape \(1,\)"),
    ],
)
def test_from_arrays_rules(kwargs, message) -> None:
    arguments = {
        "name": "g",
        "op_names": ["x", "y"],
        "op_runtime": [1.0, 1.0],
        "tensor_names": ["x:0"],
        "tensor_size": [4],
        "tensor_producer": [0],
        "consumer_ptr": [0, 1],
        "consumer_op": [1],
    }
    arguments.update(kwargs)
    with pytest.raises(GraphError, match=message):
        Graph.from_arrays(**arguments)


def test_metadata_defaults() -> None:
    g = graph([op("a"), op("b", type="Conv", flops=10)], [tensor("a:0", 1, "a", "b")])
    assert g.op_types == ("", "Conv")
    assert np.isnan(g.op_metadata("flops")[0]) and g.op_metadata("flops")[1] == 10
