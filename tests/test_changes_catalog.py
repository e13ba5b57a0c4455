"""The source's change log in the catalog (docs/FRESHNESS.md, "The change log"), on the real
MariaDB: appended with the follower's position in one transaction, read back whole transactions
at a time in position order, by id1 range, and pruned; bytes round-trip."""

from __future__ import annotations

import pytest

from debl.catalog import METADATA, Catalog, Change, engine_for
from debl.format.link import Link

pytestmark = pytest.mark.stack

SRC = "source-uuid-1"


@pytest.fixture
def catalog(stack_config):
    config = stack_config.replace(mysql_database="debl_changestest")
    METADATA.drop_all(engine_for(config))
    with Catalog(config) as catalog:
        yield catalog


def _change(seq: int, row_no: int, id1: int, id2: int = 7, data: bytes = b"x",
            deleted: bool = False) -> Change:
    link = None if deleted else Link(id1, 1, id2, 1, data, 100 + seq, seq)
    return Change(seq, row_no, id1, 1, id2, link, 1000.0 + seq, 2000.0 + seq)


def _equal(a: list[Change], b: list[Change]) -> bool:
    """Equal but for captured_ts, which the catalog sets."""
    strip = [(c.seq, c.row_no, c.key, c.link, c.commit_ts) for c in a]
    return strip == [(c.seq, c.row_no, c.key, c.link, c.commit_ts) for c in b]


def test_changes_come_back_in_position_order_with_the_position_they_reach(catalog):
    state = catalog.changes.start(SRC, "0-1-10", 10)
    assert (state.seq, state.gtid, state.state) == (10, "0-1-10", "catching-up")
    assert catalog.changes.since(SRC, 10) == ([], 10)
    batch = [_change(11, 0, 5), _change(11, 1, 6, data=b"\x00\xff\\\t'\""),
             _change(12, 0, 5, deleted=True), _change(14, 0, 900)]
    catalog.changes.append(SRC, batch, "0-1-14", 14, commit_ts=1014.0)
    changes, upto = catalog.changes.since(SRC, 10)
    assert upto == 14 and _equal(changes, batch)
    assert changes[1].link.data == b"\x00\xff\\\t'\"" and changes[2].link is None
    follower = catalog.changes.follower(SRC)
    assert (follower.seq, follower.commit_ts, follower.state) == (14, 1014.0, "following")
    # A position past every change (the source's other tables' transactions): reached.
    catalog.changes.append(SRC, [], "0-1-20", 20, commit_ts=None)
    assert catalog.changes.since(SRC, 14) == ([], 20)
    assert catalog.changes.follower(SRC).commit_ts == 1014.0  # the last captured commit's


def test_a_read_with_a_limit_ends_at_a_whole_transaction(catalog):
    catalog.changes.start(SRC, "0-1-0", 0)
    batch = [_change(1, 0, 1), _change(2, 0, 2), _change(2, 1, 3), _change(2, 2, 4),
             _change(3, 0, 5)]
    catalog.changes.append(SRC, batch, "0-1-3", 3, commit_ts=1003.0)
    changes, upto = catalog.changes.since(SRC, 0, limit=2)
    assert upto == 1 and _equal(changes, batch[:1])  # transaction 2 does not fit: not cut
    changes, upto = catalog.changes.since(SRC, 1, limit=2)
    assert upto == 2 and _equal(changes, batch[1:4])  # one transaction over the limit: whole
    changes, upto = catalog.changes.since(SRC, 2, limit=2)
    assert upto == 3 and _equal(changes, batch[4:])


def test_a_ranges_changes_and_the_prune(catalog):
    catalog.changes.start(SRC, "0-1-0", 0)
    batch = [_change(s, 0, id1) for s, id1 in enumerate([10, 50, 20, 99, 10], start=1)]
    catalog.changes.append(SRC, batch, "0-1-5", 5, commit_ts=1005.0)
    changes, upto = catalog.changes.in_range(SRC, 10, 20, after=1)
    assert upto == 5 and [(c.seq, c.id1) for c in changes] == [(3, 20), (5, 10)]
    assert catalog.changes.prune(SRC, below=3) == 3
    assert [c.seq for c in catalog.changes.since(SRC, 0)[0]] == [4, 5]


def test_two_sources_changes_at_the_same_positions_stay_apart(catalog):
    """A dataset whose loads moved to another source (another data directory) keeps both
    sources' changes: the same positions, each read, ranged and pruned as its own."""
    other = "other-source"
    for source, id1 in ((SRC, 10), (other, 20)):
        catalog.changes.start(source, "0-1-0", 0)
        catalog.changes.append(source, [_change(1, 0, id1), _change(2, 0, id1)], "0-1-2", 2,
                               commit_ts=1002.0)
    assert [c.id1 for c in catalog.changes.since(SRC, 0)[0]] == [10, 10]
    assert [c.id1 for c in catalog.changes.since(other, 0)[0]] == [20, 20]
    assert catalog.changes.in_range(other, 0, 15, after=0)[0] == []
    assert catalog.changes.prune(other, below=1) == 1
    assert [c.seq for c in catalog.changes.since(SRC, 0)[0]] == [1, 2]
    assert catalog.changes.follower(SRC).kept_from == 0
    assert catalog.changes.follower(other).kept_from == 1


def test_a_failed_follower_says_why_and_a_restart_resumes_its_position(catalog):
    catalog.changes.start(SRC, "0-1-0", 0)
    catalog.changes.append(SRC, [_change(1, 0, 1)], "0-1-1", 1, commit_ts=1001.0)
    catalog.changes.report(SRC, "failed", "the source is down: start it")
    state = catalog.changes.follower(SRC)
    assert (state.state, state.error, state.seq) == ("failed", "the source is down: start it", 1)
    state = catalog.changes.start(SRC, "0-1-0", 0)  # the dump's position: the follower's wins
    assert (state.seq, state.state, state.error) == (1, "catching-up", None)


def test_a_tail_reads_as_since_does_and_outlives_a_dropped_connection(catalog):
    """A tailer's reader (``ChangesCatalog.tail``: a kept connection, the changes read only when
    the follower moved) gives what ``since`` gives; its connection killed by the server, the
    read says so and the next one opens another."""
    from debl.errors import ChangesForgotten, ServiceError

    catalog.changes.start(SRC, "0-1-0", 0)
    batch = [_change(1, 0, 1), _change(2, 0, 2), _change(2, 1, 3), _change(3, 0, 5)]
    catalog.changes.append(SRC, batch, "0-1-3", 3, commit_ts=1003.0)
    tail = catalog.changes.tail(SRC, dump=0)
    try:
        for after, limit in ((0, 10), (0, 2), (1, 1), (3, 10)):
            read, expected = tail.read(after, limit), catalog.changes.since(SRC, after, limit)
            assert read[1] == expected[1] and _equal(read[0], expected[0])
        with catalog.engine.transaction() as conn:  # the server ends the tail's session
            tail_id = tail._conn.exec_driver_sql("SELECT CONNECTION_ID()").scalar()
            conn.exec_driver_sql(f"KILL {tail_id}")
        with pytest.raises(ServiceError):
            tail.read(0)
        assert tail.read(2)[1] == 3
        catalog.changes.append(SRC, [_change(4, 0, 9)], "0-1-4", 4, commit_ts=1004.0)
        assert [c.seq for c in tail.read(3)[0]] == [4]
        catalog.changes.prune(SRC, below=2)
        with pytest.raises(ChangesForgotten):
            tail.read(3)
    finally:
        tail.close()
