import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphopt.learning.systems.regal.actions import beta_parameters
from graphopt.solvers.beta_tables import (
    TABLE_SIZE,
    BetaSampler,
    lookup,
    quantile_table,
    reference_lookup,
    tables_for,
)

_M, _V = np.meshgrid(np.arange(4), np.arange(4))
QUANTIZED = [
    (float(a), float(b)) for a, b in zip(*beta_parameters(_M.ravel(), _V.ravel(), 4), strict=True)
]


@pytest.mark.parametrize(
    "alpha,beta",
    [*QUANTIZED, (1.0, 1.0), (2.0, 5.0), (0.5, 0.5)],
)
def test_tables_match_numpy_beta_samples(alpha, beta) -> None:
    table = quantile_table(alpha, beta)
    assert table[0] == pytest.approx(0.0, abs=1e-12) and table[-1] == pytest.approx(1.0)
    assert np.all(np.diff(table) >= 0)
    samples = np.sort(np.random.default_rng(0).beta(alpha, beta, 200_000))
    probabilities = np.linspace(0, 1, TABLE_SIZE + 1)
    low = np.searchsorted(samples, table, "left") / samples.size
    high = np.searchsorted(samples, table, "right") / samples.size
    error = np.maximum(low - probabilities, probabilities - high).clip(min=0)
    assert error.max() < 0.006  # Kolmogorov-Smirnov distance; sampling noise is ~0.003


def test_uniform_table_is_the_identity() -> None:
    np.testing.assert_allclose(quantile_table(1.0, 1.0), np.linspace(0, 1, TABLE_SIZE + 1))


@settings(max_examples=50, deadline=None)
@given(
    n_tables=st.integers(1, 5),
    n_genes=st.integers(1, 40),
    m=st.integers(1, 6),
    seed=st.integers(0, 2**32 - 1),
)
def test_lookup_matches_reference(n_tables, n_genes, m, seed) -> None:
    rng = np.random.default_rng(seed)
    tables = np.sort(rng.random((n_tables, 9)), axis=1)
    gene_table = rng.integers(0, n_tables, n_genes).astype(np.int32)
    uniforms = rng.random((m, n_genes))
    uniforms[0, 0] = 0.0
    out = np.empty_like(uniforms)
    lookup(uniforms, gene_table, tables, out)
    np.testing.assert_allclose(out, reference_lookup(uniforms, gene_table, tables), rtol=1e-14)


def test_sampler_groups_genes_and_is_seeded() -> None:
    alpha = np.array([0.2, 1.0, 0.2, 3.2])
    beta = np.array([0.05, 1.0, 0.05, 0.8])
    tables, gene_table = tables_for(alpha, beta)
    assert tables.shape == (3, TABLE_SIZE + 1)
    assert gene_table[0] == gene_table[2] != gene_table[1]
    first = BetaSampler(alpha, beta, np.random.default_rng(4))(1000)
    again = BetaSampler(alpha, beta, np.random.default_rng(4))(1000)
    np.testing.assert_array_equal(first, again)
    assert first.shape == (1000, 4) and first.min() >= 0 and first.max() <= 1
    np.testing.assert_allclose(first.mean(axis=0), alpha / (alpha + beta), atol=0.03)


@settings(max_examples=40, deadline=None)
@given(picks=st.lists(st.sampled_from([*QUANTIZED, (1.0, 1.0), (1.0, 0.5)]), min_size=1))
def test_tables_for_numbers_distinct_pairs_in_order(picks) -> None:
    alpha = np.array([a for a, _ in picks])
    beta = np.array([b for _, b in picks])
    tables, gene_table = tables_for(alpha, beta)
    pairs, inverse = np.unique(np.stack([alpha, beta], axis=1), axis=0, return_inverse=True)
    np.testing.assert_array_equal(gene_table, inverse.reshape(-1))
    np.testing.assert_array_equal(tables, [quantile_table(a, b) for a, b in pairs])


def test_no_genes_need_no_tables() -> None:
    # The chromosome of a graph without ops is empty; BRKGA's Beta mutants must still sample.
    tables, gene_table = tables_for(np.zeros(0), np.zeros(0))
    assert tables.shape == (0, TABLE_SIZE + 1) and gene_table.shape == (0,)
    assert BetaSampler(np.zeros(0), np.zeros(0), np.random.default_rng(0))(5).shape == (5, 0)
