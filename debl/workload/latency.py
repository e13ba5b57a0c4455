"""Latency statistics as LinkBench reports them, and the per-second timeline for plots.

Percentiles are exact (computed from every sample, nearest-rank: the smallest sample with at
least p% of the samples at or below it), where LinkBench reports histogram bucket bounds; the
fields are LinkBench's: count, p25, p50, p75, p95, p99, max, mean, all in milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

PERCENTILES = (25, 50, 75, 95, 99)


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
        x = np.sort(np.asarray(latencies_ms, dtype=np.float64))
        if len(x) == 0:
            return cls(0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
        p = [_nearest_rank(x, q) for q in PERCENTILES]
        return cls(len(x), *p, float(x[-1]), float(x.mean()))

    def line(self, op: str = "GET_LINKS_LIST") -> str:
        """LinkBench-style: ``GET_LINKS_LIST count = 1000 p25 = 0.1ms ... mean = 0.2ms``."""
        return (f"{op} count = {self.count}  p25 = {self.p25:.3f}ms  p50 = {self.p50:.3f}ms  "
                f"p75 = {self.p75:.3f}ms  p95 = {self.p95:.3f}ms  p99 = {self.p99:.3f}ms  "
                f"max = {self.max:.3f}ms  mean = {self.mean:.3f}ms")


def _nearest_rank(sorted_x: np.ndarray, q: float) -> float:
    rank = max(1, int(np.ceil(q / 100.0 * len(sorted_x))))
    return float(sorted_x[rank - 1])


@dataclass(frozen=True)
class TimelinePoint:
    """Requests that *completed* in second ``second`` after the start (0-based)."""

    second: int
    completed: int
    errors: int
    mean_ms: float
    p95_ms: float


def timeline(end_s: np.ndarray, latency_ms: np.ndarray, ok: np.ndarray,
             seconds: int | None = None) -> tuple[TimelinePoint, ...]:
    """One point per second from 0 to the last completion (or ``seconds``), empty seconds
    included, so that a plot shows stalls (buffered queries waiting on a bucket) as zeros.
    Latency figures cover successful requests only."""
    end_s = np.asarray(end_s, dtype=np.float64)
    ok = np.asarray(ok, dtype=bool)
    latency_ms = np.asarray(latency_ms, dtype=np.float64)
    sec = np.floor(end_s).astype(np.int64) if len(end_s) else np.empty(0, np.int64)
    last = int(sec.max()) + 1 if len(sec) else 0
    n = max(last, seconds or 0)
    points = []
    order = np.argsort(sec, kind="stable")
    sec_sorted = sec[order]
    cuts = np.searchsorted(sec_sorted, np.arange(n + 1), side="left")
    for s in range(n):
        idx = order[cuts[s]:cuts[s + 1]]
        good = latency_ms[idx[ok[idx]]]
        points.append(TimelinePoint(
            second=s, completed=int(len(good)), errors=int(len(idx) - len(good)),
            mean_ms=float(good.mean()) if len(good) else 0.0,
            p95_ms=_nearest_rank(np.sort(good), 95) if len(good) else 0.0))
    return tuple(points)
