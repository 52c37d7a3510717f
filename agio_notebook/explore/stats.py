"""The statistics of an evaluation: means, standard errors, bootstrap intervals, paired comparisons.

A sample run K times (epochs) gives K correlated scores, not K independent ones, so with K > 1 the
standard error is clustered by sample (the cluster-robust estimator; with every sample scored K times
it equals the standard error of the per-sample means) and the bootstrap resamples whole samples
(a cluster bootstrap). Two variants scored on the same samples are compared pairwise: a paired
bootstrap of the mean difference over samples, and McNemar's exact test when the scores are 0/1.
Every interval is a seeded percentile bootstrap: the same scores and seed give the same interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

RESAMPLES = 2000
CONFIDENCE = 0.95
_CHUNK = 4_000_000  # resampled indices drawn at a time (memory stays ~32 MB whatever the size)


@dataclass(frozen=True)
class Estimate:
    """A mean with its standard error and interval; ``n`` samples (clusters), ``scores`` values."""

    mean: float
    stderr: float
    low: float
    high: float
    n: int
    scores: int
    method: str


def _clusters(values: Sequence[float], clusters: Sequence[object] | None) -> tuple[np.ndarray, np.ndarray]:
    """Per-cluster sums and counts (each value its own cluster when ``clusters`` is None)."""
    x = np.asarray(values, dtype=np.float64)
    if clusters is None:
        return x, np.ones_like(x)
    codes, _ = _codes(clusters)
    sums = np.bincount(codes, weights=x)
    counts = np.bincount(codes).astype(np.float64)
    return sums, counts


def _codes(labels: Sequence[object]) -> tuple[np.ndarray, list[object]]:
    seen: dict[object, int] = {}
    codes = np.fromiter((seen.setdefault(v, len(seen)) for v in labels), dtype=np.int64, count=len(labels))
    return codes, list(seen)


def stderr(values: Sequence[float], clusters: Sequence[object] | None = None) -> float:
    """Standard error of the mean of ``values``: ``s / sqrt(n)``, or clustered by ``clusters``
    (cluster-robust, with the small-sample factor ``G / (G - 1)``; NaN with fewer than 2 clusters)."""
    sums, counts = _clusters(values, clusters)
    g = len(sums)
    if g < 2:
        return math.nan
    total = counts.sum()
    mean = sums.sum() / total
    if clusters is None:
        return float(np.std(sums, ddof=1) / math.sqrt(g))
    resid = sums - counts * mean  # each cluster's summed deviation from the grand mean
    return float(math.sqrt(g / (g - 1) * np.sum(resid ** 2)) / total)


def bootstrap_means(sums: np.ndarray, counts: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    """Means of ``resamples`` resamples of the clusters (with replacement).

    Resampling g clusters draws how many times each cluster comes back, and clusters with the same
    (sum, count) are interchangeable, so when few distinct ones exist (0/1 scores over a few epochs:
    a handful) each resample is one multinomial draw over them: the same distribution, in O(distinct)
    per resample instead of O(g). Otherwise the clusters' indices are drawn, in bounded chunks.
    """
    g = len(sums)
    rng = np.random.default_rng(seed)
    distinct, freq = np.unique(np.stack([sums, counts], axis=1), axis=0, return_counts=True)
    if len(distinct) <= max(16, g // 8):
        picks = rng.multinomial(g, freq / g, size=resamples).astype(np.float64)
        return (picks @ distinct[:, 0]) / (picks @ distinct[:, 1])
    out = np.empty(resamples)
    rows = max(1, _CHUNK // max(1, g))
    balanced = bool(np.all(counts == counts[0]))  # every cluster the same size: the denominator is fixed
    for start in range(0, resamples, rows):
        stop = min(resamples, start + rows)
        idx = rng.integers(0, g, size=(stop - start, g), dtype=np.int32)
        total = g * counts[0] if balanced else counts[idx].sum(axis=1)
        out[start:stop] = sums[idx].sum(axis=1) / total
    return out


def percentile_interval(draws: np.ndarray, confidence: float) -> tuple[float, float]:
    low, high = np.quantile(draws, [(1 - confidence) / 2, (1 + confidence) / 2])
    return float(low), float(high)


def method_name(clustered: bool, resamples: int = RESAMPLES, confidence: float = CONFIDENCE) -> str:
    """The interval's method, as a column header names it."""
    what = "cluster bootstrap (samples resampled)" if clustered else "bootstrap"
    return f"{confidence:.0%} percentile {what}, {resamples:,} resamples"


def estimate(values: Sequence[float], clusters: Sequence[object] | None = None, *, seed: int = 0,
             confidence: float = CONFIDENCE, resamples: int = RESAMPLES) -> Estimate:
    """Mean, standard error and bootstrap interval of ``values``; clustered when ``clusters`` repeat."""
    x = np.asarray(values, dtype=np.float64)
    keep = ~np.isnan(x)
    x = x[keep]
    groups = None if clusters is None else [c for c, k in zip(clusters, keep) if k]
    sums, counts = _clusters(x, groups)
    clustered = groups is not None and len(sums) < len(x)
    if not clustered:
        groups, sums, counts = None, x, np.ones_like(x)
    method = method_name(clustered, resamples, confidence)
    if len(x) == 0:
        return Estimate(math.nan, math.nan, math.nan, math.nan, 0, 0, method)
    mean = float(x.mean())
    if len(sums) < 2:
        return Estimate(mean, math.nan, math.nan, math.nan, len(sums), len(x), method)
    low, high = percentile_interval(bootstrap_means(sums, counts, resamples, seed), confidence)
    return Estimate(mean, stderr(x, groups), low, high, len(sums), len(x), method)


@dataclass(frozen=True)
class McNemar:
    """McNemar's exact test on paired 0/1 outcomes: ``only_a`` pairs where only A passed, ``only_b``
    where only B did; ``p`` two-sided (binomial on the discordant pairs)."""

    only_a: int
    only_b: int
    p: float

    @property
    def method(self) -> str:
        return "McNemar's exact test (binomial on the discordant pairs)"


def mcnemar(a: Sequence[float], b: Sequence[float]) -> McNemar:
    """Paired 0/1 outcomes of A and B on the same samples."""
    from scipy.special import bdtr  # the binomial CDF (scipy.stats itself takes seconds to import)

    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    only_a = int(np.sum((x == 1) & (y == 0)))
    only_b = int(np.sum((x == 0) & (y == 1)))
    n = only_a + only_b
    # two-sided exact binomial test at 1/2: the distribution is symmetric, so twice the smaller tail
    p = 1.0 if n == 0 else min(1.0, 2.0 * float(bdtr(min(only_a, only_b), n, 0.5)))
    return McNemar(only_a, only_b, p)


def paired(a: Sequence[float], b: Sequence[float], *, seed: int = 0, confidence: float = CONFIDENCE,
           resamples: int = RESAMPLES) -> Estimate:
    """The mean difference ``b - a`` over paired samples (each already averaged over its epochs), its
    standard error and a paired bootstrap interval (samples resampled, both sides together)."""
    d = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
    d = d[~np.isnan(d)]
    method = f"{confidence:.0%} paired percentile bootstrap (samples resampled), {resamples:,} resamples"
    if len(d) == 0:
        return Estimate(math.nan, math.nan, math.nan, math.nan, 0, 0, method)
    if len(d) < 2:
        return Estimate(float(d.mean()), math.nan, math.nan, math.nan, 1, 1, method)
    low, high = percentile_interval(bootstrap_means(d, np.ones_like(d), resamples, seed), confidence)
    return Estimate(float(d.mean()), float(np.std(d, ddof=1) / math.sqrt(len(d))), low, high, len(d), len(d), method)
