"""Connections to MySQL (MariaDB): one function that every role uses, errors made readable.

Pitfalls:

- ``LOAD DATA LOCAL INFILE`` needs ``local_infile=True`` on the client *and* the server
  (``debl stack up`` starts MariaDB with ``--local-infile=1``).
- Connections are not thread-safe: one per thread (or per Spark partition), never shared.
"""

from __future__ import annotations

import pymysql

from debl.config import Config
from debl.errors import ServiceError


def connect(config: Config, *, local_infile: bool = False, autocommit: bool = True,
            database: bool = True) -> pymysql.connections.Connection:
    """A new connection to the configured MySQL, or a ServiceError that says what is wrong.

    A missing database is created (when the user may), so that a new ``mysql_database`` setting
    is all it takes to keep a second dataset apart."""
    def attempt(db: str | None) -> pymysql.connections.Connection:
        return pymysql.connect(
            host=config.mysql_host, port=config.mysql_port, user=config.mysql_user,
            password=config.mysql_secret, database=db, local_infile=local_infile,
            autocommit=autocommit, connect_timeout=10, read_timeout=3600, write_timeout=3600,
            charset="utf8mb4")

    try:
        try:
            return attempt(config.mysql_database if database else None)
        except pymysql.err.OperationalError as exc:
            if not (database and exc.args and exc.args[0] == 1049):
                raise
            with attempt(None) as conn, conn.cursor() as cur:
                cur.execute(f"CREATE DATABASE IF NOT EXISTS `{config.mysql_database}` "
                            "CHARACTER SET utf8mb4")
            return attempt(config.mysql_database)
    except pymysql.err.OperationalError as exc:
        raise ServiceError(describe(exc, config)) from exc


def describe(exc: pymysql.err.MySQLError, config: Config) -> str:
    """A user's message for a pymysql error."""
    code = exc.args[0] if exc.args else None
    where = f"MySQL at {config.mysql_host}:{config.mysql_port}"
    if code in (2003, 2013):
        return f"{where} is not reachable ({exc.args[1]}); is the stack up? (`debl stack status`)"
    if code == 1045:
        return (f"{where} refused user {config.mysql_user!r}: wrong password "
                f"(check DEBL_MYSQL_PASSWORD or {config.mysql_password_file})")
    if code == 1049:
        return f"{where} has no database {config.mysql_database!r}; `debl stack up` creates it"
    if code == 1044:
        return (f"{where} denies user {config.mysql_user!r} access to database "
                f"{config.mysql_database!r} (grant it, or choose another mysql_database)")
    return f"{where}: {exc.args[-1] if exc.args else exc}"
