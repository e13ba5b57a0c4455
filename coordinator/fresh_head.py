"""The source's head as the queries of one process read it (docs/FRESHNESS.md, "The contract"):
the position of the last transaction committed at the source (``@@gtid_binlog_pos``), read
after a query arrived, so that its answer is not older than its arrival.

One read serves every query that arrived before it started: a query takes the last read if it
started at or after the query's arrival (with a tolerance of ``t`` seconds, after ``arrival -
t``), else waits for the read in flight if that one started late enough, else starts the next
read itself once none is in flight. Under a load of many threads the source sees about one read
per round trip however many queries arrive (the group commit of a log, read side).

The source's id is read with the connection (``debl_source_state``, ``debl.store.source_db``):
a load's dump of another source (another data directory, another table) cannot be kept fresh
from this one's head, and its queries get a ServiceError saying so.

Pitfall: instants are ``time.monotonic()``; a read that fails fails the queries waiting for it
(each may start the next: a source that is down costs each query a connection attempt).
"""

from __future__ import annotations

import threading
import time

import pymysql

from debl.config import Config
from debl.errors import ConfigError, QueryTimeout, ServiceError
from debl.position import parse_gtid
from debl.store import source_db

_READING = "reading the source's head for a fresh answer; fresh.mode=off answers without it"


class HeadReader:
    """The head of the source database of *config* (``source_db``), one read shared by the
    queries that arrived before it started (see the module). Thread-safe; ``close``."""

    def __init__(self, config: Config):
        self.config = config
        self._cond = threading.Condition()
        self._last: tuple[float, int] | None = None  # (started, seq) of the last read done
        self._reading: float | None = None  # when the read in flight started
        self._conn: pymysql.connections.Connection | None = None  # used by one read at a time
        self._source_id: str | None = None  # the source's id, read with the connection
        self.reads = 0

    def position(self, source: str, since: float, end: float | None, asked: str) -> int:
        """The sequence number of the source's head read by a read that started at or after
        the ``time.monotonic()`` *since*. ServiceError if the source cannot be read or is not
        *source*; QueryTimeout if the monotonic *end* passes while waiting for another
        query's read."""
        with self._cond:
            while True:
                last = self._last
                if last is not None and last[0] >= since:
                    self._check(source)
                    return last[1]
                if self._reading is None:
                    started = self._reading = time.monotonic()
                    break
                remaining = None if end is None else end - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise QueryTimeout(
                        f"{asked}: the source's head was being read for a fresh answer when "
                        f"its deadline passed ({source_db.where(self.config)} answers slowly; "
                        "pass a longer timeout)")
                self._cond.wait(remaining)
        try:
            seq, source_id = self._read()
        except BaseException:
            with self._cond:
                self._reading = None
                self._cond.notify_all()
            raise
        with self._cond:
            self._last, self._reading, self._source_id = (started, seq), None, source_id
            self.reads += 1
            self._cond.notify_all()
            self._check(source)
        return seq

    def _check(self, source: str) -> None:
        if self._source_id != source:
            table = self.config.source_db.table
            found = self._source_id or "(none: never initialised or dumped)"
            raise ServiceError(
                f"the load's dump is of source {source}, but {source_db.where(self.config)} "
                f"(table {table!r}) is source {found}: its head says nothing of the dump's "
                "positions. Point source_db at the dump's source, or set fresh.mode=off "
                "(docs/FRESHNESS.md, \"The contract\")")

    def _read(self) -> tuple[int, str | None]:
        """The head's seq and the source's id, on the kept connection; a connection that
        fails is dropped and the read tried once more on a new one (a server restarted since
        the last read)."""
        for attempt in (0, 1):
            fresh = self._conn is None
            try:
                conn = self._conn
                if conn is None:
                    conn = self._conn = source_db.connect(self.config)
                    with conn.cursor() as cur:
                        state = source_db.init_state(cur, self.config.source_db.table)
                    self._source_id = None if state is None else state.source_id
                with conn.cursor() as cur:
                    return parse_gtid(source_db.head(cur))[2], self._source_id
            except pymysql.err.MySQLError as exc:
                self._drop()
                if fresh or attempt:
                    raise ServiceError(f"{source_db.describe(exc, self.config)} "
                                       f"({_READING})") from exc
            except (ConfigError, ServiceError) as exc:  # no password, or not reachable
                self._drop()
                raise type(exc)(f"{exc} ({_READING})") from exc
            except BaseException:
                self._drop()
                raise
        raise AssertionError("unreachable")

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # noqa: BLE001 -- a broken connection may fail to close
                pass

    def close(self) -> None:
        with self._cond:
            self._drop()
