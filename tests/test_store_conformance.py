"""One conformance suite for every LinkStore: the in-memory reference, MySQL and HBase.

The real stores run against the local stack (``stack_config``), on their own tables
(``conf_links``), dropped at the end. Each store is reset once per module; every test then works
on id1 values of its own (the ``ns`` fixture), so tests do not see each other's rows without
paying an HBase table re-creation (seconds) per test. Tests of ``count`` and ``reset`` reset the
store themselves.
"""

from __future__ import annotations

import itertools
import random
import threading
from collections.abc import Iterable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from debl.format.link import MAX_TIME, Link, Origin
from debl.store.base import LinkStore
from debl.store.memory import MemoryStore

TABLE = "conf_links"
LT = 123456789
BIG = (1 << 63) - 1

_ids = itertools.count(1000, 1000)  # every test and every hypothesis example: fresh id1 values


def _open(kind: str, request: pytest.FixtureRequest) -> LinkStore:
    if kind == "memory":
        return MemoryStore()
    config = request.getfixturevalue("stack_config")
    if kind == "mysql":
        from debl.store.mysql import MySQLStore
        return MySQLStore(config, table=TABLE)
    from debl.store.hbase import HBaseStore
    return HBaseStore(config, table=TABLE)


@pytest.fixture(scope="module", params=[
    "memory",
    pytest.param("mysql", marks=pytest.mark.stack),
    pytest.param("hbase", marks=pytest.mark.stack),
])
def store(request: pytest.FixtureRequest):
    with _open(request.param, request) as s:
        s.reset()
        yield s
        if hasattr(s, "drop_table"):
            s.drop_table()


@pytest.fixture(scope="module", params=[pytest.param("mysql", marks=pytest.mark.stack),
                                        pytest.param("hbase", marks=pytest.mark.stack)])
def real_store(request: pytest.FixtureRequest):
    """The real stores only: the randomized comparison's oracle is the memory store."""
    with _open(request.param, request) as s:
        s.reset()
        yield s
        s.drop_table()  # type: ignore[attr-defined]  # a real store's


@pytest.fixture
def ns() -> int:
    """A base id1 no other test uses: the test's rows are id1 in [ns, ns + 1000)."""
    return next(_ids)


def L(id1: int, id2: int, time: int, *, vis: int = 1, data: bytes = b"x", version: int = 0,
      lt: int = LT) -> Link:
    return Link(id1, lt, id2, vis, data, time, version)


def put(store: LinkStore, *links: Link, origin: Origin = Origin(0, 0, 0)) -> None:
    """Write each link in a batch of its own (so only the stored-row rule applies)."""
    for link in links:
        store.write_links([(link, origin)])


def ids(links: Iterable[Link]) -> list[tuple[int, int]]:
    return [(l.id2, l.time) for l in links]


# --------------------------------------------------------------------------- reading


def test_empty_list(store: LinkStore, ns: int) -> None:
    assert store.get_link_list(ns, LT) == []
    assert list(store.scan_newest_first(ns, LT)) == []


def test_newest_first_ties_by_id2_descending(store: LinkStore, ns: int) -> None:
    store.write_links([(L(ns, 1, 5), Origin(0, 0, 1)), (L(ns, 2, 9), Origin(0, 0, 2)),
                       (L(ns, 7, 9), Origin(0, 0, 3)), (L(ns, 3, 1), Origin(0, 0, 4)),
                       (L(ns, 4, 9), Origin(0, 0, 5))])
    assert ids(store.get_link_list(ns, LT)) == [(7, 9), (4, 9), (2, 9), (1, 5), (3, 1)]


def test_lists_do_not_mix(store: LinkStore, ns: int) -> None:
    # Neighbouring id1 and link_type values are neighbouring row-key prefixes in HBase.
    put(store, L(ns, 1, 5), L(ns + 1, 2, 5), L(ns, 3, 5, lt=LT + 1), L(ns - 1 + 1000, 4, 5))
    assert ids(store.get_link_list(ns, LT)) == [(1, 5)]
    assert ids(store.get_link_list(ns + 1, LT)) == [(2, 5)]
    assert ids(store.get_link_list(ns, LT + 1)) == [(3, 5)]
    assert store.get_link_list(ns + 2, LT) == []


def test_time_range_is_inclusive(store: LinkStore, ns: int) -> None:
    put(store, *(L(ns, t, t) for t in (10, 20, 30, 40)))
    assert ids(store.get_link_list(ns, LT, min_time=20, max_time=30)) == [(30, 30), (20, 20)]
    assert ids(store.get_link_list(ns, LT, min_time=20, max_time=20)) == [(20, 20)]
    assert ids(store.get_link_list(ns, LT, min_time=41)) == []
    assert ids(store.get_link_list(ns, LT, max_time=9)) == []
    assert store.get_link_list(ns, LT, min_time=30, max_time=20) == []


def test_time_extremes(store: LinkStore, ns: int) -> None:
    put(store, L(ns, 1, 0), L(ns, 2, MAX_TIME), L(ns, 3, 1))
    assert ids(store.get_link_list(ns, LT)) == [(2, MAX_TIME), (3, 1), (1, 0)]
    assert ids(store.get_link_list(ns, LT, min_time=MAX_TIME)) == [(2, MAX_TIME)]
    assert ids(store.get_link_list(ns, LT, max_time=0)) == [(1, 0)]


def test_offset_and_limit(store: LinkStore, ns: int) -> None:
    put(store, *(L(ns, i, 100 + i) for i in range(10)))
    newest = [(i, 100 + i) for i in range(9, -1, -1)]
    assert ids(store.get_link_list(ns, LT)) == newest
    assert ids(store.get_link_list(ns, LT, offset=3, limit=4)) == newest[3:7]
    assert ids(store.get_link_list(ns, LT, limit=1)) == newest[:1]
    assert ids(store.get_link_list(ns, LT, offset=8, limit=5)) == newest[8:]
    assert store.get_link_list(ns, LT, offset=10) == []
    assert store.get_link_list(ns, LT, limit=0) == []
    assert ids(store.get_link_list(ns, LT, min_time=103, offset=1, limit=2)) == newest[1:3]


def test_hidden_rows_are_excluded_before_offset(store: LinkStore, ns: int) -> None:
    put(store, *(L(ns, i, 100 + i, vis=i % 2) for i in range(10)))
    visible = [(i, 100 + i) for i in (9, 7, 5, 3, 1)]
    assert ids(store.get_link_list(ns, LT)) == visible
    assert ids(store.get_link_list(ns, LT, offset=1, limit=2)) == visible[1:3]
    put(store, L(ns + 1, 1, 5, vis=0))
    assert store.get_link_list(ns + 1, LT) == []


def test_scan_newest_first_includes_hidden(store: LinkStore, ns: int) -> None:
    put(store, L(ns, 1, 10), L(ns, 2, 20, vis=0), L(ns, 3, 30), L(ns, 4, 20))
    assert ids(store.scan_newest_first(ns, LT)) == [(3, 30), (4, 20), (2, 20), (1, 10)]
    assert ids(store.scan_newest_first(ns, LT, min_time=20)) == [(3, 30), (4, 20), (2, 20)]
    assert [l.visibility for l in store.scan_newest_first(ns, LT)] == [1, 1, 0, 1]
    assert list(store.scan_newest_first(ns, LT, min_time=31)) == []


# --------------------------------------------------------------------------- count, multiget


def test_count_link_counts_the_visible_winners(store: LinkStore, ns: int) -> None:
    assert store.count_link(ns, LT) == 0
    put(store, L(ns, 1, 5), L(ns, 2, 5, vis=0), L(ns, 3, 7), L(ns + 1, 4, 5),
        L(ns, 5, 5, lt=LT + 1))
    assert store.count_link(ns, LT) == 2  # the hidden one and the neighbours' rows not counted
    put(store, L(ns, 1, 6, vis=0), L(ns, 2, 6))  # newer rows: 1 hidden now, 2 shown again
    assert store.count_link(ns, LT) == 2
    put(store, L(ns, 3, 1, vis=0))  # an older hidden row hides nothing
    assert store.count_link(ns, LT) == 2
    assert store.count_link(ns, LT + 1) == 1 and store.count_link(ns + 1, LT) == 1


def test_count_link_of_a_list_longer_than_a_scanner_batch(store: LinkStore, ns: int) -> None:
    store.write_links([(L(ns, id2, id2 % 97, vis=int(id2 % 5 != 0)), Origin(0, 0, 0))
                       for id2 in range(12_345)])
    assert store.count_link(ns, LT) == 12_345 - 2_469


def test_multiget_link_gives_the_asked_rows_hidden_included_in_id2_order(store: LinkStore,
                                                                         ns: int) -> None:
    put(store, L(ns, 1, 5, data=b"one"), L(ns, 2, 9, vis=0, version=3), L(ns, 3, 7),
        L(ns, 4, 2, lt=LT + 1), L(ns + 1, 3, 7))
    assert store.multiget_link(ns, LT, [3, 2, 9, 1, 3, 4]) == [
        L(ns, 1, 5, data=b"one"), L(ns, 2, 9, vis=0, version=3), L(ns, 3, 7)]
    assert store.multiget_link(ns, LT, []) == []
    assert store.multiget_link(ns, LT, [4, 9]) == []  # 4 is of the other type
    put(store, L(ns, 1, 8, data=b"newer"), L(ns, 3, 6, data=b"older"))  # the merge rule
    assert store.multiget_link(ns, LT, (1, 3)) == [L(ns, 1, 8, data=b"newer"), L(ns, 3, 7)]


def test_count_and_multiget_arguments_are_checked(store: LinkStore) -> None:
    with pytest.raises(ValueError, match="id2 must be"):
        store.multiget_link(1, LT, [1, -1])
    with pytest.raises(ValueError, match="at most 10000 id2s"):
        store.multiget_link(1, LT, range(10_001))
    with pytest.raises(ValueError, match="link_type must be"):
        store.count_link(1, 1 << 64)


# --------------------------------------------------------------------------- the merge rule


def test_merge_greater_time_wins_in_either_order(store: LinkStore, ns: int) -> None:
    put(store, L(ns, 1, 5, data=b"old"), L(ns, 1, 9, data=b"new"))
    put(store, L(ns + 1, 1, 9, data=b"new"), L(ns + 1, 1, 5, data=b"old", version=7))
    for id1 in (ns, ns + 1):
        assert store.get_link_list(id1, LT) == [L(id1, 1, 9, data=b"new")]
        assert list(store.scan_newest_first(id1, LT)) == [L(id1, 1, 9, data=b"new")]


def test_merge_equal_time_greater_version_wins(store: LinkStore, ns: int) -> None:
    put(store, L(ns, 1, 5, version=1, data=b"v1"), L(ns, 1, 5, version=2, data=b"v2"))
    put(store, L(ns + 1, 1, 5, version=2, data=b"v2"), L(ns + 1, 1, 5, version=1, data=b"v1"))
    for id1 in (ns, ns + 1):
        assert store.get_link_list(id1, LT) == [L(id1, 1, 5, version=2, data=b"v2")]


def test_merge_full_tie_against_stored_row_written_now_wins(store: LinkStore, ns: int) -> None:
    put(store, L(ns, 1, 5, version=3, data=b"first"), L(ns, 1, 5, version=3, data=b"second"))
    assert store.get_link_list(ns, LT) == [L(ns, 1, 5, version=3, data=b"second")]


def test_merge_newer_hidden_hides_older_visible(store: LinkStore, ns: int) -> None:
    put(store, L(ns, 1, 5), L(ns, 1, 6, vis=0), L(ns, 2, 7))
    assert ids(store.get_link_list(ns, LT)) == [(2, 7)]
    assert list(store.scan_newest_first(ns, LT)) == [L(ns, 2, 7), L(ns, 1, 6, vis=0)]
    # ... and an older hidden row does not hide a newer visible one.
    put(store, L(ns + 1, 1, 6), L(ns + 1, 1, 5, vis=0))
    assert ids(store.get_link_list(ns + 1, LT)) == [(1, 6)]


def test_merge_within_a_batch_uses_origin(store: LinkStore, ns: int) -> None:
    # Full tie on (time, version): the later origin wins: later line, later file, hot over cold.
    store.write_links([(L(ns, 1, 5, data=b"line2"), Origin(0, 0, 2)),
                       (L(ns, 1, 5, data=b"line1"), Origin(0, 0, 1)),
                       (L(ns, 2, 5, data=b"file1"), Origin(0, 1, 1)),
                       (L(ns, 2, 5, data=b"file0"), Origin(0, 0, 9)),
                       (L(ns, 3, 5, data=b"hot"), Origin(1, 0, 1)),
                       (L(ns, 3, 5, data=b"cold"), Origin(0, 9, 9)),
                       # time beats every origin tie-breaker; version too
                       (L(ns, 4, 6, data=b"t6"), Origin(0, 0, 1)),
                       (L(ns, 4, 5, data=b"t5"), Origin(1, 9, 9)),
                       (L(ns, 5, 5, version=2, data=b"v2"), Origin(0, 0, 1)),
                       (L(ns, 5, 5, version=1, data=b"v1"), Origin(1, 9, 9))])
    got = {l.id2: l.data for l in store.get_link_list(ns, LT)}
    assert got == {1: b"line2", 2: b"file1", 3: b"hot", 4: b"t6", 5: b"v2"}
    assert len(list(store.scan_newest_first(ns, LT))) == 5


def test_write_links_returns_rows_given(store: LinkStore, ns: int) -> None:
    assert store.write_links([]) == 0
    assert store.write_links([(L(ns, 1, 5), Origin(0, 0, 1)), (L(ns, 1, 5), Origin(0, 0, 2))]) == 2


# --------------------------------------------------------------------------- values


DATA = [b'"', b",", b"\\", b"'", b"", bytes(range(32, 101)), b"\\N", b"\\\\'\"\x00",
        b"a\x00b", bytes(b for b in range(256) if b not in b"\t\n"), b"0x41", b"%s%d"]


def test_data_round_trips_byte_exact(store: LinkStore, ns: int) -> None:
    links = [L(ns, i, 1000 - i, data=d) for i, d in enumerate(DATA)]
    store.write_links([(l, Origin(0, 0, i)) for i, l in enumerate(links)])
    assert [l.data for l in store.get_link_list(ns, LT)] == DATA
    assert [l.data for l in store.scan_newest_first(ns, LT)] == DATA


def test_large_id_values(store: LinkStore) -> None:
    # Outside the ns scheme on purpose: the top of the 64-bit signed range.
    big = [Link(BIG, BIG, BIG, 1, b"top", MAX_TIME, BIG), Link(BIG, BIG, 0, 1, b"zero", 0, 0),
           Link(BIG - 1, BIG, BIG, 1, b"below", 7, 1), Link(BIG, BIG - 1, BIG, 1, b"lt-1", 7, 1)]
    put(store, *big)
    assert store.get_link_list(BIG, BIG) == big[:2]
    assert store.get_link_list(BIG - 1, BIG) == [big[2]]
    assert store.get_link_list(BIG, BIG - 1) == [big[3]]
    assert store.get_link_list(BIG, BIG, min_time=1, max_time=MAX_TIME - 1) == []


def test_count_and_reset(store: LinkStore, ns: int) -> None:
    store.reset()
    assert store.count() == 0
    put(store, L(ns, 1, 5), L(ns, 1, 6), L(ns, 2, 5, vis=0), L(ns + 1, 1, 5), L(ns, 1, 5, lt=1))
    assert store.count() == 4  # (ns, 1) twice is one key; hidden rows count
    store.reset()
    assert store.count() == 0
    assert store.get_link_list(ns, LT) == []
    put(store, L(ns, 1, 3))  # usable after reset
    assert ids(store.get_link_list(ns, LT)) == [(1, 3)]


# --------------------------------------------------------------------------- against the oracle


_link = st.builds(
    lambda id1, lt, id2, vis, data, time, version: Link(id1, LT + lt, id2, vis, data, time,
                                                        version),
    st.integers(0, 2), st.integers(0, 1), st.integers(0, 5),
    st.sampled_from([0, 1, 1, 1]), st.binary(max_size=6), st.integers(0, 6), st.integers(0, 2))
_query = st.tuples(st.integers(0, 2), st.integers(0, 1), st.integers(0, 7), st.integers(-1, 7),
                   st.integers(0, 4), st.integers(0, 6))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=st.lists(st.lists(st.tuples(_link, st.integers(0, 1), st.integers(0, 2)),
                                 max_size=12), min_size=1, max_size=4),
       queries=st.lists(_query, min_size=1, max_size=10),
       multiget=st.lists(st.integers(0, 6), max_size=5))
def test_matches_memory_store(real_store: LinkStore, batches, queries, multiget) -> None:
    store = real_store
    base = next(_ids)  # a fresh id1 range per example: no reset needed between examples
    oracle = MemoryStore()
    for batch in batches:
        # Origins unique within a batch, as real ones are (line numbers); hot and file random.
        rows = [(link._replace(id1=base + link.id1), Origin(hot, seq, line))
                for line, (link, hot, seq) in enumerate(batch)]
        assert store.write_links(rows) == oracle.write_links(rows) == len(rows)
    for id1, lt, lo, hi, offset, limit in queries:
        args = (base + id1, LT + lt, lo, MAX_TIME if hi < 0 else hi, offset, limit)
        assert store.get_link_list(*args) == oracle.get_link_list(*args), args
    for id1, lt in itertools.product(range(3), range(2)):
        assert (list(store.scan_newest_first(base + id1, LT + lt))
                == list(oracle.scan_newest_first(base + id1, LT + lt)))
        assert store.count_link(base + id1, LT + lt) == oracle.count_link(base + id1, LT + lt)
        assert (store.multiget_link(base + id1, LT + lt, multiget)
                == oracle.multiget_link(base + id1, LT + lt, multiget))


def test_scan_id1_range_reads_every_row_of_the_range(real_store, ns: int) -> None:
    """Hidden rows included, ids outside the range excluded, one row per key, more rows than a
    page (what a check of a whole store against the reference reads)."""
    inside = [L(ns + 1, id2, 10 + id2 % 7, vis=id2 % 2) for id2 in range(1, 12_002)]
    inside += [L(ns + 2, 5, 3, lt=LT + 1), L(ns + 3, 6, 4, data=b"\x00\xff")]
    outside = [L(ns, 1, 1), L(ns + 4, 1, 1)]
    real_store.write_links([(link, Origin(0, 0, 0)) for link in inside + outside])
    real_store.write_links([(L(ns + 1, 7, 99, version=3), Origin(0, 0, 0))])  # replaces one
    want = {l.key: l for l in inside} | {(ns + 1, LT, 7): L(ns + 1, 7, 99, version=3)}
    got = list(real_store.scan_id1_range(ns + 1, ns + 3))
    assert len(got) == len(want)
    assert {l.key: l for l in got} == want


def test_concurrent_queries(store: LinkStore, ns: int) -> None:
    rnd = random.Random(7)
    links = [Link(ns + rnd.randrange(20), LT, rnd.randrange(200), int(rnd.random() < 0.9),
                  rnd.randbytes(rnd.randrange(20)), rnd.randrange(1000), rnd.randrange(3))
             for _ in range(1500)]
    rows = [(link, Origin(0, 0, i)) for i, link in enumerate(links)]
    oracle = MemoryStore()
    oracle.write_links(rows)
    store.write_links(rows)
    errors: list[str] = []
    done = []

    def client(seed: int) -> None:
        r = random.Random(seed)
        try:
            for _ in range(40):
                args = (ns + r.randrange(21), LT, r.randrange(500), r.randrange(400, 1000),
                        r.randrange(3), r.choice([1, 5, 50, 10000]))
                if store.get_link_list(*args) != oracle.get_link_list(*args):
                    errors.append(f"wrong answer for {args}")
            done.append(seed)
        except Exception as exc:  # reported below: a thread's exception is otherwise lost
            errors.append(f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=client, args=(seed,)) for seed in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    assert sorted(done) == list(range(8))


# --------------------------------------------------------------------------- faults


@pytest.mark.stack
def test_mysql_reconnects_once_after_a_dropped_connection(stack_config) -> None:
    from debl.mysql import connect
    from debl.store.mysql import MySQLStore

    # No table needed: has_secondary_index() queries information_schema through the same path.
    # One pooled connection: the killed one is the one the next call gets.
    with MySQLStore(stack_config, table="conf_links_absent", pool_size=1) as s:
        assert s.has_secondary_index() is False
        victim = s._execute("SELECT CONNECTION_ID()")[0][0]
        with connect(stack_config) as admin, admin.cursor() as cur:
            cur.execute("KILL %s", (victim,))
        assert s.has_secondary_index() is False  # reconnected, answered
        assert s._execute("SELECT CONNECTION_ID()")[0][0] != victim


def test_connection_pool_lends_at_most_size_and_reuses_the_newest() -> None:
    from debl.mysql import ConnectionPool

    made: list[object] = []

    def factory() -> object:
        made.append(object())
        return made[-1]

    pool = ConnectionPool(factory, size=2, timeout=0.05)  # type: ignore[arg-type, type-var]
    a, b = pool.get(), pool.get()
    with pytest.raises(TimeoutError):
        pool.get()  # both lent: the caller waits, then gets a clear error
    pool.put(b)
    assert pool.get() is b  # reused, not a new connection
    pool.discard(a)  # a broken one frees its slot
    assert pool.get() not in (a, b) and len(made) == 3


@pytest.mark.stack
def test_mysql_connections_stay_bounded_under_thread_per_request_callers(stack_config) -> None:
    """Defect: MySQLStore kept one connection per calling thread for as long as the store
    lived, so callers that start a thread per request ran the server out of connections (error
    1040). Now the store's connections come from a bounded pool, reused across threads."""
    import psutil

    from debl.store.mysql import MySQLStore

    def my_connections() -> int:
        """This process's connections to the server: the server is shared with the other
        workers' tests, whose own connections come and go meanwhile."""
        return sum(1 for c in psutil.Process().net_connections(kind="tcp")
                   if c.raddr and c.raddr.port == stack_config.mysql.port
                   and c.status == psutil.CONN_ESTABLISHED)

    with MySQLStore(stack_config, table=TABLE, pool_size=4) as s:
        s.create_table()
        before = my_connections()
        errors: list[str] = []
        peak = before

        def request() -> None:
            try:
                s.get_link_list(1, LT)
            except Exception as exc:
                errors.append(f"{type(exc).__name__}: {exc}")

        for _ in range(10):  # 10 waves of 30 short-lived threads: 300 requests
            wave = [threading.Thread(target=request) for _ in range(30)]
            for t in wave:
                t.start()
            peak = max(peak, my_connections())
            for t in wave:
                t.join()
            peak = max(peak, my_connections())
        assert errors == []
        assert peak <= before + 4
        assert my_connections() <= before + 4
    assert my_connections() <= before  # close() gave them all back to the server


@pytest.mark.stack
def test_mysql_read_path_reconnects_once_after_a_dropped_connection(stack_config) -> None:
    from debl.mysql import connect
    from debl.store.mysql import MySQLStore

    # Reads have their own pool (mysqlclient); with one connection in it, the killed one is
    # the one the next read gets.
    with MySQLStore(stack_config, table="conf_links_reads", pool_size=1) as s:
        s.reset()
        s.write_links([(Link(7, LT, 8, 1, b"x", 5, 0), Origin(1, 0, 0))])
        assert [l.id2 for l in s.get_link_list(7, LT)] == [8]
        victim = s._read(b"SELECT CONNECTION_ID()")[0][0]
        with connect(stack_config) as admin, admin.cursor() as cur:
            cur.execute("KILL %s", (victim,))
        assert [l.id2 for l in s.get_link_list(7, LT)] == [8]  # reconnected, answered
        assert [l.id2 for l in s.scan_newest_first(7, LT)] == [8]
        assert s._read(b"SELECT CONNECTION_ID()")[0][0] != victim
        s.drop_table()


@pytest.mark.stack
def test_mysql_reads_without_the_secondary_index(stack_config) -> None:
    """Reads force id1_type; while a bulk load has dropped it they answer all the same."""
    from debl.store.mysql import MySQLStore

    rows = [(Link(7, LT, 8 + j, int(j % 3 != 0), b"x%d" % j, 5 + j % 4, 0), Origin(1, 0, j))
            for j in range(12)]
    reference = MemoryStore()
    reference.write_links(rows)
    with MySQLStore(stack_config, table="conf_links_noindex") as s:
        s.reset()
        s.write_links(rows)
        want = reference.get_link_list(7, LT, offset=1, limit=5)
        assert s.get_link_list(7, LT, offset=1, limit=5) == want and len(want) == 5
        s.drop_secondary_index()
        assert s.get_link_list(7, LT, offset=1, limit=5) == want
        s.add_secondary_index()
        assert s.get_link_list(7, LT, offset=1, limit=5) == want
        s.drop_table()


@pytest.mark.stack
def test_hbase_reconnects_once_after_a_dropped_connection(stack_config) -> None:
    import socket

    from debl.store.hbase import HBaseStore

    with HBaseStore(stack_config, table="conf_links_absent", pool_size=2) as s:
        assert s.table_exists() is False
        # What a Thrift server restart looks like to a pooled client: "TSocket read 0 bytes".
        for conn in list(s._get_pool()._queue.queue):
            if conn.transport.is_open():
                conn.transport.sock.shutdown(socket.SHUT_RDWR)
        assert s.table_exists() is False  # reconnected, answered


@pytest.mark.parametrize("kind", ["mysql", "hbase"])
def test_unreachable_service_is_a_clear_service_error(kind: str) -> None:
    from debl.config import Config
    from debl.errors import ServiceError

    with socket_closed_port() as port:
        config = Config(mysql_port=port, hbase_thrift_port=port, mysql_password="unused")
        if kind == "mysql":
            from debl.store.mysql import MySQLStore as Store
        else:
            from debl.store.hbase import HBaseStore as Store  # type: ignore[assignment]  # the other
        with Store(config, table=TABLE) as s, pytest.raises(ServiceError) as err:
            s.get_link_list(1, LT)
    assert f"127.0.0.1:{port}" in str(err.value)
    assert "debl stack status" in str(err.value)


@pytest.mark.stack
@pytest.mark.parametrize("kind", ["mysql", "hbase"])
def test_missing_table_is_a_clear_service_error(stack_config, kind: str) -> None:
    from debl.errors import ServiceError

    if kind == "mysql":
        from debl.store.mysql import MySQLStore as Store
    else:
        from debl.store.hbase import HBaseStore as Store  # type: ignore[assignment]  # the other
    with Store(stack_config, table="conf_links_absent") as s:
        s.drop_table()
        with pytest.raises(ServiceError, match="conf_links_absent.*does not exist"):
            s.get_link_list(1, LT)


def socket_closed_port():
    """A context giving a loopback port nothing listens on (bound, then released)."""
    import contextlib
    import socket

    @contextlib.contextmanager
    def free():
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        yield port
    return free()
