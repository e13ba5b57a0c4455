"""The nlinks CDF, LinkBench's rank rule, the degrees it yields, and the Zipf sampler."""

from __future__ import annotations

import numpy as np
import pytest

from debl.errors import ConfigError
from debl.workload.distribution import ZipfSampler, load_cdf, zeta
from debl.workload.spec import GenerateSpec
from debl.workload.synth import SynthContext


def test_nlinks_section_matches_provenance():
    cdf = load_cdf("nlinks")
    assert len(cdf.values) == 19951
    assert cdf.values[0] == 0 and cdf.values[-1] == 961963
    assert cdf.cum[0] == pytest.approx(0.4533160573)
    assert cdf.cum[-1] == 1.0
    assert cdf.mean() == pytest.approx(4.097, abs=1e-3)
    reads = load_cdf("link_nreads")
    assert reads.cum[0] == pytest.approx(0.9557, abs=1e-4)


def test_unknown_section_is_a_clear_error():
    with pytest.raises(ConfigError, match="unknown distribution"):
        load_cdf("nodes")


def test_rank_rule():
    cdf = load_cdf("nlinks")
    n = 1000
    assert cdf.value_for_rank(0, n) == 961963  # rank 0: cumulative probability 1
    assert cdf.value_for_rank(n - 1, n) == 0  # 1 - 999/1000 = 0.001 <= P(0)
    ranks = np.arange(n)
    values = cdf.value_for_rank(ranks, n)
    assert np.all(np.diff(values) <= 0)  # lower rank, more links
    # Rank r gets the first value whose cumulative probability is >= 1 - r/n.
    for r in (1, 10, 300, 500, 546, 547, 900):
        v = cdf.value_for_rank(r, n)
        i = int(np.searchsorted(cdf.values, v))
        assert cdf.cum[i] >= 1 - r / n
        assert i == 0 or cdf.cum[i - 1] < 1 - r / n


@pytest.mark.parametrize("n", [1, 7, 1000, 54321, 200_000])
def test_expected_total_equals_the_sum_over_ranks(n):
    cdf = load_cdf("nlinks")
    assert cdf.expected_total(n) == int(cdf.value_for_rank(np.arange(n), n).sum())


def test_degree_histogram_of_200k_ids_matches_the_cdf():
    spec = GenerateSpec(max_id=200_001)
    ctx = SynthContext.of(spec)
    degrees = np.concatenate([ctx.degrees(*ctx.chunk_ids(c)) for c in range(ctx.chunks)])
    assert len(degrees) == 200_000
    cdf = load_cdf("nlinks")
    # Empirical P(degree <= v) at every value of the published CDF.
    counts = np.searchsorted(np.sort(degrees), cdf.values, side="right")
    deviation = np.max(np.abs(counts / len(degrees) - cdf.cum))
    assert deviation <= 1.0 / len(degrees) + 1e-12  # the rank rule has no sampling noise
    assert degrees.sum() == cdf.expected_total(200_000)


def test_degree_is_uncorrelated_with_id_order():
    spec = GenerateSpec(max_id=200_001)
    ctx = SynthContext.of(spec)
    degrees = np.concatenate([ctx.degrees(*ctx.chunk_ids(c)) for c in range(ctx.chunks)])
    ids = np.arange(len(degrees))
    assert abs(np.corrcoef(ids, degrees)[0, 1]) < 0.02
    # The top-degree ids are spread over the range, not bunched at one end.
    top = np.argsort(degrees)[-2000:]
    hist = np.bincount(top * 10 // len(degrees), minlength=10)
    assert hist.min() > 120 and hist.max() < 280


def test_max_degree_caps():
    spec = GenerateSpec(max_id=10_001, max_degree=25)
    ctx = SynthContext.of(spec)
    assert ctx.degrees(1, 10_001).max() == 25


def test_zeta_exact_and_approximated_agree():
    assert zeta(1, 0.8) == 1.0
    assert zeta(3, 0.8) == pytest.approx(1 + 2 ** -0.8 + 3 ** -0.8)
    # Beyond 10^7 terms Euler-Maclaurin takes over: it must continue the exact sum smoothly.
    step = zeta(10_000_001, 0.8) - zeta(10_000_000, 0.8)
    assert step == pytest.approx(10_000_001 ** -0.8, rel=1e-4)


def test_zipf_range_and_skew():
    zipf = ZipfSampler(100, 100_100, 0.8)
    rng = np.random.default_rng(5)
    x = zipf.sample(rng, 400_000)
    assert x.min() >= 100 and x.max() < 100_100
    ranks = x - 100
    # The two hottest ranks are exact in Gray's method.
    for k in (0, 1):
        expected = (k + 1) ** -0.8 / zeta(100_000, 0.8)
        assert np.mean(ranks == k) == pytest.approx(expected, rel=0.05)
    # The hottest 1% of ids get about their Zipf share (Gray's tail is an approximation).
    top1 = np.mean(ranks < 1000)
    assert top1 == pytest.approx(zipf.top_share(1000), abs=0.03)
    assert 0.30 < top1 < 0.45
    # Hot ranks are hotter than cold ranks by the power law: P(rank < 10) vs P(990 <= rank < 1000).
    assert np.mean(ranks < 10) > 20 * np.mean((ranks >= 990) & (ranks < 1000))


def test_zipf_tiny_ranges():
    rng = np.random.default_rng(1)
    assert set(ZipfSampler(5, 6).sample(rng, 100).tolist()) == {5}
    two = ZipfSampler(0, 2).sample(rng, 10_000)
    assert set(two.tolist()) == {0, 1}
    assert np.mean(two == 0) == pytest.approx(1 / (1 + 2 ** -0.8), abs=0.02)


def test_zipf_rejects_bad_parameters():
    with pytest.raises(ConfigError):
        ZipfSampler(5, 5)
    with pytest.raises(ConfigError):
        ZipfSampler(0, 10, 1.0)
