"""Connections to MySQL (MariaDB): one function that every role uses, errors made readable.

Two drivers: pymysql (pure Python) for everything, and mysqlclient (``MySQLdb``, libmariadb in
C) for the link store's read path only (``connect_reader``), where the driver's CPU per query
decides how many queries a client process can send, and mysqlclient spends a fraction of
pymysql's (docs/STORES.md, section 3, "Two drivers", has the measurement).

Pitfalls:

- ``LOAD DATA LOCAL INFILE`` needs ``local_infile=True`` on the client *and* the server
  (``debl stack up`` starts MariaDB with ``--local-infile=1``).
- With LOCAL INFILE on, the *server* names the file the client sends, in reply to any
  statement: a hostile or hijacked server could ask for any file the client can read. Only the
  hot path's connection has it on, and that connection sends only the files DeBL chose for the
  statement at hand (``LocalFilesConnection.allow``); every other connection has it off, the
  mysqlclient reader explicitly (libmariadb would otherwise send any file asked for).
- Connections are not thread-safe: one per thread (or per Spark partition), never shared at
  once; ``ConnectionPool`` lends each to one caller at a time.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar, cast

import MySQLdb
import pymysql
from pymysql.protocol import LoadLocalPacketWrapper

from debl.config import Config
from debl.errors import ServiceError


# Bulk statements (the hot path's merge and index build) send nothing back until they end:
# minutes on a large input. Their reads wait this long; everything else waits service_timeout.
BULK_READ_TIMEOUT_S = 3600


class _ChosenFileResult(pymysql.connections.MySQLResult):
    """A result that sends a LOCAL INFILE only if it is a file its connection allows."""

    def _read_load_local_packet(self, first_packet) -> None:
        conn = cast("LocalFilesConnection", self.connection)  # the only connection that uses it
        asked = LoadLocalPacketWrapper(first_packet).filename
        if asked not in conn.allowed_files:
            conn.write_packet(b"")  # no data: the statement loads nothing
            conn._read_packet()  # the server's answer to that (raises if it is an error)
            raise ServiceError(f"MySQL at {conn.host}:{conn.port} asked for the local file "
                               f"{asked.decode(errors='replace')!r}, which DeBL did not give it "
                               "to load: refused (is this the server DeBL should talk to?)")
        super()._read_load_local_packet(first_packet)  # type: ignore[misc]  # not in the stubs


class LocalFilesConnection(pymysql.connections.Connection):
    """A pymysql connection with LOCAL INFILE on that sends only the files ``allow`` named
    for the statement at hand (none by default)."""

    allowed_files: frozenset[bytes] = frozenset()

    def allow(self, *paths: str) -> None:
        """Let the next statements send these files, and only these."""
        self.allowed_files = frozenset(os.fsencode(p) for p in paths)

    def _read_query_result(self, unbuffered: bool = False) -> int:
        # pymysql 1.x's own method, with a result class that checks the file name.
        self._result = None
        result = _ChosenFileResult(self)
        if unbuffered:
            result.init_unbuffered_query()
        else:
            result.read()
        self._result = result
        if result.server_status is not None:
            self.server_status = result.server_status
        return result.affected_rows  # type: ignore[return-value]  # pymysql's own returns it


def connect(config: Config, *, local_infile: bool = False, autocommit: bool = True,
            database: bool = True, bulk: bool = False) -> pymysql.connections.Connection:
    """A new connection to the configured MySQL, or a ServiceError that says what is wrong.
    With *local_infile*, a LocalFilesConnection: call ``allow(path)`` before its LOAD DATA.

    Every read and write on it fails after ``service_timeout`` seconds without an answer
    (a dead server fails it at once: its socket closes); with *bulk*, reads wait up to
    ``BULK_READ_TIMEOUT_S`` for statements that run long (a stalled ``LOAD DATA`` still fails
    after ``service_timeout``: its writes stop). A missing database is created (when the user
    may), so that a new ``mysql.database`` setting is all it takes to keep a second dataset
    apart."""
    timeout = config.service_timeout

    def attempt(db: str | None) -> pymysql.connections.Connection:
        cls = LocalFilesConnection if local_infile else pymysql.connections.Connection
        return cls(
            host=config.mysql.host, port=config.mysql.port, user=config.mysql.user,
            password=config.mysql_secret, database=db, local_infile=local_infile,
            autocommit=autocommit, connect_timeout=min(10.0, timeout),
            read_timeout=BULK_READ_TIMEOUT_S if bulk else timeout, write_timeout=timeout,
            charset="utf8mb4")

    try:
        try:
            return attempt(config.mysql.database if database else None)
        except pymysql.err.OperationalError as exc:
            if not (database and exc.args and exc.args[0] == 1049):
                raise
            with attempt(None) as conn, conn.cursor() as cur:
                cur.execute(f"CREATE DATABASE IF NOT EXISTS `{config.mysql.database}` "
                            "CHARACTER SET utf8mb4")
            return attempt(config.mysql.database)
    except pymysql.err.OperationalError as exc:
        raise ServiceError(describe(exc, config)) from exc


def connect_reader(config: Config) -> MySQLdb.Connection:
    """A new mysqlclient connection for reads (autocommit: each statement sees the latest
    commits), or a ServiceError that says what is wrong. The database must exist. Reads and
    writes fail after ``service_timeout`` (whole seconds, at least 1) without an answer."""
    timeout = max(1, round(config.service_timeout))
    try:
        return MySQLdb.connect(
            host=config.mysql.host, port=config.mysql.port, user=config.mysql.user,
            password=config.mysql_secret, database=config.mysql.database, autocommit=True,
            connect_timeout=min(10, timeout), read_timeout=timeout, write_timeout=timeout,
            # local_infile: libmariadb's default sends any file a server asks for
            charset="utf8mb4", local_infile=0)
    except MySQLdb.MySQLError as exc:
        raise ServiceError(describe(exc, config)) from exc


def describe(exc: BaseException, config: Config) -> str:
    """A user's message for a pymysql or mysqlclient error (both carry ``(code, message)``)."""
    code = exc.args[0] if exc.args else None
    where = f"MySQL at {config.mysql.host}:{config.mysql.port}"
    if code in (2002, 2003, 2013):
        return f"{where} is not reachable ({exc.args[1]}); is the stack up? (`debl stack status`)"
    if code == 1045:
        return (f"{where} refused user {config.mysql.user!r}: wrong password "
                f"(check DEBL_MYSQL_PASSWORD or {config.mysql_password_file})")
    if code == 1049:
        return f"{where} has no database {config.mysql.database!r}; `debl stack up` creates it"
    if code == 1044:
        return (f"{where} denies user {config.mysql.user!r} access to database "
                f"{config.mysql.database!r} (grant it, or choose another mysql.database)")
    return f"{where}: {exc.args[-1] if exc.args else exc}"


@contextlib.contextmanager
def mysql_errors(config: Config, doing: str) -> Iterator[None]:
    """Within: a MySQL error (the server failed a statement, or the connection broke) becomes a
    ServiceError that says what DeBL was doing, so a load records it and says how to resume."""
    try:
        yield
    except (pymysql.err.MySQLError, MySQLdb.MySQLError) as exc:
        raise ServiceError(f"{describe(exc, config)} (during {doing})") from exc


# the pool of either driver (names as strings: MySQLdb.connections is imported on first connect)
C = TypeVar("C", "pymysql.connections.Connection", "MySQLdb.connections.Connection")


class ConnectionPool(Generic[C]):
    """At most *size* connections made by *factory*, lent to one caller at a time; idle ones are
    reused newest first. ``get`` waits up to *timeout* seconds for a free one, then raises
    TimeoutError. A connection that broke goes back through ``discard``, which frees its slot.

    Why not SQLAlchemy's QueuePool: its checkout and checkin cost many times this pool's, on
    every link read (docs/STORES.md, section 3, "Connections", has the measurement).
    """

    def __init__(self, factory: Callable[[], C], size: int, timeout: float):
        self.size, self.timeout = size, timeout
        self._factory: Callable[[], C] = factory
        self._slots = threading.BoundedSemaphore(size)
        self._lock = threading.Lock()
        self._idle: list[C] = []

    def get(self) -> C:
        if not self._slots.acquire(timeout=self.timeout):
            raise TimeoutError(f"no free connection in {self.timeout:.0f} s")
        with self._lock:
            if self._idle:
                return self._idle.pop()
        try:
            return self._factory()
        except BaseException:
            self._slots.release()
            raise

    def put(self, conn: C) -> None:
        with self._lock:
            self._idle.append(conn)
        self._slots.release()

    def discard(self, conn: C) -> None:
        _close_quietly(conn)
        self._slots.release()

    def close(self) -> None:
        """Close the idle connections (lent ones come back and are closed by the next call)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            _close_quietly(conn)


def _close_quietly(conn: pymysql.connections.Connection | MySQLdb.connections.Connection
                   ) -> None:
    try:
        conn.close()
    except Exception:  # already broken: nothing left to release
        pass
