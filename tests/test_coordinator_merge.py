"""The coordinator's pure parts, without services: the cross-store merge against the in-memory
reference, the demand publication policy, the wait statistics."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.demand import HALF_LIFE_S, DemandPolicy, decayed, new_coordinator_id
from coordinator.merge import merge_newest_first, select_merged
from coordinator.state import BucketState
from coordinator.stats import WaitCounters, WaitRecorder
from debl.format.link import MAX_TIME, Link, Origin
from debl.store.memory import MemoryStore

ID1, LT = 7, 123456789

# Few id2 and times, so that keys collide across stores and times and versions tie often.
_row = st.tuples(st.booleans(),  # hot?
                 st.integers(1, 6),  # id2
                 st.integers(0, 1),  # visibility
                 st.integers(0, 5),  # time
                 st.integers(0, 2),  # version
                 st.sampled_from([b"a", b"b", b"c\\\"", b""]))


def _stores(rows):
    """(hot store, cold store, reference over every row), each row with its own origin."""
    hot, cold, everything = MemoryStore(), MemoryStore(), MemoryStore()
    hot_rows, cold_rows, all_rows = [], [], []
    for line_no, (is_hot, id2, vis, t, version, data) in enumerate(rows, 1):
        link = Link(ID1, LT, id2, vis, data, t, version)
        origin = Origin(int(is_hot), 0, line_no)
        (hot_rows if is_hot else cold_rows).append((link, origin))
        all_rows.append((link, origin))
    hot.write_links(hot_rows)
    cold.write_links(cold_rows)
    everything.write_links(all_rows)
    return hot, cold, everything


@settings(max_examples=400, deadline=None)
@given(rows=st.lists(_row, max_size=25), min_time=st.integers(0, 6),
       max_time=st.one_of(st.integers(0, 6), st.just(MAX_TIME)), offset=st.integers(0, 4),
       limit=st.integers(0, 8))
def test_merge_then_filter_equals_the_reference(rows, min_time, max_time, offset, limit):
    hot, cold, reference = _stores(rows)
    winners = merge_newest_first(hot.scan_newest_first(ID1, LT, min_time),
                                 cold.scan_newest_first(ID1, LT, min_time))
    got = select_merged(winners, min_time, max_time, offset, limit)
    assert got == reference.get_link_list(ID1, LT, min_time, max_time, offset, limit)


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(_row, max_size=25))
def test_merged_winners_are_every_key_once_newest_first(rows):
    hot, cold, reference = _stores(rows)
    winners = list(merge_newest_first(hot.scan_newest_first(ID1, LT),
                                      cold.scan_newest_first(ID1, LT)))
    assert winners == list(reference.scan_newest_first(ID1, LT))


def _l(id2, vis, t, version=0, data=b""):
    return Link(ID1, LT, id2, vis, data, t, version)


def test_a_newer_hidden_row_in_one_store_hides_an_older_visible_row_in_the_other():
    hot = [_l(1, 1, 10)]
    cold = [_l(1, 0, 20)]
    assert select_merged(merge_newest_first(hot, cold), 0, MAX_TIME, 0, 10) == []
    assert select_merged(merge_newest_first(cold, hot), 0, MAX_TIME, 0, 10) == []


def test_a_winner_after_max_time_suppresses_the_older_row_inside_the_window():
    hot = [_l(1, 1, 10)]
    cold = [_l(1, 1, 20)]
    assert select_merged(merge_newest_first(hot, cold), 0, 15, 0, 10) == []
    assert select_merged(merge_newest_first(hot, cold), 0, 25, 0, 10) == [_l(1, 1, 20)]


def test_equal_time_greater_version_wins_then_hot_over_cold():
    assert list(merge_newest_first([_l(1, 1, 5, 1, b"hot")], [_l(1, 1, 5, 2, b"cold")])) == \
        [_l(1, 1, 5, 2, b"cold")]
    assert list(merge_newest_first([_l(1, 1, 5, 2, b"hot")], [_l(1, 1, 5, 2, b"cold")])) == \
        [_l(1, 1, 5, 2, b"hot")]


def test_select_merged_reads_only_what_it_needs():
    consumed = []

    def rows():
        for t in range(100, 0, -1):
            consumed.append(t)
            yield _l(t, 1, t)

    assert [l.time for l in select_merged(rows(), 0, MAX_TIME, 2, 3)] == [98, 97, 96]
    assert len(consumed) == 5


def test_demand_policy_debounces_and_heartbeats():
    policy = DemandPolicy(min_interval=0.5, heartbeat=10.0)
    assert not policy.due({}, 0.0)  # nothing ever waited: nothing to publish
    assert policy.due({3: 1}, 0.0)
    policy.done({3: 1}, 0.0)
    assert not policy.due({3: 1}, 5.0)  # unchanged: only the heartbeat
    assert policy.due({3: 1}, 10.0)
    assert not policy.due({3: 2}, 0.2)  # changed, but published 0.2 s ago
    assert policy.due({3: 2}, 0.5)
    policy.done({3: 2}, 0.5)
    assert policy.due({}, 1.0)  # released: clear the rows
    policy.done({}, 1.0)
    assert not policy.due({}, 100.0)


def test_demand_counts_waiting_queries_and_decays_the_ones_that_stopped():
    assert decayed(8.0, 0.0) == 8.0 and decayed(8.0, HALF_LIFE_S) == 4.0
    assert decayed(8.0, 3 * HALF_LIFE_S) == 1.0 and decayed(1.0, -5.0) == 1.0
    b = BucketState(3, 0, 9, "pending", 0, 9)
    assert b.demand(0.0) == 0
    b.waiting = 2  # two queries waiting on it now
    for t in (0.0, 0.0, 0.0, 0.0):  # four answered raw at t=0
        b.stopped_waiting(t)
    assert b.demand(0.0) == 6
    assert b.demand(HALF_LIFE_S) == 4  # the four weigh two after one half-life
    b.waiting = 0
    b.stopped_waiting(2 * HALF_LIFE_S)  # the old four weigh one now; the new one, one
    assert b.demand(2 * HALF_LIFE_S) == 2
    assert b.demand(20 * HALF_LIFE_S) == 0  # old demand fades out


def test_coordinator_ids_are_unique_and_fit_the_column():
    ids = {new_coordinator_id() for _ in range(50)}
    assert len(ids) == 50
    assert all(len(i) <= 64 for i in ids)


def test_wait_recorder_counts_and_percentiles():
    rec = WaitRecorder()
    assert rec.snapshot().answered == 0
    for _ in range(3):
        rec.record("immediate", 0.0)
    for w in (1.0, 2.0, 3.0, 4.0):
        rec.record("buffered", w)
    rec.record("timeouts", 9.0)
    rec.record("raw", 0.5)
    s = rec.snapshot()
    assert (s.answered, s.immediate, s.buffered, s.raw, s.timeouts) == (8, 3, 4, 1, 1)
    assert rec.answered() == {"immediate": 3, "buffered": 4, "waited_uptime": 0, "raw": 1,
                              "early": 0, "partial": 0, "timeouts": 1}

    assert s.raw_share == 1 / 8
    assert s.mean_wait_s == 2.5 and s.max_wait_s == 4.0
    assert 3.0 < s.p95_wait_s <= 4.0
    assert abs(s.immediate_share - 3 / 8) < 1e-9
    rec.reset()
    assert rec.snapshot().answered == 0


def test_wait_recorder_first_minute_counts_queries_by_arrival():
    rec = WaitRecorder()
    epoch = rec._epoch
    rec.record("immediate", 0.0, epoch + 1.0)
    rec.record("buffered", 70.0, epoch + 2.0)  # asked in the first minute, answered later
    rec.record("timeouts", 5.0, epoch + 3.0)  # not answered: in neither count
    rec.record("immediate", 0.0, epoch + 61.0)  # asked after the first minute
    rec.record("waited_uptime", 0.5, epoch + 59.0)
    s = rec.snapshot()
    assert (s.first_minute_answered, s.first_minute_immediate) == (3, 1)
    assert abs(s.first_minute_immediate_share - 1 / 3) < 1e-9
    assert s.to_dict()["first_minute_immediate_share"] == s.first_minute_immediate_share
    assert abs(s.immediate_share - 2 / 4) < 1e-9


def test_wait_recorder_keeps_bounded_memory_however_many_queries_it_counts():
    """The waits of buffered queries were kept one by one, 8 bytes a query for the coordinator's
    whole life; a histogram keeps them in a few kB with percentiles within 0.1%."""
    rec = WaitRecorder()
    waits = np.random.default_rng(3).exponential(2.0, 300_000)
    for w in waits:
        rec.record("buffered", float(w))
    small = len(pickle.dumps(rec.counters()))
    for w in waits:
        rec.record("buffered", float(w))
    assert len(pickle.dumps(rec.counters())) < 2 * small < 400_000  # not 8 bytes a query
    s = rec.snapshot()
    assert s.buffered == 600_000 and s.max_wait_s == pytest.approx(waits.max())
    assert s.mean_wait_s == pytest.approx(waits.mean(), rel=1e-6)
    exact = np.percentile(np.concatenate([waits, waits]), 95, method="inverted_cdf")
    assert exact <= s.p95_wait_s <= exact * 1.001 + 1e-9
    merged = WaitCounters.merge([rec.counters(), rec.counters()]).stats()
    assert merged.buffered == 1_200_000 and merged.p95_wait_s == s.p95_wait_s


def test_early_answers_keep_the_waits_of_those_whose_key_was_not_here():
    rec = WaitRecorder()
    rec.record("early", 0.0)
    rec.record("early", 0.25)
    rec.record("early", 1.5)
    other = WaitRecorder()
    other.record("early", 0.5)
    s = WaitCounters.merge([rec.counters(), other.counters()]).stats()
    assert (s.answered, s.early, s.early_waited) == (4, 4, 3)
    assert s.early_p50_wait_s == pytest.approx(0.5, rel=0.01)
    assert s.early_p99_wait_s == pytest.approx(1.5, rel=0.01)
