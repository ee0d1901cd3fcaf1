"""The papers' comparison metrics (paper 001 section 4.3, paper 000 Table 1).

All take per-graph objective values (lower is better) as arrays aligned over graphs.

Relative metrics divide by a reference value (BRKGA's, the best known), which is 0 on some
degenerate graphs (no ops; all runtimes 0, where one solution has a makespan of 0 and another
pays for transfers). There a value of 0 ties the reference (0 %) and any other value is worse
without bound (+-inf %): the ratio the papers define, stated rather than divided by zero or
rescaled into a finite number that would read like a real percentage.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

TIE_TOLERANCE = 1e-9
"""Relative difference under which two objective values tie (the contract's 1e-9)."""


def _percent_of(difference: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """100 * difference / reference; where the reference is 0, 0 or +-inf (module docstring)."""
    unbounded = np.where(difference == 0, 0.0, np.copysign(np.inf, difference))
    ratio = np.divide(
        100.0 * difference, reference, out=np.zeros(difference.shape), where=reference != 0
    )
    return np.where(reference == 0, unbounded, ratio)


def improvement_over(values: np.ndarray, baseline: np.ndarray) -> np.ndarray:
    """Per-graph % improvement over a baseline: 100 * (baseline - value) / baseline.

    -inf where the baseline is 0 and the value is not (module docstring).
    """
    values, baseline = np.broadcast_arrays(np.asarray(values, float), np.asarray(baseline, float))
    return _percent_of(baseline - values, baseline)


def gap_from_best(values: np.ndarray, best: np.ndarray) -> np.ndarray:
    """Per-graph % gap from the best known value: 100 * (value - best) / best.

    +inf where the best is 0 and the value is not (module docstring).
    """
    values, best = np.broadcast_arrays(np.asarray(values, float), np.asarray(best, float))
    return _percent_of(values - best, best)


def geometric_mean_gap(gaps: np.ndarray) -> float:
    """Geometric mean of (1 + gap/100), as a % gap; zero gaps (optimal graphs) are allowed.

    +inf when some gap is (a graph whose best is 0, missed).
    """
    ratios = 1.0 + np.asarray(gaps, float) / 100.0
    return float(100.0 * (np.exp(np.mean(np.log(ratios))) - 1.0)) if ratios.size else 0.0


def ties(values: np.ndarray, baseline: np.ndarray) -> np.ndarray:
    """Per graph, whether `values` ties the baseline (within 1e-9 relative)."""
    values, baseline = np.asarray(values, float), np.asarray(baseline, float)
    scale = np.maximum(np.abs(baseline), np.abs(values))
    return np.abs(values - baseline) <= TIE_TOLERANCE * np.where(scale == 0, 1.0, scale)


def wins_ties_losses(values: np.ndarray, baseline: np.ndarray) -> tuple[int, int, int]:
    """Graphs where `values` beat, tie or lose to the baseline (ties within 1e-9 relative)."""
    values, baseline = np.asarray(values, float), np.asarray(baseline, float)
    tie = ties(values, baseline)
    wins = int(np.sum(~tie & (values < baseline)))
    losses = int(np.sum(~tie & (values > baseline)))
    return wins, int(np.sum(tie)), losses


_T_975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045,
)  # fmt: skip
"""Student's t 97.5% quantiles for 1..29 degrees of freedom (scipy is not a dependency)."""


def mean_with_ci(values: np.ndarray) -> tuple[float, float, float]:
    """Mean and its 95% confidence interval (t below 30 values, normal from 30 on).

    Table 1's averages come from a few dozen graphs, so the interval says whether a difference
    between solvers is more than noise. The bounds are NaN for fewer than two values, and
    when a value is infinite (the mean is then that infinity: see the module docstring).
    """
    values = np.asarray(values, float)
    if values.size == 0:
        return float("nan"), float("nan"), float("nan")
    mean = float(np.mean(values))
    if values.size < 2 or not np.all(np.isfinite(values)):
        return mean, float("nan"), float("nan")
    quantile = _T_975[values.size - 2] if values.size < 30 else 1.96
    half = quantile * float(np.std(values, ddof=1)) / np.sqrt(values.size)
    return mean, mean - half, mean + half


def mean_and_half_width(values: Sequence[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95% confidence interval (NaN below two values)."""
    mean, low, high = mean_with_ci(np.array(values, dtype=float))
    return mean, (high - low) / 2


def gain_line(gains: np.ndarray, digits: int = 2, unit: str = " %", tie: float = 1e-9) -> str:
    """'mean [low, high] over n; better b, equal e, worse w' of per-item gains (> 0: better).

    The one line the learning benchmarks print for a paired comparison, so the mean never
    appears without its 95 % CI (`mean_with_ci`) and the count of items on each side.
    """
    gains = np.asarray(gains, float)
    mean, low, high = mean_with_ci(gains)
    better, equal = int((gains > tie).sum()), int((np.abs(gains) <= tie).sum())
    interval = (
        f"[{low:+.{digits}f}, {high:+.{digits}f}]" if np.isfinite([low, high]).all() else "[no CI]"
    )
    return (
        f"{mean:+.{digits}f}{unit} {interval} over {gains.size}; "
        f"better {better}, equal {equal}, worse {gains.size - better - equal}"
    )
