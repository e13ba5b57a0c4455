"""The MySQL (MariaDB) link store: LinkBench's link table, read through its covering index.

``get_link_list`` is one range read on the secondary key ``id1_type (id1, link_type, visibility,
time, id2, version, data)``: equality on the first three columns, a range on ``time``, and the
order ``time DESC, id2 DESC`` come straight from the index, so ``LIMIT offset+limit`` stops the
read early and no row is looked up in the primary key (the index covers every column). The read
says ``FORCE INDEX (id1_type)``, as LinkBench's does: left to itself MariaDB 10.11 picks the
primary key's ``(link_type, id1)`` prefix for short lists and sorts the rows, which cost more
server CPU per LinkBench request (docs/STORES.md, section 3, "The index, forced"). A table
without the index reads with the plain statement (tried with the index again every
``INDEX_RECHECK_S``): a bulk load between ``drop_secondary_index`` and ``add_secondary_index``,
or a table in the listing layout (``listing_table_ddl``, what the hot path loads), whose
primary key is itself ``get_link_list``'s order.

``count_link`` counts the visible rows on the same index's ``(id1, link_type, visibility)``
prefix (the table holds one row per key, its merge rule's winner: DeBL keeps no count table as
LinkBench does); ``multiget_link`` reads the primary key ``(link_type, id1, id2)`` for the id2s,
hidden rows included, as LinkBench's ``multigetLinks``.

Reads (``get_link_list``, ``count_link``, ``multiget_link``, ``scan_newest_first``) go through
mysqlclient (``MySQLdb``, C), every other statement through pymysql: the read path is what a
query client runs thousands of times a second, and there the pure-Python driver's CPU per query
(a multiple of mysqlclient's: docs/STORES.md, section 3, "Two drivers") is what limits a client
process. A read is one text-protocol round trip whose arguments are integers, formatted with
``%d`` after ``operator.index`` (so nothing but an integer reaches the SQL text, and no escaping
is needed).

Writes (``write_links``) apply the merge rule in SQL: ``INSERT ... ON DUPLICATE KEY UPDATE``
replaces a stored row only when ``(time, version)`` of the new row is ``>=`` the stored one.
This is the simple write path (tests, small batches); the hot bulk load uses ``LOAD DATA`` and
reuses ``link_table_ddl``, ``drop_secondary_index`` and ``add_secondary_index`` from here.

Pitfalls:

- One store object is shared by many query threads. Each call borrows a connection from a
  bounded pool (``mysql.pool_size``, ``debl.mysql.ConnectionPool``; one pool per driver) and
  gives it back,
  so the server sees at most that many connections per store however many threads come and go
  (a connection per thread, kept for the store's life, ran a thread-per-request caller into
  error 1040). A call that finds every connection busy waits up to ``POOL_WAIT_S``, then fails
  clearly. ``close()`` closes them all. pymysql connections are not thread-safe: a connection is
  used by one call at a time.
- Connections run in autocommit mode. Without it, InnoDB's repeatable-read snapshot taken by the
  first SELECT on a long-lived connection would hide every later write from that thread.
- In ``ON DUPLICATE KEY UPDATE`` the assignments run left to right and each one sees the columns
  already assigned. The merge condition reads ``time`` and ``version``, so those two are assigned
  last, ``time`` very last (see ``_UPSERT``).
- A dropped connection (server restart, idle timeout) is reopened once and the call retried;
  every call here is idempotent, writes included.
- Raw drivers, unlike the catalog's SQLAlchemy Core: on the same get_link_list, Core served
  fewer requests a second than raw pymysql on a held connection, and fewer still with a pooled
  connection per call; mysqlclient reads cost less client CPU than either (docs/STORES.md,
  section 3, "Why raw drivers here", has the figures).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from operator import index
from time import monotonic, perf_counter
from typing import Any, TypeVar

import MySQLdb
import pymysql
from tenacity import Retrying, retry_if_exception, stop_after_attempt

from debl.measure import request_cost
from debl.config import Config
from debl.config.values import check_identifier
from debl.errors import ServiceError
from debl.mysql import ConnectionPool, connect, connect_reader, describe
from debl.format.link import (DEFAULT_LIMIT, MAX_TIME, Link, Origin, check_ids, check_query,
                              merge_batch)
from debl.retry import retried
from debl.store.base import LinkStore

T = TypeVar("T")

INDEX_NAME = "id1_type"
_COLUMNS = "id1, link_type, id2, visibility, data, time, version"
_SCAN_PAGE = 10000
POOL_WAIT_S = 30.0  # a call waits this long for a free pooled connection
# A table found without id1_type (a listing layout, or a bulk load between dropping and
# building it) is read without forcing it, and tried with it again this often.
INDEX_RECHECK_S = 5.0

# Client-side error codes of a connection that is gone: reconnect once and retry.
_CONNECTION_LOST = {2006, 2013, 2014, 2045, 2055}
_UNKNOWN_TABLE = 1146
_NO_SUCH_INDEX = 1176


def _connection_lost(exc: BaseException) -> bool:
    """A connection the server no longer holds (restarted, killed, timed out), either driver's."""
    if isinstance(exc, (MySQLdb.InterfaceError, pymysql.err.InterfaceError)):
        return True
    return (isinstance(exc, (MySQLdb.OperationalError, pymysql.err.OperationalError))
            and bool(exc.args) and exc.args[0] in _CONNECTION_LOST)


# A MySQL connection lost: a new one and the call again, once (every call here is idempotent,
# writes included); any other error is the call's answer (docs/RELIABILITY.md, "Retries").
RETRY_LOST_CONNECTION = Retrying(retry=retry_if_exception(_connection_lost),
                                stop=stop_after_attempt(2), reraise=True)


_COLUMN_DDL = ("  id1 BIGINT UNSIGNED NOT NULL,\n"
               "  id2 BIGINT UNSIGNED NOT NULL,\n"
               "  link_type BIGINT UNSIGNED NOT NULL,\n"
               "  visibility TINYINT NOT NULL,\n"
               "  data VARBINARY(255) NOT NULL,\n"
               "  time BIGINT UNSIGNED NOT NULL,\n"
               "  version BIGINT UNSIGNED NOT NULL,\n")


# What the line format cannot carry (docs/DESIGN.md section 3), refused by the source
# database's table (debl.store.source_db): each check's name is what a client's error names.
_LINE_CHECKS = (
    ",\n  CONSTRAINT data_has_no_tab_lf_cr CHECK (LOCATE(X'09', data) = 0 AND "
    "LOCATE(X'0A', data) = 0 AND LOCATE(X'0D', data) = 0)"
    ",\n  CONSTRAINT visibility_is_0_or_1 CHECK (visibility IN (0, 1))"
    ",\n  CONSTRAINT numbers_fit_63_bits CHECK (GREATEST(id1, id2, link_type, time, version) "
    "<= 9223372036854775807)")


def link_table_ddl(table: str, engine: str = "InnoDB", with_secondary_index: bool = True,
                   line_checks: bool = False) -> str:
    """``CREATE TABLE IF NOT EXISTS`` for LinkBench's link table (names must be validated);
    with *line_checks*, refusing rows that no input line can hold (the source database's).

    ``version`` is BIGINT UNSIGNED (LinkBench: INT UNSIGNED) because the input format allows any
    64-bit version. ``data`` is VARBINARY, so bytes round-trip exactly whatever the charset.
    """
    index = (f",\n  KEY {INDEX_NAME} (id1, link_type, visibility, time, id2, version, data)"
             if with_secondary_index else "")
    checks = _LINE_CHECKS if line_checks else ""
    return (f"CREATE TABLE IF NOT EXISTS `{table}` (\n{_COLUMN_DDL}"
            f"  PRIMARY KEY (link_type, id1, id2){index}{checks}\n"
            f") ENGINE={engine} DEFAULT CHARSET=binary")


def listing_table_ddl(table: str, engine: str = "InnoDB") -> str:
    """``CREATE TABLE`` for a link table clustered in ``get_link_list``'s order: primary key
    ``(id1, link_type, time, id2)``, no secondary index (docs/STORES.md section 3, "The listing
    layout"). A list is one range of the clustered index, read backwards, hidden rows skipped
    as HBase's scan skips them.

    Pitfall: the key is unique per link only because ``(id1, link_type, id2)`` is: the server
    does not keep one row per link. Only a writer that sends each link once may fill it (the hot
    path's first and only run); the store's ``write_links`` upsert needs LinkBench's layout.
    """
    return (f"CREATE TABLE `{table}` (\n{_COLUMN_DDL}"
            "  PRIMARY KEY (id1, link_type, time, id2)\n"
            f") ENGINE={engine} DEFAULT CHARSET=binary")


def add_index_ddl(table: str) -> str:
    """The statement that builds the deferred secondary index."""
    return (f"ALTER TABLE `{table}` ADD KEY {INDEX_NAME} "
            "(id1, link_type, visibility, time, id2, version, data)")


def drop_index_ddl(table: str) -> str:
    return f"ALTER TABLE `{table}` DROP KEY {INDEX_NAME}"


# The merge rule against the stored row: the new row wins iff (time, version) >= stored. The
# condition reads the stored time and version, so they are assigned last (see module pitfalls):
# when `version` is assigned, `time` is still the stored one; when `time` is assigned, `version`
# already holds the new value only if the new row won, and then the condition reduces to
# new.time >= stored.time, which is true for a winner.
_WINS = "(VALUES(time), VALUES(version)) >= (time, version)"
_UPSERT = (
    "INSERT INTO `{table}` (" + _COLUMNS + ") VALUES (%s, %s, %s, %s, %s, %s, %s) "
    "ON DUPLICATE KEY UPDATE "
    f"visibility = IF({_WINS}, VALUES(visibility), visibility), "
    f"data = IF({_WINS}, VALUES(data), data), "
    f"version = IF({_WINS}, VALUES(version), version), "
    f"time = IF({_WINS}, VALUES(time), time)")


def _service_error(config: Config, exc: BaseException, table: str | None = None) -> ServiceError:
    code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else None
    if code == _UNKNOWN_TABLE:
        return ServiceError(f"MySQL at {config.mysql.host}:{config.mysql.port}: table "
                            f"{config.mysql.database}.{table} does not exist (create it with the "
                            "store's create_table() or reset(), or load data)")
    text = (describe(exc, config) if isinstance(exc, (pymysql.err.MySQLError, MySQLdb.MySQLError))
            else str(exc))
    if "debl stack" not in text and (code is None or code in _CONNECTION_LOST):
        text += " (is the server up? see `debl stack status`)"
    return ServiceError(text)


class _IndexMissing(Exception):
    """The statement forced an index the table does not have (now)."""


class MySQLStore(LinkStore):
    """LinkStore on a MySQL/MariaDB link table (``config.mysql.link_table``, or *table*).

    Thread-safe: each call borrows a connection from the store's bounded pool (*pool_size*, by
    default ``config.mysql.pool_size``).
    """

    def __init__(self, config: Config, table: str | None = None,
                 pool_size: int | None = None) -> None:
        self.config = config
        # a load's own table (debl.namespace) is longer than the configured base name
        self.table = config.mysql.link_table if table is None else check_identifier(table, "table")
        self.pool_size = pool_size or config.mysql.pool_size
        self._pool = ConnectionPool(lambda: connect(self.config), self.pool_size, POOL_WAIT_S)
        self._upsert = _UPSERT.format(table=self.table)
        self._readers = ConnectionPool(lambda: connect_reader(self.config), self.pool_size,
                                       POOL_WAIT_S)
        where = "WHERE id1 = %d AND link_type = %d "
        listing = ("AND visibility = 1 AND time BETWEEN %d AND %d "
                   "ORDER BY time DESC, id2 DESC LIMIT %d OFFSET %d")
        self._list_sql = (f"SELECT {_COLUMNS} FROM `{self.table}` FORCE INDEX ({INDEX_NAME}) "
                          + where + listing).encode()
        self._no_index_until = 0.0  # read without forcing id1_type until then (monotonic)
        self._list_sql_no_index = (f"SELECT {_COLUMNS} FROM `{self.table}` "
                                   + where + listing).encode()
        # count_link: the covering index's (id1, link_type, visibility) prefix, as a list's read
        count, visible = f"SELECT COUNT(*) FROM `{self.table}` ", "AND visibility = 1"
        self._count_sql = (count + f"FORCE INDEX ({INDEX_NAME}) " + where + visible).encode()
        self._count_sql_no_index = (count + where + visible).encode()
        # multiget_link: the primary key (link_type, id1, id2), hidden rows included
        self._multiget_sql = (f"SELECT {_COLUMNS} FROM `{self.table}` " + where
                              + "AND id2 IN (%s) ORDER BY id2")
        select = f"SELECT {_COLUMNS} FROM `{self.table}` " + where
        order = f" ORDER BY time DESC, id2 DESC LIMIT {_SCAN_PAGE}"
        self._scan_sql = (select + "AND time >= %d" + order).encode()
        self._scan_next_sql = (select + "AND time >= %d AND (time < %d OR (time = %d AND id2 < %d))"
                               + order).encode()
        # Every row of an id1 range by primary-key-like order (id1, link_type, id2), by keyset.
        by_key = f" ORDER BY id1, link_type, id2 LIMIT {_SCAN_PAGE}"
        span = f"SELECT {_COLUMNS} FROM `{self.table}` WHERE id1 BETWEEN %d AND %d"
        self._range_sql = (span + by_key).encode()
        self._range_next_sql = (span + " AND (id1, link_type, id2) > (%d, %d, %d)"
                                + by_key).encode()

    # ------------------------------------------------------------------ connections

    def _borrow(self, pool: ConnectionPool) -> Any:
        try:
            return pool.get()
        except TimeoutError:
            raise ServiceError(
                f"MySQL at {self.config.mysql.host}:{self.config.mysql.port}: all "
                f"{self.pool_size} connections of this store stayed busy for {POOL_WAIT_S:.0f}"
                " s; raise mysql.pool_size, or give the callers fewer threads") from None

    def _read(self, sql: bytes) -> tuple[tuple, ...]:
        """Rows of one SELECT on a pooled reader (mysqlclient); reconnect and retry once if it
        was lost. Raises _IndexMissing when the statement forces an index the table lacks.
        Its time, the wait for a reader included, is the calling thread's request's ``mysql``
        time (``debl.measure.request_cost``)."""
        started = perf_counter()
        try:
            return self._read_retried(sql)
        finally:
            request_cost.charge(request_cost.MYSQL, started)

    def _read_retried(self, sql: bytes) -> tuple[tuple, ...]:
        try:
            return retried(RETRY_LOST_CONNECTION, self._read_once, sql)
        except (MySQLdb.OperationalError, MySQLdb.InterfaceError) as exc:
            if exc.args and exc.args[0] == _NO_SUCH_INDEX:
                raise _IndexMissing() from exc
            raise _service_error(self.config, exc, self.table) from exc
        except MySQLdb.MySQLError as exc:  # the server refused the statement
            if exc.args and exc.args[0] == _UNKNOWN_TABLE:
                raise _service_error(self.config, exc, self.table) from exc
            raise

    def _read_once(self, sql: bytes) -> tuple[tuple, ...]:
        reader = self._borrow(self._readers)
        try:
            reader.query(sql)
            rows = reader.store_result().fetch_row(0)
        except MySQLdb.MySQLError as exc:
            if _connection_lost(exc):
                self._readers.discard(reader)  # a new connection next time
            else:  # the server refused the statement: still usable
                self._readers.put(reader)
            raise
        except BaseException:  # interrupted mid-call: its state is unknown, not lent again
            self._readers.discard(reader)
            raise
        self._readers.put(reader)
        return rows

    def _run(self, work: Callable[[pymysql.connections.Connection], T]) -> T:
        """Run *work* on a pooled connection; reconnect and retry once if it was lost."""
        try:
            return retried(RETRY_LOST_CONNECTION, self._run_once, work)
        except (pymysql.err.OperationalError, pymysql.err.InterfaceError) as exc:
            raise _service_error(self.config, exc, self.table) from exc
        except pymysql.err.ProgrammingError as exc:
            if exc.args and exc.args[0] == _UNKNOWN_TABLE:
                raise _service_error(self.config, exc, self.table) from exc
            raise

    def _run_once(self, work: Callable[[pymysql.connections.Connection], T]) -> T:
        conn = self._borrow(self._pool)
        try:
            result = work(conn)
        except pymysql.err.MySQLError as exc:
            if _connection_lost(exc):
                self._pool.discard(conn)  # a new connection next time
            else:  # the server refused the statement: still usable
                self._pool.put(conn)
            raise
        except BaseException:
            # Interrupted mid-call (a KeyboardInterrupt, a generator closed): its state on
            # the connection is unknown, so it is not lent again.
            self._pool.discard(conn)
            raise
        self._pool.put(conn)
        return result

    def _execute(self, sql: str, args: Any = None) -> list[tuple]:
        def work(conn: pymysql.connections.Connection) -> list[tuple]:
            with conn.cursor() as cur:
                cur.execute(sql, args)
                return list(cur.fetchall())
        return self._run(work)

    def close(self) -> None:
        """Close every idle connection; the store stays usable (a later call opens anew)."""
        self._pool.close()
        self._readers.close()

    # ------------------------------------------------------------------ schema

    def create_table(self, with_secondary_index: bool = True) -> None:
        """Create the link table if it does not exist (an existing table is left as it is)."""
        self._execute(link_table_ddl(self.table, self.config.mysql.engine, with_secondary_index))

    def table_exists(self) -> bool:
        rows = self._execute(
            "SELECT 1 FROM information_schema.tables WHERE table_schema = %s AND table_name = %s",
            (self.config.mysql.database, self.table))
        return bool(rows)

    def size_bytes(self) -> int:
        """What the table holds on disk, data and indexes (0 when it does not exist), as the
        server reports it."""
        rows = self._execute(
            "SELECT COALESCE(SUM(data_length + index_length), 0) FROM information_schema.tables "
            "WHERE table_schema = %s AND table_name = %s", (self.config.mysql.database, self.table))
        return int(rows[0][0])

    def has_secondary_index(self) -> bool:
        rows = self._execute(
            "SELECT 1 FROM information_schema.statistics WHERE table_schema = %s "
            "AND table_name = %s AND index_name = %s LIMIT 1",
            (self.config.mysql.database, self.table, INDEX_NAME))
        return bool(rows)

    def drop_secondary_index(self) -> None:
        """Drop ``id1_type`` if present (before a bulk load: the index is rebuilt once after)."""
        if self.has_secondary_index():
            self._execute(drop_index_ddl(self.table))

    def add_secondary_index(self) -> None:
        """Build ``id1_type`` if missing (after a bulk load). On a big table this takes long."""
        if not self.has_secondary_index():
            self._execute(add_index_ddl(self.table))

    def drop_table(self) -> None:
        self._execute(f"DROP TABLE IF EXISTS `{self.table}`")

    # ------------------------------------------------------------------ LinkStore

    def get_link_list(self, id1: int, link_type: int, min_time: int = 0,
                      max_time: int = MAX_TIME, offset: int = 0,
                      limit: int = DEFAULT_LIMIT) -> list[Link]:
        check_query(id1, link_type, min_time, max_time, offset, limit)
        args = (index(id1), index(link_type), max(index(min_time), 0),
                min(index(max_time), MAX_TIME), index(limit), index(offset))
        return list(map(Link._make, self._read_by_index(self._list_sql, self._list_sql_no_index,
                                                        args)))

    def count_link(self, id1: int, link_type: int) -> int:
        """One ``COUNT(*)`` of the visible rows on the covering index's prefix (the table
        holds one row per key: its merge rule's winner)."""
        check_ids(id1, link_type)
        rows = self._read_by_index(self._count_sql, self._count_sql_no_index,
                                   (index(id1), index(link_type)))
        return int(rows[0][0])

    def multiget_link(self, id1: int, link_type: int, id2s: Iterable[int]) -> list[Link]:
        """One read of the primary key for the id2s, in id2 order, hidden rows included."""
        id2s = check_ids(id1, link_type, id2s)
        if not id2s:
            return []
        listed = ", ".join("%d" % index(id2) for id2 in sorted(set(id2s)))
        sql = self._multiget_sql % (index(id1), index(link_type), listed)
        return list(map(Link._make, self._read(sql.encode())))

    def _read_by_index(self, forced: bytes, plain: bytes, args: tuple) -> tuple[tuple, ...]:
        """The rows of *forced* (a statement that forces id1_type) with *args*; on a table
        without the index, of *plain*, for ``INDEX_RECHECK_S`` before the index is tried again
        (docs/STORES.md, section 3, "The index, forced")."""
        if monotonic() >= self._no_index_until:
            try:
                return self._read(forced % args)
            except _IndexMissing:  # the listing layout, or a bulk load between its index steps
                self._no_index_until = monotonic() + INDEX_RECHECK_S
        return self._read(plain % args)

    def scan_newest_first(self, id1: int, link_type: int, min_time: int = 0) -> Iterator[Link]:
        """Pages of 10,000 rows by keyset (time, id2), so no connection is held between pages
        and an abandoned iterator leaves nothing open."""
        id1, link_type, min_time = index(id1), index(link_type), max(index(min_time), 0)
        rows = self._read(self._scan_sql % (id1, link_type, min_time))
        while rows:
            yield from map(Link._make, rows)
            if len(rows) < _SCAN_PAGE:
                return
            _, _, id2, _, _, time, _ = rows[-1]
            rows = self._read(self._scan_next_sql % (id1, link_type, min_time, time, time, id2))

    def scan_id1_range(self, k_lo: int, k_hi: int) -> Iterator[Link]:
        """Every row with k_lo <= id1 <= k_hi, hidden ones included, in (id1, link_type, id2)
        order; pages of 10,000 rows by keyset, as HBaseStore.scan_id1_range (what a check of a
        whole store against the reference reads). On a table in the listing layout every page
        sorts what is left of the range: fit for checks of test-sized tables, not for millions
        of rows."""
        k_lo, k_hi = index(k_lo), index(k_hi)
        rows = self._read(self._range_sql % (k_lo, k_hi))
        while rows:
            yield from map(Link._make, rows)
            if len(rows) < _SCAN_PAGE:
                return
            id1, link_type, id2 = rows[-1][:3]
            rows = self._read(self._range_next_sql % (k_lo, k_hi, id1, link_type, id2))

    def write_links(self, links: Iterable[tuple[Link, Origin]]) -> int:
        n, winners = merge_batch(links)
        if not winners:
            return n
        # Primary-key order: concurrent writers lock rows in one order and cannot deadlock.
        rows = [tuple(link) for link in sorted(winners.values(),
                                               key=lambda l: (l.link_type, l.id1, l.id2))]

        def work(conn: pymysql.connections.Connection) -> None:
            conn.begin()
            try:
                with conn.cursor() as cur:
                    # pymysql turns this into multi-row INSERTs of up to ~1 MB each.
                    cur.executemany(self._upsert, rows)
                conn.commit()
            except BaseException:
                try:
                    conn.rollback()
                except Exception:  # the connection is gone; the server rolled back
                    pass
                raise
        self._run(work)
        return n

    def count(self) -> int:
        return int(self._execute(f"SELECT COUNT(*) FROM `{self.table}`")[0][0])

    def reset(self) -> None:
        """Create the table if missing (with its secondary index), then empty it."""
        self.create_table()
        self._execute(f"TRUNCATE TABLE `{self.table}`")

