"""The source's binary log read as a replica (docs/FRESHNESS.md, "Capture: `debl follow`"): the
committed transactions after a GTID, each with its position, its commit time and the row
changes of the source's link table, through ``mysql-replication`` (MariaDB's GTID replication
protocol: ``is_mariadb``, ``auto_position``), as ``source_db.replication_user``.

What it guarantees, and refuses:

- A transaction is given only once its commit is read (an ``Xid`` event, a ``COMMIT`` query of
  a non-transactional engine, or the statement of a standalone GTID such as DDL), in log order,
  each once: one cut off by a lost connection is read again whole from its GTID event.
- Every row event of the link table is checked against LinkBench's link table (the seven
  columns, their order, types, signedness, ``VARBINARY(255)``) before a row is decoded: a
  table changed at the source (``ALTER TABLE``) is a SourceError naming the columns found; rows
  are never read with another table's layout. A statement that empties, drops or renames the
  table, or writes it as a statement rather than as rows (``binlog_format`` not ``ROW`` for
  that session), is a SourceError too: the change log could not say what changed; so is a
  transaction whose rows of the table end without a commit the reader knows (XA's prepare).
- A position the source's log no longer holds (MariaDB's error 1236: purged, or a log that was
  reset) is a PositionLost (a SourceError) saying that the changes after it are lost for good
  and what to do.
- A source that cannot be reached or drops the connection is a ServiceError: the caller
  retries from the last transaction it has (``Committed.gtid``).

Pitfalls: the commit time is the GTID event's header timestamp, whole seconds (MariaDB's log
keeps no finer time for row events). The library reconnects by itself after a dropped read
(errors 2006, 2013) from its ``auto_position``, which this reader moves to each transaction
given, so such a reconnect resumes where the reader is. Reads block until the source sends an
event; with nothing to send it sends a heartbeat every ``HEARTBEAT_S``, given as None.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

import pymysql
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.constants import FIELD_TYPE
from pymysqlreplication.event import (HeartbeatLogEvent, MariadbGtidEvent, QueryEvent,
                                      XidEvent)
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

from debl.config import Config
from debl.errors import DeblError, ServiceError, SourceError
from debl.format.link import Link
from debl.position import parse_gtid
from debl.store import source_db

HEARTBEAT_S = 1.0  # the source's heartbeat on an idle connection (MASTER_HEARTBEAT_PERIOD)
_POSITION_LOST = 1236  # ER_MASTER_FATAL_ERROR_READING_BINLOG
_STANDALONE = 1  # a MariaDB GTID event's flag: one statement, no BEGIN/COMMIT (DDL)
# LinkBench's link table as the source holds it (debl.store.mysql.link_table_ddl): name, type,
# unsigned; data is VARBINARY(255), binary.
LINK_COLUMNS = (("id1", FIELD_TYPE.LONGLONG, True), ("id2", FIELD_TYPE.LONGLONG, True),
                ("link_type", FIELD_TYPE.LONGLONG, True), ("visibility", FIELD_TYPE.TINY, False),
                ("data", FIELD_TYPE.VARCHAR, False), ("time", FIELD_TYPE.LONGLONG, True),
                ("version", FIELD_TYPE.LONGLONG, True))
_TYPE_NAMES = {v: k for k, v in vars(FIELD_TYPE).items() if isinstance(v, int)}
# Statements that change the table's rows without row events, or the table itself.
_DDL = re.compile(r"^\s*(TRUNCATE|DROP|RENAME|CREATE\s+OR\s+REPLACE|ALTER\b.*\b(?:RENAME|"
                  r"PARTITION)\b)", re.IGNORECASE | re.DOTALL)
_DML = re.compile(r"^\s*(INSERT|REPLACE|UPDATE|DELETE|LOAD\s+DATA)\b", re.IGNORECASE)
# Statements that may change a table's definition (the cached table maps are dropped).
_SCHEMA = re.compile(r"^\s*(ALTER|CREATE|DROP|RENAME|TRUNCATE)\b", re.IGNORECASE)


class PositionLost(SourceError):
    """The source's log no longer holds the position asked for (MariaDB's error 1236)."""


@dataclass(frozen=True)
class RowChange:
    """One row of the link table changed by a transaction: the row before (None: inserted)
    and after (None: deleted)."""

    before: Link | None
    after: Link | None


@dataclass(frozen=True)
class Committed:
    """A committed transaction of the source: its GTID and sequence number, its commit time
    (epoch seconds, whole), and its row changes of the link table in log order (none for a
    transaction on other tables, which still moves the position)."""

    gtid: str
    seq: int
    commit_ts: float
    rows: tuple[RowChange, ...]


def replica_server_id(config: Config) -> int:
    """The server id the follower connects with: ``source_db.follower_server_id``, or one
    derived from the catalog's database and the source's table (2 to 2^31-1, never the
    source's own)."""
    if config.source_db.follower_server_id:
        return config.source_db.follower_server_id
    name = f"{config.mysql.host}:{config.mysql.port}/{config.mysql.database}/" \
           f"{config.source_db.table}"
    derived = 2 + zlib.crc32(name.encode()) % (2**31 - 2)
    return derived if derived != config.source_db.server_id else derived + 1


class BinlogReader:
    """The committed transactions after GTID *after*: iterate for ``Committed`` (and None for
    each heartbeat of an idle source); ``close`` ends the connection (from another thread
    too: a blocked read then ends with a ServiceError)."""

    def __init__(self, config: Config, after: str):
        self.config, self.after = config, after
        db = config.source_db
        self._db, self._table = db.database, db.table
        self._closed = False
        timeout = max(config.service_timeout, 4 * HEARTBEAT_S)
        self._stream = BinLogStreamReader(
            {"host": db.host, "port": db.port, "user": db.replication_user,
             "password": config.source_db_replication_secret,
             "connect_timeout": min(10.0, timeout), "read_timeout": timeout},
            server_id=replica_server_id(config), is_mariadb=True, auto_position=after,
            blocking=True, resume_stream=True, slave_heartbeat=HEARTBEAT_S,
            # A table's map is parsed once per table id, not once per transaction (the
            # follower's CPU: docs/FRESHNESS.md, "Measured: the follower's lag"); a
            # statement that may change the table drops the maps (_refuse_statement).
            freeze_schema=True,
            only_schemas=[db.database], only_tables=[db.table], enable_logging=False,
            only_events=[MariadbGtidEvent, XidEvent, QueryEvent, WriteRowsEvent,
                         UpdateRowsEvent, DeleteRowsEvent, HeartbeatLogEvent])

    def close(self) -> None:
        self._closed = True
        try:
            self._stream.close()
        except (pymysql.err.Error, OSError):  # already gone
            pass

    def __iter__(self) -> Iterator[Committed | None]:
        gtid: str | None = None  # the transaction being read
        seq, commit_ts, flags = 0, 0.0, 0
        rows: list[RowChange] = []
        last = parse_gtid(self.after)[2]
        while True:
            event = self._next()
            if isinstance(event, HeartbeatLogEvent):
                yield None
                continue
            if isinstance(event, MariadbGtidEvent):
                # A transaction begins (one cut off by a reconnect begins again here).
                if gtid is not None and rows and event.gtid_seq_no != seq:
                    self._uncommitted(gtid)
                gtid, seq, commit_ts, flags = event.gtid, event.gtid_seq_no, \
                    float(event.timestamp), event.flags
                rows = []
                continue
            if gtid is None:  # the tail of a transaction begun before our start
                continue
            if isinstance(event, (WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent)):
                rows.extend(self._rows(event, gtid))
                continue
            if isinstance(event, QueryEvent):
                query = event.query.strip()
                self._refuse_statement(event, query, gtid)
                if not (flags & _STANDALONE or query.upper() in ("COMMIT", "ROLLBACK")):
                    continue  # BEGIN, or a statement inside the transaction
            # XidEvent, a COMMIT, or a standalone statement: the transaction is committed.
            if seq > last:  # never one twice (a reconnect's replay)
                last = seq
                self._stream.auto_position = gtid
                yield Committed(gtid, seq, commit_ts, tuple(rows))
            gtid, rows = None, []

    def _uncommitted(self, gtid: str) -> None:
        """SourceError: the transaction *gtid* changed rows of the table and ended without a
        commit the reader knows (an XA transaction's prepared part, whose commit comes
        later as a statement): its rows are never dropped silently."""
        raise SourceError(
            f"the source's transaction {gtid} changed rows of `{self._db}`.`{self._table}` "
            "and its log holds no commit the follower reads (an XA transaction?): the "
            "follower stopped before it, nothing past the previous transaction was captured. "
            "Write the table in plain transactions, take a new dump (`debl source dump DIR`, "
            "`debl load DIR`), then start `debl follow` again")

    def _next(self):
        """The next event; errors worded (see the module)."""
        try:
            event = self._stream.fetchone()
        except pymysql.err.MySQLError as exc:
            code = exc.args[0] if exc.args else None
            if code == _POSITION_LOST:
                raise PositionLost(
                    f"{source_db.where(self.config)} cannot send its binary log after GTID "
                    f"{self._stream.auto_position} (MariaDB error 1236: {exc.args[-1]}): the "
                    "log no longer holds that position (purged: source_db.log_expire; or reset)"
                    ", so the source's changes since then are lost for good and the loads "
                    "from dumps at or before it cannot be kept fresh. Take a new dump (`debl "
                    "source dump DIR`), load it (`debl load DIR`), then start `debl follow` "
                    "again: it starts at that load's position") from exc
            if self._closed:
                raise ServiceError("the reader of the source's binary log was closed") from exc
            if code == 1045:
                db = self.config.source_db
                raise ServiceError(
                    f"{source_db.where(self.config)} refused the follower's replication user "
                    f"{db.replication_user!r}: wrong password (check "
                    "DEBL_SOURCE_DB_REPLICATION_PASSWORD or "
                    f"{self.config.source_db_replication_password_file})") from exc
            raise ServiceError(f"{source_db.describe(exc, self.config)} (reading its binary "
                               "log as a replica)") from exc
        except (DeblError, OSError):
            raise
        except Exception as exc:  # the library met an event it cannot read: never go on
            raise SourceError(
                f"{source_db.where(self.config)}: its binary log after GTID "
                f"{self._stream.auto_position} could not be read ({type(exc).__name__}: {exc})"
                "; nothing past that position was captured. Check the source's log format "
                '(docs/RUNTIME.md, "The source database") and start `debl follow` again') \
                from exc
        if event is None:  # the server ended the stream (it is shutting down)
            raise ServiceError(f"{source_db.where(self.config)} ended its binary log stream "
                               "(shutting down?)")
        return event

    def _rows(self, event, gtid: str) -> list[RowChange]:
        """The event's rows as links, its columns checked first."""
        self._check_columns(event, gtid)  # every event: a table id may outlive an ALTER
        try:
            rows = event.rows  # the library decodes the rows here, on first reading
        except Exception as exc:  # noqa: BLE001 -- a row it cannot decode: never go on
            raise SourceError(
                f"{source_db.where(self.config)}: the rows of transaction {gtid} on "
                f"`{self._table}` could not be decoded ({type(exc).__name__}: {exc}); nothing "
                "from that transaction on was captured. Check the source's log format "
                '(docs/RUNTIME.md, "The source database") and start `debl follow` again') \
                from exc
        if isinstance(event, WriteRowsEvent):
            return [RowChange(None, self._link(r["values"], gtid)) for r in rows]
        if isinstance(event, DeleteRowsEvent):
            return [RowChange(self._link(r["values"], gtid), None) for r in rows]
        return [RowChange(self._link(r["before_values"], gtid),
                          self._link(r["after_values"], gtid)) for r in rows]

    def _check_columns(self, event, gtid: str) -> None:
        if any(c.name is None for c in event.columns):
            raise SourceError(
                f"{source_db.where(self.config)} logs the rows of `{self._table}` without "
                "their columns' names and types (binlog_row_metadata is not FULL): the "
                f"follower cannot check them and stopped at GTID {gtid}, before reading them. "
                "Set binlog_row_metadata=FULL (the stack's source has it: "
                'docs/RUNTIME.md, "The source database"), take a new dump and load it, then '
                "start `debl follow` again")
        found = tuple((c.name, c.type, bool(c.unsigned)) for c in event.columns)
        data = next((c for c in event.columns if c.name == "data"), None)
        binary = data is not None and getattr(data, "max_length", None) == 255 and \
            (data.character_set_name or "binary") == "binary"
        if found != LINK_COLUMNS or not binary:
            shown = ", ".join(
                f"{name} {_TYPE_NAMES.get(kind, kind)}{' unsigned' if unsigned else ''}"
                for name, kind, unsigned in found)
            raise SourceError(
                f"the source's table `{self._db}`.`{self._table}` changed at GTID {gtid}: its "
                f"rows now have the columns ({shown}), not LinkBench's link table's (id1, id2, "
                "link_type BIGINT UNSIGNED, visibility TINYINT, data VARBINARY(255), time, "
                "version BIGINT UNSIGNED). The follower stopped before reading them: nothing "
                "past the previous transaction was captured. Give the table its definition "
                "back and take a new dump (`debl source dump DIR`, `debl load DIR`), then "
                "start `debl follow` again")

    def _link(self, values: dict, gtid: str) -> Link:
        data = values.get("data")
        if data == "":  # the library decodes an empty binary string as str (b"".decode)
            data = b""
        try:
            if not isinstance(data, bytes):  # decoded with a charset: never guess its bytes
                raise TypeError(f"data decoded as {type(data).__name__}")
            return Link(values["id1"], values["link_type"], values["id2"], values["visibility"],
                        data, values["time"], values["version"])
        except (KeyError, TypeError) as exc:  # a NULL, a missing column: checked above
            raise SourceError(f"the source's table `{self._table}` holds a row the follower "
                              f"cannot read at GTID {gtid} ({values!r:.200}): nothing past "
                              "the previous transaction was captured") from exc

    def _refuse_statement(self, event, query: str, gtid: str) -> None:
        """SourceError for a statement on the link table that the log holds as a statement
        (see the module). A statement that may change the table's definition drops the
        table maps the library keeps (``freeze_schema``): the next rows are checked against
        the table's map as the log gives it then."""
        if not (_DDL.match(query) or _DML.match(query) or _SCHEMA.match(query)) or \
                not self._names_table(event, query):
            return
        self._stream.table_map.clear()
        if not (_DDL.match(query) or _DML.match(query)):
            return
        kind = ("changes its rows or the table itself without row events"
                if _DDL.match(query) else "was logged as a statement, not as its rows "
                "(binlog_format must be ROW for every session that writes the table)")
        raise SourceError(
            f"the source's table `{self._db}`.`{self._table}`: the statement at GTID {gtid} "
            f"({query[:120]!r}) {kind}; the follower cannot tell which rows changed and "
            "stopped before it: nothing past the previous transaction was captured. Take a "
            "new dump of the table (`debl source dump DIR`, `debl load DIR`), then start "
            "`debl follow` again")

    def _names_table(self, event, query: str) -> bool:
        """Whether *query* names the link table: qualified with its database, or unqualified
        in a session whose database it is."""
        schema = event.schema.decode(errors="replace") if isinstance(event.schema, bytes) \
            else event.schema
        name = re.escape(self._table)
        for m in re.finditer(rf"(?:`?(\w+)`?\s*\.\s*)?`?\b{name}\b`?", query):
            if (m.group(1) or schema) == self._db:
                return True
        return False
