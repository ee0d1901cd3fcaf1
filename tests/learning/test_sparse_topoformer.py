"""The sparse Topoformer: its edge lists, its equality with dense masked attention, locality."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.nn import functional as F

from graphopt.ir.generators import FAMILIES, generate
from graphopt.ir.graph import Graph
from graphopt.learning.encoders.sparse_topoformer import (
    SPARSE_RELATIONS,
    DagEdges,
    SparseTopoformer,
    dag_edges,
)
from graphopt.learning.threads import one_torch_thread
from strategies import graphs


@pytest.fixture(autouse=True, scope="module")
def one_thread() -> Iterator[None]:
    """These networks are tiny: on 2 busy cores a second torch thread made this file 5-8x
    slower (40 s instead of 5 s), the threads waiting on each other at every small op."""
    with one_torch_thread():
        yield


def _graph(n_ops: int, producers: list[int], consumers: list[list[int]]) -> Graph:
    """A graph of `n_ops` ops and one tensor per entry of `producers`, read by `consumers`."""
    ptr = np.cumsum([0, *map(len, consumers)])
    return Graph.from_arrays(
        "handmade",
        [f"op{i}" for i in range(n_ops)],
        np.ones(n_ops),
        [f"t{t}" for t in range(len(producers))],
        np.ones(len(producers), dtype=np.int64),
        producers,
        ptr,
        [op for ops in consumers for op in ops],
    )


def _chain(n_ops: int) -> Graph:
    """op0 -> op1 -> ... : op i is i hops from op0."""
    return _graph(n_ops, list(range(n_ops - 1)), [[i + 1] for i in range(n_ops - 1)])


def _reference_pairs(graph: Graph) -> list[list[tuple[int, int]]]:
    """Per relation, the sorted (query, key) pairs, from the op pairs one edge at a time."""
    parents = {(op, op) for op in range(graph.n_ops)}
    children = set(parents)
    for producer, consumer in graph.edge_index.T.tolist():
        parents.add((consumer, producer))
        children.add((producer, consumer))
    return [sorted(parents), sorted(children)]


def _check_edges(graph: Graph) -> None:
    edges = dag_edges(graph)
    assert edges.n == graph.n_ops
    assert len(edges.dst) == len(edges.src) == len(SPARSE_RELATIONS)
    for dst, src, expected in zip(edges.dst, edges.src, _reference_pairs(graph), strict=True):
        assert dst.dtype == src.dtype == torch.int64
        assert list(zip(dst.tolist(), src.tolist(), strict=True)) == expected


@settings(max_examples=150, deadline=None)
@given(graphs(max_ops=30))
def test_dag_edges_match_the_pairs_edge_by_edge(graph: Graph) -> None:
    _check_edges(graph)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_dag_edges_of_generated_graphs(family: str) -> None:
    _check_edges(generate(family, 200, seed=1))


def test_dag_edges_merge_tensors_between_the_same_ops() -> None:
    # op0 makes t0 and t1, both read by op1; t2 (op0 -> op2) is the only other edge.
    graph = _graph(3, [0, 0, 0], [[1], [1], [2]])
    assert graph.edge_index.shape[1] == 3
    edges = dag_edges(graph)
    assert edges.dst[0].tolist() == [0, 1, 1, 2, 2]  # parents: op1 and op2 see op0
    assert edges.src[0].tolist() == [0, 0, 1, 0, 2]
    assert edges.dst[1].tolist() == [0, 0, 0, 1, 2]  # children: op0 sees op1 and op2
    assert edges.src[1].tolist() == [0, 1, 2, 1, 2]


@pytest.mark.parametrize("graph", [_graph(1, [], []), _graph(3, [0], [[]]), _graph(2, [], [])])
def test_dag_edges_of_graphs_without_edges_are_self_loops(graph: Graph) -> None:
    edges = dag_edges(graph)
    for dst, src in zip(edges.dst, edges.src, strict=True):
        assert dst.tolist() == src.tolist() == list(range(graph.n_ops))


def _dense_reference(model: SparseTopoformer, x: torch.Tensor, graph: Graph) -> torch.Tensor:
    """The same weights with dense [heads, n, n] masks and `scaled_dot_product_attention`."""
    n = graph.n_ops
    parents = torch.eye(n, dtype=torch.bool)
    children = torch.eye(n, dtype=torch.bool)
    for producer, consumer in graph.edge_index.T.tolist():
        parents[consumer, producer] = True
        children[producer, consumer] = True
    relations = torch.stack([parents, children])
    h = model.embed(x)
    for layer in model.layers:
        hidden = h.shape[1]
        width = hidden // layer.heads
        masks = relations[torch.arange(layer.heads) % len(SPARSE_RELATIONS)]
        q, k, v = (
            part.view(n, layer.heads, width).transpose(0, 1)
            for part in layer.qkv(layer.norm_attention(h)).chunk(3, dim=-1)
        )
        attended = F.scaled_dot_product_attention(q, k, v, attn_mask=masks)
        h = h + layer.out(attended.transpose(0, 1).reshape(n, hidden))
        h = h + layer.lin2(torch.relu(layer.lin1(layer.norm_mlp(h))))
    return model.norm(h)


def _compare_with_dense(graph: Graph, inputs: int, heads: int, width: int, layers: int) -> None:
    model = SparseTopoformer(inputs, heads * width, layers, heads).double()
    for parameter in model.parameters():  # LayerNorm starts at 1 / 0: make every weight count
        torch.nn.init.normal_(parameter, std=0.7)
    x = torch.randn(graph.n_ops, inputs, dtype=torch.float64, requires_grad=True)
    upstream = torch.randn(graph.n_ops, heads * width, dtype=torch.float64)
    wrt = [x, *model.parameters()]
    sparse = model(x, dag_edges(graph))
    dense = _dense_reference(model, x, graph)
    torch.testing.assert_close(sparse, dense, rtol=1e-9, atol=1e-9)
    sparse_grads = torch.autograd.grad((sparse * upstream).sum(), wrt)
    dense_grads = torch.autograd.grad((dense * upstream).sum(), wrt)
    for got, expected in zip(sparse_grads, dense_grads, strict=True):
        torch.testing.assert_close(got, expected, rtol=1e-9, atol=1e-9)


@settings(max_examples=80, deadline=None)
@given(
    graph=graphs(max_ops=20),
    inputs=st.integers(1, 4),
    heads=st.integers(1, 5),
    width=st.integers(1, 3),
    layers=st.integers(0, 3),
    seed=st.integers(0, 2**16),
)
def test_output_and_gradients_equal_dense_masked_attention(
    graph: Graph, inputs: int, heads: int, width: int, layers: int, seed: int
) -> None:
    torch.manual_seed(seed)
    _compare_with_dense(graph, inputs, heads, width, layers)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_equals_dense_masked_attention_on_generated_graphs(family: str) -> None:
    torch.manual_seed(0)
    _compare_with_dense(generate(family, 60, seed=2), inputs=3, heads=4, width=2, layers=3)


def test_float32_equals_dense_masked_attention() -> None:
    torch.manual_seed(1)
    graph = generate("layered", 80, seed=4)
    model = SparseTopoformer(5, 16, 2, 4)
    x = torch.randn(graph.n_ops, 5)
    with torch.no_grad():
        torch.testing.assert_close(
            model(x, dag_edges(graph)), _dense_reference(model, x, graph), rtol=1e-5, atol=1e-5
        )


def _hops(graph: Graph, source: int) -> list[float]:
    """Hops from `source` to every op, edges taken in either direction (inf: unreachable)."""
    neighbours: list[set[int]] = [set() for _ in range(graph.n_ops)]
    for producer, consumer in graph.edge_index.T.tolist():
        neighbours[producer].add(consumer)
        neighbours[consumer].add(producer)
    hops = [float("inf")] * graph.n_ops
    hops[source] = 0
    queue = deque([source])
    while queue:
        op = queue.popleft()
        for other in neighbours[op]:
            if hops[other] == float("inf"):
                hops[other] = hops[op] + 1
                queue.append(other)
    return hops


@settings(max_examples=60, deadline=None)
@given(graph=graphs(max_ops=25), layers=st.integers(0, 3), data=st.data())
def test_an_op_sees_only_ops_within_layers_hops(graph: Graph, layers: int, data) -> None:
    target = data.draw(st.integers(0, graph.n_ops - 1))
    torch.manual_seed(data.draw(st.integers(0, 2**16)))
    model = SparseTopoformer(3, 8, layers, 4).double()
    far = torch.tensor([hops > layers for hops in _hops(graph, target)])
    x = torch.randn(graph.n_ops, 3, dtype=torch.float64)
    moved = x + far[:, None] * torch.randn_like(x)
    edges = dag_edges(graph)
    with torch.no_grad():
        before, after = model(x, edges), model(moved, edges)
    torch.testing.assert_close(after[target], before[target], rtol=0, atol=1e-12)
    if far.any():
        assert not torch.allclose(after[far], before[far])


@pytest.mark.parametrize("layers", [0, 1, 2, 3])
def test_an_op_sees_the_op_exactly_layers_hops_away(layers: int) -> None:
    torch.manual_seed(layers)
    graph = _chain(6)
    model = SparseTopoformer(3, 8, layers, 2).double()
    edges = dag_edges(graph)
    x = torch.randn(6, 3, dtype=torch.float64)
    with torch.no_grad():
        base = model(x, edges)[0]
        for op in range(6):
            moved = x.clone()
            moved[op] += 1.0
            changed = not torch.allclose(model(moved, edges)[0], base, rtol=0, atol=1e-12)
            assert changed == (op <= layers)


def test_one_op_graph() -> None:
    model = SparseTopoformer(2, 4, 2, 2)
    out = model(torch.randn(1, 2), dag_edges(_graph(1, [], [])))
    assert out.shape == (1, 4)
    assert torch.isfinite(out).all()


@pytest.mark.parametrize(("hidden", "heads"), [(10, 4), (8, 3), (8, 0)])
def test_hidden_not_a_multiple_of_heads_is_refused(hidden: int, heads: int) -> None:
    with pytest.raises(ValueError, match="multiple of heads"):
        SparseTopoformer(3, hidden, 2, heads)


def test_negative_layers_are_refused() -> None:
    with pytest.raises(ValueError, match="layers"):
        SparseTopoformer(3, 8, -1, 2)


@pytest.mark.parametrize("shape", [(5, 4), (4, 3), (5,), (1, 5, 3), (0, 3)])
def test_inputs_of_the_wrong_shape_are_refused(shape: tuple[int, ...]) -> None:
    model = SparseTopoformer(3, 8, 1, 2)
    with pytest.raises(ValueError, match="x must be"):
        model(torch.randn(shape), dag_edges(_chain(5)))


def test_edges_without_both_relations_are_refused() -> None:
    edges = dag_edges(_chain(4))
    with pytest.raises(ValueError, match="one edge list per relation"):
        SparseTopoformer(3, 8, 1, 2)(torch.randn(4, 3), DagEdges(edges.dst[:1], edges.src[:1], 4))
