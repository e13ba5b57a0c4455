"""The coordinator: routes each read (get_link_list, count_link, multiget_link:
coordinator.operations) over the current load's stores and buffers the queries whose data is
still on its way (docs/DESIGN.md section 6; docs/COORDINATOR.md, "Routing", "The three reads",
"Buffering and release", "The raw route", "Answers before uptime").

Every query is answered wholly from one load, which the answer names: the current one
(``catalog.loads.make_current``), or before any is up the newest load if it answers early. With
``b`` the bucket of id1 in that load's bucket map:

- no load is up yet: wait for uptime (a failed newest load with nothing current: an error);
  before the uptime of a load that answers early, an answerable key is answered from its files
  (route ``early``), any other waits, counted in its key's and its bucket's demand;
- hot rows: from the hot files' bucket of id1 in HDFS (coordinator.raw) until MySQL has taken
  the load's hot keys over, from MySQL after (for keys its key filter may hold);
- cold rows: none when no cold row can have id1 (route ``mysql``); bucket ``b`` ``loaded``:
  HBase (route ``merged``); otherwise the query is buffered on ``b``, its demand rises, and it is
  answered when the poller sees ``b`` loaded or, with the raw route on, once it has waited
  ``coordinator.raw_after``: from the bucket's files (route ``raw``); ``failed``: released at
  once, by the raw route when it is on, else with ServiceError naming the bucket.

Hot and cold rows are merged key by key by the one merge rule (coordinator.merge), then
filtered, counted or picked by id2 (the operation's own answer from the winners). A load whose
dump has the source's log position answers fresh: the source's changes of the key up to its
head after the query's arrival take the place of the load's rows in that merge
(coordinator.fresh; docs/FRESHNESS.md, "The contract"). Past its
deadline (``timeout``/``deadline``, else ``default_timeout``, else
``coordinator.query_timeout``) a query gets QueryTimeout, or with ``partial=True`` the hot rows
alone marked incomplete. A new current load (the next day's, a rollback, the uptime of the load
answered early) swaps the dataset between two queries; queries already routed finish on the
stores they started on, and the heartbeat says when none of another load is in flight.

Threads: one poller thread (coordinator.poller); client threads share the object; all routing
state sits behind one lock and condition variable; store I/O happens outside the lock.

Pitfalls: ``get_link_list``, ``count_link`` and ``multiget_link`` return a plain answer, like a
LinkStore (a partial answer then looks complete: use ``query`` or ``ask``). Close the
coordinator (``with``): close deletes its demand rows; queries still waiting get ServiceError.
"""

from __future__ import annotations

import threading
import time
from collections import Counter

from debl.measure import request_cost
from debl.catalog import Catalog, JobState, LoadRecord
from debl.config import Config
from debl.errors import QueryTimeout, ServiceError
from coordinator.admission import FifoGate
from coordinator.demand import new_coordinator_id
from coordinator.early import EarlyAnswerTally
from coordinator.fresh import FreshViews
from coordinator.link_queries import LinkQueries
from coordinator.operations import CountLink, Operation
from coordinator.poller import EarlyServing, Poller, PollResult, Publication
from coordinator.raw import RawReader
from coordinator.raw_warmup import RawWarmup, raw_buckets
from coordinator.routes import Answer, HotSide, PendingQuery, Route, RoutePlan, end_of
from coordinator.load_stores import LoadStores
from coordinator.sources import fetch
from coordinator.state import BucketState, BucketView, Dataset, describe_newest, load_failure
from coordinator.stats import CoordinatorStats, WaitCounters, WaitRecorder

# Answer counts published besides the outcomes (coordinator.stats: ``raw``, ``partial`` are
# routes already): those at once by store, and how many read the hot files raw.
VIA = {Route.MYSQL: "via_mysql", Route.MERGED: "via_hbase"}


class Coordinator(LinkQueries):
    """Routes get_link_list, count_link and multiget_link (``LinkQueries``) over the current
    load's stores; buffers queries on buckets not yet loaded.

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
        self.default_timeout = (config.coordinator.query_timeout if default_timeout is None
                                else default_timeout)
        self._cond = threading.Condition()
        self._newest: LoadRecord | None = None
        self._dataset: Dataset | None = None
        self._closed = False
        self._recorder = WaitRecorder()
        self._fetching: Counter = Counter()  # load id -> queries reading its stores now
        self._hot_raw: Counter = Counter()  # load id -> queries reading its hot files now
        self._via: Counter = Counter()  # answers per store they came from (VIA)
        self.early_answers = EarlyAnswerTally()  # not yet in the catalog's counts
        self._stores: dict[str, LoadStores] = {}
        catalog = Catalog(config)  # thread-safe: the poller's and the raw reader's
        self._raw = RawReader(config, catalog.index)
        slots = config.coordinator.raw_slots
        self._raw_gate = FifoGate(slots) if slots else None
        self._warmup = RawWarmup(self._raw)
        self.fresh = FreshViews(config, catalog.changes)  # docs/FRESHNESS.md
        self._poller = Poller(self, catalog.serving, catalog.early,
                              config.coordinator.poll_interval)
        self._poller.poll()
        self._poller.start()

    def __enter__(self) -> "Coordinator":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the poller, delete this coordinator's demand rows, close every connection, wait
        for the raw route's threads (docs/COORDINATOR.md, "Threads"); buffered queries get
        ServiceError. Idempotent."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.notify_all()
        self._poller.stop()
        try:
            self._poller.publish_last()
        except ServiceError as exc:  # the rows age out of the catalog's demand anyway
            self._poller.last_error = str(exc)
        for stores in self._stores.values():
            stores.close()
        self.fresh.close()
        self._warmup.close(timeout=self.config.service_timeout)
        self._raw.close()

    @property
    def last_poll_error(self) -> str | None:
        return self._poller.last_error

    # ------------------------------------------------------------------ queries

    def ask(self, operation: Operation, *, timeout: float | None = None,
            deadline: float | None = None, partial: bool = False) -> Answer:
        """Route *operation* (``coordinator.operations``: get_link_list, count_link or
        multiget_link) by its id1 and link_type, wait as needed, answer it on the sources of its
        route: the details (complete, waited, bucket, route, load). The reads of
        ``LinkQueries`` (``get_link_list``, ``query``, ``count_link``, ``multiget_link``) come
        here."""
        started = time.monotonic()
        end = end_of(started, self.default_timeout if timeout is None and deadline is None
                     else timeout, deadline)
        route = self._route(operation, started, end, partial)
        request_cost.routed(time.monotonic() - started, route.route, route.hot, route.outcome)
        answered = False
        try:  # the source's changes of the key (coordinator.fresh), then the stores' rows
            overlay = self.fresh.overlay(route.dataset.load, operation, started, end,
                                          route.route is Route.PARTIAL)
            result = fetch(route, self._raw, self._raw_gate, operation, overlay)
            answered = True
        finally:
            self._done(route, started, answered, operation.id1)
        counted = isinstance(operation, CountLink)
        return Answer([] if counted else result, route.route is not Route.PARTIAL,
                      route.waited_s, None if route.bucket is None else route.bucket.b_index,
                      route.route, route.dataset.load.load_id, route.hot,
                      result if counted else None, None if overlay is None else overlay.position)

    def _done(self, route: RoutePlan, started: float, answered: bool, id1: int) -> None:
        """The query's counts, in one turn of the lock: the lock is where the client threads
        queue (docs/COORDINATOR.md, "Threads")."""
        load_id = route.dataset.load.load_id
        with self._cond:
            self._fetching[load_id] -= 1
            if route.hot is HotSide.RAW:
                self._hot_raw[load_id] -= 1
            if answered:  # where the answer came from, for `debl status` and `debl ui`
                self._recorder.record(route.outcome, route.waited_s, started)
                if route.route in VIA:
                    self._via[VIA[route.route]] += 1
                if route.hot is HotSide.RAW:
                    self._via["via_hot_raw"] += 1
                if route.route is Route.EARLY:  # for the claims found false later
                    self.early_answers.count(load_id, id1)

    def _route(self, operation: Operation, started: float, end: float | None,
               partial: bool) -> RoutePlan:
        """Decide where the query goes, waiting for uptime or for its bucket as needed: each
        turn looks at the dataset as it is now, and routes the query or waits for a change (a
        poll, close, the deadline, the raw route's moment)."""
        id1 = operation.id1
        query = PendingQuery(id1, operation.link_type, partial, started,
                             self.config.coordinator.raw_after, operation.name)
        with self._cond:
            try:
                while True:
                    if self._closed:
                        raise ServiceError(f"coordinator {self.coordinator_id} is closed")
                    now = time.monotonic()
                    remaining = None if end is None else max(end - now, 0.0)
                    dataset = self._dataset
                    if dataset is None:
                        self._wait_for_uptime(query, now, remaining)
                        continue
                    if dataset.early is not None:  # before uptime: answerable, or it waits
                        route = self._route_early(query, dataset, now, remaining)
                        if route is not None:
                            return route
                        continue
                    bucket = dataset.bucket_of(id1)
                    if query.registered is None and bucket is not None:
                        dataset.asked[bucket.b_index] += 1
                    route = self._route_now(query, dataset, bucket, now)
                    if route is None and bucket is not None:  # its bucket is on its way
                        self._register(query, bucket, now)
                        route = self._route_waiting(query, dataset, bucket, now, remaining)
                    if route is not None:
                        return route
                    query.waited_bucket = True
                    self._cond.wait(query.wait_s(now, remaining))
            finally:
                self._stop_waiting(query)

    def _wait_for_uptime(self, query: PendingQuery, now: float, remaining: float | None) -> None:
        """No load is up (lock held): the newest load's failure, or past the deadline a
        QueryTimeout; else wait for a change."""
        failure = load_failure(self._newest)
        if failure is not None:
            raise ServiceError(failure)
        if remaining == 0.0:
            self._recorder.record("timeouts", now - query.started, query.started)
            raise QueryTimeout(
                f"{query.asked}: the system is not up yet "
                f"({describe_newest(self._newest)}); gave up after {now - query.started:.1f} s")
        query.waited_uptime = True
        self._cond.wait(remaining)

    def _route_early(self, query: PendingQuery, dataset: Dataset, now: float,
                     remaining: float | None) -> RoutePlan | None:
        """Before the load's uptime (lock held; coordinator.early): an answerable key goes to
        the load's files now (route ``early``); another waits, counted in its key's demand and
        its bucket's, until a poll brings more keys, the uptime or the deadline (QueryTimeout).
        None: route again."""
        early = dataset.early
        assert early is not None  # called before the uptime only
        if early.answers(query.id1):
            return self._plan(Route.EARLY, dataset, dataset.bucket_of(query.id1), query.id1,
                              query.link_type, "early", query.waited(now))
        if query.waiting_in is not early:
            early.wait(query.id1, query.waiting_in)
            query.waiting_in = early
            bucket = dataset.bucket_for_demand(query.id1)
            if bucket is not None:
                self._register(query, bucket, now)
            self._poller.wake()  # the copy fetches first what queries wait for
        self._wait_for_uptime(query, now, remaining)
        return None

    def _route_now(self, query: PendingQuery, dataset: Dataset, bucket: BucketState | None,
                   now: float) -> RoutePlan | None:
        """The route of a query whose cold rows are known now (lock held): none can exist or
        its bucket is loaded (the stores), or gen_HF gave up on its bucket (released now: the
        raw route, else ServiceError). None: the bucket is on its way."""
        if bucket is None or bucket.loaded:
            return self._plan(Route.MYSQL if bucket is None else Route.MERGED, dataset, bucket,
                              query.id1, query.link_type, query.outcome(), query.waited(now))
        if bucket.j_stat == JobState.FAILED:  # released now: gen_HF gave up on it
            if query.raw_after is not None:
                return self._plan(Route.RAW, dataset, bucket, query.id1, query.link_type, "raw",
                                  query.waited(now))
            raise ServiceError(
                f"{query.asked}: gen_HF failed to load bucket "
                f"{bucket.b_index} (id1 {bucket.k_lo}..{bucket.k_hi}); its error is "
                "in `debl status`. Fix the cause and restart `debl gen-hf`, or turn "
                "the raw route on (raw_after) to answer from the bucket's files")
        return None

    def _register(self, query: PendingQuery, bucket: BucketState, now: float) -> None:
        """Count the query among *bucket*'s waiters (lock held), once per bucket: the first
        time, or on a new dataset's bucket; the poller publishes the new demand."""
        if query.registered is bucket:
            return
        if query.registered is not None:
            query.registered.waiting -= 1
        bucket.waiting += 1
        query.registered = bucket
        self._poller.wake()  # the poller publishes the new demand
        if query.raw_after is not None and query.raw_at is None:
            query.raw_at = now + query.raw_after  # from the moment it needs the bucket

    def _route_waiting(self, query: PendingQuery, dataset: Dataset, bucket: BucketState,
                       now: float, remaining: float | None) -> RoutePlan | None:
        """The route of a query waiting for *bucket* (lock held): the raw route once it has
        waited ``raw_after``; past the deadline the hot rows alone (``partial``) or
        QueryTimeout. None: wait on."""
        if query.raw_at is not None and now >= query.raw_at:
            return self._plan(Route.RAW, dataset, bucket, query.id1, query.link_type, "raw",
                              now - query.started)
        if remaining == 0.0:
            if query.partial:
                return self._plan(Route.PARTIAL, dataset, bucket, query.id1, query.link_type,
                                  "partial", now - query.started)
            self._recorder.record("timeouts", now - query.started, query.started)
            raise QueryTimeout(
                f"{query.asked}: bucket {bucket.b_index} "
                f"(id1 {bucket.k_lo}..{bucket.k_hi}) is still {bucket.j_stat!r} "
                f"after waiting {now - query.started:.1f} s; gen_HF has not loaded it yet "
                "(pass a longer timeout, or partial=True for the hot rows alone)")
        return None

    def _stop_waiting(self, query: PendingQuery) -> None:
        """The query leaves its bucket's waiters (lock held), however it ended: answered, raw,
        past its deadline, or closed; its demand decays from now."""
        if query.waiting_in is not None:
            query.waiting_in.unwait(query.id1)
        registered = query.registered
        if registered is not None:
            registered.waiting -= 1
            if not registered.loaded:  # raw, deadline or closed: still its demand
                registered.stopped_waiting(time.monotonic())
            self._poller.wake()

    def _plan(self, kind: Route, dataset: Dataset, bucket: BucketState | None, id1: int,
              link_type: int, outcome: str, waited_s: float) -> RoutePlan:
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
        stores = self._stores.get(load_id)
        if stores is None:
            stores = self._stores[load_id] = LoadStores(self.config, dataset.load)
        return RoutePlan(kind, dataset, bucket, hot, hot_bucket, outcome, waited_s, stores)

    # ------------------------------------------------------------------ the poller's side

    def take_poll(self, result: PollResult) -> None:
        """What a poll read (the poller's hand-over): swap the dataset for a new current load,
        switch the hot keys to MySQL once it has them, or take new job states."""
        current, newest, states = result.current, result.newest, result.states
        serving = result.read_serving_state
        with self._cond:
            self._newest = newest
            dataset = self._dataset
        if current is None:
            self._take_early(result)
            return
        if (dataset is None or dataset.load.load_id != current.load_id
                or dataset.early is not None):  # a new current load, or this one is up now
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
        if len(self._stores) > 1:  # a day left while its queries were in flight: gone now?
            self._forget_stores(dataset.load.load_id)

    def _take_early(self, result: PollResult) -> None:
        """No load is current: serve the newest load before its uptime if it answers early
        (``result.early``), else nothing (waiters may get the newest load's error)."""
        state = result.early
        with self._cond:
            dataset = self._dataset
            if state is None:
                self._dataset = None
            elif dataset is None or dataset.load.load_id != state.load.load_id:
                self._dataset = Dataset.of_early(state)
                self._raw.serve(state.load.load_id, hot=True)
            elif dataset.early is None or not dataset.refresh(state):
                return
            self._cond.notify_all()

    def record_early_answers(self) -> None:
        """Add the early answers given so far to the catalog's counts now, rather than at the
        poller's next turn: a command that shows an answer and exits calls it first, so that a
        claim found false later counts that answer (docs/COORDINATOR.md, "Answers before
        uptime"). Raises ServiceError if MySQL cannot take them (they are kept for the next
        try)."""
        self._poller.record_early_answers()

    def _forget_stores(self, serving: str) -> None:
        """Close the stores of loads no query reads any more (a day the coordinator left)."""
        with self._cond:
            idle = [load_id for load_id in self._stores
                    if load_id != serving and not self._fetching[load_id]]
            closing = [self._stores.pop(load_id) for load_id in idle]
        for stores in closing:
            stores.close()
        self.fresh.forget(idle)  # a fresh view lives as long as its load's stores

    def publication(self, now: float) -> Publication:
        """What the poller publishes at the ``time.monotonic()`` *now* (``Publication``): the
        load served, its demand, answers per outcome, queries asked per bucket; and what the
        heartbeat says: that load once no query of another is in flight, and whether no query
        reads its hot files any more while MySQL has its hot keys."""
        with self._cond:
            dataset = self._dataset
            if dataset is None:
                return Publication.none()
            load_id = dataset.load.load_id
            alone = not any(n for other, n in self._fetching.items() if other != load_id)
            early = dataset.early
            answered = {**self._recorder.answered(), **self._via,
                        **self.fresh.published(load_id)}
            return Publication(load_id, dataset.demand(now), answered, dict(dataset.asked),
                               load_id if alone else None,
                               alone and dataset.load.hot_in_mysql and not self._hot_raw[load_id],
                               None if early is None else EarlyServing(
                                   load_id, early.gen, dict(early.waiting)))

    # ------------------------------------------------------------------ state, for callers

    @property
    def is_up(self) -> bool:
        """Whether a load is served: one that is up, or one answering before its uptime."""
        with self._cond:
            return self._dataset is not None

    @property
    def load_id(self) -> str | None:
        """The load being served (None while the system is not up)."""
        with self._cond:
            return self._dataset.load.load_id if self._dataset else None

    def wait_warm(self, timeout: float | None = None) -> bool:
        """Block until the buckets the raw route will read are opened (``coordinator.
        raw_warmup``); False if *timeout* passed first. Queries need not wait for it: a caller
        measuring steady service does, as HBase's regions are open before they serve."""
        return self._warmup.wait(timeout)

    def wait_until_up(self, timeout: float | None = None) -> bool:
        """Block until a load is served (up, or answering before its uptime: ``is_up``); False
        if *timeout* passed first."""
        with self._cond:
            return self._cond.wait_for(lambda: self._dataset is not None or self._closed,
                                       timeout) and self._dataset is not None

    def buckets(self) -> list[BucketView]:
        """Every cold bucket's state as this coordinator last saw it (empty while not up)."""
        with self._cond:
            return [] if self._dataset is None else self._dataset.views()

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
        """Counts of queries per outcome, and the waits of buffered and early ones."""
        return self._recorder.snapshot()

    def wait_counters(self) -> WaitCounters:
        """The raw counters behind ``stats()``, picklable and mergeable (``WaitCounters.merge``):
        what each process of a multi-process query client reports."""
        return self._recorder.counters()

    def reset_stats(self) -> None:
        """Zero the counters and restart the clock of the first-minute counts."""
        self._recorder.reset()
