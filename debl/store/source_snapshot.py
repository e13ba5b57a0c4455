"""One consistent snapshot of the source's link table and its position in the binary log, what
``debl source dump`` reads (docs/FRESHNESS.md, "Positions").

``START TRANSACTION WITH CONSISTENT SNAPSHOT`` (InnoDB, repeatable read) fixes what every read
of the transaction sees; MariaDB gives the binary log's file and offset of that very moment as
the status ``binlog_snapshot_file`` / ``binlog_snapshot_position``, which ``BINLOG_GTID_POS``
turns into a GTID: the snapshot holds exactly the transactions up to it, whatever commits
meanwhile (tests/test_source_db.py writes while it dumps and checks it).

Rows are streamed (an unbuffered cursor of mysqlclient, C: the dump's cost is per row) in id1
order, read from the covering index ``id1_type``: never the whole table in memory.

Pitfalls:

- The snapshot's transaction must stay open until the last row is read, on one connection; it
  is read-only and holds no lock, but it keeps InnoDB from purging the row versions it may
  see: a long dump of a busy source makes the server's undo log grow meanwhile.
- A server that waits on a client which does not read gives up after ``net_write_timeout``:
  raised for the snapshot's session, so that a dump writing slowly is not cut off.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import MySQLdb
import MySQLdb.cursors

from debl.config import Config
from debl.errors import ServiceError
from debl.store.source_db import one_domain, where

ROWS_PER_FETCH = 10_000
NET_WRITE_TIMEOUT_S = 3600  # seconds the server waits for the dump to read on
_COLUMNS = "id1, link_type, id2, visibility, data, time, version"  # a line's order


@dataclass(frozen=True)
class Extent:
    """How many rows the snapshot holds, and their least and greatest ``time`` (None: none)."""

    rows: int
    min_time: int | None
    max_time: int | None


class Snapshot:
    """The source's link table at one position: ``gtid`` (set on ``with``), ``extent()``,
    ``rows()``. Use with ``with``; one reader at a time."""

    def __init__(self, config: Config):
        self.config = config
        self.table = config.source_db.table
        self.gtid = ""
        self._conn: MySQLdb.Connection | None = None

    def __enter__(self) -> "Snapshot":
        db, timeout = self.config.source_db, max(1, round(self.config.service_timeout))
        try:
            self._conn = MySQLdb.connect(
                host=db.host, port=db.port, user=db.user, password=self.config.source_db_secret,
                database=db.database, connect_timeout=min(10, timeout), read_timeout=timeout,
                write_timeout=timeout, charset="utf8mb4", local_infile=0)
            cur = self._conn.cursor()
            cur.execute(f"SET SESSION net_write_timeout = {NET_WRITE_TIMEOUT_S}")
            cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
            cur.execute("SHOW STATUS LIKE 'binlog_snapshot_%'")
            status = {name.lower(): value for name, value in cur.fetchall()}
            cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (status["binlog_snapshot_file"],
                                                           int(status["binlog_snapshot_position"])))
            position = cur.fetchone()[0]
        except MySQLdb.MySQLError as exc:
            self.__exit__()
            raise ServiceError(f"{where(self.config)}: {exc.args[-1]} (while taking the "
                               "dump's snapshot)") from exc
        except BaseException:
            self.__exit__()
            raise
        self.gtid = one_domain(position.decode() if isinstance(position, bytes) else position,
                               "the position of the dump's snapshot")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._conn is not None:
            try:
                self._conn.close()  # ends the transaction: it wrote nothing
            except MySQLdb.MySQLError:
                pass
            self._conn = None

    def extent(self) -> Extent:
        """The snapshot's row count and time bounds (one pass over an index on the server)."""
        cur = self._connection().cursor()
        self._run(cur, f"SELECT COUNT(*), MIN(time), MAX(time) FROM `{self.table}`")
        return Extent(*cur.fetchone())

    def rows(self, per_fetch: int = ROWS_PER_FETCH) -> Iterator[list[tuple]]:
        """The snapshot's rows in id1 order, ``per_fetch`` at a time, each a tuple in the line's
        order: id1, link_type, id2, visibility, data, time, version."""
        cur = self._connection().cursor(MySQLdb.cursors.SSCursor)
        try:
            self._run(cur, f"SELECT {_COLUMNS} FROM `{self.table}` FORCE INDEX (id1_type) "
                           "ORDER BY id1")
            while True:
                try:
                    batch = cur.fetchmany(per_fetch)
                except MySQLdb.MySQLError as exc:
                    raise self._failed(exc) from exc
                if not batch:
                    return
                yield list(batch)
        finally:
            cur.close()

    def _connection(self) -> MySQLdb.Connection:
        if self._conn is None:
            raise RuntimeError("a snapshot is read inside its `with`, which takes it")
        return self._conn

    def _run(self, cur, sql: str) -> None:
        try:
            cur.execute(sql)
        except MySQLdb.MySQLError as exc:
            raise self._failed(exc) from exc

    def _failed(self, exc: MySQLdb.MySQLError) -> ServiceError:
        return ServiceError(f"{where(self.config)}: {exc.args[-1]} (while the dump read the "
                            f"table `{self.table}`); nothing of the dump is kept: run it again")
