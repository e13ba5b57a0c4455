"""Latency statistics as LinkBench reports them, kept in histograms that merge exactly.

Every latency is an integer number of nanoseconds in a log-linear histogram
(``debl.measure.histogram``: buckets at most 1/1024 of their values wide; merging adds counts
exactly, so the percentiles of the client's worker processes merged are those of all their samples
together; a percentile is never below the true sample and above it by less than 0.1% plus 1 ns;
``max`` and ``mean`` are exact). LinkBench reports wider bucket bounds (``p99 = [29,30]ms``).

The fields are LinkBench's: count, p25, p50, p75, p95, p99, max, mean, in milliseconds.

``RunCounts`` adds what the per-second timeline needs (completions, errors, latency sum and a
histogram per second since the run's start) and merges the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from debl.measure.histogram import (Histogram, add_counts, bucket_high, bucket_index, count_keys,
                            nearest_rank)

PERCENTILES = (25, 50, 75, 95, 99)

# Bucket indices stay below 2**16 for any int64 value, so (second, bucket) packs into one key.
_KEY_BITS = 16
_NS_PER_MS = 1e6


@dataclass(frozen=True)
class LatencySummary:
    """LinkBench's per-operation line. With ``count == 0`` every figure is 0."""

    count: int
    p25: float
    p50: float
    p75: float
    p95: float
    p99: float
    max: float
    mean: float

    @classmethod
    def of(cls, latencies_ms: np.ndarray) -> "LatencySummary":
        """The summary of raw latencies in milliseconds (through a histogram, as the client)."""
        ns = np.rint(np.asarray(latencies_ms, dtype=np.float64) * _NS_PER_MS).astype(np.int64)
        return LatencyHistogram.of(ns).summary()

    def line(self, op: str = "GET_LINKS_LIST") -> str:
        """LinkBench-style: ``GET_LINKS_LIST count = 1000 p25 = 0.1ms ... mean = 0.2ms``."""
        return (f"{op} count = {self.count}  p25 = {self.p25:.3f}ms  p50 = {self.p50:.3f}ms  "
                f"p75 = {self.p75:.3f}ms  p95 = {self.p95:.3f}ms  p99 = {self.p99:.3f}ms  "
                f"max = {self.max:.3f}ms  mean = {self.mean:.3f}ms")


class LatencyHistogram(Histogram):
    """A histogram of latencies (``debl.measure.histogram``), summarized as LinkBench reports
    them."""

    def summary(self) -> LatencySummary:
        n = self.count
        if n == 0:
            return LatencySummary(0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
        p25, p50, p75, p95, p99 = (self.percentile_ns(q) / _NS_PER_MS for q in PERCENTILES)
        return LatencySummary(n, p25, p50, p75, p95, p99, self.max_ns / _NS_PER_MS,
                              self.total_ns / n / _NS_PER_MS)


@dataclass(frozen=True)
class TimelinePoint:
    """Requests that *completed* in second ``second`` after the start (0-based)."""

    second: int
    completed: int
    errors: int
    mean_ms: float
    p95_ms: float


def _dense_add(arrays: Sequence[np.ndarray]) -> np.ndarray:
    out = np.zeros(max((len(a) for a in arrays), default=0), dtype=np.int64)
    for a in arrays:
        out[:len(a)] += a
    return out


@dataclass(frozen=True, eq=False)
class RunCounts:
    """Everything the client reports about latencies, for a part of a run or the whole: the
    histogram of successful requests, and per second since the start (by completion time)
    the errors, the successes' latency sum and histogram. Parts merge exactly (``merge``)."""

    latency: LatencyHistogram
    second_keys: np.ndarray  # second << 16 | bucket, sorted
    second_counts: np.ndarray
    second_total_ns: np.ndarray  # per second, successes only
    second_errors: np.ndarray  # per second

    @classmethod
    def of(cls, end_ns: np.ndarray, latency_ns: np.ndarray, ok: np.ndarray) -> "RunCounts":
        """From raw samples: completion instants (ns since the start), latencies (ns), success."""
        end_ns = np.asarray(end_ns, dtype=np.int64)
        latency_ns = np.maximum(np.asarray(latency_ns, dtype=np.int64), 0)
        ok = np.asarray(ok, dtype=bool)
        second = np.maximum(end_ns, 0) // 1_000_000_000
        n = int(second.max()) + 1 if len(second) else 0
        good = latency_ns[ok]
        keys, counts = count_keys((second[ok] << _KEY_BITS) | bucket_index(good))
        totals = np.bincount(second[ok], weights=good, minlength=n)
        return cls(LatencyHistogram.of(good), keys, counts,
                   np.rint(totals).astype(np.int64),
                   np.bincount(second[~ok], minlength=n).astype(np.int64))

    @classmethod
    def merge(cls, parts: Sequence["RunCounts"]) -> "RunCounts":
        keys, counts = add_counts((p.second_keys, p.second_counts) for p in parts)
        return cls(LatencyHistogram.merge([p.latency for p in parts]), keys, counts,
                   _dense_add([p.second_total_ns for p in parts]),
                   _dense_add([p.second_errors for p in parts]))

    def timeline(self, seconds: int | None = None) -> tuple[TimelinePoint, ...]:
        """One point per second from 0 to the last completion (or ``seconds``), empty seconds
        included, so that a plot shows stalls (buffered queries waiting on a bucket) as zeros.
        Latency figures cover successful requests only."""
        sec = self.second_keys >> _KEY_BITS
        buckets = self.second_keys & ((1 << _KEY_BITS) - 1)
        last = int(sec.max()) + 1 if len(sec) else 0
        n = max(last, len(self.second_errors), seconds or 0)
        cuts = np.searchsorted(sec, np.arange(n + 1), side="left")
        points = []
        for s in range(n):
            b, c = buckets[cuts[s]:cuts[s + 1]], self.second_counts[cuts[s]:cuts[s + 1]]
            done = int(c.sum())
            errors = int(self.second_errors[s]) if s < len(self.second_errors) else 0
            total = int(self.second_total_ns[s]) if s < len(self.second_total_ns) else 0
            p95 = int(bucket_high(nearest_rank(b, c, 95))) if done else 0
            points.append(TimelinePoint(second=s, completed=done, errors=errors,
                                        mean_ms=total / done / _NS_PER_MS if done else 0.0,
                                        p95_ms=p95 / _NS_PER_MS))
        return tuple(points)


def timeline(end_s: np.ndarray, latency_ms: np.ndarray, ok: np.ndarray,
             seconds: int | None = None) -> tuple[TimelinePoint, ...]:
    """The per-second timeline of raw samples (completion seconds since the start, latencies
    in ms), computed as the client does (``RunCounts``)."""
    end_ns = np.floor(np.asarray(end_s, dtype=np.float64) * 1e9).astype(np.int64)
    latency_ns = np.rint(np.asarray(latency_ms, dtype=np.float64) * _NS_PER_MS).astype(np.int64)
    return RunCounts.of(end_ns, latency_ns, ok).timeline(seconds)
