"""The coordinator: routes each get_link_list to MySQL, HBase or both, and buffers the queries
whose data is still on its way (docs/DESIGN.md section 6).

Routing, with ``b`` the bucket of id1 in the bucket map of the latest load (``debl.buckets``):

- the system is not up (no load yet, or the latest load still running): wait for uptime;
- no cold row can have id1 (no bucket ``b`` in the index, or id1 outside the id1 span of its
  cold rows, ``[c_lo, c_hi]``): MySQL alone answers, at once;
- bucket ``b`` is ``loaded``: MySQL and HBase answer and the rows are merged
  (coordinator.merge): merge per key first, then filter;
- otherwise (``pending``, ``queued``, ``running``): the query is buffered on ``b`` (its
  ``q_list``), the bucket's demand rises, and the query is answered as soon as the poller sees
  ``b`` loaded, or, with the raw route on (``config.raw_after`` seconds, not "off"), once it
  has waited that long: then from the bucket's files in HDFS (coordinator.raw) merged with
  MySQL's rows, the answer it would get after the conversion (route ``raw``). Either way it
  counts towards the bucket's demand (coordinator.demand), which steers gen_HF;
- ``failed`` (gen_HF gave up on the bucket, or a run of it failed): the queries on it are
  released at once, answered by the raw route when it is on, else with ServiceError naming the
  bucket (a bucket gen_HF refuses never made its waiters wait forever again).

A query may carry a deadline. Past it the caller gets QueryTimeout naming the bucket, its state
and the time waited, or, if it asked for ``partial=True``, the MySQL-only answer marked
incomplete. A query without one gets the constructor's ``default_timeout``, else
``config.query_timeout``: no query waits forever.

A new load (docs/RELIABILITY.md, "Concurrency"): the poller sees the new load id in the catalog,
stops answering from the old dataset (queries wait for the new uptime) and, once no query of
the old dataset is still reading the stores, says so in its heartbeat (``debl_coordinators``);
the load empties the old stores only after that, so no query is answered from half-emptied
stores.

Threads: one poller thread per coordinator reads the catalog every ``config.poll_interval``
seconds and publishes this coordinator's demand and answer counts (``debl status`` sums them);
client threads share the object. All routing
state sits behind one lock and one condition variable, which is notified when a bucket lands,
when the dataset changes and on close; store I/O happens outside the lock. The MySQL and HBase
stores and the raw reader are themselves thread-safe (a connection per thread, a connection
pool, locks around the reader's cache).

Restart: nothing lives only in memory except the queries buffered by this coordinator's own
clients. A new coordinator reads the load, the bucket index and the job states from MySQL and
publishes under a new id; the rows of a killed one age out of ``Catalog.demand()``.

Pitfalls:

- ``get_link_list`` returns a plain list, like a LinkStore, so that the query client can drive a
  coordinator; a partial answer is then indistinguishable from a complete one. Callers that use
  ``partial=True`` should call ``query``, which says whether the answer is complete.
- Close the coordinator (``with``): close deletes its demand rows; queries still waiting get
  ServiceError.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import chain

from debl.catalog import Catalog
from debl.config import Config
from debl.errors import QueryTimeout, ServiceError
from debl.model import DEFAULT_LIMIT, MAX_TIME, Link, check_query
from debl.store.hbase import HBaseStore
from debl.store.mysql import MySQLStore
from coordinator.demand import DemandPolicy, new_coordinator_id
from coordinator.merge import merge_newest_first, select_merged
from coordinator.raw import RawBucket, RawReader
from coordinator.state import BucketState, Dataset, LoadView, read_dataset, read_load
from coordinator.stats import CoordinatorStats, WaitCounters, WaitRecorder

log = logging.getLogger("debl.coordinator")

_JOIN_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Answer:
    """One get_link_list through the coordinator.

    ``route``: ``mysql`` (no cold row can have id1), ``merged`` (the bucket is loaded: MySQL and
    HBase), ``raw`` (the bucket is not loaded: MySQL and the bucket's files in HDFS),
    ``partial`` (the deadline passed first: MySQL only, ``complete`` False).
    ``waited_s``: time blocked waiting for uptime or for the bucket (0.0 if answered at once).
    ``bucket``: the cold bucket of id1, None when no cold row can have id1.
    """

    links: list[Link]
    complete: bool
    waited_s: float
    bucket: int | None
    route: str

    @property
    def waited(self) -> bool:
        return self.waited_s > 0.0


@dataclass(frozen=True)
class BucketView:
    """A copy of one bucket's state (``waiting``: this coordinator's buffered queries;
    ``[c_lo, c_hi]``: the id1 span of its cold rows)."""

    b_index: int
    k_lo: int
    k_hi: int
    j_stat: str
    waiting: int
    c_lo: int
    c_hi: int


@dataclass(frozen=True)
class _Route:
    kind: str  # mysql / merged / raw / partial
    dataset: Dataset
    bucket: int | None
    outcome: str  # for the stats: immediate / buffered / waited_uptime / raw / partial
    waited_s: float


class Coordinator:
    """Routes get_link_list over MySQL and HBase; buffers queries on buckets not yet loaded.

    ``Coordinator(config)`` connects to MySQL at once (ServiceError if it cannot) and reads the
    current state, so a coordinator built after uptime answers its first query without waiting.
    HBase is connected on first use. *coordinator_id* names this coordinator's demand rows
    (default: host-pid-random). *default_timeout* (seconds; default ``config.query_timeout``)
    applies to queries that give neither ``timeout`` nor ``deadline``.
    """

    def __init__(self, config: Config, coordinator_id: str | None = None, *,
                 default_timeout: float | None = None) -> None:
        self.config = config
        self.coordinator_id = coordinator_id or new_coordinator_id()
        if len(self.coordinator_id) > 64:
            raise ValueError("coordinator_id must be at most 64 characters")
        self.default_timeout = config.query_timeout if default_timeout is None else default_timeout
        self._cond = threading.Condition()
        self._load: LoadView | None = None
        self._dataset: Dataset | None = None
        self._closed = False
        self._wake = threading.Event()
        self._recorder = WaitRecorder()
        self._policy = DemandPolicy(max(config.poll_interval, 0.01))
        self._polls = 0
        self._answers_published: dict[str, int] = {}
        self._answers_at = float("-inf")
        self._fetching: dict[str, int] = {}  # load id -> queries reading its stores now
        self.last_poll_error: str | None = None
        self._mysql = MySQLStore(config)
        self._hbase = HBaseStore(config)
        self._catalog = Catalog(config)  # thread-safe: the poller's, the raw reader's, close's
        self._raw = RawReader(config, self._catalog)
        self._poll()
        self._poller = threading.Thread(target=self._run_poller, daemon=True,
                                        name=f"debl-coordinator-{self.coordinator_id}")
        self._poller.start()

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> "Coordinator":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the poller, delete this coordinator's demand rows, close every connection.
        Queries still buffered get ServiceError. Idempotent."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.notify_all()
        self._wake.set()
        self._poller.join(_JOIN_TIMEOUT_S)
        try:
            self._catalog.forget_coordinator(self.coordinator_id)
            self._catalog.publish_demand(self.coordinator_id, {})
            self._catalog.publish_answers(self.coordinator_id, self._recorder.answered())
        except Exception as exc:  # noqa: BLE001 -- the rows age out of Catalog.demand anyway
            log.warning("coordinator %s: could not clear its demand rows: %s",
                        self.coordinator_id, exc)
        self._catalog.close()
        self._mysql.close()
        self._hbase.close()
        self._raw.close()

    # ------------------------------------------------------------------ queries

    def get_link_list(self, id1: int, link_type: int, min_time: int = 0,
                      max_time: int = MAX_TIME, offset: int = 0, limit: int = DEFAULT_LIMIT,
                      *, timeout: float | None = None, deadline: float | None = None,
                      partial: bool = False) -> list[Link]:
        """Visible links of (id1, link_type) in [min_time, max_time], newest first (ties: id2
        descending), after the merge rule across MySQL and HBase, then offset and limit.

        Blocks while id1's bucket is not loaded (with the raw route on, at most
        ``config.raw_after`` seconds). *timeout* (seconds from now) or *deadline*
        (epoch seconds, ``time.time()``), whichever comes first, bounds the wait: past it,
        QueryTimeout, or with *partial* the MySQL-only answer (see ``query``)."""
        return self.query(id1, link_type, min_time, max_time, offset, limit, timeout=timeout,
                          deadline=deadline, partial=partial).links

    def query(self, id1: int, link_type: int, min_time: int = 0, max_time: int = MAX_TIME,
              offset: int = 0, limit: int = DEFAULT_LIMIT, *, timeout: float | None = None,
              deadline: float | None = None, partial: bool = False) -> Answer:
        """``get_link_list`` with the details: whether the answer is complete, how long it
        waited, which bucket and which route answered."""
        check_query(id1, link_type, min_time, max_time, offset, limit)
        started = time.monotonic()
        end = self._end(started, timeout, deadline)
        route = self._route(id1, link_type, started, end, partial)
        try:
            links = self._fetch(route, id1, link_type, min_time, max_time, offset, limit)
        finally:
            with self._cond:
                load_id = route.dataset.load.load_id
                self._fetching[load_id] -= 1
                if not self._fetching[load_id]:
                    del self._fetching[load_id]
        self._recorder.record(route.outcome, route.waited_s, started)
        return Answer(links, route.kind != "partial", route.waited_s, route.bucket, route.kind)

    def _end(self, started: float, timeout: float | None, deadline: float | None) -> float | None:
        """The monotonic instant past which the query gives up (None: never)."""
        if timeout is None and deadline is None:
            timeout = self.default_timeout
        ends = []
        if timeout is not None:
            ends.append(started + max(timeout, 0.0))
        if deadline is not None:
            ends.append(started + max(deadline - time.time(), 0.0))
        return min(ends) if ends else None

    def _route(self, id1: int, link_type: int, started: float, end: float | None,
               partial: bool) -> _Route:
        """Decide where the query goes, waiting for uptime or for its bucket as needed."""
        waited_uptime = waited_bucket = False
        registered: BucketState | None = None
        raw_after = self.config.raw_after
        raw_at: float | None = None  # when the raw route answers, once the query needs a bucket
        with self._cond:
            try:
                while True:
                    if self._closed:
                        raise ServiceError(f"coordinator {self.coordinator_id} is closed")
                    now = time.monotonic()
                    remaining = None if end is None else max(end - now, 0.0)
                    dataset = self._dataset
                    if dataset is None:
                        self._check_load_usable()
                        if remaining == 0.0:
                            self._recorder.record("timeouts", now - started, started)
                            raise QueryTimeout(
                                f"get_link_list({id1}, {link_type}): the system is not up yet "
                                f"({self._describe_load()}); gave up after {now - started:.1f} s")
                        waited_uptime = True
                        self._cond.wait(remaining)
                        continue
                    bucket = dataset.bucket_of(id1)
                    waited = now - started if (waited_uptime or waited_bucket) else 0.0
                    if bucket is None or bucket.loaded:
                        outcome = ("buffered" if waited_bucket else
                                   "waited_uptime" if waited_uptime else "immediate")
                        return self._fetching_from(
                            _Route("mysql" if bucket is None else "merged", dataset,
                                   None if bucket is None else bucket.b_index, outcome, waited))
                    if bucket.j_stat == "failed":  # released now: gen_HF gave up on it
                        if raw_after is not None:
                            return self._fetching_from(_Route("raw", dataset, bucket.b_index,
                                                              "raw", waited))
                        raise ServiceError(
                            f"get_link_list({id1}, {link_type}): gen_HF failed to load bucket "
                            f"{bucket.b_index} (id1 {bucket.k_lo}..{bucket.k_hi}); its error is "
                            "in `debl status`. Fix the cause and restart `debl gen-hf`, or turn "
                            "the raw route on (raw_after) to answer from the bucket's files")
                    if registered is not bucket:  # first time here, or a new dataset
                        if registered is not None:
                            registered.waiting -= 1
                        bucket.waiting += 1
                        registered = bucket
                        self._wake.set()  # the poller publishes the new demand
                        if raw_after is not None and raw_at is None:
                            raw_at = now + raw_after  # from the moment it needs the bucket
                    if raw_at is not None and now >= raw_at:
                        return self._fetching_from(_Route("raw", dataset, bucket.b_index, "raw",
                                                          now - started))
                    if remaining == 0.0:
                        if partial:
                            return self._fetching_from(_Route("partial", dataset,
                                                              bucket.b_index, "partial",
                                                              now - started))
                        self._recorder.record("timeouts", now - started, started)
                        raise QueryTimeout(
                            f"get_link_list({id1}, {link_type}): bucket {bucket.b_index} "
                            f"(id1 {bucket.k_lo}..{bucket.k_hi}) is still {bucket.j_stat!r} "
                            f"after waiting {now - started:.1f} s; gen_HF has not loaded it yet "
                            "(pass a longer timeout, or partial=True for the MySQL-only answer)")
                    waited_bucket = True
                    self._cond.wait(remaining if raw_at is None else
                                    raw_at - now if remaining is None else
                                    min(remaining, raw_at - now))
            finally:
                if registered is not None:
                    registered.waiting -= 1
                    if not registered.loaded:  # raw, deadline or closed: still its demand
                        registered.stopped_waiting(time.monotonic())
                    self._wake.set()

    def _fetching_from(self, route: _Route) -> _Route:
        """Count a query that is about to read the stores of its route's load (lock held);
        ``query`` counts it out. The heartbeat acknowledges a new load only at zero."""
        load_id = route.dataset.load.load_id
        self._fetching[load_id] = self._fetching.get(load_id, 0) + 1
        return route

    def _check_load_usable(self) -> None:
        load = self._load
        if load is not None and load.state == "failed":
            reason = (load.error or "no error recorded").strip().splitlines()[0][:200]
            raise ServiceError(
                f"the latest load {load.load_id} failed ({reason}); nothing can be answered "
                f"until it is resumed (`debl load SOURCE --resume {load.load_id}`) or a new "
                "load is up")

    def _describe_load(self) -> str:
        load = self._load
        if load is None:
            return "no load has been run"
        return f"load {load.load_id} is {load.state}"

    def _fetch(self, route: _Route, id1: int, link_type: int, min_time: int, max_time: int,
               offset: int, limit: int) -> list[Link]:
        """Run the query on the stores the route names (no lock held)."""
        if limit == 0 or min_time > max_time:
            return []
        hot = route.dataset.may_be_hot(id1, link_type)
        args = (id1, link_type, min_time, max_time, offset, limit)
        if route.kind == "raw":
            bucket = route.dataset.buckets[route.bucket]
            cold = self._raw.scan_newest_first(
                RawBucket(route.dataset.load.load_id, bucket.b_index, bucket.rows),
                id1, link_type, min_time)
            if hot:
                cold = merge_newest_first(self._mysql.scan_newest_first(id1, link_type,
                                                                        min_time), cold)
            return select_merged(cold, min_time, max_time, offset, limit)
        if route.kind != "merged":  # mysql, or partial: MySQL alone
            return self._mysql.get_link_list(*args) if hot else []
        if not hot:  # MySQL holds no row of id1: push the whole query down to HBase
            return self._hbase.get_link_list(*args)
        hot_rows: Iterator[Link] = self._mysql.scan_newest_first(id1, link_type, min_time)
        first = next(hot_rows, None)
        if first is None:  # nothing in MySQL for this list: HBase alone, filtered server-side
            return self._hbase.get_link_list(*args)
        cold_rows = self._hbase.scan_newest_first(id1, link_type, min_time)
        winners = merge_newest_first(chain([first], hot_rows), cold_rows)
        return select_merged(winners, min_time, max_time, offset, limit)

    # ------------------------------------------------------------------ state, for callers

    @property
    def is_up(self) -> bool:
        with self._cond:
            return self._dataset is not None

    @property
    def load_id(self) -> str | None:
        """The load being served (None while the system is not up)."""
        with self._cond:
            return self._dataset.load.load_id if self._dataset else None

    def wait_until_up(self, timeout: float | None = None) -> bool:
        """Block until the system is up; False if *timeout* passed first."""
        with self._cond:
            return self._cond.wait_for(lambda: self._dataset is not None or self._closed,
                                       timeout) and self._dataset is not None

    def buckets(self) -> list[BucketView]:
        """Every cold bucket's state as this coordinator last saw it (empty while not up)."""
        with self._cond:
            if self._dataset is None:
                return []
            return [BucketView(s.b_index, s.k_lo, s.k_hi, s.j_stat, s.waiting, s.c_lo, s.c_hi)
                    for _, s in sorted(self._dataset.buckets.items())]

    def waiting(self) -> dict[int, int]:
        """Queries of this coordinator buffered per bucket now."""
        with self._cond:
            return self._dataset.waiting() if self._dataset else {}

    def demand(self) -> dict[int, int]:
        """The demand this coordinator publishes per bucket (coordinator.demand): queries
        waiting, and the decayed weight of those that needed the bucket and stopped waiting."""
        with self._cond:
            return self._dataset.demand(time.monotonic()) if self._dataset else {}

    def id_range(self) -> tuple[int, int] | None:
        """(start_id, max_id), max exclusive: the served load's id1 range, for the default
        request ids of ``debl query`` (see ``Dataset.id_range``); None while not up."""
        with self._cond:
            return self._dataset.id_range() if self._dataset else None

    def stats(self) -> CoordinatorStats:
        """Counts of queries answered at once / after buffering, and buffered wait times."""
        return self._recorder.snapshot()

    def wait_counters(self) -> WaitCounters:
        """The raw counters behind ``stats()``, picklable and mergeable across coordinators
        (``WaitCounters.merge``): what each process of a multi-process query client reports."""
        return self._recorder.counters()

    def reset_stats(self) -> None:
        """Zero the counters and restart the clock of the first-minute counts."""
        self._recorder.reset()

    # ------------------------------------------------------------------ the poller

    def _poll(self) -> None:
        """Read the latest load and the job states; swap or update the dataset; then the
        heartbeat."""
        load = read_load(self._catalog)
        self._take(load)
        with self._cond:
            # The latest load is acknowledged once no query reads another load's stores.
            busy = any(n for load_id, n in self._fetching.items()
                       if load is None or load_id != load.load_id)
        self._catalog.heartbeat(self.coordinator_id, None if busy or load is None
                                else load.load_id, max(self.config.poll_interval, 0.01))

    def _take(self, load: LoadView | None) -> None:
        """Serve *load*: swap the dataset for a new load, update the job states of the same."""
        catalog = self._catalog
        with self._cond:
            current = self._dataset
        if load is None or not load.is_up:
            with self._cond:
                self._load = load
                if self._dataset is not None:  # a new load started: down until its uptime
                    self._dataset = None
                    self._cond.notify_all()
                elif load is not None and load.state == "failed":
                    self._cond.notify_all()  # waiters for uptime get the load's error
            return
        if current is None or current.load.load_id != load.load_id:
            dataset = read_dataset(catalog, load)
            with self._cond:
                self._load = load
                self._dataset = dataset
                self._cond.notify_all()
            log.info("coordinator %s: load %s is up, %d buckets", self.coordinator_id,
                     load.load_id, len(dataset.buckets))
            return
        states = catalog.job_states()
        with self._cond:
            if self._dataset is current:
                if current.apply_states(states):
                    self._cond.notify_all()

    def _publish(self, now: float) -> None:
        """Publish the demand when the policy says so, and the answer counts when they changed
        (at most once per poll interval)."""
        with self._cond:
            demand = self._dataset.demand(now) if self._dataset else {}
        answered = self._recorder.answered()
        counts_due = (answered != self._answers_published
                      and now - self._answers_at >= self._policy.min_interval)
        if not self._policy.due(demand, now) and not counts_due:
            return
        if self._policy.due(demand, now):
            self._catalog.publish_demand(self.coordinator_id, demand)
            self._policy.done(demand, now)
        if counts_due:
            self._catalog.publish_answers(self.coordinator_id, answered)
            self._answers_published, self._answers_at = answered, now

    def _run_poller(self) -> None:
        """Poll every poll_interval; publish demand when it changed (at most once per
        poll_interval) and as a heartbeat. A failing poll is logged and retried: the
        coordinator keeps answering from the state it has."""
        interval = max(self.config.poll_interval, 0.01)  # 0 would make this loop spin
        next_poll = time.monotonic() + interval
        while True:
            now = time.monotonic()
            with self._cond:
                if self._closed:
                    return
                demand = self._dataset.demand(now) if self._dataset else {}
            due = self._policy.next_due(demand, now)
            wake_at = next_poll if due is None else min(next_poll, due)
            if wake_at > now:
                self._wake.wait(wake_at - now)
                self._wake.clear()
                continue  # re-read the counts: a query may have changed them
            try:
                if now >= next_poll:
                    next_poll = now + interval
                    self._poll()
                    self._polls += 1
                self._publish(time.monotonic())
                self.last_poll_error = None
            except Exception as exc:  # noqa: BLE001 -- never let the poller die
                self.last_poll_error = f"{type(exc).__name__}: {exc}"
                log.warning("coordinator %s: poll failed (retrying): %s", self.coordinator_id,
                            self.last_poll_error)
                # The catalog's pool replaces a broken connection on the next call.
                next_poll = time.monotonic() + interval
                # Back off publishing too, or a dead server turns the loop into a busy one.
                self._policy.last = time.monotonic()
