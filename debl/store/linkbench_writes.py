"""LinkBench's link writes against a source database: ``add_link``, ``update_link`` and
``delete_link`` with LinkBench's semantics (those of its MySQL store: docs/WORKLOAD.md,
"Writes"), on a MariaDB link table in LinkBench's layout (``PRIMARY KEY (link_type, id1,
id2)``: ``debl.store.mysql.link_table_ddl``) named by a SQLAlchemy URL and a table name
(docs/WORKLOAD.md, "Writes").

- ``add_link(link)``: one transaction, one statement: the row is inserted, or, when its key
  exists, its visibility, data, time and version become the link's (``INSERT ... ON DUPLICATE
  KEY UPDATE``). LinkBench sends two statements for an existing key (the upsert of visibility
  alone, then an ``UPDATE`` of the four columns) to keep its count table; DeBL keeps none, and
  the row after the transaction is the same.
- ``update_link(link)``: LinkBench's ``updateLink`` is its ``addLink`` (and its request loop
  calls ``addLink`` for an update): the same statement. Only the request generator tells them
  apart (docs/WORKLOAD.md, "Writes").
- ``delete_link(id1, link_type, id2, expunge=False)``: one transaction: the row read ``FOR
  UPDATE``; absent, or hidden and not expunged: nothing is written; else the link is hidden
  (``visibility = 0``, its time, data and version kept, as LinkBench does) or with *expunge*
  deleted.

Each write answers a ``WriteAck``: whether the key existed (LinkBench's return value), whether
the transaction changed a row, the GTID of its commit (``@@last_gtid`` on the same connection
after the commit; None when it changed nothing, so wrote nothing to the binary log, or the
server keeps no binary log), and ``time.monotonic_ns()`` just before its first statement was sent
and just after the commit was acknowledged: what a later check of fresh answers needs
(docs/FRESHNESS.md, "The contract").

Pitfalls:

- Raw pymysql, not SQLAlchemy's engine, though the address is a SQLAlchemy URL: SQLAlchemy's
  MySQL dialects always set ``CLIENT_FOUND_ROWS``, under which an upsert that finds its key
  reports 1 row, like an insert; LinkBench's semantics need the server's own count (1 inserted,
  2 updated, 0 unchanged).
- One ``SourceSession`` is one connection: not thread-safe; a thread per session.
- A deadlock or a lock wait timeout (another writer on the same key) rolls the transaction back;
  it is run again, at most ``RETRIES`` times, as LinkBench's MySQL store does
  (``RETRY_ROLLED_BACK``; docs/RELIABILITY.md, "Retries"). A
  connection lost during a write is not retried (its commit may have happened): the write
  fails with a ServiceError.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from operator import index
from typing import Any

import pymysql
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError
from tenacity import Retrying, retry_if_exception, stop_after_attempt

from debl.config.values import check_identifier
from debl.errors import ConfigError, ServiceError
from debl.format.link import Link, check_ids
from debl.retry import retried
from debl.store.mysql import link_table_ddl

RETRIES = 3
_RETRIED = {1205, 1213}  # lock wait timeout, deadlock: the server rolled the transaction back
_LOST = {2006, 2013}  # the connection broke: whether the commit happened is unknown
_SCHEMES = ("mysql", "mariadb")
_KEY = "id1 = %s AND link_type = %s AND id2 = %s"


def _rolled_back(exc: BaseException) -> bool:
    """A transaction the server rolled back for another writer on the same keys."""
    return (isinstance(exc, pymysql.err.OperationalError) and bool(exc.args)
            and exc.args[0] in _RETRIED)


# A write's transaction rolled back by a deadlock or a lock wait timeout: run again at once, at
# most RETRIES times more, as LinkBench does; a lost connection is not retried (its commit may
# have happened), nor any other error (docs/RELIABILITY.md, "Retries").
RETRY_ROLLED_BACK = Retrying(retry=retry_if_exception(_rolled_back),
                             stop=stop_after_attempt(RETRIES + 1), reraise=True)


@dataclass(frozen=True)
class WriteAck:
    """One write acknowledged by the source. ``found``: the key existed before (LinkBench's
    ``addLink`` returns it negated, ``updateLink`` and ``deleteLink`` as it is); ``changed``: a
    row was inserted, updated or deleted; ``gtid``: the commit's GTID (``domain-server-seq``),
    None if it changed nothing or the server keeps no binary log; ``sent_ns`` / ``acked_ns``:
    ``time.monotonic_ns()`` before the first statement and after the commit returned."""

    found: bool
    changed: bool
    gtid: str | None
    sent_ns: int
    acked_ns: int


class SourceLinks:
    """The source's link table at *url* (a SQLAlchemy URL, ``mysql+pymysql://user:password@
    host:port/database``) named *table*. Cheap: it opens nothing itself; ``session()`` opens a
    connection. Raises ConfigError for a URL that is not a MySQL/MariaDB one or a bad table
    name."""

    def __init__(self, url: str, table: str, timeout: float = 30.0) -> None:
        try:
            parsed = make_url(url)
        except ArgumentError as exc:
            raise ConfigError(f"the source database's URL is not a SQLAlchemy URL: {exc}") from None
        if parsed.get_backend_name() not in _SCHEMES or not parsed.database:
            raise ConfigError(
                f"the source database's URL {parsed.render_as_string(hide_password=True)!r} must "
                "name a MySQL or MariaDB database: mysql+pymysql://user:password@host:port/db")
        self.url = parsed
        self.table = check_identifier(table, "table")
        self.timeout = timeout
        self.where = (f"the source database at {parsed.host or 'localhost'}:"
                      f"{parsed.port or 3306}/{parsed.database}")

    def session(self) -> "SourceSession":
        """A connection of its own (ServiceError if the server cannot be reached)."""
        url = self.url
        try:
            conn = pymysql.connect(
                host=url.host or "localhost", port=url.port or 3306, user=url.username,
                password=url.password or "", database=url.database, autocommit=False,
                connect_timeout=min(10.0, self.timeout), read_timeout=self.timeout,
                write_timeout=self.timeout, charset="utf8mb4",
                unix_socket=url.query.get("unix_socket"))
        except pymysql.err.MySQLError as exc:
            raise ServiceError(f"{self.where}: cannot connect: {exc.args[-1]} (is it up? is "
                               "the URL right?)") from exc
        return SourceSession(self, conn)

    def create_table(self, engine: str = "InnoDB") -> None:
        """LinkBench's link table, if it does not exist (a scratch source: tests, demos)."""
        with self.session() as s:
            s.execute(link_table_ddl(self.table, engine))


class SourceSession:
    """One connection to the source's link table; LinkBench's writes, each one transaction."""

    def __init__(self, links: SourceLinks, conn: pymysql.connections.Connection) -> None:
        self.links, self.conn = links, conn
        t = links.table
        self._upsert = (f"INSERT INTO `{t}` (id1, id2, link_type, visibility, data, time, "
                        "version) VALUES (%s, %s, %s, %s, %s, %s, %s) ON DUPLICATE KEY UPDATE "
                        "visibility = VALUES(visibility), data = VALUES(data), "
                        "time = VALUES(time), version = VALUES(version)")
        self._locked = f"SELECT visibility FROM `{t}` WHERE {_KEY} FOR UPDATE"
        self._hide = f"UPDATE `{t}` SET visibility = 0 WHERE {_KEY}"
        self._expunge = f"DELETE FROM `{t}` WHERE {_KEY}"
        self._get = (f"SELECT id1, link_type, id2, visibility, data, time, version FROM `{t}` "
                     f"WHERE {_KEY}")

    def __enter__(self) -> "SourceSession":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        try:
            self.conn.close()
        except pymysql.err.Error:  # already closed, or the server is gone: nothing to end
            pass

    def execute(self, sql: str, args: Any = None) -> list[tuple]:
        """One statement in a transaction of its own; its rows."""
        return self._transaction(lambda cur: (cur.execute(sql, args), list(cur.fetchall()))[1])

    def add_link(self, link: Link) -> WriteAck:
        """LinkBench's addLink: insert *link*, or give its key the link's visibility, data,
        time and version. ``found``: the key existed (an update, not an add)."""
        id1, link_type, id2, visibility, data, time_ms, version = link
        check_ids(id1, link_type, (id2,))
        if visibility not in (0, 1):
            raise ValueError(f"visibility must be 0 or 1, not {visibility}")
        row = (index(id1), index(id2), index(link_type), visibility, bytes(data),
               index(time_ms), index(version))

        def work(cur: Any) -> tuple[bool, bool]:
            # affected rows without CLIENT_FOUND_ROWS: 1 inserted, 2 updated, 0 unchanged
            n = cur.execute(self._upsert, row)
            return n != 1, n != 0
        return self._write(work)

    def update_link(self, link: Link) -> WriteAck:
        """LinkBench's updateLink: its addLink (``found``: the link existed, so it was
        updated)."""
        return self.add_link(link)

    def delete_link(self, id1: int, link_type: int, id2: int, expunge: bool = False) -> WriteAck:
        """LinkBench's deleteLink: hide the link (visibility 0; time, data, version kept), or
        with *expunge* delete its row; nothing if it is absent, or hidden and not expunged."""
        key = (index(id1), index(link_type), index(id2))
        check_ids(id1, link_type, (id2,))

        def work(cur: Any) -> tuple[bool, bool]:
            cur.execute(self._locked, key)
            found = cur.fetchone()
            if found is None or (found[0] == 0 and not expunge):
                return found is not None, False
            cur.execute(self._expunge if expunge else self._hide, key)
            return True, True
        return self._write(work)

    def get_link(self, id1: int, link_type: int, id2: int) -> Link | None:
        """The row of one key as the source holds it now (LinkBench's getLink), hidden or
        not; None if it has none."""
        rows = self.execute(self._get, (index(id1), index(link_type), index(id2)))
        if not rows:
            return None
        id1, link_type, id2, visibility, data, time_ms, version = rows[0]
        return Link(id1, link_type, id2, visibility, bytes(data), time_ms, version)

    def _write(self, work: Any) -> WriteAck:
        """Run *work* (cursor -> (found, changed)) as one transaction; its GTID if it changed a
        row. The times bracket the whole transaction, retries included."""
        sent = time.monotonic_ns()
        found, changed = self._transaction(work)
        acked = time.monotonic_ns()
        gtid = None
        if changed:
            try:
                with self.conn.cursor() as cur:
                    cur.execute("SELECT @@last_gtid")
                    row = cur.fetchone()  # one row
            except pymysql.err.MySQLError as exc:
                raise ServiceError(f"{self.links.where}: the write committed, but its GTID "
                                   f"could not be read ({exc.args[-1]})") from exc
            gtid = (row[0] if row else None) or None  # '' without a binary log
        return WriteAck(found, changed, gtid, sent, acked)

    def _transaction(self, work: Any) -> Any:
        try:
            return retried(RETRY_ROLLED_BACK, self._transaction_once, work)
        except pymysql.err.OperationalError as exc:
            code = exc.args[0] if exc.args else None
            lost = " (the connection is lost: is the source up?)" if code in _LOST else ""
            raise ServiceError(f"{self.links.where}: {exc.args[-1]}{lost}") from exc
        except pymysql.err.MySQLError as exc:
            raise ServiceError(f"{self.links.where}, table {self.links.table}: "
                               f"{exc.args[-1] if exc.args else exc}") from exc

    def _transaction_once(self, work: Any) -> Any:
        try:
            self.conn.begin()
            with self.conn.cursor() as cur:
                result = work(cur)
            self.conn.commit()
            return result
        except BaseException:  # rolled back, whatever broke it (the server may have already)
            self._rollback()
            raise

    def _rollback(self) -> None:
        try:
            self.conn.rollback()
        except pymysql.err.Error:  # the connection is gone: the server rolled back
            pass
