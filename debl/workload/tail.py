"""The slowest requests of a client run and where their time went, by route and by cause
(docs/BENCHMARKS.md, "The tail").

Each request runs inside a record of its own (``debl.measure.request_cost``): the route the
coordinator chose, the seconds each component took (``COMPONENTS``: the wait for the route, MySQL,
HBase, HDFS reads and HDFS's other calls, the merge, the client being late), the rest of the wall
time ("other"), the raw route's reads, the sorted runs merged, the collections during it. Each
worker process keeps, in a ``TailKeeper``:

- its slowest successful requests with their records, at most ``capacity`` of them
  (``tail_capacity``: the share of the whole run's requests), in a min-heap: a request no slower
  than the fastest kept costs one comparison, no lock;
- per route, the latencies of all its successful requests in a histogram
  (``debl.measure.histogram``), and how many ran beside a full collection.

``TailCounts.merge`` adds the processes' parts. Exact: the run's slowest ``k <= capacity``
requests are each among their own process's slowest ``k``, so among what it kept; the
histograms add bucket by bucket. ``TailCounts.breakdown`` summarises: the slowest
``ceil(share * answered)`` requests, split by route and by dominant cause (the component that
took the most of its wall time, "other" included), with the mean milliseconds per component,
beside every route's count and percentiles over all requests.

A route is the coordinator's (``route_label``: ``mysql`` no cold row can hold the key, ``merged``
HBase, ``raw`` the bucket's files, ``early``, ``partial``; ``, hot raw`` when the hot rows came
from the hot files' bucket; `` (buffered)`` or `` (waited for uptime)`` when the answer waited
for its bucket or for uptime), or for a target that names none (a plain store) the target's name.

Pitfalls:

- Successful requests only, as the latency percentiles (a request that raised has no route).
- With no request count (``--duration`` alone) the capacity is ``DEFAULT_CAPACITY``: a run whose
  slowest share holds more requests is summarised by its slowest ``capacity`` and says so
  (``exact`` False).
- A dominant cause tied between components goes to the first in ``CAUSES``.
"""

from __future__ import annotations

import heapq
import itertools
import math
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from debl.measure.histogram import Histogram
from debl.measure.request_cost import COMPONENTS, RequestCost

TAIL_SHARE = 0.01  # the slowest 1%
DEFAULT_CAPACITY = 10_000  # slowest requests kept per process when the run's count is unknown
CAUSES = (*COMPONENTS, "other")
_MAX_ROUTES = 127  # routes per process (an index in a signed byte)
MORE_ROUTES = "(other routes)"  # the routes of a process past the first 126


def route_label(route: str, hot: str, outcome: str, default: str) -> str:
    """The name of a request's route in the breakdown (see the module's docstring)."""
    if not route:
        return default
    label = route + (", hot raw" if hot == "raw" else "")
    if outcome == "buffered":
        return label + " (buffered)"
    return label + (" (waited for uptime)" if outcome == "waited_uptime" else "")


def tail_capacity(total: int | None, share: float = TAIL_SHARE) -> int:
    """The slowest requests a process keeps for a run of *total* requests (None: unknown)."""
    return DEFAULT_CAPACITY if total is None else share_of(total, share)


def share_of(count: int, share: float) -> int:
    """``ceil(share * count)``, without the float's rounding error (7% of 100 is 7, where
    ``0.07 * 100`` is a little over 7)."""
    return math.ceil(round(share * count, 9))


@dataclass(frozen=True)
class TailSample:
    """One slow request: its latency and completion (seconds since the run's start), its route
    and the coordinator's outcome (empty for a plain store), its key and rows, milliseconds per
    cause (``ms``, keyed by ``CAUSES``), the raw route's reads and bytes, the sorted runs
    merged, and the collections of its process during it (``gc_ms`` all, ``gc_full`` full)."""

    latency_ms: float
    end_s: float
    route: str
    outcome: str
    id1: int
    link_type: int
    rows: int
    ms: dict[str, float]
    hdfs_reads: int = 0
    hdfs_bytes: int = 0
    runs: int = 0
    gc_ms: float = 0.0
    gc_full: int = 0

    @classmethod
    def of(cls, latency_ns: int, end_ns: int, id1: int, link_type: int, rows: int,
           cost: RequestCost, route: str) -> "TailSample":
        """From a finished request's record; "other" is its wall time less every component."""
        wall_s = latency_ns / 1e9
        ms = {c: s * 1e3 for c, s in zip(COMPONENTS, cost.spent)}
        ms["other"] = cost.other_s(wall_s) * 1e3
        return cls(latency_ns / 1e6, end_ns / 1e9, route, cost.outcome, id1, link_type, rows,
                   ms, cost.hdfs_reads, cost.hdfs_bytes, cost.runs, cost.gc_ns / 1e6,
                   cost.gc_full)

    @property
    def dominant(self) -> str:
        """The cause that took the most of its wall time (ties: the first in ``CAUSES``)."""
        return max(CAUSES, key=lambda c: (self.ms.get(c, 0.0), -CAUSES.index(c)))


class TailKeeper:
    """One process's slowest requests (at most *capacity*) and its routes' names; shared by its
    requester threads. *default_route*: the route of a request whose target named none."""

    def __init__(self, capacity: int, default_route: str) -> None:
        self.capacity = capacity
        self.default_route = default_route
        self._heap: list[tuple[int, int, tuple]] = []  # (latency, order, the request)
        self._order = itertools.count()
        # A request must be slower than this to be kept: the fastest kept, once full.
        self._floor = -1 if capacity > 0 else math.inf
        self._lock = threading.Lock()
        self._routes: dict[tuple[str, str, str], int] = {}
        self.labels: list[str] = []

    def route_of(self, cost: RequestCost) -> int:
        """The index of *cost*'s route among this process's (``labels``)."""
        key = (cost.route, cost.hot, cost.outcome)
        index = self._routes.get(key)
        if index is None:
            with self._lock:
                label = route_label(*key, self.default_route)
                if label not in self.labels and len(self.labels) >= _MAX_ROUTES - 1:
                    label = MORE_ROUTES  # never an error in a requester's thread
                if label not in self.labels:
                    self.labels.append(label)
                index = self._routes[key] = self.labels.index(label)
        return index

    def offer(self, latency_ns: int, end_ns: int, id1: int, link_type: int, rows: int,
              cost: RequestCost, route: int) -> None:
        """Keep this successful request (its *route* index: ``route_of``) if it is among the
        slowest so far."""
        if latency_ns <= self._floor:  # the common case: read without the lock
            return
        entry = (latency_ns, next(self._order), (end_ns, id1, link_type, rows, cost, route))
        with self._lock:
            if len(self._heap) < self.capacity:
                heapq.heappush(self._heap, entry)
            elif latency_ns > self._heap[0][0]:
                heapq.heapreplace(self._heap, entry)
            else:
                return
            if len(self._heap) == self.capacity:
                self._floor = self._heap[0][0]

    def counts(self, latency_ns: np.ndarray, route: np.ndarray, ok: np.ndarray,
               full_gc: np.ndarray) -> "TailCounts":
        """This process's part: the slowest kept, and per route the histogram of every
        successful request's latency (*latency_ns*, *route* index, *ok*, *full_gc*: one entry
        per request, in any order) and how many ran beside a full collection."""
        with self._lock:
            kept = sorted(self._heap, reverse=True)
        samples = tuple(TailSample.of(latency, end, id1, lt, rows, cost, self.labels[r])
                        for latency, _, (end, id1, lt, rows, cost, r) in kept)
        routes, gcs = {}, {}
        for index, label in enumerate(self.labels):
            mine = ok & (route == index)
            if mine.any():
                routes[label] = Histogram.of(latency_ns[mine])
                gcs[label] = int(full_gc[mine].sum())
        return TailCounts(self.capacity, samples, routes, gcs)


@dataclass(frozen=True, eq=False)
class TailCounts:
    """The slowest requests kept (slowest first) and every route's latencies, of one process
    or of several merged; picklable, small."""

    capacity: int
    samples: tuple[TailSample, ...]
    routes: dict[str, Histogram]
    full_gc: dict[str, int]

    @classmethod
    def merge(cls, parts: Sequence["TailCounts"]) -> "TailCounts":
        """The parts of one run (one capacity), added: the slowest of their union, the
        histograms and counts per route added."""
        capacity = min((p.capacity for p in parts), default=0)
        samples = sorted((s for p in parts for s in p.samples), key=lambda s: -s.latency_ms)
        routes: dict[str, list[Histogram]] = {}
        gcs: Counter[str] = Counter()
        for p in parts:
            for label, histogram in p.routes.items():
                routes.setdefault(label, []).append(histogram)
            gcs.update(p.full_gc)
        return cls(capacity, tuple(samples[:capacity]),
                   {label: Histogram.merge(hs) for label, hs in routes.items()}, dict(gcs))

    def breakdown(self, share: float = TAIL_SHARE) -> "TailBreakdown":
        """The slowest *share* of the answered requests by route and by dominant cause."""
        answered = sum(h.count for h in self.routes.values())
        wanted = share_of(answered, share)
        tail = self.samples[:wanted]
        in_tail = Counter(s.route for s in tail)
        routes = tuple(
            RouteLatency(label, h.count, h.count / answered, h.percentile_ns(50) / 1e6,
                         h.percentile_ns(99) / 1e6, h.max_ns / 1e6, h.mean_ns() / 1e6,
                         self.full_gc.get(label, 0), in_tail[label])
            for label, h in sorted(self.routes.items(), key=lambda kv: -kv[1].count))
        return TailBreakdown(share, answered, wanted, len(tail) == wanted,
                             tail[-1].latency_ms if tail else 0.0, routes,
                             _groups(tail, lambda s: s.route),
                             _groups(tail, lambda s: s.dominant), tuple(tail))


@dataclass(frozen=True)
class RouteLatency:
    """Every successful request of one route: how many (and their share of all answered),
    their latency, how many ran beside a full collection, how many are in the slowest."""

    route: str
    requests: int
    share: float
    p50_ms: float
    p99_ms: float
    max_ms: float
    mean_ms: float
    full_gc: int
    in_tail: int


@dataclass(frozen=True)
class TailGroup:
    """The slowest requests that share a route or a dominant cause: how many (and their share
    of the slowest), their mean latency and mean milliseconds per cause (``CAUSES``), how many
    ran beside a full collection, their mean HDFS reads."""

    name: str
    count: int
    share: float
    latency_ms: float
    ms: dict[str, float]
    full_gc: int
    hdfs_reads: float


def _groups(tail: Sequence[TailSample], key) -> tuple[TailGroup, ...]:
    """*tail* grouped by ``key(sample)``, the largest group first (ties: by name)."""
    groups: dict[str, list[TailSample]] = {}
    for s in tail:
        groups.setdefault(key(s), []).append(s)
    return tuple(
        TailGroup(name, len(g), len(g) / len(tail), _mean([s.latency_ms for s in g]),
                  {c: _mean([s.ms.get(c, 0.0) for s in g]) for c in CAUSES},
                  sum(s.gc_full > 0 for s in g), _mean([s.hdfs_reads for s in g]))
        for name, g in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])))


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


@dataclass(frozen=True)
class TailBreakdown:
    """A run's slowest *share*: of *answered* successful requests the slowest ``wanted``
    (``exact`` False: fewer were kept, see the module's pitfalls), from ``threshold_ms`` on;
    every route over all requests; the slowest by route and by dominant cause; the samples,
    slowest first. ``to_dict`` / ``from_dict``: its JSON (``<approach>.tail.json``)."""

    share: float
    answered: int
    wanted: int
    exact: bool
    threshold_ms: float
    routes: tuple[RouteLatency, ...]
    by_route: tuple[TailGroup, ...]
    by_cause: tuple[TailGroup, ...]
    samples: tuple[TailSample, ...]

    @property
    def slowest(self) -> int:
        """The slowest requests summarised (``wanted``, or fewer when not ``exact``)."""
        return len(self.samples)

    def to_dict(self) -> dict:
        return {**asdict(self), "causes": list(CAUSES)}

    @classmethod
    def from_dict(cls, d: dict) -> "TailBreakdown":
        return cls(d["share"], d["answered"], d["wanted"], d["exact"], d["threshold_ms"],
                   tuple(RouteLatency(**r) for r in d["routes"]),
                   tuple(TailGroup(**g) for g in d["by_route"]),
                   tuple(TailGroup(**g) for g in d["by_cause"]),
                   tuple(TailSample(**s) for s in d["samples"]))
