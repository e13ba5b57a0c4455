"""The source's change log (docs/FRESHNESS.md, "The change log"): the follower appends each
committed row change of the source's link table with the position it has reached, in one
transaction, so that a follower killed at any point resumes there and nothing is lost or
doubled; every process that answers reads the changes since a position, all of them (the
tailer) or those of one id1 range (a range's first use).

Pitfall: a read is one transaction, so the position captured and the changes it returns are of
one moment: every change at or before ``upto`` is in the answer, none after it.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterable

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError

from debl.catalog.base import CatalogEngine
from debl.catalog.records import Change, FollowerState
from debl.catalog.schema import changes_table, follower_table
from debl.errors import ChangesForgotten, DeblError, ServiceError
from debl.format.link import Link
from debl.mysql import describe

# The follower's append, built once: it runs for every batch, and a statement built per call
# is CPU on the path every fresh answer waits on (docs/FRESHNESS.md, "Measured: the
# follower's lag").
_INSERT_CHANGES = changes_table.insert()
_ADVANCE = follower_table.update().where(
    follower_table.c.source == sa.bindparam("b_source")).values(
    gtid=sa.bindparam("b_gtid"), seq=sa.bindparam("b_seq"),
    # None leaves the last captured commit as it is (a batch without changes).
    commit_ts=sa.func.coalesce(sa.bindparam("b_commit_ts", type_=sa.Double),
                               follower_table.c.commit_ts),
    captured_ts=sa.func.coalesce(sa.bindparam("b_captured_ts", type_=sa.Double),
                                 follower_table.c.captured_ts),
    heartbeat=sa.bindparam("b_heartbeat"), state=sa.bindparam("b_state"), error=None,
    changes=follower_table.c.changes + sa.bindparam("b_added"))
_COLUMNS = ("seq", "row_no", "id1", "link_type", "id2", "deleted", "visibility", "data", "time",
            "version", "commit_ts", "captured_ts")

# The tail's reads, built once (ChangeTail: a read every few milliseconds).
_FOLLOWER_AT = sa.select(follower_table.c.seq, follower_table.c.kept_from).where(
    follower_table.c.source == sa.bindparam("b_source"))
_SINCE = sa.select(*(changes_table.c[name] for name in _COLUMNS)).where(
    changes_table.c.source == sa.bindparam("b_source"),
    changes_table.c.seq > sa.bindparam("b_after"),
    changes_table.c.seq <= sa.bindparam("b_upto")).order_by(
    changes_table.c.seq, changes_table.c.row_no).limit(sa.bindparam("b_limit"))


class ChangesCatalog:
    """The change log and the follower's position: ``Catalog.changes``."""

    def __init__(self, engine: CatalogEngine):
        self._engine = engine
        self._transaction = engine.transaction

    # -- the follower's side

    def append(self, source: str, changes: Iterable[Change], gtid: str, seq: int,
               commit_ts: float | None, state: str = "following") -> None:
        """Add *changes* and move *source*'s follower to the position (*gtid*, *seq*) in one
        transaction: a follower that dies before it commits resumes from the old position and
        captures them again, never twice."""
        now = time.time()
        rows = [{**_row(c), "source": source} for c in changes]
        with self._transaction() as conn:
            if rows:
                conn.execute(_INSERT_CHANGES, rows)
            moved = conn.execute(_ADVANCE, {
                "b_source": source, "b_gtid": gtid, "b_seq": seq, "b_commit_ts": commit_ts,
                "b_captured_ts": now if rows else None, "b_heartbeat": now, "b_state": state,
                "b_added": len(rows)}).rowcount
            if not moved:  # rolled back with the transaction: nothing written
                _known_follower(conn, source)

    def start(self, source: str, gtid: str, seq: int) -> FollowerState:
        """The follower's row at its start: the position it has reached, or *gtid*/*seq* (the
        oldest kept dump's) for a source never followed; the row names this host and process."""
        now = time.time()
        with self._transaction() as conn:
            found = _follower(conn, source)
            if found is None:
                conn.execute(follower_table.insert().values(
                    source=source, gtid=gtid, seq=seq, heartbeat=now, state="catching-up",
                    host=socket.gethostname(), pid=os.getpid(), kept_from=seq))
            else:
                conn.execute(follower_table.update().where(follower_table.c.source == source)
                             .values(heartbeat=now, state="catching-up", error=None,
                                     host=socket.gethostname(), pid=os.getpid()))
            return _known_follower(conn, source)

    def skip_to(self, source: str, gtid: str, seq: int) -> FollowerState:
        """Move *source*'s follower forward to (*gtid*, *seq*) without capturing what lies
        between (no kept day needs it: the oldest kept dump is there); the log then holds every
        change past it only (``kept_from``). A position at or before the follower's changes
        nothing."""
        t = follower_table
        with self._transaction() as conn:
            conn.execute(t.update().where(t.c.source == source, t.c.seq < seq).values(
                gtid=gtid, seq=seq, kept_from=sa.func.greatest(t.c.kept_from, seq),
                heartbeat=time.time()))
            return _known_follower(conn, source)

    def report(self, source: str, state: str, error: str | None = None) -> None:
        """The follower's state and error (None: none), and a sign of life."""
        t = follower_table
        with self._transaction() as conn:
            conn.execute(t.update().where(t.c.source == source).values(
                state=state, error=error, heartbeat=time.time()))

    def saw_head(self, source: str, gtid: str, seq: int) -> None:
        """The source's head as the follower has just read it (``debl status`` shows how far
        behind it the follower is), and a sign of life."""
        t = follower_table
        now = time.time()
        with self._transaction() as conn:
            conn.execute(t.update().where(t.c.source == source).values(
                head_gtid=gtid, head_seq=seq, head_ts=now, heartbeat=now))

    # -- the readers' side

    def follower(self, source: str) -> FollowerState | None:
        with self._transaction() as conn:
            return _follower(conn, source)

    def get(self, source: str) -> FollowerState:
        """*source*'s follower, which must be recorded (``start``): DeblError if its row is gone
        (the catalog made anew meanwhile)."""
        with self._transaction() as conn:
            return _known_follower(conn, source)

    def followers(self) -> list[FollowerState]:
        """Every source's follower (``debl status``), by source."""
        t = follower_table
        with self._transaction() as conn:
            return [_state(row) for row in conn.execute(sa.select(t).order_by(t.c.source))]

    def since(self, source: str, after: int, limit: int = 10_000,
              dump: int | None = None) -> tuple[list[Change], int]:
        """The changes past position *after* in position order, at most about *limit* (whole
        transactions), and the position they reach: every change up to it is in the list.
        *dump*: the position of the reader's dump; ChangesForgotten if the log no longer
        holds every change past it (``_check_kept``). A reader that asks often takes a
        ``tail`` instead."""
        with self._transaction() as conn:
            return _read_since(conn, source, after, limit, dump)

    def tail(self, source: str, dump: int | None = None) -> "ChangeTail":
        """``since`` of *source* for one reader that asks often, on a connection of its own
        (``ChangeTail``)."""
        return ChangeTail(self._engine, source, dump)

    def in_range(self, source: str, id_lo: int, id_hi: int, after: int,
                 dump: int | None = None) -> tuple[list[Change], int]:
        """The changes of id1s in ``[id_lo, id_hi]`` past position *after*, in position order,
        and the position they reach (the follower's: every such change up to it is there).
        *dump*: as ``since``'s."""
        t = changes_table
        with self._transaction() as conn:
            state = _follower(conn, source)
            _check_kept(source, state, dump)
            captured = after if state is None else max(after, state.seq)
            rows = conn.execute(_select().where(t.c.source == source,
                                                t.c.id1.between(id_lo, id_hi), t.c.seq > after,
                                                t.c.seq <= captured)
                                .order_by(t.c.seq, t.c.row_no)).all()
            return [_change(r) for r in rows], captured

    def prune(self, source: str, below: int) -> int:
        """Forget *source*'s changes at or before position *below* (no kept day needs them: the
        oldest kept dump is at or past it); the number forgotten. Its follower's ``kept_from``
        moves up to *below*: a load of an older dump cannot be kept fresh any more. Another
        source's changes and follower are left as they are."""
        t, c = follower_table, changes_table
        with self._transaction() as conn:
            conn.execute(t.update().where(t.c.source == source)
                         .values(kept_from=sa.func.greatest(t.c.kept_from, below)))
            return conn.execute(c.delete().where(c.c.source == source, c.c.seq <= below)
                                ).rowcount


class ChangeTail:
    """``ChangesCatalog.since`` of one source for one reader (a process's tailer, which asks
    every few milliseconds while queries wait): one kept connection in autocommit, the
    follower's position read first and the changes only when it moved, so that a read with
    nothing new is one round trip. Not thread-safe; ``close``.

    Pitfall: in autocommit each statement sees its own moment; the changes read are still
    exactly those up to the position read first, since the follower writes its changes and
    its position in one transaction. A driver error drops the connection (the next read opens
    another) and is a ServiceError."""

    def __init__(self, engine: CatalogEngine, source: str, dump: int | None):
        self._engine, self.source, self.dump = engine, source, dump
        self._conn: Connection | None = None

    def read(self, after: int, limit: int = 10_000) -> tuple[list[Change], int]:
        """As ``ChangesCatalog.since(source, after, limit, dump)``."""
        if self._conn is None:
            self._conn = self._engine.kept_connection()
        try:
            return _read_since(self._conn, self.source, after, limit, self.dump)
        except DBAPIError as exc:
            self.close()
            raise ServiceError(describe(exc.orig or exc, self._engine.config)) from exc

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except DBAPIError:  # a broken connection may fail to close
                pass


def _read_since(conn: Connection, source: str, after: int, limit: int,
                dump: int | None) -> tuple[list[Change], int]:
    """``since`` on *conn*: the follower's position first, the changes only when it moved."""
    found = conn.execute(_FOLLOWER_AT, {"b_source": source}).first()
    if found is not None and dump is not None and found.kept_from > dump:
        _check_kept(source, _known_follower(conn, source), dump)
    captured = after if found is None else max(after, found.seq)
    if captured == after:
        return [], after
    rows = conn.execute(_SINCE, {"b_source": source, "b_after": after, "b_upto": captured,
                                 "b_limit": limit + 1}).all()
    if len(rows) <= limit:
        return [_change(r) for r in rows], captured
    last = rows[-1].seq  # cut at a transaction's start: whole transactions only
    kept = [r for r in rows if r.seq != last]
    if kept:
        return [_change(r) for r in kept], kept[-1].seq
    rows = conn.execute(_select().where(changes_table.c.source == source,
                                        changes_table.c.seq == last)
                        .order_by(changes_table.c.row_no)).all()
    return [_change(r) for r in rows], last


def _row(c: Change) -> dict:
    link = c.link
    return {"seq": c.seq, "row_no": c.row_no, "id1": c.id1, "link_type": c.link_type,
            "id2": c.id2, "deleted": link is None,
            "visibility": None if link is None else link.visibility,
            "data": None if link is None else link.data,
            "time": None if link is None else link.time,
            "version": None if link is None else link.version,
            "commit_ts": c.commit_ts, "captured_ts": c.captured_ts}


def _check_kept(source: str, state: FollowerState | None, dump: int | None) -> None:
    """ChangesForgotten if the change log of *source* no longer holds every change past the
    position *dump* (the follower's ``kept_from`` is past it: pruned, or lost by the source's
    log; docs/FRESHNESS.md, "Capture: `debl follow`"): a load of that dump cannot be kept
    fresh."""
    if dump is not None and state is not None and not state.keeps(dump):
        raise ChangesForgotten(
            f"the change log of source {source} holds the changes past seq {state.kept_from} "
            f"only, not those since this load's dump (seq {dump}): they were forgotten (no "
            "kept load needed them, or the source's log lost them), so the load cannot be "
            "kept fresh. Take a new dump and load it (`debl source dump DIR`, `debl load "
            "DIR`), or set fresh.mode=off to answer from the dump")


def _select() -> sa.Select:
    return sa.select(*(changes_table.c[name] for name in _COLUMNS))


def _change(r) -> Change:
    link = None if r.deleted else Link(r.id1, r.link_type, r.id2, r.visibility, bytes(r.data),
                                       r.time, r.version)
    return Change(r.seq, r.row_no, r.id1, r.link_type, r.id2, link, r.commit_ts, r.captured_ts)


def _follower(conn: Connection, source: str) -> FollowerState | None:
    t = follower_table
    row = conn.execute(sa.select(t).where(t.c.source == source)).first()
    return None if row is None else _state(row)


def _known_follower(conn: Connection, source: str) -> FollowerState:
    found = _follower(conn, source)
    if found is None:
        raise DeblError(f"the catalog holds no follower of source {source} any more (made anew "
                        "meanwhile?): start `debl follow` again")
    return found


def _state(row) -> FollowerState:
    return FollowerState(row.source, row.gtid, row.seq, row.commit_ts, row.captured_ts,
                         row.heartbeat, row.state, row.error, row.host, row.pid, row.head_gtid,
                         row.head_seq, row.head_ts, row.changes, row.kept_from)
