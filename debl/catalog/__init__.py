"""The catalog: DeBL's own tables in MySQL, shared by the loader, gen_HF and every coordinator.

=====================  =============================================================
table                  one row per
=====================  =============================================================
debl_schema            (one row) the schema version of these tables
debl_loads             load: approach, source, bucket map, state, uptime, summary
debl_load_files        source file of a load: size, mtime, hot or cold
debl_file_counts       (file, part): rows and rejects a part of the load took from it
debl_chunks            cold chunk: bytes, path, file segments, copied / bucketed
debl_phases            timed phase (copy of a chunk, one dist_ch, MySQL load, index...)
debl_bucket_chunks     (bucket, chunk): what one dist_ch wrote into one bucket
debl_buckets           bucket: the bucket index (k_lo, k_hi, rows, bytes, location, and
                       c_lo, c_hi: the real id1 span of its cold rows)
debl_jobs              bucket: the job status (pending/queued/running/loaded/failed)
debl_demand            (coordinator, bucket): queries that need the bucket (docs/COORDINATOR.md)
debl_answers           (coordinator, route): queries it answered that way since uptime
debl_coordinators      running coordinator: the latest load it has seen with no query of an
                       older one in flight, its heartbeat (a new load waits for them)
=====================  =============================================================

The tables are SQLAlchemy Core ``Table`` objects on one ``MetaData`` (``METADATA``), created by
``create_all``; every statement is a Core expression with named columns. Methods return
dataclasses (or a plain mapping such as bucket -> state), never driver rows. No other module
writes SQL against these tables.

The package, by role: ``schema`` (the tables and their version), ``records`` (the dataclasses the
methods return), ``engines`` (the process's engines and MySQL named locks), and here the
``Catalog`` that reads and writes the tables. Import every name from ``debl.catalog``.

The bucket index row of a bucket is recomputed from its ``debl_bucket_chunks`` rows, so re-running
the dist_ch of a chunk replaces exactly that chunk's share. One dataset lives in a database at a
time: a new load clears the bucket, job and demand tables (the previous day's dump is replaced).

Connections: one SQLAlchemy ``Engine`` per process and MySQL account (``engine_for``), with a
connection pool. Each method takes a pooled connection for one transaction and gives it back, so
a ``Catalog`` is thread-safe and cheap to make; ``with Catalog(config) as catalog:`` still
reads well, and ``close`` has nothing to release.

Schema version: ``debl_schema`` holds ``SCHEMA_VERSION``. A database whose catalog has another
version (or DeBL tables without ``debl_schema``: a DeBL from before versioning, version 0) is
refused with ``CatalogVersionError``, which says what to do. A new load (``replace_older=True``)
drops an *older* catalog and starts afresh: one dataset lives in a database, and the old
catalog's loads could not be read anyway. A newer catalog is never touched.

Pitfalls:

- Connections are opened with autocommit off, so that a transaction (``engine.begin``) is a real
  MySQL transaction; with it on, each statement of a "transaction" would commit on its own.
- Transactions run at READ COMMITTED. At InnoDB's default (REPEATABLE READ) a DELETE takes gap
  locks, and coordinators replacing their demand rows at the same moment deadlock each other
  (tests/test_catalog.py, eight threads, deadlocked within 20 rounds).
- After ``os.fork`` a child must not use the parent's pooled sockets (closing one would end the
  parent's session): the engines are forgotten in the child, without closing their connections.
- A named lock (``named_lock``) lives on a MySQL session: its connection leaves the pool for
  good, so that no later user of the pool inherits the lock.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError

from debl.buckets import BucketMap
from debl.catalog.engines import NamedLock, engine_for, named_lock
from debl.catalog.records import (Bucket, BucketChunk, ChunkRecord, DemandRow, FileCount, Job,
                                  LoadFile, LoadRecord, Phase)
from debl.catalog.schema import (DATASET_TABLES, METADATA, RETIRED_TABLES, SCHEMA_VERSION,
                                 STATES, answers_table, bucket_chunks_table, buckets_table,
                                 chunks_table, coordinators_table, demand_table,
                                 file_counts_table, files_table, hot_keys_table, jobs_table,
                                 loads_table,
                                 phases_table, schema_table, schema_version)
from debl.config import Config
from debl.errors import CatalogVersionError, ServiceError
from debl.key_filter import KeyFilter
from debl.mysql import describe

__all__ = ["Bucket", "BucketChunk", "Catalog", "ChunkRecord", "DemandRow", "FileCount", "Job",
           "LoadFile", "LoadRecord", "METADATA", "NamedLock", "Phase", "SCHEMA_VERSION", "STATES",
           "engine_for", "named_lock"]

_CHECKSUM_MOD = 1 << 64  # as debl.model.CHECKSUM_MOD: checksums are sums mod 2^64
_ER_TABLE_EXISTS = 1050
# The job states that stamp a time column when a bucket enters them (see set_job_state).
_STAMPED = {"queued": "queued", "running": "started", "loaded": "ended", "failed": "ended"}
_LOAD_UPDATES = frozenset({"state", "uptime", "ended", "hot_k_lo", "hot_k_hi", "hot_rows",
                           "summary", "error"})


# ---------------------------------------------------------------------------- the catalog


class Catalog:
    """DeBL's tables in MySQL. Thread-safe: every method call takes a pooled connection.

    Raises ServiceError when MySQL cannot be reached, CatalogVersionError when the database
    holds the catalog of another DeBL version; with *replace_older* (a new load) an older
    catalog is dropped instead."""

    def __init__(self, config: Config, *, replace_older: bool = False):
        self.config = config
        self.engine = engine_for(config)
        self._check_schema(replace_older)

    def __enter__(self) -> "Catalog":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Nothing to release: the connections belong to the process's pool."""

    @contextmanager
    def _transaction(self) -> Iterator[Connection]:
        """A pooled connection in one transaction, committed at the end (rolled back on an
        error); driver errors become ServiceErrors that name the cause."""
        try:
            with self.engine.begin() as conn:
                yield conn
        except DBAPIError as exc:
            raise ServiceError(describe(exc.orig, self.config)) from exc

    # -- the schema

    def _check_schema(self, replace_older: bool) -> None:
        with self._transaction() as conn:
            found = schema_version(conn)
        if found is not None and found < SCHEMA_VERSION and replace_older:
            with self._transaction() as conn:
                METADATA.drop_all(conn)
                for name in RETIRED_TABLES:
                    conn.execute(sa.schema.DropTable(sa.Table(name, sa.MetaData()),
                                                     if_exists=True))
            found = None
        if found is None:
            found = self._create()
        if found != SCHEMA_VERSION:
            raise CatalogVersionError(self._version_message(found))

    def _create(self) -> int | None:
        """Create what is missing and record the version; returns the version now recorded.
        Two processes may race here on a fresh database: the loser's CREATE finds the table
        made, which is what it wanted, and it looks again."""
        try:
            with self._transaction() as conn:
                METADATA.create_all(conn)
        except ServiceError as exc:
            orig = getattr(exc.__cause__, "orig", None)
            if not (orig is not None and orig.args and orig.args[0] == _ER_TABLE_EXISTS):
                raise
            with self._transaction() as conn:
                METADATA.create_all(conn)
        with self._transaction() as conn:
            conn.execute(mysql.insert(schema_table).prefix_with("IGNORE")
                         .values(version=SCHEMA_VERSION))
            return schema_version(conn)

    def _version_message(self, found: int | None) -> str:
        where = f"the catalog in MySQL database {self.config.mysql_database!r}"
        if found is not None and found > SCHEMA_VERSION:
            return (f"{where} was written by a newer DeBL (schema version {found}; this DeBL "
                    f"reads version {SCHEMA_VERSION}): use that DeBL, or point this one at "
                    "another database (mysql_database, DEBL_MYSQL_DATABASE)")
        return (f"{where} was written by an older DeBL (schema version {found or 0}; this DeBL "
                f"reads version {SCHEMA_VERSION}), so its loads cannot be read: run `debl load` "
                "anew (a new load replaces the old catalog), or drop the database, or point "
                "DeBL at another one (mysql_database, DEBL_MYSQL_DATABASE)")

    # -- loads

    def begin_load(self, load_id: str, approach: str, source: str, chunk_size: int,
                   params: dict, started: float | None = None) -> None:
        """Record a new load that started at *started* (default: now) and clear the previous
        dataset's buckets, jobs and demand, in one transaction: no reader sees the new load
        beside the old buckets."""
        with self._transaction() as conn:
            for table in DATASET_TABLES:
                conn.execute(table.delete())
            conn.execute(loads_table.insert().values(
                load_id=load_id, approach=approach, source=source, state="running",
                chunk_size=chunk_size, params=params,
                started=time.time() if started is None else started))

    def update_load(self, load_id: str, **values: Any) -> None:
        """Set some of a load's fields: ``state``, ``uptime``, ``ended``, ``hot_k_lo``,
        ``hot_k_hi``, ``hot_rows``, ``summary`` (a dict), ``error`` (the bucket map:
        ``set_bucket_map``)."""
        unknown = set(values) - _LOAD_UPDATES
        if unknown:
            raise ValueError(f"update_load cannot set {', '.join(sorted(unknown))}")
        t = loads_table
        with self._transaction() as conn:
            conn.execute(t.update().where(t.c.load_id == load_id).values(**values))

    def end_hot_phase(self, load_id: str, bytes: int, rows: int, k_lo: int | None,
                      k_hi: int | None, counts: dict[int, tuple[int, int]],
                      hot_keys: KeyFilter | None = None) -> None:
        """The hot path is done: end its phase, record its per-file counts, the load's
        ``hot_k_lo``, ``hot_k_hi``, ``hot_rows`` and its key filter, in one transaction. A
        resumed load skips the hot path once its phase has ended, so what sends queries to
        MySQL must be recorded with that end, never after it (a kill in between once hid
        MySQL's rows)."""
        p, fc, loads = phases_table, file_counts_table, loads_table
        with self._transaction() as conn:
            conn.execute(hot_keys_table.delete().where(hot_keys_table.c.load_id == load_id))
            if hot_keys is not None:
                conn.execute(hot_keys_table.insert().values(load_id=load_id, bits=hot_keys.bits))
            conn.execute(p.update().where(p.c.load_id == load_id, p.c.phase == "hot",
                                          p.c.item == "all")
                         .values(ended=time.time(), bytes=bytes, rows=rows))
            conn.execute(fc.delete().where(fc.c.load_id == load_id, fc.c.part == "hot"))
            if counts:
                conn.execute(fc.insert(), [{"load_id": load_id, "file_seq": seq, "part": "hot",
                                            "rows": n, "rejects": bad}
                                           for seq, (n, bad) in counts.items()])
            conn.execute(loads.update().where(loads.c.load_id == load_id)
                         .values(hot_k_lo=k_lo, hot_k_hi=k_hi, hot_rows=rows))

    def hot_keys(self, load_id: str) -> KeyFilter | None:
        """The key filter of the load's hot rows; None if it has none (no hot file, or a load
        whose hot path has not ended): then every key in the hot range may be in MySQL."""
        t = hot_keys_table
        with self._transaction() as conn:
            bits = conn.execute(sa.select(t.c.bits).where(t.c.load_id == load_id)).scalar()
        return None if bits is None else KeyFilter(bits)

    def set_bucket_map(self, load_id: str, bucket_map: BucketMap) -> None:
        """Record the load's bucket map (decided once, before its first chunk is bucketed)."""
        t = loads_table
        with self._transaction() as conn:
            conn.execute(t.update().where(t.c.load_id == load_id)
                         .values(bucket_map=bucket_map.to_dict()))

    def load(self, load_id: str | None = None) -> LoadRecord | None:
        """A load (the latest one by start time, without an id); None if there is none."""
        t = loads_table
        query = sa.select(t).order_by(t.c.started.desc()).limit(1)
        if load_id is not None:
            query = query.where(t.c.load_id == load_id)
        with self._transaction() as conn:
            row = conn.execute(query).mappings().first()
        if row is None:
            return None
        stored = row["bucket_map"]
        return LoadRecord(**{**row, "bucket_map": None if stored is None
                             else BucketMap.from_dict(stored)})

    def add_files(self, load_id: str, files: Iterable[LoadFile]) -> None:
        rows = [{"load_id": load_id, **asdict(f)} for f in files]
        if rows:
            with self._transaction() as conn:
                conn.execute(files_table.insert(), rows)

    def files(self, load_id: str) -> list[LoadFile]:
        """The load's source files in listing order."""
        t = files_table
        query = (sa.select(t.c.file_seq, t.c.name, t.c.size, t.c.mtime, t.c.hot)
                 .where(t.c.load_id == load_id).order_by(t.c.file_seq))
        with self._transaction() as conn:
            return [LoadFile(*row) for row in conn.execute(query)]

    def set_file_counts(self, load_id: str, part: str,
                        counts: dict[int, tuple[int, int]]) -> None:
        """Record, for one part of the load, (rows, rejects) taken from each file."""
        t = file_counts_table
        rows = [{"load_id": load_id, "file_seq": seq, "part": part, "rows": n, "rejects": bad}
                for seq, (n, bad) in counts.items()]
        with self._transaction() as conn:
            conn.execute(t.delete().where(t.c.load_id == load_id, t.c.part == part))
            if rows:
                conn.execute(t.insert(), rows)

    def file_counts(self, load_id: str) -> list[FileCount]:
        t = file_counts_table
        query = (sa.select(t.c.file_seq, t.c.part, t.c.rows, t.c.rejects)
                 .where(t.c.load_id == load_id).order_by(t.c.file_seq, t.c.part))
        with self._transaction() as conn:
            return [FileCount(*row) for row in conn.execute(query)]

    # -- phases (for the reports)

    def phase_start(self, load_id: str, phase: str, item: str = "") -> None:
        """Start a phase item now (a restarted item loses its end and counts)."""
        self.record_phase(load_id, phase, item, time.time())

    def phase_end(self, load_id: str, phase: str, item: str = "", bytes: int | None = None,
                  rows: int | None = None) -> None:
        t = phases_table
        with self._transaction() as conn:
            conn.execute(t.update()
                         .where(t.c.load_id == load_id, t.c.phase == phase, t.c.item == item)
                         .values(ended=time.time(), bytes=bytes, rows=rows))

    def record_phase(self, load_id: str, phase: str, item: str, started: float,
                     ended: float | None = None, bytes: int | None = None,
                     rows: int | None = None) -> None:
        """Record a phase item (e.g. one timed by a step of its own), replacing it."""
        values = {"started": started, "ended": ended, "bytes": bytes, "rows": rows}
        statement = (mysql.insert(phases_table)
                     .values(load_id=load_id, phase=phase, item=item, **values)
                     .on_duplicate_key_update(**values))
        with self._transaction() as conn:
            conn.execute(statement)

    def drop_phase(self, load_id: str, phase: str, item: str) -> None:
        """Forget a phase item that turned out to be nothing (a copy past the input's end)."""
        t = phases_table
        with self._transaction() as conn:
            conn.execute(t.delete().where(t.c.load_id == load_id, t.c.phase == phase,
                                          t.c.item == item))

    def phases(self, load_id: str) -> list[Phase]:
        """The load's phase items by start time."""
        t = phases_table
        query = (sa.select(t.c.phase, t.c.item, t.c.started, t.c.ended, t.c.bytes, t.c.rows)
                 .where(t.c.load_id == load_id).order_by(t.c.started))
        with self._transaction() as conn:
            return [Phase(*row) for row in conn.execute(query)]

    def phase_ended(self, load_id: str, phase: str) -> bool:
        """Whether an item of *phase* has ended (a resumed load need not redo that step)."""
        t = phases_table
        query = (sa.select(t.c.item)
                 .where(t.c.load_id == load_id, t.c.phase == phase, t.c.ended.is_not(None))
                 .limit(1))
        with self._transaction() as conn:
            return conn.execute(query).first() is not None

    # -- chunks

    def record_chunk(self, load_id: str, chunk: ChunkRecord) -> None:
        """Record a chunk of the load, replacing what was recorded for its number."""
        values = {"path": chunk.path, "bytes": chunk.bytes, "layout": chunk.layout,
                  "state": chunk.state}
        statement = (mysql.insert(chunks_table)
                     .values(load_id=load_id, chunk_no=chunk.chunk_no, **values)
                     .on_duplicate_key_update(**values))
        with self._transaction() as conn:
            conn.execute(statement)

    def chunks(self, load_id: str) -> list[ChunkRecord]:
        """The load's chunks by number."""
        t = chunks_table
        query = (sa.select(t.c.chunk_no, t.c.path, t.c.bytes, t.c.layout, t.c.state)
                 .where(t.c.load_id == load_id).order_by(t.c.chunk_no))
        with self._transaction() as conn:
            return [ChunkRecord(*row) for row in conn.execute(query)]

    # -- the bucket index

    def record_bucket_chunks(self, load_id: str, chunk_no: int, bucket_map: BucketMap,
                             parts: list[BucketChunk], location: str) -> None:
        """Replace a chunk's share of every bucket, recompute those buckets' index rows
        (``k_lo``, ``k_hi`` from *bucket_map*; sums and the cold span over the chunks; a bucket
        no chunk has rows of any more leaves the index) and give each bucket a job status row
        (``pending`` if new); one transaction."""
        bc, index, jobs = bucket_chunks_table, buckets_table, jobs_table
        with self._transaction() as conn:
            touched = set(conn.execute(sa.select(bc.c.b_index).where(bc.c.chunk_no == chunk_no))
                          .scalars())
            touched |= {p.b_index for p in parts}
            conn.execute(bc.delete().where(bc.c.chunk_no == chunk_no))
            if parts:
                conn.execute(bc.insert(), [
                    {"b_index": p.b_index, "chunk_no": chunk_no, "load_id": load_id,
                     "rows": p.rows, "bytes": p.bytes, "checksum": p.checksum, "path": p.path,
                     "c_lo": p.c_lo, "c_hi": p.c_hi} for p in parts])
            if not touched:
                return
            sums = conn.execute(
                sa.select(bc.c.b_index, sa.func.sum(bc.c.rows), sa.func.sum(bc.c.bytes),
                          sa.func.sum(bc.c.checksum), sa.func.min(bc.c.c_lo),
                          sa.func.max(bc.c.c_hi))
                .where(bc.c.b_index.in_(touched)).group_by(bc.c.b_index)).all()
            emptied = touched - {b for b, *_ in sums}
            if emptied:
                conn.execute(index.delete().where(index.c.b_index.in_(emptied)))
            if not sums:
                return
            upsert = mysql.insert(index)
            conn.execute(
                upsert.on_duplicate_key_update({c.name: upsert.inserted[c.name]
                                                for c in index.columns if not c.primary_key}),
                [{"b_index": b, "k_lo": bucket_map.range_of(b)[0],
                  "k_hi": bucket_map.range_of(b)[1], "rows": int(rows), "bytes": int(size),
                  "checksum": int(checksum) % _CHECKSUM_MOD, "location": f"{location}/{b}",
                  "load_id": load_id, "c_lo": int(c_lo), "c_hi": int(c_hi)}
                 for b, rows, size, checksum, c_lo, c_hi in sums])
            conn.execute(mysql.insert(jobs).prefix_with("IGNORE"),
                         [{"b_index": b, "state": "pending"} for b, *_ in sums])

    def buckets(self) -> list[Bucket]:
        """The bucket index with each bucket's job state, by b_index."""
        b, j = buckets_table, jobs_table
        query = (sa.select(b.c.b_index, b.c.k_lo, b.c.k_hi, b.c.rows, b.c.bytes, b.c.checksum,
                           b.c.location, sa.func.coalesce(j.c.state, "pending"), b.c.c_lo,
                           b.c.c_hi)
                 .select_from(b.outerjoin(j, j.c.b_index == b.c.b_index))
                 .order_by(b.c.b_index))
        with self._transaction() as conn:
            return [Bucket(*row) for row in conn.execute(query)]

    def bucket_paths(self, b_index: int) -> list[str]:
        """The path prefixes of a bucket's files, one per chunk, in chunk order."""
        t = bucket_chunks_table
        query = sa.select(t.c.path).where(t.c.b_index == b_index).order_by(t.c.chunk_no)
        with self._transaction() as conn:
            return list(conn.execute(query).scalars())

    def bucket_chunks(self, b_index: int, load_id: str | None = None,
                      hot: bool = False) -> list[BucketChunk]:
        """What each dist_ch wrote into the bucket, in chunk order (paths as bucket_paths);
        only *load_id*'s when given; *hot*: the bucket's hot files instead of its cold ones
        (none yet: the hot files are bucketed from schema version 6 on)."""
        t = bucket_chunks_table
        where = [t.c.b_index == b_index]
        if load_id is not None:
            where.append(t.c.load_id == load_id)
        if hot:
            return []
        query = (sa.select(t.c.b_index, t.c.chunk_no, t.c.rows, t.c.bytes, t.c.checksum, t.c.path,
                           t.c.c_lo, t.c.c_hi)
                 .where(*where).order_by(t.c.chunk_no))
        with self._transaction() as conn:
            return [BucketChunk(*row) for row in conn.execute(query)]

    # -- job status

    def job_states(self) -> dict[int, str]:
        t = jobs_table
        with self._transaction() as conn:
            return {b: state for b, state in conn.execute(sa.select(t.c.b_index, t.c.state))}

    def jobs(self) -> list[Job]:
        """Every bucket's job status, by b_index."""
        t = jobs_table
        with self._transaction() as conn:
            return [Job(**row) for row in
                    conn.execute(sa.select(t).order_by(t.c.b_index)).mappings()]

    def set_job_state(self, buckets: Iterable[int], state: str, run_id: str | None = None,
                      error: str | None = None, *, of_run: str | None = None,
                      of_load: str | None = None) -> list[int]:
        """Move buckets to *state*; returns those moved. Entering ``queued``, ``running``,
        ``loaded`` or ``failed`` stamps the matching time; entering ``running`` counts an
        attempt. With *of_run*, only buckets that run *of_run* still holds (``running`` under
        that run id) move; with *of_load*, only buckets of that load's bucket index: a new load
        clears the job table, so a run that outlived its load never touches the new load's
        buckets."""
        if state not in STATES:
            raise ValueError(f"unknown job state {state!r}: one of {', '.join(STATES)}")
        ids = list(buckets)
        if not ids:
            return []
        t = jobs_table
        values: dict[str, Any] = {"state": state, "run_id": run_id, "error": error}
        if state in _STAMPED:
            values[_STAMPED[state]] = time.time()
        if state == "running":
            values["attempts"] = t.c.attempts + 1
        where = [t.c.b_index.in_(ids)]
        if of_run is not None:
            where += [t.c.run_id == of_run, t.c.state == "running"]
        if of_load is not None:
            index = buckets_table
            where.append(t.c.b_index.in_(sa.select(index.c.b_index)
                                         .where(index.c.load_id == of_load)))
        with self._transaction() as conn:
            moved = list(conn.execute(sa.select(t.c.b_index).where(*where).with_for_update())
                         .scalars())
            if moved:
                conn.execute(t.update().where(t.c.b_index.in_(moved)).values(values))
            return moved

    def finish_run(self, run_id: str, loaded: dict[int, tuple[int, int, int]]) -> list[int]:
        """Mark the buckets of run *run_id* ``loaded`` with their (rows, superseded, checksum),
        in one transaction; returns the buckets marked. Only buckets the run still holds are
        marked (see ``set_job_state``'s *of_run*): after a new load began, none."""
        t = jobs_table
        with self._transaction() as conn:
            held = set(conn.execute(
                sa.select(t.c.b_index).where(t.c.b_index.in_(list(loaded)), t.c.run_id == run_id,
                                             t.c.state == "running").with_for_update()).scalars())
            now = time.time()
            for b in sorted(held):
                rows, superseded, checksum = loaded[b]
                conn.execute(t.update().where(t.c.b_index == b).values(
                    state="loaded", ended=now, error=None, rows_loaded=rows,
                    superseded=superseded, checksum_loaded=checksum))
        return sorted(held)

    def record_loaded(self, b_index: int, rows: int, superseded: int, checksum: int) -> None:
        t = jobs_table
        with self._transaction() as conn:
            conn.execute(t.update().where(t.c.b_index == b_index).values(
                rows_loaded=rows, superseded=superseded, checksum_loaded=checksum))

    # -- demand

    def publish_demand(self, coordinator: str, waiting: dict[int, int]) -> None:
        """Replace this coordinator's published demand with *waiting* (bucket -> queries), in
        one transaction: a reader sees the old demand or the new one, never none."""
        t = demand_table
        now = time.time()
        rows = [{"coordinator": coordinator, "b_index": b, "waiting": n, "updated": now}
                for b, n in waiting.items() if n > 0]
        with self._transaction() as conn:
            conn.execute(t.delete().where(t.c.coordinator == coordinator))
            if rows:
                conn.execute(t.insert(), rows)

    def demand(self, max_age: float = 60.0) -> dict[int, int]:
        """Demand per bucket summed over every coordinator that published in the last
        *max_age* seconds (older rows belong to coordinators that died)."""
        t = demand_table
        query = (sa.select(t.c.b_index, sa.func.sum(t.c.waiting))
                 .where(t.c.updated >= time.time() - max_age).group_by(t.c.b_index))
        with self._transaction() as conn:
            return {int(b): int(n) for b, n in conn.execute(query)}

    def published_demand(self, max_age: float | None = None) -> list[DemandRow]:
        """Each coordinator's published rows (only those of the last *max_age* s, if given)."""
        t = demand_table
        query = sa.select(t.c.coordinator, t.c.b_index, t.c.waiting, t.c.updated)
        if max_age is not None:
            query = query.where(t.c.updated >= time.time() - max_age)
        with self._transaction() as conn:
            return [DemandRow(*row)
                    for row in conn.execute(query.order_by(t.c.coordinator, t.c.b_index))]

    def publish_answers(self, coordinator: str, answered: dict[str, int]) -> None:
        """Record this coordinator's count of queries answered per route (or outcome)."""
        if not answered:
            return
        t = answers_table
        now = time.time()
        upsert = mysql.insert(t)
        with self._transaction() as conn:
            conn.execute(upsert.on_duplicate_key_update(answered=upsert.inserted.answered,
                                                        updated=upsert.inserted.updated),
                         [{"coordinator": coordinator, "route": route, "answered": n,
                           "updated": now} for route, n in answered.items()])

    def answers(self) -> tuple[dict[str, int], int]:
        """Queries answered per route, summed over every coordinator of the dataset (closed
        ones included), and how many coordinators published."""
        t = answers_table
        with self._transaction() as conn:
            by_route = {route: int(n) for route, n in conn.execute(
                sa.select(t.c.route, sa.func.sum(t.c.answered)).group_by(t.c.route))}
            coordinators = conn.execute(
                sa.select(sa.func.count(sa.distinct(t.c.coordinator)))).scalar()
        return by_route, int(coordinators or 0)

    # -- coordinators' heartbeats

    def heartbeat(self, coordinator: str, load_id: str | None, interval_s: float) -> None:
        """A running coordinator says it is alive and which load it has seen (None: none yet,
        or a query of an older load is still in flight)."""
        values = {"load_id": load_id, "interval_s": interval_s, "updated": time.time()}
        statement = (mysql.insert(coordinators_table).values(coordinator=coordinator, **values)
                     .on_duplicate_key_update(**values))
        with self._transaction() as conn:
            conn.execute(statement)

    def forget_coordinator(self, coordinator: str) -> None:
        t = coordinators_table
        with self._transaction() as conn:
            conn.execute(t.delete().where(t.c.coordinator == coordinator))

    def coordinators_behind(self, load_id: str) -> list[str]:
        """Live coordinators (a heartbeat within three of their poll intervals, and 2 s) that
        have not yet seen *load_id* with nothing older in flight."""
        t = coordinators_table
        now = time.time()
        with self._transaction() as conn:
            rows = conn.execute(sa.select(t.c.coordinator, t.c.load_id, t.c.interval_s,
                                          t.c.updated)).all()
        return sorted(c for c, seen, interval, updated in rows
                      if updated >= now - (3 * interval + 2.0) and seen != load_id)

    # -- sessions

    def running_statements(self) -> list[str]:
        """The first 64 characters of each statement that another session of this MySQL user
        runs now in this database (a fault campaign records them as the point a kill hit: the
        hot path's ``LOAD DATA``, its merge, its index build)."""
        query = sa.text("SELECT LEFT(info, 64) FROM information_schema.processlist "
                        "WHERE db = DATABASE() AND id <> CONNECTION_ID() AND info IS NOT NULL "
                        "AND command <> 'Sleep'")
        with self._transaction() as conn:
            return [row[0] for row in conn.execute(query)]

    def session_count(self) -> int:
        """The MySQL sessions open on this database, this one included (the soak watches them
        stay flat: a leak of connections shows here first)."""
        query = sa.text("SELECT COUNT(*) FROM information_schema.processlist "
                        "WHERE db = DATABASE()")
        with self._transaction() as conn:
            return int(conn.execute(query).scalar())

    # -- locks

    def named_lock(self, name: str) -> NamedLock | None:
        """Take the MySQL named lock *name* now, or None if another session holds it. Named
        locks are server-wide: put the database's name in *name* to keep datasets apart."""
        return named_lock(self.config, name)

