"""LinkBench's link writes on a real MariaDB with its binary log on (tests/binlog_mariadb.py):
add_link twice is an update, update_link of a missing link adds it, delete_link hides (and
expunge deletes), bytes round-trip, and every write that changed a row answers its commit's GTID
and the monotonic times that bracket it (debl.store.linkbench_writes); and the query client's
writer pool sending a mix's writes there (debl.workload.writers)."""

from __future__ import annotations

import time
from collections import Counter

import pytest

from debl.errors import ConfigError, ServiceError
from debl.format.link import Link, Origin
from debl.store.linkbench_writes import SourceLinks
from debl.store.memory import MemoryStore
from debl.workload.client import ClientSpec, run_client
from debl.workload.mix import READ_OPS, WRITE_OPS
from debl.workload.requests import RequestSpec
from tests.binlog_mariadb import binlog_mariadb
from tests.dataset import check_writes_landed

LT = 123456789


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    with binlog_mariadb(tmp_path_factory.mktemp("binlog")) as url:
        links = SourceLinks(url, "linktable")
        links.create_table()
        yield links


@pytest.fixture
def session(source):
    with source.session() as s:
        yield s


def _head(source: SourceLinks) -> str:
    """The last GTID the server committed, read on a connection of its own."""
    with source.session() as other:
        return other.execute("SELECT @@gtid_binlog_pos")[0][0]


def _seq(gtid: str) -> int:
    domain, server, seq = gtid.split("-")
    assert (domain, server) == ("0", "1")
    return int(seq)


def test_add_twice_is_an_update_of_visibility_data_time_and_version(source, session):
    first = Link(1, LT, 2, 1, b"first", 1_000, 0)
    before = time.monotonic_ns()
    ack = session.add_link(first)
    after = time.monotonic_ns()
    assert (ack.found, ack.changed) == (False, True)
    assert before <= ack.sent_ns <= ack.acked_ns <= after
    assert ack.gtid == _head(source)  # the commit's own GTID
    assert session.get_link(1, LT, 2) == first
    second = Link(1, LT, 2, 0, b"second", 900, 7)  # older time, hidden: replaces all the same
    again = session.add_link(second)
    assert (again.found, again.changed) == (True, True)
    assert _seq(again.gtid) == _seq(ack.gtid) + 1 and again.gtid == _head(source)
    assert session.get_link(1, LT, 2) == second
    same = session.add_link(second)  # nothing to change: nothing committed to the log
    assert (same.found, same.changed, same.gtid) == (True, False, None)
    assert _head(source) == again.gtid


def test_update_of_a_missing_link_adds_it(source, session):
    link = Link(3, LT, 4, 1, b"updated", 2_000, 1)
    ack = session.update_link(link)
    assert (ack.found, ack.changed) == (False, True) and ack.gtid == _head(source)
    assert session.get_link(3, LT, 4) == link
    newer = link._replace(data=b"again", time=2_001)
    assert session.update_link(newer).found and session.get_link(3, LT, 4) == newer


def test_delete_hides_the_link_and_keeps_its_row(source, session):
    link = Link(5, LT, 6, 1, b"shown", 3_000, 2)
    session.add_link(link)
    ack = session.delete_link(5, LT, 6)
    assert (ack.found, ack.changed) == (True, True) and ack.gtid == _head(source)
    assert session.get_link(5, LT, 6) == link._replace(visibility=0)  # time, data, version kept
    twice = session.delete_link(5, LT, 6)  # already hidden: nothing written
    assert (twice.found, twice.changed, twice.gtid) == (True, False, None)
    missing = session.delete_link(5, LT, 7)
    assert (missing.found, missing.changed, missing.gtid) == (False, False, None)
    assert session.get_link(5, LT, 7) is None
    back = session.add_link(link._replace(time=3_001))  # a hidden link added again: shown
    assert back.found and session.get_link(5, LT, 6).visibility == 1
    gone = session.delete_link(5, LT, 6, expunge=True)
    assert (gone.found, gone.changed) == (True, True) and gone.gtid == _head(source)
    assert session.get_link(5, LT, 6) is None


DATA = [b"", b"'", b'"', b"\\", b"\\'\x00", b"%s%d", bytes(b for b in range(256)
                                                        if b not in b"\t\n\r")]


def test_data_bytes_round_trip(session):
    for id2, data in enumerate(DATA):
        session.add_link(Link(9, LT, id2, 1, data, 5_000, 0))
    assert [session.get_link(9, LT, id2).data for id2 in range(len(DATA))] == DATA


def test_gtids_rise_with_each_commit_over_several_sessions(source):
    with source.session() as a, source.session() as b:
        acks = [(a if i % 2 else b).add_link(Link(11, LT, i, 1, b"x", 6_000 + i, 0))
                for i in range(10)]
    seqs = [_seq(ack.gtid) for ack in acks]
    assert seqs == list(range(seqs[0], seqs[0] + 10))
    assert all(x.acked_ns <= y.sent_ns for x, y in zip(acks, acks[1:]))


def test_bad_addresses_are_clear_errors(source):
    with pytest.raises(ConfigError, match="must name a MySQL or MariaDB database"):
        SourceLinks("postgresql://u:secret@host/db", "linktable")
    with pytest.raises(ConfigError, match="not a SQLAlchemy URL"):
        SourceLinks("no url", "linktable")
    with pytest.raises(ConfigError):
        SourceLinks(source.url.render_as_string(hide_password=False), "bad-name;")
    url = source.url.set(port=1)  # nothing listens there
    with pytest.raises(ServiceError, match="source database at 127.0.0.1:1/source: cannot "
                                           "connect") as err:
        SourceLinks(url.render_as_string(hide_password=False), "linktable").session()
    assert source.url.password not in str(err.value)
    absent = SourceLinks(source.url.render_as_string(hide_password=False), "absent")
    with absent.session() as s, pytest.raises(ServiceError, match="table absent: .*exist"):
        s.add_link(Link(1, LT, 1, 1, b"", 1, 0))


def test_the_client_sends_the_mixs_reads_and_writes_and_every_write_lands(source):
    """`run_client` with the linkbench mix: the readers' operations on a store, the writer
    pool's writes on the source, each recorded with its GTID and instants, and the source's
    rows as the records say."""
    requests = RequestSpec(max_id=2001, seed=9)
    store = MemoryStore()
    store.write_links((Link(i, LT + i % 2, i + j, int(j % 4 != 1), b"x", 1000 + j, 0),
                       Origin(0, 0, j)) for i in range(1, 2001) for j in range(i % 7))
    links = SourceLinks(source.url.render_as_string(hide_password=False), "client_links")
    links.create_table()
    result = run_client(store, ClientSpec(requests, threads=2, total=3000, mix="linkbench",
                                          write_rate=400, writers=3), writes_to=links)
    assert result.completed == 3000 and result.errors == 0
    reads = {op: result.operations[op].count for op in READ_OPS}
    assert sum(reads.values()) == 3000 and all(reads.values())
    assert reads["get_link_list"] > reads["count_link"] > reads["multiget_link"]
    writes = result.writes
    assert writes.errors == 0 and writes.completed == len(writes.records) > 0
    assert {op: result.operations[op].count for op in WRITE_OPS} == dict(
        Counter(r.op for r in writes.records))
    for r in writes.records:
        assert r.intended_ns <= r.sent_ns <= r.acked_ns
        assert (r.gtid is not None) == r.changed  # the source logs every change
    seqs = sorted(int(r.gtid.split("-")[2]) for r in writes.records if r.gtid)
    assert len(set(seqs)) == len(seqs)  # one commit, one GTID
    with links.session() as session:
        assert check_writes_landed(session, writes.records) > 0
    doc = result.to_dict()
    assert doc["writes"]["completed"] == writes.completed and doc["spec"]["mix"] == "linkbench"
    assert set(doc["operations"]) == set(READ_OPS + WRITE_OPS)
