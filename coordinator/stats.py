"""Wait statistics of the queries one coordinator answered, for the benchmark's report.

Every answered query is counted once, by how it was answered:

- ``immediate``: answered without blocking;
- ``buffered``: blocked on a bucket that was not loaded yet, answered when it landed (its wait
  includes any wait for uptime before it);
- ``waited_uptime``: blocked only because the system was not up yet;
- ``raw``: its bucket was not loaded; answered by the raw route after ``coordinator.raw_after``
  seconds;
- ``early``: answered before the load's uptime, once every byte that can hold its key was
  here (docs/COORDINATOR.md, "Answers before uptime"), at once or after waiting for those
  bytes: the waits of those that waited are kept apart (``early_*``), the wait of a query
  whose key was not here yet;
- ``partial``: passed its deadline and got the MySQL-only answer (it asked for it);
- ``timeouts``: passed its deadline and got QueryTimeout.

Wait times are kept for buffered queries only (the paper's "mean wait of buffered queries"), in a
log-linear histogram (``debl.measure.histogram``: a few kB however many queries a coordinator
answers in its life; percentiles within 0.1%, mean and maximum exact). A list of every wait once
grew by 8 bytes a buffered query for the coordinator's whole life.

The same counts are also kept for the queries *asked* in the first minute of the recorder's clock
(which starts at creation or ``reset``; the benchmark resets it when its query phase starts at
uptime): that minute is when most buckets are still cold, so its share answered at once says how
usable the system is right after uptime, which the whole-run share (dominated by the time after
full availability) hides.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field

from debl.measure.histogram import Histogram, bucket_of

FIRST_WINDOW_S = 60.0  # the "first minute" of the recorder's clock


@dataclass(frozen=True)
class CoordinatorStats:
    """A snapshot of the counters; ``*_wait_s`` cover buffered queries (0 when there were none)."""

    answered: int
    immediate: int
    buffered: int
    waited_uptime: int
    partial: int
    timeouts: int
    mean_wait_s: float
    p50_wait_s: float
    p95_wait_s: float
    max_wait_s: float
    first_minute_answered: int = 0
    first_minute_immediate: int = 0
    raw: int = 0
    early: int = 0
    early_waited: int = 0  # early answers whose key was not here when asked
    early_p50_wait_s: float = 0.0
    early_p99_wait_s: float = 0.0

    @property
    def raw_share(self) -> float:
        """The share of answered queries that the raw route answered."""
        return self.raw / self.answered if self.answered else 0.0

    @property
    def immediate_share(self) -> float:
        """The share of answered queries that did not wait at all."""
        return self.immediate / self.answered if self.answered else 0.0

    @property
    def first_minute_immediate_share(self) -> float:
        """The same share among the queries asked in the first minute (0 when none were)."""
        return (self.first_minute_immediate / self.first_minute_answered
                if self.first_minute_answered else 0.0)

    def to_dict(self) -> dict:
        return {**asdict(self), "immediate_share": self.immediate_share,
                "first_minute_immediate_share": self.first_minute_immediate_share,
                "raw_share": self.raw_share}



OUTCOMES = ("immediate", "buffered", "waited_uptime", "raw", "early", "partial", "timeouts")


class WaitRecorder:
    """Thread-safe counters; ``record`` is called once per finished query."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self._counts = dict.fromkeys(OUTCOMES, 0)
            self._waits: Counter[int] = Counter()  # buffered waits per histogram bucket
            self._waits_total_ns = 0
            self._waits_max_ns = 0
            # Early answers that waited, as the buffered ones: counts per histogram bucket.
            self._early: Counter[int] = Counter()
            self._early_ns = [0, 0]  # their total and maximum
            self._first = {"answered": 0, "immediate": 0}
            self._epoch = time.monotonic()

    def record(self, outcome: str, waited_s: float, asked_at: float | None = None) -> None:
        """Count one finished query; *asked_at* is its ``time.monotonic()`` arrival (default:
        now minus *waited_s*), which decides whether it counts in the first minute."""
        if asked_at is None:
            asked_at = time.monotonic() - waited_s
        with self._lock:
            self._counts[outcome] += 1
            if outcome == "buffered":
                ns = max(round(waited_s * 1e9), 0)
                self._waits[bucket_of(ns)] += 1
                self._waits_total_ns += ns
                self._waits_max_ns = max(self._waits_max_ns, ns)
            elif outcome == "early" and waited_s > 0:
                ns = round(waited_s * 1e9)
                self._early[bucket_of(ns)] += 1
                self._early_ns = [self._early_ns[0] + ns, max(self._early_ns[1], ns)]
            if outcome != "timeouts" and asked_at - self._epoch < FIRST_WINDOW_S:
                self._first["answered"] += 1
                self._first["immediate"] += outcome == "immediate"

    def answered(self) -> dict[str, int]:
        """The counts per outcome (what a coordinator publishes for ``debl status``)."""
        with self._lock:
            return dict(self._counts)

    def counters(self) -> "WaitCounters":
        """The raw counters now, picklable: a query client with several processes (one
        coordinator each) merges them into one set of statistics."""
        with self._lock:
            waits = Histogram.of_counts(self._waits, self._waits_total_ns, self._waits_max_ns)
            return WaitCounters(dict(self._counts), waits, self._first["answered"],
                                self._first["immediate"],
                                Histogram.of_counts(self._early, *self._early_ns))

    def snapshot(self) -> CoordinatorStats:
        return self.counters().stats()


@dataclass(frozen=True)
class WaitCounters:
    """One or more recorders' raw counters; ``merge`` adds them exactly (the waits' histograms
    too), ``stats`` summarizes them."""

    counts: dict[str, int]
    waits: Histogram = field(default_factory=lambda: Histogram.of([]))  # buffered queries' waits
    first_answered: int = 0
    first_immediate: int = 0
    early_waits: Histogram = field(default_factory=lambda: Histogram.of([]))

    @classmethod
    def merge(cls, parts: "list[WaitCounters]") -> "WaitCounters":
        counts = dict.fromkeys(OUTCOMES, 0)
        for p in parts:
            for k, n in p.counts.items():
                counts[k] = counts.get(k, 0) + n
        return cls(counts, Histogram.merge([p.waits for p in parts]),
                   sum(p.first_answered for p in parts), sum(p.first_immediate for p in parts),
                   Histogram.merge([p.early_waits for p in parts]))

    def stats(self) -> CoordinatorStats:
        counts = {k: self.counts.get(k, 0) for k in OUTCOMES}
        waits = self.waits
        answered = sum(n for k, n in counts.items() if k != "timeouts")
        mean, p50, p95, top = (waits.mean_ns() / 1e9, waits.percentile_ns(50) / 1e9,
                               waits.percentile_ns(95) / 1e9, waits.max_ns / 1e9)
        return CoordinatorStats(answered=answered, mean_wait_s=mean, p50_wait_s=p50,
                                p95_wait_s=p95, max_wait_s=top,
                                first_minute_answered=self.first_answered,
                                first_minute_immediate=self.first_immediate,
                                early_waited=self.early_waits.count,
                                early_p50_wait_s=self.early_waits.percentile_ns(50) / 1e9,
                                early_p99_wait_s=self.early_waits.percentile_ns(99) / 1e9,
                                **counts)
