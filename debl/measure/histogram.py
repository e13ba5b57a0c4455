"""Histograms of durations that merge exactly, in bounded memory: the query client's latencies
(``debl.workload.latency``) and the coordinator's buffered waits (``coordinator.stats``).

Every value is an integer number of nanoseconds, counted in a log-linear bucket (HdrHistogram's
layout): values below 2**11 ns (2 µs) have a bucket each, and above that every power of two is cut
into 2**10 equal buckets, so a bucket is at most 1/1024 of its values wide. A histogram is sparse
(only the buckets that hold a sample), so it stays a few kB whatever the number of samples.

Merging histograms adds the counts bucket by bucket; nothing is approximated by the merge, so
the percentiles of merged histograms are exactly those of the histogram of all the samples
together. The approximation is the bucket, once: a reported percentile is the highest value of
the bucket that holds the nearest-rank sample (the smallest sample with at least p% of the
samples at or below it), so it is never below the true sample and above it by less than 1/1024
(0.1%) plus 1 ns. The maximum and the mean are exact (the histogram keeps the sum and the
largest value).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Self

import numpy as np
import numpy.typing as npt

SUB_BITS = 10  # 2**10 buckets per power of two: relative resolution 1/1024
_SUB = 1 << SUB_BITS


def bucket_index(ns: np.ndarray) -> np.ndarray:
    """The bucket of each value (int64 ns >= 0): monotone in the value.

    A value with ``b`` significant bits is shifted right by ``max(0, b - 11)``: the index is
    ``shift * 1024 + (ns >> shift)``, contiguous from one power of two to the next. Indices stay
    below 2**16 for any int64 value."""
    ns = np.asarray(ns, dtype=np.int64)
    # frexp's exponent of a positive value is its bit length (exact: ns < 2**53 in practice).
    bits = np.frexp(ns.astype(np.float64))[1].astype(np.int64)
    shift = np.maximum(bits - (SUB_BITS + 1), 0)
    return shift * _SUB + (ns >> shift)


def bucket_of(ns: int) -> int:
    """``bucket_index`` of one value, without numpy (one sample at a time, under a lock)."""
    shift = max(ns.bit_length() - (SUB_BITS + 1), 0)
    return shift * _SUB + (ns >> shift)


def bucket_high(index: np.ndarray | int) -> np.ndarray:
    """The highest value (ns) that falls into each bucket."""
    index = np.asarray(index, dtype=np.int64)
    shift = np.maximum(index // _SUB - 1, 0)
    mantissa = index - shift * _SUB
    return ((mantissa + 1) << shift) - 1


def add_counts(parts: Iterable[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Sparse counts ``(sorted unique keys, counts)`` added key by key."""
    parts = [(k, c) for k, c in parts if len(k)]
    if not parts:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    keys = np.concatenate([k for k, _ in parts])
    counts = np.concatenate([c for _, c in parts])
    unique, inverse = np.unique(keys, return_inverse=True)
    total = np.zeros(len(unique), dtype=np.int64)
    np.add.at(total, inverse, counts)
    return unique, total


def count_keys(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sparse counts of *keys*: ``(sorted unique keys, how often each occurs)``."""
    unique, counts = np.unique(np.asarray(keys, dtype=np.int64), return_counts=True)
    return unique, counts.astype(np.int64)


def nearest_rank(keys: np.ndarray, counts: np.ndarray, q: float) -> int:
    """The bucket key holding the nearest-rank q-th percentile sample."""
    total = int(counts.sum())
    rank = max(1, int(np.ceil(q / 100.0 * total)))
    return int(keys[np.searchsorted(np.cumsum(counts), rank, side="left")])


@dataclass(frozen=True, eq=False)
class Histogram:
    """Counts of durations per bucket (sparse), with their exact sum and maximum. Picklable."""

    keys: np.ndarray  # sorted bucket indices that hold a sample
    counts: np.ndarray  # samples per bucket
    total_ns: int = 0
    max_ns: int = 0

    @classmethod
    def of(cls, durations_ns: npt.ArrayLike) -> Self:
        ns = np.maximum(np.asarray(durations_ns, dtype=np.int64), 0)
        keys, counts = count_keys(bucket_index(ns))
        return cls(keys, counts, int(ns.sum()), int(ns.max()) if len(ns) else 0)

    @classmethod
    def of_counts(cls, counts: Mapping[int, int], total_ns: int, max_ns: int) -> Self:
        """From counts kept per bucket (``bucket_of``) one sample at a time."""
        keys = np.array(sorted(counts), dtype=np.int64)
        return cls(keys, np.array([counts[k] for k in keys.tolist()], dtype=np.int64),
                   total_ns, max_ns)

    @classmethod
    def merge(cls, parts: Sequence["Histogram"]) -> Self:
        keys, counts = add_counts((p.keys, p.counts) for p in parts)
        return cls(keys, counts, sum(p.total_ns for p in parts),
                   max((p.max_ns for p in parts), default=0))

    @property
    def count(self) -> int:
        return int(self.counts.sum())

    def percentile_ns(self, q: float) -> int:
        """Nearest-rank percentile: the highest value of its bucket, at most the maximum."""
        if not len(self.keys):
            return 0
        return min(int(bucket_high(nearest_rank(self.keys, self.counts, q))), self.max_ns)

    def mean_ns(self) -> float:
        n = self.count
        return self.total_ns / n if n else 0.0
