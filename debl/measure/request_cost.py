"""Where one request's wall time went (docs/BENCHMARKS.md, "The tail"):
a small record per request, kept for the calling thread, that the stores, the raw route and the
coordinator charge as they work, and the garbage collector's pauses of the process.

A caller that wants the breakdown (the query client, ``debl.workload.requesters``) wraps each
request in ``begin()`` ... ``finish()``; in between, each timed step on that thread adds its
``time.perf_counter()`` seconds to one of ``COMPONENTS``:

- ``wait``: deciding the route (``coordinator.coordinator``): the coordinator's lock, and
  waiting for uptime, for the bucket (a buffered query) or, before uptime, for the key's bytes;
  and for a fresh answer the source's head, the change log and the key range's refresh
  (``coordinator.fresh``);
- ``mysql``: a statement on MySQL, the wait for a pooled connection included (``debl.store.
  mysql``);
- ``hbase``: a Thrift call to HBase, its rows decoded, the wait for a pooled connection
  included (``debl.store.hbase``);
- ``hdfs``: the raw route's block reads, the wait for a read thread included
  (``debl.hdfs``), with the ranges read and their bytes;
- ``hdfs_meta``: the raw route's other HDFS calls on the query's own path: a bucket opened
  (its files' block locations and indexes, its listing, its chunks in the catalog) or waited
  for while another thread opens it, a listing checked (``coordinator.raw``,
  ``debl.hdfs``);
- ``merge``: the time inside the merge of the sides and of a bucket's files that no store took
  (the rows parsed and merged, the block cache looked up), with the sorted runs merged;
- ``late``: open loop only, how late the client sent the request after its intended instant.

What none of them took is "other" (``other_s``): the interpreter lock, the garbage collector,
thread scheduling, the client's and the coordinator's own work.

Pitfalls:

- A thread without a record (a load, the raw route's warm-up and listing threads) is charged
  nothing: a timed step then costs a clock read and a thread-local look-up.
- A step that runs on other threads (the raw route's read threads) is charged to the calling
  thread as the time it waited for it; steps nested in the merge are taken out of it
  (``Timed``), so no time is counted twice.
- The collections are the process's (``watch_gc``): one that another thread started during the
  request counts too, since it stopped this request's thread at the latest when it came back
  to Python. They overlap the components; they are not one of them.
"""

from __future__ import annotations

import gc
import threading
from time import perf_counter, perf_counter_ns

COMPONENTS = ("wait", "mysql", "hbase", "hdfs", "hdfs_meta", "merge", "late")
WAIT, MYSQL, HBASE, HDFS, HDFS_META, MERGE, LATE = range(len(COMPONENTS))

_local = threading.local()
# The process's collections so far: full (generation 2) ones, nanoseconds in all of them, and
# the start of the one running. Written only by the collector's callback, which does not nest.
_gc = [0, 0, 0]
_watching = [False]


class RequestCost:
    """One request's record: seconds per component (``spent``, indexed like ``COMPONENTS``),
    the route the coordinator chose (``route``, ``hot``, ``outcome``: empty for a plain store),
    the raw route's reads (``hdfs_reads`` ranges, ``hdfs_bytes``), the sorted runs merged
    (``runs``: each merge counts its inputs) and, after ``finish``, the collections during it
    (``gc_ns`` in all generations, ``gc_full`` full ones)."""

    __slots__ = ("spent", "route", "hot", "outcome", "hdfs_reads", "hdfs_bytes", "runs", "gc_ns",
                 "gc_full", "_gc_from")

    def __init__(self) -> None:
        self.spent = [0.0] * len(COMPONENTS)
        self.route = self.hot = self.outcome = ""
        self.hdfs_reads = self.hdfs_bytes = self.runs = self.gc_ns = self.gc_full = 0
        self._gc_from: tuple[int, int] | None = None  # the process's collections at ``begin``

    def charged(self) -> float:
        """Seconds charged to every component so far."""
        return sum(self.spent)

    def other_s(self, wall_s: float) -> float:
        """What no component took of *wall_s*, the request's wall time (never below 0: the
        components are measured inside it, up to the clock's rounding)."""
        return max(wall_s - self.charged(), 0.0)

    def charge_rest(self, component: int, since: float, charged_before: float) -> None:
        """Charge *component* with the time since *since* (``perf_counter``) that the steps
        inside it did not charge themselves (*charged_before*: ``charged()`` at *since*)."""
        inner = self.charged() - charged_before
        self.spent[component] += max(perf_counter() - since - inner, 0.0)


def begin() -> RequestCost:
    """A new record for the calling thread's next request, charged until ``finish``."""
    cost = _local.cost = RequestCost()
    cost._gc_from = _gc[0], _gc[1]
    return cost


def finish() -> RequestCost | None:
    """End the calling thread's record (None if it had none), with the collections since
    ``begin``."""
    cost = getattr(_local, "cost", None)
    if cost is not None:
        _local.cost = None
        full, ns = cost._gc_from
        cost.gc_full, cost.gc_ns = _gc[0] - full, _gc[1] - ns
    return cost


def current() -> RequestCost | None:
    """The calling thread's record, None outside ``begin`` ... ``finish``."""
    return getattr(_local, "cost", None)


def charge(component: int, since: float) -> None:
    """Add the time since *since* (``perf_counter``) to the calling thread's record, if any."""
    cost = getattr(_local, "cost", None)
    if cost is not None:
        cost.spent[component] += perf_counter() - since


class Timed:
    """``with Timed(component):`` charges *component* of the calling thread's record with the
    time in the block that the timed steps inside it did not charge themselves (so blocks
    nest, and nothing is counted twice); nothing without a record."""

    __slots__ = ("_component", "_cost", "_since", "_charged")

    def __init__(self, component: int) -> None:
        self._component = component

    def __enter__(self) -> None:
        cost = self._cost = getattr(_local, "cost", None)
        if cost is not None:
            self._since, self._charged = perf_counter(), cost.charged()

    def __exit__(self, *exc: object) -> None:
        if self._cost is not None:
            self._cost.charge_rest(self._component, self._since, self._charged)


def charge_reads(since: float, ranges: int, nbytes: int) -> None:
    """``charge(HDFS, since)`` for *ranges* byte ranges read, *nbytes* in all."""
    cost = getattr(_local, "cost", None)
    if cost is not None:
        cost.spent[HDFS] += perf_counter() - since
        cost.hdfs_reads += ranges
        cost.hdfs_bytes += nbytes


def routed(wait_s: float, route: str, hot: str, outcome: str) -> None:
    """The coordinator's route for the calling thread's request (``coordinator.routes``: its
    route, hot side and outcome, as text), after *wait_s* seconds deciding it (``wait``)."""
    cost = getattr(_local, "cost", None)
    if cost is not None:
        cost.spent[WAIT] += wait_s
        cost.route, cost.hot, cost.outcome = str(route), str(hot), str(outcome)


def note_runs(runs: int) -> None:
    """A merge of *runs* sorted inputs on the calling thread (``coordinator.merge``)."""
    cost = getattr(_local, "cost", None)
    if cost is not None:
        cost.runs += runs


def watch_gc() -> None:
    """Count the process's collections from now on (idempotent; the callback stays for the
    process's life: a query client's worker, or a ``debl query``)."""
    if not _watching[0]:
        _watching[0] = True
        gc.callbacks.append(_on_gc)


def _on_gc(phase: str, info: dict) -> None:
    if phase == "start":
        _gc[2] = perf_counter_ns()
    else:
        _gc[1] += perf_counter_ns() - _gc[2]
        _gc[0] += info.get("generation") == 2
