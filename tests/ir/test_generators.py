"""Synthetic graph families: determinism, validity, per-family structure, sizes and errors."""

from __future__ import annotations

import inspect
import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graphopt.errors import GraphError, GraphoptError
from graphopt.ir.generators import (
    DEFAULT_SIZES,
    FAMILIES,
    MAX_SIZE,
    CommonOptions,
    SizeDistribution,
    augment,
    barabasi_albert,
    erdos_renyi,
    generate,
    layered,
    node_blocks,
    node_layers,
    stochastic_block,
    watts_strogatz,
)
from graphopt.ir.graph import Graph

FAMILY_NAMES = ["erdos_renyi", "layered", "sbm", "watts_strogatz", "barabasi_albert"]


def _arrays(graph: Graph) -> dict[str, np.ndarray]:
    return {
        "op_runtime": graph.op_runtime,
        "op_temp_memory": graph.op_temp_memory,
        "tensor_size": graph.tensor_size,
        "tensor_producer": graph.tensor_producer,
        "tensor_persistent": graph.tensor_persistent,
        "consumer_ptr": graph.consumer_ptr,
        "consumer_op": graph.consumer_op,
    }


def _assert_same(a: Graph, b: Graph) -> None:
    assert a.name == b.name
    assert a.op_names == b.op_names
    assert a.tensor_names == b.tensor_names
    for key, value in _arrays(a).items():
        np.testing.assert_array_equal(value, _arrays(b)[key], err_msg=key)
    assert a.attrs == b.attrs


def _undirected(graph: Graph) -> set[tuple[int, int]]:
    src, dst = graph.edge_index
    return {(min(u, v), max(u, v)) for u, v in zip(src.tolist(), dst.tolist(), strict=True)}


def _valid_params(family: str, n: int) -> dict[str, int]:
    """Family parameters that are valid for any n (the defaults need n > 6 or n > 3)."""
    if family == "watts_strogatz":
        return {"k": min(6, 2 * ((n - 1) // 2))}
    if family == "barabasi_albert":
        return {"m": min(3, n - 1)}
    return {}


# ------------------------------------------------------------------------------ registry
def test_families_registry_and_dispatch() -> None:
    assert list(FAMILIES) == FAMILY_NAMES
    assert FAMILIES["sbm"] is stochastic_block
    _assert_same(generate("layered", 50, seed=3, fan_in=2.0), layered(50, seed=3, fan_in=2.0))


def test_unknown_family_names_it_and_the_valid_ones() -> None:
    with pytest.raises(GraphoptError, match=r"unknown graph family 'grid'; valid families: "):
        generate("grid", 10)
    with pytest.raises(GraphoptError, match="erdos_renyi, layered, sbm, watts_strogatz, barabasi"):
        generate("grid", 10)


def test_unknown_parameter_is_named() -> None:
    with pytest.raises(GraphoptError, match=r"watts_strogatz: unknown parameter 'm'; valid .* k"):
        generate("watts_strogatz", 10, m=2)


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_signatures_list_the_common_options_with_their_defaults(family: str) -> None:
    # `generate` and dataset configs check keywords against the signature.
    parameters = inspect.signature(FAMILIES[family]).parameters
    common = list(CommonOptions.__annotations__)
    assert list(parameters)[-len(common) :] == common
    assert parameters["seed"].default == 0 and parameters["sizes"].default == DEFAULT_SIZES
    assert all(p.kind is not inspect.Parameter.VAR_KEYWORD for p in parameters.values())


# --------------------------------------------------------------------------- determinism
@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_same_seed_same_graph_other_seed_other_graph(family: str) -> None:
    first = generate(family, 300, seed=7)
    _assert_same(first, generate(family, 300, seed=7))
    other = generate(family, 300, seed=8)
    assert _undirected(first) != _undirected(other)
    assert not np.array_equal(first.op_runtime, other.op_runtime)
    assert not np.array_equal(first.tensor_size, other.tensor_size)


@pytest.mark.parametrize("family", FAMILY_NAMES)
@pytest.mark.parametrize("n", [2, 9, 250])
def test_one_tensor_per_op_consumed_by_its_successors(family: str, n: int) -> None:
    graph = generate(family, n, seed=1, **_valid_params(family, n))
    assert graph.n_ops == graph.n_tensors == n
    assert graph.op_names == tuple(f"op{i}" for i in range(n))
    assert graph.tensor_names == tuple(f"op{i}:0" for i in range(n))
    np.testing.assert_array_equal(graph.tensor_producer, np.arange(n))
    np.testing.assert_array_equal(np.diff(graph.op_output_ptr), np.ones(n))
    assert len(_undirected(graph)) == graph.n_edges  # no pair is joined twice
    assert graph.name == f"{family}_n{n}_s1"
    params = json.loads(json.dumps(graph.attrs))["params"]
    assert (graph.attrs["family"], graph.attrs["seed"], params["n"]) == (family, 1, n)


def test_undirected_families_are_oriented_by_a_random_rank() -> None:
    src, dst = erdos_renyi(200, seed=0).edge_index
    assert np.any(src > dst) and np.any(src < dst)  # op indices are not a topological order


def test_name_is_kept() -> None:
    assert erdos_renyi(5, name="mine").name == "mine"


# ------------------------------------------------------------------------------ families
@pytest.mark.parametrize(("n", "n_layers"), [(1, None), (7, 7), (400, None), (400, 5)])
def test_layered_edges_go_forward_with_a_parent_in_the_previous_layer(
    n: int, n_layers: int | None
) -> None:
    graph = layered(n, n_layers=n_layers, seed=2)
    layer = node_layers(graph)
    sizes = graph.attrs["layer_sizes"]
    assert len(sizes) == (n_layers or max(1, round(math.sqrt(n))))
    assert min(sizes) >= 1 and sum(sizes) == n
    assert np.all(np.diff(layer) >= 0)
    src, dst = graph.edge_index
    assert np.all(layer[src] < layer[dst])
    from_previous = layer[src] == layer[dst] - 1
    has_parent = np.zeros(n, dtype=bool)
    has_parent[dst[from_previous]] = True
    np.testing.assert_array_equal(has_parent, layer > 0)
    np.testing.assert_array_equal(graph.sources, np.flatnonzero(layer == 0))


def test_layered_fan_in_and_skip_rates() -> None:
    graph = layered(4000, fan_in=2.5, skip_prob=0.3, seed=0)
    layer = node_layers(graph)
    src, dst = graph.edge_index
    later = np.count_nonzero(layer > 0)
    deep = np.count_nonzero(layer > 1)
    assert np.count_nonzero(layer[src] == layer[dst] - 1) / later == pytest.approx(2.5, rel=0.05)
    assert np.count_nonzero(layer[src] < layer[dst] - 1) / deep == pytest.approx(0.3, rel=0.1)


def test_layered_default_mean_degree_is_about_six() -> None:
    graph = layered(1000, seed=0)
    assert 5.5 < 2 * graph.n_edges / graph.n_ops < 6.5


def test_node_layers_rejects_other_families() -> None:
    with pytest.raises(GraphoptError, match="has no layer_sizes, it was not made by layered"):
        node_layers(erdos_renyi(5))
    with pytest.raises(GraphoptError, match="has no block_sizes, it was not made by sbm"):
        node_blocks(layered(5))


@pytest.mark.parametrize(("n", "m"), [(2, 1), (5, 4), (300, 1), (300, 3), (300, 10)])
def test_barabasi_albert_edge_count(n: int, m: int) -> None:
    graph = barabasi_albert(n, m=m, seed=4)
    assert graph.n_edges == len(_undirected(graph)) == (n - m) * m


def test_dense_rewiring_and_attachment_resume_with_fresh_draws() -> None:
    # Rejection sampling here outruns the first batch of uniforms (for seed 30 of BA and for
    # most WS seeds), so the kernels stop and resume; counts and distinct pairs must still hold.
    graph = barabasi_albert(12, m=9, seed=30)
    assert graph.n_edges == len(_undirected(graph)) == 3 * 9
    for seed in range(10):
        graph = watts_strogatz(9, k=6, beta=1.0, seed=seed)
        assert graph.n_edges == len(_undirected(graph)) == 27


def test_barabasi_albert_attaches_preferentially() -> None:
    graph = barabasi_albert(3000, seed=0)
    degree = np.bincount(graph.edge_index.ravel(), minlength=graph.n_ops)
    assert degree.min() >= 3
    assert degree.max() > 40  # hubs; an ER graph of the same density peaks near 16
    assert degree[:10].mean() > 5 * degree[-1000:].mean()  # early ops collect edges


@pytest.mark.parametrize(
    ("n", "k", "beta"), [(1, 0, 0.5), (7, 6, 1.0), (50, 4, 0.3), (500, 6, 0.1)]
)
def test_watts_strogatz_edge_count(n: int, k: int, beta: float) -> None:
    graph = watts_strogatz(n, k=k, beta=beta, seed=5)
    assert graph.n_edges == len(_undirected(graph)) == n * k // 2


def test_watts_strogatz_without_rewiring_is_the_ring_lattice() -> None:
    n, k = 40, 6
    lattice = {
        (min(u, (u + j) % n), max(u, (u + j) % n)) for u in range(n) for j in range(1, k // 2 + 1)
    }
    assert _undirected(watts_strogatz(n, k=k, beta=0.0, seed=0)) == lattice
    rewired = _undirected(watts_strogatz(n, k=k, beta=1.0, seed=0))
    assert len(rewired & lattice) < len(lattice) // 2


def test_erdos_renyi_edge_count_is_binomial() -> None:
    n, p = 2000, 0.004
    pairs = n * (n - 1) / 2
    for seed in range(3):
        edges = erdos_renyi(n, p=p, seed=seed).n_edges
        assert abs(edges - p * pairs) < 4 * math.sqrt(pairs * p * (1 - p))
    assert erdos_renyi(30, p=0.0).n_edges == 0
    assert erdos_renyi(30, p=1.0).n_edges == 30 * 29 // 2
    assert erdos_renyi(4).attrs["params"]["p"] == 1.0  # avg_degree 6 > n - 1: capped
    assert erdos_renyi(1001, avg_degree=4.0).attrs["params"]["p"] == pytest.approx(0.004)


def test_stochastic_block_edges_are_mostly_inside_blocks() -> None:
    graph = stochastic_block(1000, seed=0)
    block = node_blocks(graph)
    assert graph.attrs["block_sizes"] == [250, 250, 250, 250]
    src, dst = graph.edge_index
    inside = np.count_nonzero(block[src] == block[dst]) / graph.n_edges
    assert 0.7 < inside < 0.9  # default intra_fraction 0.8
    assert 5.5 < 2 * graph.n_edges / graph.n_ops < 6.5
    params = graph.attrs["params"]
    assert params["p_in"] > 10 * params["p_out"]


def test_stochastic_block_explicit_probabilities() -> None:
    block_sizes = stochastic_block(10, n_blocks=3, p_in=1.0, p_out=0.0).attrs["block_sizes"]
    assert block_sizes == [4, 3, 3]
    only_inside = stochastic_block(10, n_blocks=3, p_in=1.0, p_out=0.0)
    assert only_inside.n_edges == 6 + 3 + 3
    only_across = stochastic_block(10, n_blocks=3, p_in=0.0, p_out=1.0)
    block = node_blocks(only_across)
    src, dst = only_across.edge_index
    assert only_across.n_edges == 45 - 12 and np.all(block[src] != block[dst])
    assert stochastic_block(2).attrs["block_sizes"] == [1, 1, 0, 0]


# ------------------------------------------------------------------ runtimes, sizes, flags
@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_runtimes_within_bounds(family: str) -> None:
    graph = generate(family, 200, seed=0, runtime_low=2.0, runtime_high=5.0)
    assert graph.op_runtime.min() >= 2.0 and graph.op_runtime.max() <= 5.0
    assert graph.op_runtime.std() > 0.5
    default = generate(family, 200, seed=0)
    assert default.op_runtime.min() >= 0.0 and default.op_runtime.max() <= 1.0
    constant = generate(family, 20, seed=0, runtime_low=0.5, runtime_high=0.5)
    np.testing.assert_array_equal(constant.op_runtime, 0.5)


@pytest.mark.parametrize(
    ("distribution", "low", "high"),
    [
        (SizeDistribution(), 1024, 1048576),
        (SizeDistribution("loguniform", low=1, high=10), 1, 10),
        (SizeDistribution("uniform", low=0, high=3), 0, 3),
        (SizeDistribution("uniform", low=100, high=100), 100, 100),
        (SizeDistribution("constant", value=0), 0, 0),
        (SizeDistribution("constant", value=4096), 4096, 4096),
        (SizeDistribution("lognormal", mean=8.0, sigma=1.0), 0, MAX_SIZE),
        (SizeDistribution("lognormal", mean=60.0, sigma=0.5), MAX_SIZE, MAX_SIZE),
    ],
)
def test_sizes_within_bounds(distribution: SizeDistribution, low: int, high: int) -> None:
    sizes = distribution.sample(np.random.default_rng(0), 5000)
    assert sizes.dtype == np.int64 and sizes.shape == (5000,)
    assert sizes.min() >= low and sizes.max() <= high
    if low == MAX_SIZE:  # 100 tensors of 2**53 bytes: beyond the graph's total-bytes limit
        with pytest.raises(GraphError, match="add up to"):
            erdos_renyi(100, sizes=distribution, temp_memory=distribution)
        return
    graph = erdos_renyi(100, sizes=distribution, temp_memory=distribution)
    assert graph.tensor_size.min() >= low and graph.tensor_size.max() <= high
    assert graph.op_temp_memory.min() >= low and graph.op_temp_memory.max() <= high
    assert json.loads(json.dumps(graph.attrs))["params"]["sizes"]["kind"] == distribution.kind


def test_size_distributions_have_their_shape() -> None:
    rng = np.random.default_rng(0)
    loguniform = SizeDistribution(low=1000, high=1_000_000).sample(rng, 20000)
    assert np.median(loguniform) == pytest.approx(math.sqrt(1000 * 1_000_000), rel=0.1)
    uniform = SizeDistribution("uniform", low=0, high=2).sample(rng, 3000)
    np.testing.assert_array_equal(np.unique(uniform), [0, 1, 2])
    lognormal = SizeDistribution("lognormal", mean=10.0, sigma=1.0).sample(rng, 20000)
    assert np.median(lognormal) == pytest.approx(math.exp(10.0), rel=0.1)


def test_temp_memory_defaults_to_zero() -> None:
    np.testing.assert_array_equal(layered(30).op_temp_memory, 0)


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_persistent_sources_marks_exactly_the_sources_outputs(family: str) -> None:
    graph = generate(family, 200, seed=3, persistent_sources=True)
    expected = np.zeros(graph.n_tensors, dtype=bool)
    expected[graph.sources] = True  # op i produces tensor i
    np.testing.assert_array_equal(graph.tensor_persistent, expected)
    assert 0 < expected.sum() < graph.n_ops
    assert not generate(family, 200, seed=3).tensor_persistent.any()


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_fusion_fields_keep_the_graph_and_time_ops_by_the_roofline(family: str) -> None:
    plain = generate(family, 300, seed=5)
    fused = generate(family, 300, seed=5, fusion=True)
    np.testing.assert_array_equal(fused.tensor_size, plain.tensor_size)
    np.testing.assert_array_equal(fused.consumer_op, plain.consumer_op)
    np.testing.assert_array_equal(fused.op_compute_time, plain.op_runtime)
    bandwidth, launch = fused.kernel
    traffic = fused.tensor_size + np.array(
        [fused.tensor_size[fused.inputs(op)].sum() for op in range(fused.n_ops)]
    )
    np.testing.assert_allclose(
        fused.op_runtime, np.maximum(fused.op_compute_time, traffic / bandwidth) + launch
    )
    shares = np.bincount(fused.op_fusion, minlength=4) / fused.n_ops
    np.testing.assert_allclose(shares, [0.2, 0.5, 0.15, 0.15], atol=0.08)
    assert fused.attrs["params"]["fusion"] and plain.kernel is None and not plain.op_fusion.any()


# ------------------------------------------------------------------------------- augment
def test_augment_keeps_topology_and_scales_each_size() -> None:
    graph = stochastic_block(200, seed=0)
    copies = augment(graph, 3, seed=1)
    assert [copy.name for copy in copies] == [f"{graph.name}/aug{k}" for k in range(3)]
    for copy in copies:
        for key in ("consumer_ptr", "consumer_op", "op_runtime", "op_temp_memory"):
            np.testing.assert_array_equal(_arrays(copy)[key], _arrays(graph)[key])
        ratio = copy.tensor_size / graph.tensor_size
        slack = 0.5 / graph.tensor_size  # rounding to the nearest byte
        assert np.all(ratio >= 0.5 - slack) and np.all(ratio <= 1.5 + slack)
        assert ratio.std() > 0.2  # one draw per tensor, not one per copy
    assert not np.array_equal(copies[0].tensor_size, copies[1].tensor_size)
    again = augment(graph, 3, seed=1)
    for a, b in zip(copies, again, strict=True):
        np.testing.assert_array_equal(a.tensor_size, b.tensor_size)
    assert augment(graph, 0) == []


def test_augment_factor_range() -> None:
    graph = erdos_renyi(50, sizes=SizeDistribution("constant", value=1000))
    (copy,) = augment(graph, 1, low=2.0, high=2.0)
    np.testing.assert_array_equal(copy.tensor_size, 2000)


# -------------------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: erdos_renyi(0), r"erdos_renyi: n must be an integer >= 1, got n=0"),
        (lambda: layered(2.5), r"layered: n must be an integer >= 1, got n=2.5"),
        (lambda: erdos_renyi(10, p=1.5), r"erdos_renyi: p must be a finite number in \[0.0, 1.0\]"),
        (lambda: erdos_renyi(10, p=-0.1), r"erdos_renyi: p must be .*, got p=-0.1"),
        (lambda: erdos_renyi(10, avg_degree=-1.0), r"erdos_renyi: avg_degree must be .* >= 0.0"),
        (
            lambda: erdos_renyi(10, seed=-1),
            r"erdos_renyi: seed must be an integer >= 0, got seed=-1",
        ),
        (lambda: layered(10, n_layers=11), r"layered: n_layers must be an integer in \[1, 10\]"),
        (lambda: layered(10, n_layers=0), r"layered: n_layers must be an integer in \[1, 10\]"),
        (lambda: layered(10, fan_in=0.5), r"layered: fan_in must be a finite number >= 1.0"),
        (lambda: layered(10, skip_prob=2.0), r"layered: skip_prob must be .* in \[0.0, 1.0\]"),
        (lambda: stochastic_block(10, n_blocks=0), r"sbm: n_blocks must be an integer >= 1"),
        (
            lambda: stochastic_block(10, p_in=1.1),
            r"sbm: p_in must be a finite number in \[0.0, 1.0",
        ),
        (lambda: stochastic_block(10, p_out=-1), r"sbm: p_out must be a finite number in \[0.0, 1"),
        (lambda: stochastic_block(10, intra_fraction=1.5), r"sbm: intra_fraction must be"),
        (lambda: watts_strogatz(10, k=7), r"watts_strogatz: k must be even and < n, got k=7"),
        (lambda: watts_strogatz(6, k=6), r"watts_strogatz: k must be even and < n, got k=6, n=6"),
        (lambda: watts_strogatz(10, k=-2), r"watts_strogatz: k must be an integer >= 0, got k=-2"),
        (lambda: watts_strogatz(10, beta=1.5), r"watts_strogatz: beta must be .* in \[0.0, 1.0\]"),
        (lambda: layered(10, fusion="yes"), r"layered: fusion must be a bool, got 'yes'"),
        (lambda: barabasi_albert(10, m=0), r"barabasi_albert: m must be >= 1 and < n, got m=0"),
        (lambda: barabasi_albert(10, m=10), r"barabasi_albert: m must be >= 1 and < n, got m=10"),
        (lambda: barabasi_albert(1, m=1), r"barabasi_albert: n must be an integer >= 2, got n=1"),
        (lambda: erdos_renyi(10, runtime_low=-1.0), r"erdos_renyi: runtime_low must be .* >= 0.0"),
        (
            lambda: layered(10, runtime_low=2.0, runtime_high=1.0),
            r"layered: runtime_low must be <= runtime_high, got runtime_low=2.0, runtime_high=1.0",
        ),
        (lambda: erdos_renyi(10, runtime_high=math.inf), r"runtime_high must be a finite number"),
        (lambda: erdos_renyi(10, sizes=1024), r"erdos_renyi: sizes must be a SizeDistribution"),
        (lambda: erdos_renyi(10, temp_memory=0), r"temp_memory must be a SizeDistribution or None"),
        (lambda: erdos_renyi(10, persistent_sources=1), r"persistent_sources must be a bool"),
        (lambda: erdos_renyi(10, name=""), r"erdos_renyi: name must be a non-empty string or None"),
        (
            lambda: SizeDistribution("gaussian"),
            r"SizeDistribution: kind must be one of 'loguniform', 'uniform', 'constant', "
            r"'lognormal', got kind='gaussian'",
        ),
        (
            lambda: SizeDistribution("uniform", low=5, high=3),
            r"SizeDistribution: low must be <= high, got low=5, high=3",
        ),
        (lambda: SizeDistribution(low=0), r"SizeDistribution: low must be an integer in \[1, "),
        (lambda: SizeDistribution("uniform", low=-1), r"SizeDistribution: low must be .* \[0, "),
        (lambda: SizeDistribution(high=2**60), r"SizeDistribution: high must be an integer in"),
        (lambda: SizeDistribution("constant", value=-5), r"SizeDistribution: value must be an int"),
        (lambda: SizeDistribution(low=1.5), r"SizeDistribution: low must be an integer"),
        (lambda: SizeDistribution(mean=math.nan), r"SizeDistribution: mean must be a finite num"),
        (lambda: SizeDistribution(sigma=-1.0), r"SizeDistribution: sigma must be .* >= 0.0"),
        (lambda: augment(erdos_renyi(5), -1), r"augment: copies must be an integer >= 0"),
        (lambda: augment(erdos_renyi(5), 1, low=-0.5), r"augment: low must be .* >= 0.0"),
        (
            lambda: augment(erdos_renyi(5), 1, low=1.5, high=0.5),
            r"augment: low must be <= high, got low=1.5, high=0.5",
        ),
    ],
)
def test_invalid_parameters_raise_with_the_rule(call, message: str) -> None:
    with pytest.raises(GraphoptError, match=message):
        call()


# ------------------------------------------------------------------------------ property
@settings(
    max_examples=100, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(
    family=st.sampled_from(FAMILY_NAMES),
    n=st.integers(1, 60),
    seed=st.integers(0, 2**32),
)
def test_every_family_is_valid_and_deterministic_for_small_n(
    family: str, n: int, seed: int
) -> None:
    if family == "barabasi_albert" and n == 1:
        with pytest.raises(GraphoptError, match="n must be an integer >= 2"):
            generate(family, n, seed=seed)
        return
    params = _valid_params(family, n)
    graph = generate(family, n, seed=seed, **params)
    assert graph.n_ops == n
    assert graph.topological_order.shape == (n,)
    src, dst = graph.edge_index
    assert np.all(src != dst)
    _assert_same(graph, generate(family, n, seed=seed, **params))
