"""Fresh answers without the stack (docs/FRESHNESS.md): the one merge with a key's changes in
place of the load's rows equals the reference over the source's rows at that position, for the
three reads and any window; a key range buffers what it has not seen, applies in position order
and never goes back; a fresh view materializes a range without losing or doubling a change
however far its tailer has gone, and in mode off answers from what the background applied.

The change log and the head here are in memory (pure unit tests); tests/test_fresh.py runs the
same on the real stack."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.fresh import FreshView, FreshViews
from coordinator.fresh_ranges import BACKGROUND, ON_DEMAND, KeyRange
from coordinator.merge import answer
from coordinator.operations import CountLink, LinkList, MultigetLink
from debl.catalog import Change, FollowerState, LoadRecord, LoadState
from debl.config import Config
from debl.errors import ChangesForgotten, QueryTimeout
from debl.format.bucket_map import BucketMap
from debl.format.link import Link, Origin
from debl.store.memory import MemoryStore

LT = 123456789
SOURCE = "source-1"


def _store(rows) -> MemoryStore:
    store = MemoryStore()
    store.write_links((link, Origin(0, 0, 0)) for link in rows)
    return store


_links = st.builds(lambda id2, vis, t, v: Link(1, LT, id2, vis, b"d%d" % t, t, v),
                   st.integers(0, 12), st.integers(0, 1), st.integers(0, 9), st.integers(0, 2))
_changes = st.dictionaries(st.integers(0, 15), st.one_of(
    st.none(), st.tuples(st.integers(0, 1), st.integers(0, 9), st.integers(0, 2))))


@settings(max_examples=300, deadline=None)
@given(st.lists(_links, unique_by=lambda link: link.id2), _changes, st.integers(0, 9),
       st.integers(0, 9), st.integers(0, 4), st.integers(0, 5),
       st.lists(st.integers(0, 15), max_size=6))
def test_the_merge_with_changes_in_place_equals_the_source_at_that_position(
        base, changed, min_time, max_time, offset, limit, id2s):
    """A changed key's row replaces the load's whatever its time and version (an older time
    too), a deletion removes it, a new key is added, before the filters, order, offset,
    limit, count and picks by id2."""
    changes = {id2: None if c is None else Link(1, LT, id2, c[0], b"c", c[1], c[2])
               for id2, c in changed.items()}
    rows = {link.id2: link for link in base}
    for id2, link in changes.items():
        if link is None:
            rows.pop(id2, None)
        else:
            rows[id2] = link
    loaded, source = _store(base), _store(rows.values())
    for op in (LinkList(1, LT, min_time, max_time, offset, limit), CountLink(1, LT),
               MultigetLink(1, LT, tuple(id2s))):
        expected = op.on(source)
        assert answer(None, loaded, op, changes) == expected, op
        assert answer(loaded, None, op, changes) == expected, op
        assert answer(None, None, op, {k: v for k, v in changes.items()}) == \
            op.on(_store(v for v in changes.values() if v is not None)), op


def _change(seq: int, id1: int, id2: int, t: int | None, row_no: int = 0) -> Change:
    link = None if t is None else Link(id1, LT, id2, 1, b"s%d" % seq, t, 0)
    return Change(seq, row_no, id1, LT, id2, link, 0.0, 0.0)


class _NoLock:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_a_range_applies_in_position_order_skips_what_it_has_and_never_goes_back():
    r = KeyRange(0, 0, 99, [_change(11, 5, 1, 100), _change(12, 5, 1, 50)], 12, ON_DEMAND,
                 _NoLock())
    seen = r.read(5, LT, refresh=False)
    assert seen.position == 12 and seen.rows == {1: _change(12, 5, 1, 50).link}
    # the tailer was behind the range's first read: what it has already is skipped
    assert r.deliver([_change(12, 5, 1, 50), _change(13, 5, 2, 7), _change(14, 5, 1, None)],
                     14) == 2
    assert r.read(5, LT, refresh=False).position == 12  # not applied yet: still 12
    after = r.read(5, LT, refresh=True)
    assert after.position == 14 and after.rows == {1: None, 2: _change(13, 5, 2, 7).link}
    r.deliver([], 20)  # a read past every change of the range: the range is at 20
    r.refresh(BACKGROUND)
    assert r.read(5, LT, refresh=False).position == 20
    counts = r.snapshot()
    assert (counts.applied_on_demand, counts.refreshes_on_demand, counts.applied_background,
            counts.refreshes_background, counts.buffered) == (4, 2, 0, 0, 0)


class MemoryLog:
    """The change log as ``ChangesCatalog`` reads it, in memory: whole transactions, the
    follower's position, the position past which it holds every change (``kept_from``).
    ``in_range_hook`` runs inside ``in_range``'s read (to move the log between a range's read
    and its registration)."""

    def __init__(self):
        self.changes: list[Change] = []
        self.seq: int | None = None
        self.kept_from = 0
        self.in_range_hook = None
        self.lock = threading.Lock()

    def append(self, changes, seq):
        with self.lock:
            self.changes += changes
            self.seq = seq

    def follower(self, source):
        if self.seq is None:
            return None
        return FollowerState(source, f"0-1-{self.seq}", self.seq, None, None, 0.0, "following",
                             None, None, None, head_gtid="0-1-30", head_seq=30, head_ts=0.0,
                             kept_from=self.kept_from)

    def _check(self, source, dump):
        if dump is not None and self.seq is not None and self.kept_from > dump:
            raise ChangesForgotten(f"the change log of source {source} holds the changes past "
                               f"seq {self.kept_from} only")

    def since(self, source, after, limit=10_000, dump=None):
        with self.lock:
            self._check(source, dump)
            upto = after if self.seq is None else max(after, self.seq)
            return [c for c in self.changes if after < c.seq <= upto], upto

    def tail(self, source, dump=None):  # ChangesCatalog.tail's reader: since, kept open
        return SimpleNamespace(read=lambda after, limit=10_000: self.since(source, after, limit,
                                                                          dump),
                               close=lambda: None)

    def in_range(self, source, lo, hi, after, dump=None):
        with self.lock:
            self._check(source, dump)
            upto = after if self.seq is None else max(after, self.seq)
            found = [c for c in self.changes if after < c.seq <= upto and lo <= c.id1 <= hi]
        if self.in_range_hook is not None:
            hook, self.in_range_hook = self.in_range_hook, None
            hook()
        return found, upto


class _Head:
    """The source's head, in memory: what the log's follower will reach."""

    def __init__(self):
        self.seq = 0

    def position(self, source, since, end, asked):
        return self.seq


def _view(log, head, mode="on", **fresh) -> FreshView:
    fresh = {"tail_interval": 0.001, "idle_refresh": 0.05, **fresh}
    config = Config(fresh_mode=mode, **{f"fresh_{k}": v for k, v in fresh.items()})
    return FreshView(config, _load("L1"), log, head, _NoLock())


def _load(load_id: str) -> LoadRecord:
    return LoadRecord(load_id, "debl", "src", LoadState.UP, BucketMap.fixed(100), 1, {}, 0.0,
                      0.0, None, None, None, 0, None, None, dump_gtid="0-1-10",
                      dump_source=SOURCE)


def _wait(predicate, timeout=10.0):
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.005)


def test_a_range_read_while_the_tailer_moves_on_loses_and_doubles_nothing():
    log, head = MemoryLog(), _Head()
    log.append([_change(11, 5, 1, 100), _change(12, 250, 1, 100)], 12)
    view = _view(log, head)
    try:
        def meanwhile():  # after the range's first read: a change of it, and the tailer past it
            log.append([_change(13, 5, 2, 30)], 13)
            _wait(lambda: view.tailer.position == 13)

        log.in_range_hook = meanwhile
        head.seq = 12
        got = view.overlay(5, LT, time.monotonic(), None, "q", wait=True)
        assert got.position == 13 and set(got.rows) == {1, 2}
        log.append([_change(14, 5, 1, None), _change(14, 7, 3, 1, row_no=1)], 14)
        head.seq = 14
        got = view.overlay(5, LT, time.monotonic(), None, "q", wait=True)
        assert got.position >= 14 and got.rows == {1: None, 2: _change(13, 5, 2, 30).link}
        assert view.overlay(7, LT, time.monotonic(), None, "q", wait=True).rows == \
            {3: _change(14, 7, 3, 1, row_no=1).link}
        counts = view.counts()
        assert list(counts) == [0] and counts[0].applied_on_demand == 4  # 11, 13, 14 twice
        # the range of id1 250 was never asked: nothing of it is kept
        assert view.overlay(250, LT, time.monotonic(), None, "q", wait=True).rows == \
            {1: _change(12, 250, 1, 100).link}
    finally:
        view.close()


def test_a_query_waits_for_the_head_and_past_its_deadline_says_the_follower_is_behind():
    log, head = MemoryLog(), _Head()
    view = _view(log, head)
    try:
        head.seq = 20
        started = time.monotonic()
        with pytest.raises(QueryTimeout, match="no follower has captured source source-1 "
                                               "yet: start `debl follow`"):
            view.overlay(5, LT, started, started + 0.2, "get_link_list(5, 1)", wait=True)
        log.append([], 15)
        with pytest.raises(QueryTimeout, match=r"get_link_list\(5, 1\): waited .* \(seq 20, "
                                               r"load L1\).* \(5 transactions short\); the "
                                               r"source's head as it read it .* 0-1-30, 15 "
                                               r"behind"):
            view.overlay(5, LT, started, time.monotonic() + 0.2, "get_link_list(5, 1)",
                         wait=True)
        done = threading.Event()

        def later():
            time.sleep(0.1)
            log.append([_change(20, 5, 9, 1)], 20)
            done.set()

        threading.Thread(target=later).start()
        got = view.overlay(5, LT, time.monotonic(), time.monotonic() + 10, "q", wait=True)
        assert done.is_set() and got.position == 20 and 9 in got.rows
    finally:
        view.close()


def test_mode_off_answers_from_what_the_background_applied():
    log, head = MemoryLog(), _Head()
    log.append([_change(11, 5, 1, 100)], 11)
    view = _view(log, head, mode="off")
    try:
        head.seq = 10**9  # never waited for
        first = view.overlay(5, LT, time.monotonic(), None, "q", wait=True)
        assert first.position == 10 and first.rows == {}  # the dump, the range asked for
        _wait(lambda: 0 in view.ranges)
        assert view.overlay(5, LT, time.monotonic(), None, "q", wait=True).rows == \
            {1: _change(11, 5, 1, 100).link}
        log.append([_change(12, 5, 1, None)], 12)
        _wait(lambda: view.overlay(5, LT, time.monotonic(), None, "q", True).position == 12)
        assert view.overlay(5, LT, time.monotonic(), None, "q", wait=True).rows == {1: None}
        counts = view.counts()[0]
        assert counts.applied_on_demand == 0 and counts.applied_background == 2
    finally:
        view.close()


def test_the_view_let_go_last_stays_live_and_a_rollback_takes_it_back():
    """After a switch the previous day's view goes on tailing unserved; a rollback to its load
    answers at once from it, not from a view replayed from its dump (a fresh one answers the
    dump first in mode off); the one kept before is closed when the next is let go."""
    log = MemoryLog()
    log.append([_change(11, 5, 1, 100)], 11)
    config = Config(fresh_mode="off", fresh_tail_interval=0.001, fresh_idle_refresh=0.05)
    views = FreshViews(config, log)
    loads = {name: _load(name) for name in ("A", "B", "C")}
    op = LinkList(5, LT)

    def position(name):
        return views.overlay(loads[name], op, time.monotonic(), None, False).position

    try:
        _wait(lambda: position("A") == 11)
        views.forget(["A"])  # the next day, B, is served
        position("B")
        log.append([_change(12, 5, 1, None)], 12)
        _wait(lambda: position("B") == 12)
        # rolled back: A's view, kept, answers at once with what it has (a view made anew
        # would answer from the dump, 10, until its range is read), and goes on
        assert position("A") >= 11
        _wait(lambda: position("A") == 12)
        views.forget(["B"])
        views.forget(["A"])  # C served: B's view, kept, is closed; A's kept
        position("C")
        alive = {t.name for t in threading.enumerate()}
        assert "debl-fresh-B-tail" not in alive and "debl-fresh-A-tail" in alive
    finally:
        views.close()
    assert not any(t.name.startswith("debl-fresh-") for t in threading.enumerate())


def test_a_full_buffer_is_applied_in_the_background():
    log, head = MemoryLog(), _Head()
    view = _view(log, head, buffer_threshold=3, idle_refresh=60.0)
    try:
        head.seq = 10
        view.overlay(5, LT, time.monotonic(), None, "q", wait=True)  # materialized, idle
        log.append([_change(11, 5, 1, 1), _change(12, 5, 2, 1)], 12)
        _wait(lambda: view.tailer.position == 12)
        time.sleep(0.05)
        assert view.counts()[0].buffered == 2  # below the threshold: waits for a query
        log.append([_change(13, 5, 3, 1)], 13)
        _wait(lambda: view.counts()[0].applied_background == 3)
        assert view.counts()[0].buffered == 0
    finally:
        view.close()


def test_a_load_whose_changes_the_log_forgot_is_refused():
    """The follower's ``kept_from`` past the load's dump (pruned, or lost by the source's log):
    a query says so rather than answer without the forgotten changes, and at once, not at its
    deadline (it is for good: the tailer stops), the next one too."""
    log, head = MemoryLog(), _Head()
    log.append([_change(25, 5, 1, 1)], 25)
    log.kept_from = 20
    view = _view(log, head)
    try:
        head.seq = 25
        for id1 in (5, 7):
            with pytest.raises(ChangesForgotten, match="holds the changes past seq 20 only"):
                view.overlay(id1, LT, time.monotonic(), time.monotonic() + 3600, "q", wait=True)
        assert view.tailer.fatal is not None
    finally:
        view.close()
