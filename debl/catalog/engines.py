"""Connections to the catalog's MySQL: one SQLAlchemy ``Engine`` per process and account, and
MySQL named locks, each on a session of its own (the pitfalls are in ``debl.catalog``'s
docstring)."""

from __future__ import annotations

import os
import threading

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from debl.config import Config
from debl.errors import ServiceError
from debl.mysql import connect, describe

_engines: dict[tuple, Engine] = {}
_engines_lock = threading.Lock()


def engine_for(config: Config) -> Engine:
    """The process's Engine for *config*'s MySQL account and database (made on first use).

    Its connections come from ``debl.mysql.connect`` (the one place that knows the connection
    settings, creates a missing database and turns errors into ServiceErrors), with autocommit
    off, at READ COMMITTED. ``pool_pre_ping`` replaces a connection the server has closed (a
    restart, a KILL, an idle timeout) before a method gets it."""
    key = (config.mysql.host, config.mysql.port, config.mysql.user, config.mysql.database,
           config.mysql_secret)
    with _engines_lock:
        engine = _engines.get(key)
        if engine is None:
            engine = sa.create_engine("mysql+pymysql://",
                                      creator=lambda: connect(config, autocommit=False),
                                      isolation_level="READ COMMITTED", pool_pre_ping=True,
                                      pool_recycle=3600)
            _engines[key] = engine
        return engine


def _forget_engines() -> None:
    for engine in _engines.values():
        engine.dispose(close=False)  # the parent still uses those sockets
    _engines.clear()


os.register_at_fork(after_in_child=_forget_engines)


class NamedLock:
    """A MySQL named lock, held by its own session until ``release`` (or the process ends)."""

    def __init__(self, name: str, conn: Connection):
        self.name = name
        self._conn = conn

    def held(self) -> bool:
        """Whether this session still holds the lock. Also keeps the idle session alive: a
        server that closed it (``wait_timeout``, a restart) released the lock with it."""
        if self._conn.closed:
            return False
        try:
            holder = self._conn.execute(sa.select(sa.func.is_used_lock(self.name))).scalar()
            me = self._conn.execute(sa.select(sa.func.connection_id())).scalar()
            self._conn.commit()
        except DBAPIError:
            return False
        return holder is not None and holder == me

    def release(self) -> None:
        """End the lock's session (detached from the pool), and with it the lock.

        Pitfall: SQLAlchemy must not reset the session (on a server that died the reset's
        rollback fails and is logged with a whole traceback), and invalidating a detached
        connection only forgets its socket, leaving the session, and the lock, to the garbage
        collector. So the session is invalidated and then closed here, by hand. A session the
        server closed (``held`` found it gone) has nothing left to end: asking for it would
        raise (its transaction failed), or reconnect."""
        if self._conn.closed:
            return
        try:
            session = None if self._conn.invalidated else self._conn.connection.dbapi_connection
        except SQLAlchemyError:  # its session failed with the server's closing of it
            session = None
        self._conn.invalidate()
        self._conn.close()
        if session is not None and session.open:
            session.close()  # pymysql: on a dead server, it only drops the socket



def named_lock(config: Config, name: str, wait: float = 0.0) -> NamedLock | None:
    """``Catalog.named_lock`` without a Catalog: it needs no table, so a load can take its lock
    before it looks at (or replaces) the catalog's schema. Waits up to *wait* seconds for
    another session to release it; None if it did not."""
    try:
        conn = engine_for(config).connect()
        conn.detach()  # its session will hold the lock: it must never serve anyone else
        got = conn.execute(sa.select(sa.func.get_lock(name, wait))).scalar()
        conn.commit()
    except DBAPIError as exc:
        raise ServiceError(describe(exc.orig or exc, config)) from exc
    if got != 1:
        conn.close()
        return None
    return NamedLock(name, conn)

