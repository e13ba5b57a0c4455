"""What the follower writes, without the stack (docs/FRESHNESS.md, "Changes" and "Capture:
`debl follow`"): a transaction's row changes as changes, the batches of transactions, where the
follower starts, and its server id as a replica."""

from __future__ import annotations

import pytest

from debl.catalog import LoadRecord
from debl.config import Config
from debl.errors import ConfigError, DeblError
from debl.format.link import Link
from debl.position import DumpPosition
from debl.store.source_binlog import Committed, RowChange, replica_server_id
from loaders.capture import Batch, changes_of
from loaders.follower import kept_position

A = Link(1, 2, 3, 1, b"a\x00\xff", 10, 1)
B = Link(1, 2, 3, 0, b"a\x00\xff", 10, 1)  # A hidden
C = Link(1, 2, 4, 1, b"c", 11, 2)  # A's row under another key


def _tx(seq: int, *rows: RowChange) -> Committed:
    return Committed(f"0-1-{seq}", seq, 1000.0 + seq, rows)


def _shown(changes) -> list[tuple]:
    return [(c.seq, c.row_no, c.key, c.link, c.commit_ts, c.captured_ts) for c in changes]


def test_inserts_updates_and_deletes_become_rows_and_deletions_in_log_order():
    tx = _tx(7, RowChange(None, A), RowChange(A, B), RowChange(B, None))
    assert _shown(changes_of(tx, 5.0)) == [
        (7, 0, A.key, A, 1007.0, 5.0), (7, 1, A.key, B, 1007.0, 5.0),
        (7, 2, A.key, None, 1007.0, 5.0)]


def test_an_update_that_moves_a_key_deletes_the_old_key_then_writes_the_new():
    tx = _tx(8, RowChange(A, C), RowChange(None, A))
    assert _shown(changes_of(tx, 5.0)) == [
        (8, 0, A.key, None, 1008.0, 5.0), (8, 1, C.key, C, 1008.0, 5.0),
        (8, 2, A.key, A, 1008.0, 5.0)]


def test_a_transaction_of_other_tables_gives_no_change():
    assert changes_of(_tx(9), 5.0) == []


def test_a_batch_holds_whole_transactions_up_to_its_limit_and_is_due_after_its_wait():
    batch = Batch(limit=3, wait=0.5)
    assert not batch and not batch.due(0.0)
    batch.add(_tx(1, RowChange(None, A)), now=10.0)
    batch.add(_tx(2), now=10.1)  # no change: the position only
    assert not batch.due(10.4) and batch.due(10.5) and batch.left(10.2) == pytest.approx(0.3)
    assert batch.due(10.1, nothing_ahead=True)  # a group commit: nothing more read ahead
    assert batch.due(10.1, target=2) and not batch.due(10.1, target=3)  # reaches the target
    two = _tx(3, RowChange(A, C))  # a moved key: two changes
    assert batch.fits(two)
    batch.add(two, now=10.2)
    assert batch.due(10.2)  # full: 3 changes
    assert not batch.fits(_tx(4, RowChange(None, A)))
    assert batch.last.seq == 3 and batch.commit_ts == 1003.0
    assert [(c.seq, c.row_no) for c in batch.take(20.0)] == [(1, 0), (3, 0), (3, 1)]
    assert not batch and batch.changes == 0
    big = _tx(5, *[RowChange(None, Link(i, 1, 1, 1, b"", 1, 1)) for i in range(10)])
    assert batch.fits(big)  # an empty batch takes any transaction whole


def test_a_batch_without_changes_has_no_commit_time():
    batch = Batch(limit=10, wait=1.0)
    batch.add(_tx(1), now=0.0)
    batch.add(_tx(2), now=0.0)
    assert batch.commit_ts is None and batch.take(1.0) == [] and batch.changes == 0


def _load(load_id: str, position: DumpPosition | None, dropped: float | None = None):
    return LoadRecord(load_id, "debl", "/x", "up", None, 1, {}, 0.0, None, None, None, None, 0,
                      None, None, dropped=dropped,
                      dump_gtid=position.gtid if position else None,
                      dump_source=position.source if position else None)


def test_the_follower_starts_at_the_oldest_kept_dump_of_its_source():
    old, new = DumpPosition("0-1-10", "S"), DumpPosition("0-1-20", "S")
    loads = [_load("L3", new), _load("L2", None), _load("L1", DumpPosition("0-1-5", "S"),
                                                        dropped=1.0),
             _load("L0", old)]
    assert kept_position(loads, "S", "here") == old
    with pytest.raises(DeblError, match="nothing to follow.*debl source dump DIR"):
        kept_position([_load("L2", None), loads[2]], "S", "here")
    with pytest.raises(DeblError, match="dumped from source T, but here is source S"):
        kept_position([_load("L4", DumpPosition("0-1-3", "T"))], "S", "here")


def test_a_replica_has_a_server_id_of_its_own():
    config = Config()
    derived = replica_server_id(config)
    assert 2 <= derived < 2**31 and derived != config.source_db.server_id
    other = replica_server_id(config.replace(mysql_database="debl_other"))
    assert other != derived  # two datasets' followers of one source
    assert replica_server_id(config.replace(source_db_follower_server_id=77)) == 77
    with pytest.raises(ConfigError, match="follower_server_id"):
        Config(source_db_follower_server_id=1)  # the source's own
