"""The statistics of evaluate(): each against a textbook case, and against SciPy where it has the same
estimator or test."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from agio_notebook.explore import stats


def test_the_standard_error_is_the_textbook_one_and_scipys():
    values = [2, 4, 4, 4, 5, 5, 7, 9]  # the textbook set: mean 5, sample sd 2.138
    assert stats.stderr(values) == pytest.approx(2.13809 / math.sqrt(8), abs=1e-5)
    rng = np.random.default_rng(3)
    for n in (2, 7, 250):
        x = rng.normal(10, 3, n)
        assert stats.stderr(x) == pytest.approx(sps.sem(x))
    assert math.isnan(stats.stderr([1.0]))


def _sandwich_se(values, clusters):
    """The cluster-robust (CR1) standard error of an intercept-only regression, by its matrix formula."""
    y = np.asarray(values, dtype=float)
    X = np.ones((len(y), 1))
    beta = np.linalg.solve(X.T @ X, X.T @ y)
    u = y - X @ beta
    meat = np.zeros((1, 1))
    groups = sorted(set(clusters))
    for g in groups:
        idx = [i for i, c in enumerate(clusters) if c == g]
        s = X[idx].T @ u[idx]
        meat += np.outer(s, s)
    bread = np.linalg.inv(X.T @ X)
    G = len(groups)
    return float(np.sqrt(G / (G - 1) * (bread @ meat @ bread))[0, 0])


def test_clustered_standard_errors_match_the_sandwich_formula_and_the_per_sample_means():
    rng = np.random.default_rng(5)
    # balanced: 40 samples x 3 epochs; the clustered error is the standard error of the 40 sample means
    effects = rng.normal(0, 1, 40)
    values = [e + rng.normal(0, 0.5) for e in effects for _ in range(3)]
    clusters = [i for i in range(40) for _ in range(3)]
    means = np.asarray(values).reshape(40, 3).mean(axis=1)
    assert stats.stderr(values, clusters) == pytest.approx(sps.sem(means))
    assert stats.stderr(values, clusters) == pytest.approx(_sandwich_se(values, clusters))
    # correlated epochs: ignoring the clusters would understate the error
    assert stats.stderr(values, clusters) > 1.4 * stats.stderr(values)
    # unbalanced (a sample lost an epoch): still the sandwich formula
    keep = [i for i in range(len(values)) if i not in (4, 17, 18, 59)]
    v2, c2 = [values[i] for i in keep], [clusters[i] for i in keep]
    assert stats.stderr(v2, c2) == pytest.approx(_sandwich_se(v2, c2))
    # one value per cluster: it is the plain standard error again
    assert stats.stderr(values, list(range(len(values)))) == pytest.approx(sps.sem(values))


def test_the_bootstrap_interval_agrees_with_scipys():
    rng = np.random.default_rng(11)
    x = rng.exponential(2.0, 300)
    ours = stats.estimate(x, seed=1, resamples=5000)
    theirs = sps.bootstrap((x,), np.mean, method="percentile", n_resamples=5000, random_state=2).confidence_interval
    se = sps.sem(x)
    # two independent Monte Carlo draws of the same interval: their endpoints differ by ~0.1 se
    assert abs(ours.low - theirs.low) < 0.25 * se and abs(ours.high - theirs.high) < 0.25 * se
    assert ours.mean == pytest.approx(x.mean()) and ours.stderr == pytest.approx(se)
    assert ours.method == "95% percentile bootstrap, 5,000 resamples"
    # textbook: for a large sample the percentile interval is close to mean +- 1.96 se
    assert ours.low == pytest.approx(x.mean() - 1.96 * se, abs=0.2 * se)
    assert ours.high == pytest.approx(x.mean() + 1.96 * se, abs=0.2 * se)


def test_the_cluster_bootstrap_resamples_whole_samples_as_scipys_paired_bootstrap_does():
    rng = np.random.default_rng(12)
    effects = rng.normal(0.6, 0.2, 80)
    values = np.clip([e + rng.normal(0, 0.1) for e in effects for _ in range(3)], 0, 1)
    clusters = [i for i in range(80) for _ in range(3)]
    ours = stats.estimate(values, clusters, seed=3, resamples=5000)
    sums = np.asarray(values).reshape(80, 3).sum(axis=1)
    counts = np.full(80, 3.0)
    theirs = sps.bootstrap((sums, counts), lambda s, c, axis=-1: s.sum(axis=axis) / c.sum(axis=axis), paired=True,
                           vectorized=True, method="percentile", n_resamples=5000, random_state=4).confidence_interval
    assert abs(ours.low - theirs.low) < 0.25 * ours.stderr and abs(ours.high - theirs.high) < 0.25 * ours.stderr
    assert ours.method == "95% percentile cluster bootstrap (samples resampled), 5,000 resamples"
    assert (ours.n, ours.scores) == (80, 240)
    # resampling single scores instead would give a narrower (wrong) interval here
    naive = stats.estimate(values, seed=3, resamples=5000)
    assert (naive.high - naive.low) < 0.8 * (ours.high - ours.low)


def test_intervals_are_seeded_and_stay_inside_the_values():
    x = [0.0, 0.1, 0.9, 1.0, 1.0, 0.2, 0.5]
    assert stats.estimate(x, seed=7) == stats.estimate(x, seed=7)
    assert stats.estimate(x, seed=7) != stats.estimate(x, seed=8)
    e = stats.estimate(x, seed=7)
    assert 0.0 <= e.low <= e.mean <= e.high <= 1.0
    same = stats.estimate([1.0, 1.0, 1.0], seed=0)
    assert (same.low, same.high, same.stderr) == (1.0, 1.0, 0.0)
    one = stats.estimate([0.4])
    assert one.mean == 0.4 and math.isnan(one.low) and math.isnan(one.stderr)
    nan = stats.estimate([math.nan, 0.5, 0.7])
    assert nan.scores == 2 and nan.mean == pytest.approx(0.6)  # missing scores are not zeros


def test_mcnemar_is_the_exact_binomial_test_on_the_discordant_pairs():
    # textbook: 8 pairs only A passed, 2 only B: p = 2 * P(X <= 2 | n=10, 1/2) = 2 * 56 / 1024
    a = [1] * 8 + [0] * 2 + [1] * 5 + [0] * 5
    b = [0] * 8 + [1] * 2 + [1] * 5 + [0] * 5
    test = stats.mcnemar(a, b)
    assert (test.only_a, test.only_b) == (8, 2)
    assert test.p == pytest.approx(2 * sum(math.comb(10, k) for k in range(3)) / 2 ** 10)
    assert test.p == pytest.approx(sps.binomtest(2, 10, 0.5).pvalue)
    # Agresti's approval table (794, 150 / 86, 570): the exact p is close to the chi-square with continuity
    big_a = [1] * 794 + [1] * 150 + [0] * 86 + [0] * 570
    big_b = [1] * 794 + [0] * 150 + [1] * 86 + [0] * 570
    big = stats.mcnemar(big_a, big_b)
    chi2 = (abs(150 - 86) - 1) ** 2 / (150 + 86)
    assert chi2 == pytest.approx(16.82, abs=0.01)
    assert big.p == pytest.approx(sps.chi2.sf(chi2, 1), rel=0.25) and big.p < 0.001
    assert stats.mcnemar([1, 0, 1], [1, 0, 1]).p == 1.0  # no discordant pair: no evidence either way


def test_the_paired_difference_and_its_interval():
    rng = np.random.default_rng(21)
    base = rng.normal(0.5, 0.25, 120)
    a = base + rng.normal(0, 0.05, 120)
    b = base + 0.04 + rng.normal(0, 0.05, 120)
    est = stats.paired(a, b, seed=2, resamples=5000)
    assert est.mean == pytest.approx(np.mean(b - a)) and est.stderr == pytest.approx(sps.sem(b - a))
    t = sps.ttest_rel(b, a).confidence_interval(0.95)  # the t interval: close for 120 pairs
    assert est.low == pytest.approx(t.low, abs=0.15 * est.stderr) and est.high == pytest.approx(t.high, abs=0.15 * est.stderr)
    assert est.low > 0  # pairing sees the small, consistent gain
    unpaired = sps.ttest_ind(b, a).confidence_interval(0.95)
    assert unpaired.low < 0 < unpaired.high  # which two unpaired means cannot tell from noise
    assert est.method == "95% paired percentile bootstrap (samples resampled), 5,000 resamples"
