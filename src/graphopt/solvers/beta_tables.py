"""Fast sampling of many genes from a few Beta distributions, by inverse-CDF tables.

REGAL's quantized actions give at most k^2 distinct Beta distributions per graph (paper 001
A.2), while BRKGA draws millions of mutant genes from them. numpy's `Generator.beta` costs about
100 ns a gene with per-gene parameters, ten times a uniform draw, which would make REGAL's
search much slower than uniform BRKGA's (paper 001 table 2 blames exactly this for its extra
time). Instead, each distinct distribution gets a table of its quantile function at
`TABLE_SIZE + 1` evenly spaced probabilities, and a gene is a uniform draw pushed through the
piecewise-linear interpolation of its table. The tables come from the CDF, integrated exactly
enough by Simpson's rule after the substitution t = s^(1/alpha) (resp. 1 - t = s^(1/beta) on
the upper half), which removes the endpoint singularities of alpha, beta < 1.

`lookup` (numba) has the plain twin `reference_lookup`.
"""

from __future__ import annotations

from functools import cache

import numba
import numpy as np

TABLE_SIZE = 4096
"""Intervals of each quantile table: probabilities are resolved to 1/4096."""

_GRID = 8192
"""Simpson intervals per half of [0, 1] when integrating a CDF."""


def _half_cdf(a: float, b: float) -> tuple[np.ndarray, np.ndarray]:
    """Unnormalized CDF of Beta(a, b) on [0, 1/2]: points x and integral from 0 to x.

    With t = s^(1/a), t^(a-1) (1-t)^(b-1) dt = (1/a) (1 - s^(1/a))^(b-1) ds, bounded for
    t <= 1/2.
    """
    s = np.linspace(0.0, 0.5**a, _GRID + 1)
    integrand = (1.0 - s ** (1.0 / a)) ** (b - 1.0) / a
    h = s[1] - s[0]
    # Cumulative Simpson on pairs of intervals, trapezoid inside each pair's first half.
    pairs = h / 3.0 * (integrand[0:-2:2] + 4.0 * integrand[1:-1:2] + integrand[2::2])
    cumulative = np.concatenate([[0.0], np.cumsum(pairs)])
    return s[::2] ** (1.0 / a), cumulative


@cache
def quantile_table(alpha: float, beta: float) -> np.ndarray:
    """[TABLE_SIZE + 1] quantiles of Beta(alpha, beta) at probabilities 0, 1/T, ..., 1."""
    lower_x, lower = _half_cdf(alpha, beta)
    upper_x, upper = _half_cdf(beta, alpha)
    total = lower[-1] + upper[-1]
    x = np.concatenate([lower_x, 1.0 - upper_x[::-1][1:]])
    cdf = np.concatenate([lower, total - upper[::-1][1:]]) / total
    probabilities = np.linspace(0.0, 1.0, TABLE_SIZE + 1)
    table = np.interp(probabilities, cdf, x)
    table.flags.writeable = False
    return table


def tables_for(alpha: np.ndarray, beta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Quantile tables of the distinct (alpha, beta) pairs, and each gene's table.

    Returns:
        tables [D, TABLE_SIZE + 1] float64 and gene_table [n_genes] int32 (D = 0 when there
        are no genes, e.g. the chromosome of a graph without ops).
    """
    # Pairs ranked as (alpha, beta), numbered through each parameter's distinct values: a
    # row-wise np.unique sorts records, which costs more than the rest of a solve's set-up.
    alphas, alpha_rank = np.unique(alpha, return_inverse=True)
    betas, beta_rank = np.unique(beta, return_inverse=True)
    pairs, gene_table = np.unique(alpha_rank * len(betas) + beta_rank, return_inverse=True)
    tables = np.zeros((len(pairs), TABLE_SIZE + 1))
    for row, p in enumerate(pairs):
        tables[row] = quantile_table(float(alphas[p // len(betas)]), float(betas[p % len(betas)]))
    return tables, gene_table.reshape(-1).astype(np.int32)


@numba.njit(cache=True, nogil=True)
def lookup(uniforms: np.ndarray, gene_table: np.ndarray, tables: np.ndarray, out: np.ndarray):
    """out[i, g] = the gene's quantile function at uniforms[i, g] (linear interpolation).

    Shapes:
        uniforms, out: [m, n_genes] float64; gene_table: [n_genes] int32;
        tables: [D, T + 1] float64.
    """
    size = tables.shape[1] - 1
    for i in range(uniforms.shape[0]):
        for g in range(uniforms.shape[1]):
            position = uniforms[i, g] * size
            k = min(int(position), size - 1)
            fraction = position - k
            row = tables[gene_table[g]]
            out[i, g] = row[k] + fraction * (row[k + 1] - row[k])


def reference_lookup(
    uniforms: np.ndarray, gene_table: np.ndarray, tables: np.ndarray
) -> np.ndarray:
    """Plain numpy twin of `lookup`."""
    size = tables.shape[1] - 1
    position = uniforms * size
    k = np.minimum(position.astype(np.int64), size - 1)
    rows = tables[gene_table][None, :, :].repeat(uniforms.shape[0], axis=0)
    low = np.take_along_axis(rows, k[..., None], axis=2)[..., 0]
    high = np.take_along_axis(rows, k[..., None] + 1, axis=2)[..., 0]
    return low + (position - k) * (high - low)


class BetaSampler:
    """Draws [m, n_genes] chromosomes, gene g from Beta(alpha[g], beta[g]), through tables."""

    def __init__(self, alpha: np.ndarray, beta: np.ndarray, rng: np.random.Generator) -> None:
        self.tables, self.gene_table = tables_for(
            np.asarray(alpha, dtype=np.float64), np.asarray(beta, dtype=np.float64)
        )
        self.rng = rng

    def __call__(self, m: int) -> np.ndarray:
        """M chromosomes."""
        uniforms = self.rng.random((m, self.gene_table.shape[0]))
        out = np.empty_like(uniforms)
        lookup(uniforms, self.gene_table, self.tables, out)
        return out
