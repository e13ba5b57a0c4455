"""The coordinator: routes each get_link_list over the current load's stores and buffers the
queries whose data is still on its way (docs/DESIGN.md section 6, docs/COORDINATOR.md).

Every query is answered wholly from one load, the current one (``Catalog.make_current``); the
answer names it. With ``b`` the bucket of id1 in that load's bucket map:

- no load is up yet: wait for uptime (a failed newest load with nothing current: an error);
- hot rows: from the hot files' bucket of id1 in HDFS (coordinator.raw) until MySQL has taken
  the load's hot keys over, from MySQL after (for keys its key filter may hold);
- cold rows: none when no cold row can have id1 (no bucket ``b``, or id1 outside the id1 span of
  its cold rows, ``[c_lo, c_hi]``): the hot rows alone answer, at once (route ``mysql``);
  bucket ``b`` ``loaded``: HBase (route ``merged``); otherwise (``pending``, ``queued``,
  ``running``) the query is buffered on ``b`` (its ``q_list``), the bucket's demand rises, and
  it is answered as soon as the poller sees ``b`` loaded, or, with the raw route on
  (``config.coordinator.raw_after`` seconds, not "off"), once it has waited that long: from the
  bucket's files in HDFS (route ``raw``), the answer it would get after the conversion. Either
  way it counts towards the bucket's demand (coordinator.demand), which steers gen_HF;
- ``failed`` (gen_HF gave up on the bucket): the queries on it are released at once, answered
  by the raw route when it is on, else with ServiceError naming the bucket.

Hot and cold rows are merged key by key by the one merge rule (coordinator.merge), then
filtered: any hot source with any cold source.

A query may carry a deadline. Past it the caller gets QueryTimeout naming the bucket, its state
and the time waited, or, if it asked for ``partial=True``, the hot rows alone marked incomplete.
Without one: the constructor's ``default_timeout``, else ``config.coordinator.query_timeout``.

A new current load (the next day's, or a rollback): the poller reads it in one transaction and
swaps the dataset; queries already routed finish on the stores of the load they started on, new
ones go to the new load. Once none of another load is in flight the heartbeat says so, and only
then may cleanup drop the old stores. MySQL's take-over of the hot keys works the same way: the
hot bucket files are removed only after every coordinator's heartbeat says none of its queries
reads them.

Threads: one poller thread (coordinator.poller); client threads share the object. All routing
state sits behind one lock and one condition variable, notified when a bucket lands, when the
dataset changes and on close; store I/O happens outside the lock. The MySQL and HBase stores and
the raw reader are thread-safe.

Pitfalls:

- ``get_link_list`` returns a plain list, like a LinkStore, so that the query client can drive a
  coordinator; a partial answer is then indistinguishable from a complete one. Callers that use
  ``partial=True`` should call ``query``, which says whether the answer is complete.
- Close the coordinator (``with``): close deletes its demand rows; queries still waiting get
  ServiceError.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from debl.catalog import Catalog, LoadRecord, ServingState
from debl.config import Config
from debl.errors import QueryTimeout, ServiceError
from debl.model import DEFAULT_LIMIT, MAX_TIME, Link, check_query
from coordinator.demand import new_coordinator_id
from coordinator.merge import NewestFirst, answer
from coordinator.poller import Poller
from coordinator.raw import RawBucket, RawReader
from coordinator.raw_warmup import RawWarmup, raw_buckets
from coordinator.routes import Answer, HotSide, Route
from coordinator.sources import LoadStores, RawFiles
from coordinator.state import BucketState, BucketView, Dataset, HotBucket
from coordinator.stats import CoordinatorStats, WaitCounters, WaitRecorder


# Answer counts published besides the outcomes (coordinator.stats: ``raw``, ``partial`` are
# routes already): those at once by store, and how many read the hot files raw.
VIA = {Route.MYSQL: "via_mysql", Route.MERGED: "via_hbase"}


@dataclass(frozen=True)
class _Route:
    """Where one query goes, decided under the lock: everything it reads is in here."""

    route: Route
    dataset: Dataset
    bucket: BucketState | None
    hot: HotSide
    hot_bucket: HotBucket | None
    outcome: str  # for the stats: immediate / buffered / waited_uptime / raw / partial
    waited_s: float


class Coordinator:
    """Routes get_link_list over the current load's stores; buffers queries on buckets not yet
    loaded.

    ``Coordinator(config)`` connects to MySQL at once (ServiceError if it cannot) and reads the
    current state, so a coordinator built after uptime answers its first query without waiting.
    The stores are connected on first use. *coordinator_id* names this coordinator's demand rows
    (default: host-pid-random). *default_timeout* (seconds; default
    ``config.coordinator.query_timeout``): for queries with neither ``timeout`` nor ``deadline``.
    """

    def __init__(self, config: Config, coordinator_id: str | None = None, *,
                 default_timeout: float | None = None) -> None:
        self.config = config
        self.coordinator_id = coordinator_id or new_coordinator_id()
        if len(self.coordinator_id) > 64:
            raise ValueError("coordinator_id must be at most 64 characters")
        timeout = config.coordinator.query_timeout
        self.default_timeout = timeout if default_timeout is None else default_timeout
        self._cond = threading.Condition()
        self._newest: LoadRecord | None = None
        self._dataset: Dataset | None = None
        self._closed = False
        self._recorder = WaitRecorder()
        self._fetching: Counter = Counter()  # load id -> queries reading its stores now
        self._hot_raw: Counter = Counter()  # load id -> queries reading its hot files now
        self._via: Counter = Counter()  # answers per store they came from (VIA)
        self._stores: dict[str, LoadStores] = {}
        self._catalog = Catalog(config)  # thread-safe: the poller's, the raw reader's, close's
        self._raw = RawReader(config, self._catalog)
        self._warmup = RawWarmup(self._raw)
        self._poller = Poller(self, self._catalog)
        self._poller.poll()
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
        self._poller.stop()
        try:
            self._poller.publish_last()
        except ServiceError as exc:  # the rows age out of Catalog.demand anyway
            self._poller.last_error = str(exc)
        self._catalog.close()
        for stores in self._stores.values():
            stores.close()
        # The warm-up and the reader's threads stopped and waited for: a thread still inside
        # the HDFS client when the interpreter exits aborts the process (issue 38.10).
        self._warmup.close(timeout=self.config.service_timeout)
        self._raw.close()

    @property
    def last_poll_error(self) -> str | None:
        return self._poller.last_error

    # ------------------------------------------------------------------ queries

    def get_link_list(self, id1: int, link_type: int, min_time: int = 0,
                      max_time: int = MAX_TIME, offset: int = 0, limit: int = DEFAULT_LIMIT,
                      *, timeout: float | None = None, deadline: float | None = None,
                      partial: bool = False) -> list[Link]:
        """Visible links of (id1, link_type) in [min_time, max_time], newest first (ties: id2
        descending), after the merge rule across the load's stores, then offset and limit.

        Blocks while id1's bucket is not loaded (with the raw route on, at most
        ``config.coordinator.raw_after`` seconds). *timeout* (seconds from now) or *deadline*
        (epoch seconds, ``time.time()``), whichever comes first, bounds the wait: past it,
        QueryTimeout, or with *partial* the hot rows alone (see ``query``)."""
        return self.query(id1, link_type, min_time, max_time, offset, limit, timeout=timeout,
                          deadline=deadline, partial=partial).links

    def query(self, id1: int, link_type: int, min_time: int = 0, max_time: int = MAX_TIME,
              offset: int = 0, limit: int = DEFAULT_LIMIT, *, timeout: float | None = None,
              deadline: float | None = None, partial: bool = False) -> Answer:
        """``get_link_list`` with the details: whether the answer is complete, how long it
        waited, which bucket, route and load answered."""
        check_query(id1, link_type, min_time, max_time, offset, limit)
        started = time.monotonic()
        end = self._end(started, timeout, deadline)
        route = self._route(id1, link_type, started, end, partial)
        try:
            links = self._fetch(route, id1, link_type, min_time, max_time, offset, limit)
        finally:
            load_id = route.dataset.load.load_id
            with self._cond:
                self._fetching[load_id] -= 1
                if route.hot is HotSide.RAW:
                    self._hot_raw[load_id] -= 1
        self._recorder.record(route.outcome, route.waited_s, started)
        with self._cond:  # where the answer came from, for `debl status` and `debl ui`
            if route.route in VIA:
                self._via[VIA[route.route]] += 1
            if route.hot is HotSide.RAW:
                self._via["via_hot_raw"] += 1
        return Answer(links, route.route is not Route.PARTIAL, route.waited_s,
                      None if route.bucket is None else route.bucket.b_index, route.route,
                      load_id, route.hot)

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
        raw_after = self.config.coordinator.raw_after
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
                    if registered is None and bucket is not None:
                        dataset.asked[bucket.b_index] += 1
                    waited = now - started if (waited_uptime or waited_bucket) else 0.0
                    plan = lambda kind, outcome, w: self._plan(  # noqa: E731
                        kind, dataset, bucket, id1, link_type, outcome, w)
                    if bucket is None or bucket.loaded:
                        outcome = ("buffered" if waited_bucket else
                                   "waited_uptime" if waited_uptime else "immediate")
                        return plan(Route.MYSQL if bucket is None else Route.MERGED, outcome,
                                    waited)
                    if bucket.j_stat == "failed":  # released now: gen_HF gave up on it
                        if raw_after is not None:
                            return plan(Route.RAW, "raw", waited)
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
                        self._poller.wake()  # the poller publishes the new demand
                        if raw_after is not None and raw_at is None:
                            raw_at = now + raw_after  # from the moment it needs the bucket
                    if raw_at is not None and now >= raw_at:
                        return plan(Route.RAW, "raw", now - started)
                    if remaining == 0.0:
                        if partial:
                            return plan(Route.PARTIAL, "partial", now - started)
                        self._recorder.record("timeouts", now - started, started)
                        raise QueryTimeout(
                            f"get_link_list({id1}, {link_type}): bucket {bucket.b_index} "
                            f"(id1 {bucket.k_lo}..{bucket.k_hi}) is still {bucket.j_stat!r} "
                            f"after waiting {now - started:.1f} s; gen_HF has not loaded it yet "
                            "(pass a longer timeout, or partial=True for the hot rows alone)")
                    waited_bucket = True
                    self._cond.wait(remaining if raw_at is None else
                                    raw_at - now if remaining is None else
                                    min(remaining, raw_at - now))
            finally:
                if registered is not None:
                    registered.waiting -= 1
                    if not registered.loaded:  # raw, deadline or closed: still its demand
                        registered.stopped_waiting(time.monotonic())
                    self._poller.wake()

    def _plan(self, kind: Route, dataset: Dataset, bucket: BucketState | None, id1: int,
              link_type: int, outcome: str, waited_s: float) -> _Route:
        """The route of a query about to read the stores of *dataset*'s load (lock held): where
        its hot rows come from, counted in so that the heartbeat acknowledges a new load, or
        MySQL's take-over, only once no query reads the old ones."""
        load_id = dataset.load.load_id
        hot_bucket = dataset.hot_bucket_of(id1)
        hot = (HotSide.RAW if hot_bucket is not None else
               HotSide.MYSQL if dataset.may_be_hot(id1, link_type) else HotSide.NONE)
        self._fetching[load_id] += 1
        if hot is HotSide.RAW:
            self._hot_raw[load_id] += 1
        return _Route(kind, dataset, bucket, hot, hot_bucket, outcome, waited_s)

    def _check_load_usable(self) -> None:
        newest = self._newest
        if newest is not None and newest.state == "failed":
            reason = (newest.error or "no error recorded").strip().splitlines()[0][:200]
            raise ServiceError(
                f"the latest load {newest.load_id} failed ({reason}) and no load is up to "
                f"answer from: resume it (`debl load SOURCE --resume {newest.load_id}`) or run "
                "a new load")

    def _describe_load(self) -> str:
        newest = self._newest
        if newest is None:
            return "no load has been run"
        return f"load {newest.load_id} is {newest.state}"

    def _fetch(self, route: _Route, id1: int, link_type: int, min_time: int, max_time: int,
               offset: int, limit: int) -> list[Link]:
        """Run the query on the sources the route names (no lock held)."""
        load = route.dataset.load
        stores = self._stores_of(load)
        args = (id1, link_type, min_time, max_time, offset, limit)
        hot: NewestFirst | None = (
            stores.mysql if route.hot is HotSide.MYSQL else
            RawFiles(self._raw, RawBucket(load.load_id, route.hot_bucket.b_index,
                                           route.hot_bucket.rows, hot=True))
            if route.hot is HotSide.RAW else None)
        cold: NewestFirst | None = None
        if route.route is Route.MERGED:
            if hot is None:  # no hot row: push the whole query down to HBase
                return stores.hbase.get_link_list(*args)
            cold = stores.hbase
        elif route.route is Route.RAW:
            cold = RawFiles(self._raw, RawBucket(load.load_id, route.bucket.b_index,
                                                  route.bucket.rows))
        elif route.hot is HotSide.MYSQL:  # the hot rows alone, from MySQL: one statement
            return stores.mysql.get_link_list(*args)
        return answer(hot, cold, *args)

    def _stores_of(self, load: LoadRecord) -> LoadStores:
        with self._cond:
            stores = self._stores.get(load.load_id)
            if stores is None:
                stores = self._stores[load.load_id] = LoadStores(self.config, load)
            return stores

    # ------------------------------------------------------------------ the poller's side

    def _take(self, current: LoadRecord | None, newest: LoadRecord | None,
              states: dict[int, str], serving: Callable[[], ServingState | None]) -> None:
        """What a poll read: swap the dataset for a new current load, switch the hot keys to
        MySQL once it has them, or take new job states."""
        with self._cond:
            self._newest = newest
            dataset = self._dataset
        if current is None:
            with self._cond:
                if dataset is not None:  # a rollback to nothing cannot happen; be safe
                    self._dataset = None
                self._cond.notify_all()  # waiters for uptime may get the newest load's error
            return
        if dataset is None or dataset.load.load_id != current.load_id:
            state = serving()
            if state is None:
                return
            fresh = Dataset.of(state)
            with self._cond:
                self._dataset = fresh
                self._cond.notify_all()
            self._forget_stores(state.load.load_id)
            self._raw.serve(state.load.load_id, hot=not state.load.hot_in_mysql)
            if self.config.coordinator.raw_after is not None:
                self._warmup.offer(raw_buckets(fresh))
            return
        if current.hot_in_mysql and not dataset.load.hot_in_mysql:
            state = serving()
            with self._cond:
                if state is not None and state.load.load_id == dataset.load.load_id:
                    dataset.took_over(state)
            if dataset.load.hot_in_mysql:  # its hot buckets are nobody's any more
                self._raw.serve(dataset.load.load_id, hot=False)
        with self._cond:
            if self._dataset is dataset and dataset.apply_states(states):
                self._cond.notify_all()

    def _forget_stores(self, serving: str) -> None:
        """Close the stores of loads no query reads any more (a day the coordinator left)."""
        with self._cond:
            idle = [load_id for load_id in self._stores
                    if load_id != serving and not self._fetching[load_id]]
            closing = [self._stores.pop(load_id) for load_id in idle]
        for stores in closing:
            stores.close()

    def _acknowledged(self) -> tuple[str | None, bool]:
        """What the heartbeat says: the load served with no query of another in flight (None
        while one is), and whether no query reads that load's hot files any more while MySQL
        has its hot keys."""
        with self._cond:
            dataset = self._dataset
            if dataset is None:
                return None, False
            load_id = dataset.load.load_id
            if any(n for other, n in self._fetching.items() if other != load_id):
                return None, False
            return load_id, dataset.load.hot_in_mysql and not self._hot_raw[load_id]

    def _published_state(self, now: float) -> tuple[str | None, dict[int, int], dict[str, int],
                                                     dict[int, int]]:
        """(load served, its demand, answers per outcome, queries asked per bucket)."""
        with self._cond:
            dataset = self._dataset
            if dataset is None:
                return None, {}, {}, {}
            return (dataset.load.load_id, dataset.demand(now),
                    {**self._recorder.answered(), **self._via},
                    dict(dataset.asked))

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

    def wait_warm(self, timeout: float | None = None) -> bool:
        """Block until the buckets the raw route will read are opened
        (``coordinator.raw_warmup``); False if *timeout* passed first. Queries need not wait
        for it: a caller measuring steady service does, as HBase's regions are open before
        they serve."""
        return self._warmup.wait(timeout)

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
