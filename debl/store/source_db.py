"""The source database as DeBL reaches it (docs/RUNTIME.md, "The source database";
docs/FRESHNESS.md): its connections, its link table, the head of its binary log, and its state
table ``debl_source_state``, which says which source it is and where the last
``debl source db init`` left the link table.

The link table is LinkBench's (``debl.store.mysql.link_table_ddl``: primary key ``(link_type,
id1, id2)``, key ``id1_type``), with checks that refuse a row the line format cannot carry
(docs/DESIGN.md section 3): a tab, newline or carriage return in ``data``, a visibility other
than 0 or 1, a number over 2^63-1. A client that writes one gets MariaDB's error naming the
check; a dump never meets one.

``debl_source_state`` has a row per link table: ``source_id``, a UUID made the first time the
table is initialised or dumped (the ``"source"`` of a dump's position: a new data directory or
a new state table is another source, whose positions mean nothing to the old one), and the
last init's GTID position (the head right after its fill committed), files, rows and rejects.
It lives in the source database itself: whoever reaches the source reads it, from any host,
and it goes with the data (docs/RUNTIME.md, "The source database").

Positions are MariaDB's GTIDs (``debl.position``). The binary log of a source is one GTID domain
(the stack starts it with ``gtid_domain_id=0``); a log with several is refused naming them.

Pitfall: the statements here run on pymysql connections to the source, in autocommit mode
unless said; the dump's snapshot is ``debl.store.source_snapshot``'s.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace

import pymysql

from debl.config import Config
from debl.errors import ServiceError, SourceError
from debl.format.link import Link
from debl.position import parse_gtid
from debl.store.mysql import link_table_ddl

STATE_TABLE = "debl_source_state"
_STATE_DDL = (f"CREATE TABLE IF NOT EXISTS `{STATE_TABLE}` (\n"
              "  link_table VARCHAR(64) NOT NULL PRIMARY KEY,\n"
              "  source_id CHAR(36) NOT NULL,\n"
              "  init_gtid VARCHAR(64) NULL,\n"
              "  init_at DOUBLE NULL,\n"
              "  init_files INT NULL,\n"
              "  init_rows BIGINT NULL,\n"
              "  init_rejects BIGINT NULL\n"
              ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4")


@dataclass(frozen=True)
class InitState:
    """Where the last ``debl source db init`` left a link table: at GTID *gtid* the table held
    exactly the merged rows of its *files*."""

    source_id: str
    gtid: str | None
    at: float | None
    files: int | None
    rows: int | None
    rejects: int | None


def as_mysql(config: Config) -> Config:
    """*config* with its ``mysql`` section pointing at the source database (its host, port,
    user, password and database; InnoDB, whose snapshots a dump reads): what the hot path's
    bulk load (``loaders.mysql_bulk``) takes to fill the source's table."""
    db = config.source_db
    return config.replace(mysql=replace(config.mysql, host=db.host, port=db.port, user=db.user,
                                        password=config.source_db_secret, database=db.database,
                                        engine="InnoDB"))


def where(config: Config) -> str:
    db = config.source_db
    return f"the source database at {db.host}:{db.port}"


def describe(exc: pymysql.err.MySQLError, config: Config) -> str:
    """A user's message for a pymysql error on the source database."""
    code = exc.args[0] if exc.args else None
    db = config.source_db
    if code in (2002, 2003, 2013):
        return (f"{where(config)} is not reachable ({exc.args[1]}); is the stack up? (`debl "
                "stack status`; it starts the source database too)")
    if code == 1045:
        return (f"{where(config)} refused user {db.user!r}: wrong password (check "
                f"DEBL_SOURCE_DB_PASSWORD or {config.source_db_password_file})")
    if code in (1044, 1049):
        return (f"{where(config)} has no database {db.database!r} that user {db.user!r} may "
                "use; `debl stack up` creates it for the stack's source")
    return f"{where(config)}: {exc.args[-1] if exc.args else exc}"


@contextlib.contextmanager
def errors(config: Config, doing: str) -> Iterator[None]:
    """Within: a pymysql error on the source database becomes a ServiceError saying what DeBL
    was doing."""
    try:
        yield
    except pymysql.err.MySQLError as exc:
        raise ServiceError(f"{describe(exc, config)} (during {doing})") from exc


def connect(config: Config, *, autocommit: bool = True) -> pymysql.connections.Connection:
    """A new connection to the source database as ``source_db.user``, or a ServiceError that
    says what is wrong. Reads and writes wait at most ``service_timeout`` for an answer."""
    timeout = config.service_timeout
    db = config.source_db
    try:
        return pymysql.connect(host=db.host, port=db.port, user=db.user,
                               password=config.source_db_secret, database=db.database,
                               autocommit=autocommit, connect_timeout=min(10.0, timeout),
                               read_timeout=timeout, write_timeout=timeout, charset="utf8mb4")
    except pymysql.err.MySQLError as exc:
        raise ServiceError(describe(exc, config)) from exc


def table_ddl(table: str) -> str:
    """``CREATE TABLE IF NOT EXISTS`` of the source's link table *table* (see the module)."""
    return link_table_ddl(table, "InnoDB", line_checks=True)


def head(cur) -> str:
    """The source's head: the GTID of the last transaction in its binary log
    (``@@gtid_binlog_pos``); SourceError if the log is empty or holds several domains."""
    cur.execute("SELECT @@gtid_binlog_pos")
    return one_domain(cur.fetchone()[0], "the head of the source's binary log")


def one_domain(position: str | None, what: str) -> str:
    """*position* (a GTID position as MariaDB gives it, comma-separated per domain) if it is
    one GTID, else SourceError naming what it is."""
    position = (position or "").strip()
    if not position:
        raise SourceError(f"{what} is empty: the binary log holds no transaction yet (is "
                          "log_bin on? `debl stack up` starts the source with it); write one "
                          "and try again")
    gtids = [g.strip() for g in position.split(",")]
    if len(gtids) > 1:
        raise SourceError(f"{what} spans several GTID domains ({', '.join(gtids)}): DeBL reads "
                          "a source whose log is one domain (docs/FRESHNESS.md, \"Positions\")")
    parse_gtid(gtids[0])
    return gtids[0]


def rows_in_range(cur, table: str, k_lo: int, k_hi: int) -> list[Link]:
    """Every row of the link table *table* with ``k_lo <= id1 <= k_hi``, hidden ones included
    (on its ``id1_type`` index: the range, not the table)."""
    cur.execute(f"SELECT id1, link_type, id2, visibility, data, time, version FROM `{table}` "
                "WHERE id1 BETWEEN %s AND %s", (k_lo, k_hi))
    return [Link(id1, t, id2, v, bytes(d), time_, version)
            for id1, t, id2, v, d, time_, version in cur.fetchall()]


def is_empty(cur, table: str) -> bool:
    """Whether the link table *table* has no row (a missing table is empty)."""
    try:
        cur.execute(f"SELECT 1 FROM `{table}` LIMIT 1")
    except pymysql.err.ProgrammingError as exc:
        if exc.args and exc.args[0] == 1146:
            return True
        raise
    return cur.fetchone() is None


def init_lock(cur, table: str) -> bool:
    """Take the named lock of *table*'s init on *cur*'s session (held until it ends): False if
    another init holds it."""
    cur.execute("SELECT GET_LOCK(%s, 0)", (f"debl_source_init.{table}",))
    return cur.fetchone()[0] == 1


def source_id(cur, table: str) -> str:
    """The source's id for its link table *table*, made (a UUID) on first use."""
    cur.execute(_STATE_DDL)
    cur.execute(f"INSERT IGNORE INTO `{STATE_TABLE}` (link_table, source_id) VALUES (%s, UUID())",
                (table,))
    cur.execute(f"SELECT source_id FROM `{STATE_TABLE}` WHERE link_table = %s", (table,))
    return cur.fetchone()[0]


def record_init(cur, table: str, gtid: str, files: int, rows: int, rejects: int) -> None:
    """Record that the link table *table* equalled the merged rows of *files* input files at
    GTID *gtid*."""
    source_id(cur, table)
    cur.execute(f"UPDATE `{STATE_TABLE}` SET init_gtid = %s, init_at = %s, init_files = %s, "
                "init_rows = %s, init_rejects = %s WHERE link_table = %s",
                (gtid, time.time(), files, rows, rejects, table))


def init_state(cur, table: str) -> InitState | None:
    """What ``debl_source_state`` says of *table* (None: neither initialised nor dumped)."""
    try:
        cur.execute(f"SELECT source_id, init_gtid, init_at, init_files, init_rows, init_rejects "
                    f"FROM `{STATE_TABLE}` WHERE link_table = %s", (table,))
    except pymysql.err.ProgrammingError as exc:
        if exc.args and exc.args[0] == 1146:
            return None
        raise
    row = cur.fetchone()
    return None if row is None else InitState(*row)


def server_summary(config: Config) -> str:
    """What the stack's status says of the source: its version, its log format and head, its
    link table's existence (raises if it does not answer)."""
    conn = connect(config)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT VERSION(), @@log_bin, @@binlog_format, @@binlog_row_image, "
                        "@@binlog_row_metadata, @@gtid_binlog_pos")
            # (a SELECT of variables gives one row)
            version, log_bin, fmt, image, metadata, position = cur.fetchone()  # type: ignore[misc]
    finally:
        conn.close()
    if not log_bin:
        return f"MariaDB {version}, binary log OFF"
    return (f"MariaDB {version}, binary log {fmt}/{image}/{metadata}, head "
            f"{position or '(empty)'}")
