"""Fresh answers (docs/FRESHNESS.md): per load served with a dump's position, a **fresh view**
(``FreshView``) keeps the source's changes since the dump per key range and gives each query
the changes of its key up to one position (``Overlay``), which the one merge puts in place of
the load's rows (``coordinator.merge``); ``FreshViews`` holds a process's views, its reader of
the source's head and its counts.

A query on id1 (every read, every route), ``fresh.mode`` on or serial
(``FreshView.overlay``; docs/FRESHNESS.md, "The contract"):

1. ``P`` = the source's head read after the query arrived (``coordinator.fresh_head``; with
   ``fresh.tolerance`` t, a read started after ``arrival - t``);
2. wait until the tailer has every change up to ``P`` (``Tailer.wait_for``; past the query's
   deadline QueryTimeout, naming the follower's lag and state);
3. the key's range (materialized on its first query: its changes since the dump read by id1
   range) refreshed to at least ``P`` under its lock, and the key's overlay read under that
   lock at the range's applied position ``p``: ``P <= p <=`` what the follower had captured
   ``<=`` the head when the answer is given.

Mode off: no head, no wait: the overlay as the background refresh left it (a range's first
query asks the refresher to materialize it and answers from the dump meanwhile). A query on
the ``partial`` route (its deadline passed) waits for nothing either, but has its range
refreshed. A load without a dump's position has no view: answered as before.

Days: each load has its own view from its own dump's position; the coordinator lets a view go
with the load's stores, once no query reads the load (``forget``); the last view let go stays
live until the next one is, so that a rollback to the day before takes its view back as it is.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from contextlib import AbstractContextManager, nullcontext

from debl.catalog import FRESH_COUNTS, Change, ChangesCatalog, LoadRecord
from debl.config import Config
from debl.errors import QueryTimeout
from debl.format.bucket_map import MAX_ID
from debl.measure import request_cost
from coordinator.fresh_head import HeadReader
from coordinator.fresh_ranges import BACKGROUND, ON_DEMAND, KeyRange, Overlay, RangeCounts
from coordinator.fresh_tailer import Refresher, Tailer
from coordinator.operations import Operation


class FreshView:
    """The fresh view of *load* (which has a dump's position): its ranges, its tailer and its
    refresher (see the module). ``overlay`` for a query; ``close``."""

    def __init__(self, config: Config, load: LoadRecord, changes: ChangesCatalog,
                 head: HeadReader, serial: AbstractContextManager):
        self.settings = config.fresh
        # A query without a deadline waits for the change log at most this long: with no
        # follower running it would wait for ever (QueryTimeout names the follower's state).
        self._longest_wait = config.service_timeout
        position = load.position
        assert position is not None  # FreshViews makes a view only of a load with one
        self.load_id, self.source, self.dump_seq = load.load_id, position.source, position.seq
        self._map = load.bucket_map  # None: one range, the whole id space
        self._changes, self._head, self._serial = changes, head, serial
        self.ranges: dict[int, KeyRange] = {}  # replaced, never changed: read without a lock
        self._making: dict[int, threading.Lock] = {}
        self._making_lock = threading.Lock()
        self._wanted: set[int] = set()  # mode off: ranges the refresher materializes
        follower = changes.follower(self.source)
        start = self.dump_seq if follower is None else max(self.dump_seq, follower.seq)
        name = f"debl-fresh-{load.load_id}"
        self._tail = changes.tail(self.source, dump=self.dump_seq)  # refused if forgotten
        self.tailer = Tailer(self._tail.read, start, self._deliver, self.settings.tail_interval,
                             serial, name + "-tail")
        self.refresher = Refresher(self.background, self.settings.idle_refresh,
                                   name + "-refresh")
        self.tailer.start()
        self.refresher.start()

    def _bucket_of(self, id1: int) -> int:
        return 0 if self._map is None else self._map.bucket_of(id1)

    def _range_of(self, b: int) -> tuple[int, int]:
        return (0, MAX_ID) if self._map is None else self._map.range_of(b)

    # -- a query

    def overlay(self, id1: int, link_type: int, arrived: float, end: float | None, asked: str,
                wait: bool) -> Overlay:
        """The changes of (id1, link_type) for a query that arrived at the monotonic
        *arrived* (see the module); *wait*: for the head after its arrival (mode on or serial,
        not past its deadline)."""
        b = self._bucket_of(id1)
        if self.settings.mode == "off":
            found = self.ranges.get(b)
            if found is None:
                self._wanted.add(b)
                self.refresher.wake()
                return Overlay({}, self.dump_seq)
            return found.read(id1, link_type, refresh=False)
        if wait:
            target = self._head.position(self.source, arrived - self.settings.tolerance, end,
                                         asked)
            until = end if end is not None else time.monotonic() + self._longest_wait
            if not self.tailer.wait_for(target, until):
                raise QueryTimeout(self._behind(asked, target, arrived))
        found = self.ranges.get(b) or self._materialize(b, ON_DEMAND)
        return found.read(id1, link_type, refresh=True)

    def _behind(self, asked: str, target: int, arrived: float) -> str:
        """Why a query waited past its deadline for the change log, and what to do."""
        waited = time.monotonic() - arrived
        what = (f"{asked}: waited {waited:.1f} s for the change log to reach the source's "
                f"head at the query's arrival (seq {target}, load {self.load_id}); ")
        try:
            follower = self._changes.follower(self.source)
        except Exception as exc:  # noqa: BLE001 -- the message must still be given
            return what + f"the follower's state could not be read ({exc})"
        if follower is None:
            return what + (f"no follower has captured source {self.source} yet: start `debl "
                           "follow` (or pass a longer timeout, or set fresh.mode=off to answer "
                           "from the dump and what has been captured)")
        said = f"; its error: {follower.error}" if follower.error else ""
        if follower.seq >= target:
            return what + (f"the follower has it (up to {follower.gtid}) but this process "
                           f"reads the log up to seq {self.tailer.position}"
                           + (f": {self.tailer.error}" if self.tailer.error else ""))
        now = time.time()
        head = ("" if follower.head_seq is None or follower.head_ts is None else
                f"; the source's head as it read it {now - follower.head_ts:.1f} s ago: "
                f"{follower.head_gtid}, {max(0, follower.head_seq - follower.seq)} behind")
        lag = ("" if follower.commit_ts is None or follower.captured_ts is None else
               f"; its last captured commit took {follower.captured_ts - follower.commit_ts:.1f}"
               " s to capture")
        return what + (f"the follower of source {self.source} has captured up to "
                       f"{follower.gtid} ({target - follower.seq} transactions short){head}"
                       f"{lag}; it is {follower.state}{said}, last sign of life "
                       f"{now - follower.heartbeat:.1f} s ago: is `debl follow` running? (or "
                       "pass a longer timeout, or set fresh.mode=off)")

    # -- ranges

    def _materialize(self, b: int, how: str) -> KeyRange:
        """Range *b*, read from the change log on its first use: its changes since the dump's
        position up to at least the tailer's, so that the tailer's next deliveries continue
        it (those at or before its position are skipped)."""
        with self._making_lock:
            making = self._making.setdefault(b, threading.Lock())
        with making, self._serial:
            found = self.ranges.get(b)
            if found is not None:
                return found
            k_lo, k_hi = self._range_of(b)
            made, after = None, self.dump_seq
            while True:
                changes, upto = self._changes.in_range(self.source, k_lo, k_hi, after,
                                                         dump=self.dump_seq)
                if made is None:
                    made = KeyRange(b, k_lo, k_hi, changes, upto, how, self._serial)
                else:  # the tailer went past the first read meanwhile: the rest, buffered
                    made.deliver(changes, upto)
                with self.tailer.cond:  # no delivery in between: none lost, none doubled
                    if upto >= self.tailer.position:
                        self.ranges = {**self.ranges, b: made}
                        return made
                after = upto

    def _deliver(self, changes: list[Change], upto: int) -> None:
        """The tailer's read (its condition held): each change into the buffer of its range,
        if materialized (another's changes are read with it when it is); every range has
        every change up to *upto*. A buffer past the threshold wakes the refresher."""
        ranges = self.ranges
        groups: dict[int, list[Change]] = {}
        for change in changes:
            b = self._bucket_of(change.id1)
            if b in ranges:
                groups.setdefault(b, []).append(change)
        threshold = self.settings.buffer_threshold
        full = False
        for b, found in ranges.items():
            full |= found.deliver(groups.get(b, []), upto) >= threshold
        if full:
            self.refresher.wake()

    def background(self) -> None:
        """The refresher's turn: the ranges wanted (mode off) materialized; the ranges whose
        buffer passed the threshold, and those behind and idle for ``fresh.idle_refresh`` (in
        mode off every range behind), refreshed."""
        while self._wanted:
            self._materialize(self._wanted.pop(), BACKGROUND)
        now = time.monotonic()
        every = self.settings.mode == "off"
        for found in list(self.ranges.values()):
            if found.known > found.applied and (
                    every or found.buffered >= self.settings.buffer_threshold
                    or found.idle_for(now) >= self.settings.idle_refresh):
                found.refresh(BACKGROUND)

    def counts(self) -> dict[int, RangeCounts]:
        """Per materialized range, its counts now."""
        return {b: r.snapshot() for b, r in self.ranges.items()}

    def close(self) -> None:
        self.tailer.stop()
        self.refresher.stop()
        self._tail.close()  # the tailer's thread has ended (or is stuck and never reads again)


class FreshViews:
    """A process's fresh views, one per load served that has a dump's position (see the
    module), over the catalog's change log *changes*. Thread-safe; ``close``."""

    def __init__(self, config: Config, changes: ChangesCatalog):
        self.config = config
        self._changes = changes
        self._head = HeadReader(config)
        self._serial = threading.Lock() if config.fresh.mode == "serial" else nullcontext()
        self._views: dict[str, FreshView] = {}
        # The view last let go (the day before, after a switch), still tailing: a rollback
        # to its load takes it back as it is, not replayed from its dump (see ``forget``).
        self._day_before: FreshView | None = None
        self._lock = threading.Lock()
        self._timeouts: Counter = Counter()  # load id -> queries past their deadline here

    def overlay(self, load: LoadRecord, operation: Operation, arrived: float,
                end: float | None, partial: bool) -> Overlay | None:
        """The changes of *operation*'s key for its answer from *load* (None: the load has no
        dump's position, answered as before). *partial*: its deadline passed, it waits for
        nothing more. Its time counts as ``wait`` (``debl.measure.request_cost``)."""
        if load.position is None:
            return None
        view = self._view(load)
        with request_cost.Timed(request_cost.WAIT):
            try:
                return view.overlay(operation.id1, operation.link_type, arrived, end,
                                    f"{operation.name}({operation.id1}, {operation.link_type})",
                                    wait=not partial)
            except QueryTimeout:
                with self._lock:
                    self._timeouts[load.load_id] += 1
                raise

    def _view(self, load: LoadRecord) -> FreshView:
        view = self._views.get(load.load_id)
        if view is None:
            with self._lock:
                view = self._views.get(load.load_id)
                if view is None:
                    kept = self._day_before
                    if kept is not None and kept.load_id == load.load_id:
                        view, self._day_before = kept, None
                    else:
                        view = FreshView(self.config, load, self._changes, self._head,
                                         self._serial)
                    self._views = {**self._views, load.load_id: view}
        return view

    @property
    def head_reads(self) -> int:
        """The reads of the source's head this process made (one serves many queries)."""
        return self._head.reads

    def forget(self, load_ids: list[str]) -> None:
        """Let go of the views of *load_ids* (loads no query reads any more). The last of
        them stays live, unserved, as the day before (its tailer goes on: about the CPU of a
        second view): after a rollback a view replayed from its dump made every query wait
        until its range had read every change since then. The one kept before is closed."""
        with self._lock:
            gone = [self._views[i] for i in load_ids if i in self._views]
            self._views = {i: v for i, v in self._views.items() if i not in load_ids}
            if gone:
                kept, self._day_before = self._day_before, gone.pop()
                gone += [kept] if kept is not None else []
        for view in gone:
            view.close()

    def ranges(self, load_id: str) -> dict[int, RangeCounts]:
        """The counts of each materialized range of *load_id*'s view (empty: none)."""
        view = self._views.get(load_id)
        return {} if view is None else view.counts()

    def published(self, load_id: str) -> dict[str, int]:
        """What the process publishes of *load_id*'s view (``debl.catalog.FRESH_COUNTS``):
        empty while it has none."""
        view = self._views.get(load_id)
        if view is None:
            return {}
        total = RangeCounts()
        for counts in view.counts().values():
            total.add(counts)
        found = {**vars(total), "timed_out": self._timeouts[load_id]}
        return {FRESH_COUNTS[name]: n for name, n in found.items()}

    def close(self) -> None:
        with self._lock:
            views, self._views = list(self._views.values()), {}
            if self._day_before is not None:
                views.append(self._day_before)
                self._day_before = None
        for view in views:
            view.close()
        self._head.close()
