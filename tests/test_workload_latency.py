"""Latency histograms: bucket bounds, percentiles against the exact ones, exact merges."""

from __future__ import annotations

import numpy as np
import pytest

from debl.measure.histogram import bucket_high, bucket_index
from debl.workload.latency import LatencyHistogram, LatencySummary, RunCounts, timeline

RNG = np.random.default_rng(7)


def _latencies(n: int) -> np.ndarray:
    """Log-normal around 1 ms with a tail to seconds, and some exact small values."""
    x = np.exp(RNG.normal(np.log(1e6), 1.5, n)).astype(np.int64)
    x[:50] = np.arange(50)  # 0..49 ns: each its own bucket
    return x


def _exact_nearest_rank(x: np.ndarray, q: float) -> int:
    s = np.sort(x)
    return int(s[max(1, int(np.ceil(q / 100 * len(s)))) - 1])


def test_buckets_are_monotone_and_hold_their_values():
    values = np.unique(np.concatenate([np.arange(5000), _latencies(20000),
                                       np.array([2**40, 2**53 - 1, 2**62])]))
    idx = bucket_index(values)
    assert np.all(np.diff(idx) >= 0)
    high = bucket_high(idx)
    assert np.all(values <= high)
    assert np.all(high - values <= values / 1024)  # at most 1/1024 of the value wide
    assert np.array_equal(bucket_index(np.arange(2048)), np.arange(2048))  # exact below 2 µs
    assert int(idx.max()) < 1 << 16


@pytest.mark.parametrize("n", [1, 7, 1000, 50_000])
def test_percentiles_bound_the_exact_nearest_rank(n):
    x = _latencies(max(n, 50))[:n]
    h = LatencyHistogram.of(x)
    assert h.count == n and h.max_ns == int(x.max()) and h.total_ns == int(x.sum())
    for q in (25, 50, 75, 95, 99, 100):
        exact = _exact_nearest_rank(x, q)
        got = h.percentile_ns(q)
        assert exact <= got <= exact + exact / 1024 + 1, q


def test_merged_histograms_give_the_percentiles_of_the_union():
    x = _latencies(30_000)
    cuts = np.sort(RNG.choice(len(x), 4, replace=False))
    parts = [LatencyHistogram.of(p) for p in np.split(x, cuts)]
    merged = LatencyHistogram.merge(parts)
    union = LatencyHistogram.of(x)
    assert np.array_equal(merged.keys, union.keys)
    assert np.array_equal(merged.counts, union.counts)
    assert (merged.total_ns, merged.max_ns) == (union.total_ns, union.max_ns)
    for q in (25, 50, 75, 95, 99, 99.9):
        assert merged.percentile_ns(q) == union.percentile_ns(q)
    assert merged.summary() == union.summary()


def test_merged_run_counts_give_the_timeline_of_the_union():
    n = 20_000
    end = np.sort(RNG.integers(0, 7_500_000_000, n))  # completions over 7.5 s
    lat = _latencies(n)
    ok = RNG.random(n) > 0.05
    whole = RunCounts.of(end, lat, ok)
    owner = RNG.integers(0, 3, n)  # three worker processes
    merged = RunCounts.merge([RunCounts.of(end[owner == w], lat[owner == w], ok[owner == w])
                              for w in range(3)])
    assert merged.timeline() == whole.timeline()
    assert merged.latency.summary() == whole.latency.summary()
    points = whole.timeline(seconds=10)
    assert [p.second for p in points] == list(range(10))
    assert sum(p.completed for p in points) == int(ok.sum())
    assert sum(p.errors for p in points) == int((~ok).sum())
    second = end // 1_000_000_000
    for p in points[:8]:
        good = lat[(second == p.second) & ok]
        assert p.mean_ms == pytest.approx(good.mean() / 1e6)
        exact = _exact_nearest_rank(good, 95)
        assert exact / 1e6 <= p.p95_ms <= (exact + exact / 1024 + 1) / 1e6


def test_summary_of_raw_milliseconds():
    s = LatencySummary.of(np.arange(1, 101, dtype=float))
    expected = (25.0, 50.0, 75.0, 95.0, 99.0)
    got = (s.p25, s.p50, s.p75, s.p95, s.p99)
    assert all(e <= g <= e * (1 + 1 / 1024) for e, g in zip(expected, got))
    assert (s.count, s.max, s.mean) == (100, 100.0, 50.5)
    assert LatencySummary.of(np.empty(0)).count == 0
    assert LatencyHistogram.merge([]).summary().count == 0


def test_timeline_of_raw_samples():
    points = timeline(np.array([0.1, 0.5, 2.2]), np.array([1.0, 3.0, 5.0]),
                      np.array([True, True, False]), seconds=4)
    assert [(p.second, p.completed, p.errors, p.mean_ms) for p in points] == [
        (0, 2, 0, 2.0), (1, 0, 0, 0.0), (2, 0, 1, 0.0), (3, 0, 0, 0.0)]
