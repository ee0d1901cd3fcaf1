"""The papers' comparison metrics (paper 001 section 4.3, paper 000 Table 1).

All take per-graph objective values (lower is better) as arrays aligned over graphs.
"""

from __future__ import annotations

import numpy as np

TIE_TOLERANCE = 1e-9
"""Relative difference under which two objective values tie (the contract's 1e-9)."""


def improvement_over(values: np.ndarray, baseline: np.ndarray) -> np.ndarray:
    """Per-graph % improvement over a baseline: 100 * (baseline - value) / baseline."""
    values, baseline = np.asarray(values, float), np.asarray(baseline, float)
    return 100.0 * (baseline - values) / np.where(baseline == 0, 1.0, baseline)


def gap_from_best(values: np.ndarray, best: np.ndarray) -> np.ndarray:
    """Per-graph % gap from the best known value: 100 * (value - best) / best."""
    values, best = np.asarray(values, float), np.asarray(best, float)
    return 100.0 * (values - best) / np.where(best == 0, 1.0, best)


def geometric_mean_gap(gaps: np.ndarray) -> float:
    """Geometric mean of (1 + gap/100), as a % gap; zero gaps (optimal graphs) are allowed."""
    ratios = 1.0 + np.asarray(gaps, float) / 100.0
    return float(100.0 * (np.exp(np.mean(np.log(ratios))) - 1.0)) if ratios.size else 0.0


def wins_ties_losses(values: np.ndarray, baseline: np.ndarray) -> tuple[int, int, int]:
    """Graphs where `values` beat, tie or lose to the baseline (ties within 1e-9 relative)."""
    values, baseline = np.asarray(values, float), np.asarray(baseline, float)
    scale = np.maximum(np.abs(baseline), np.abs(values))
    tie = np.abs(values - baseline) <= TIE_TOLERANCE * np.where(scale == 0, 1.0, scale)
    wins = int(np.sum(~tie & (values < baseline)))
    losses = int(np.sum(~tie & (values > baseline)))
    return wins, int(np.sum(tie)), losses
