"""The catalog's loads, three roles: ``LoadsCatalog``, each load's row (its namespace, state,
uptime, hot state) and which load is current (the day every coordinator serves) and which one
it replaced (``debl rollback``), docs/LOADING.md, "Days"; ``FilesCatalog``, a load's source
files and per-file counts; ``PhasesCatalog``, its timed phases.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import asdict
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql

from debl.format.bucket_map import BucketMap
from debl.catalog.base import CatalogEngine
from debl.catalog.records import FileCount, LoadFile, LoadRecord, Phase
from debl.catalog.schema import (DATASET_TABLES, HotState, LoadState, current_table,
                                 file_counts_table, files_table, hot_keys_table, loads_table,
                                 phases_table)
from debl.errors import LoadStateError
from debl.keys.key_filter import KeyFilter
from debl.namespace import Namespace
from debl.position import DumpPosition

_LOAD_UPDATES = frozenset({"state", "uptime", "ended", "hot_k_lo", "hot_k_hi", "hot_rows",
                           "summary", "error", "hot_state"})
_SLOT = 1  # debl_current's one row


def load_record(row) -> LoadRecord:
    """A ``debl_loads`` row (a mapping) as a LoadRecord."""
    stored = row["bucket_map"]
    return LoadRecord(**{**row, "bucket_map": None if stored is None
                         else BucketMap.from_dict(stored)})


class LoadsCatalog:
    """Loads and the current load (the days): ``Catalog.loads``."""

    def __init__(self, engine: CatalogEngine):
        self._transaction = engine.transaction

    # -- loads

    def begin_load(self, load_id: str, approach: str, source: str, chunk_size: int,
                   params: dict, namespace: Namespace, started: float | None = None,
                   hot: bool = False, position: DumpPosition | None = None) -> None:
        """Record a new load, in its own *namespace*, that started at *started* (default:
        now). Nothing of any other load changes: the current one keeps serving until this one
        is up (``make_current``). *hot*: the load has hot files (``hot_state`` loading).
        *position*: the dump's position its listing carries."""
        with self._transaction() as conn:
            conn.execute(loads_table.insert().values(
                load_id=load_id, approach=approach, source=source, state=LoadState.RUNNING,
                chunk_size=chunk_size, params=params,
                started=time.time() if started is None else started,
                link_table=namespace.link_table, hbase_table=namespace.hbase_table,
                hdfs_dir=namespace.hdfs_dir, hot_state=HotState.LOADING if hot else HotState.NONE,
                dump_gtid=None if position is None else position.gtid,
                dump_source=None if position is None else position.source))

    def update_load(self, load_id: str, **values: Any) -> None:
        """Set some of a load's fields: ``state``, ``uptime``, ``ended``, ``hot_k_lo``,
        ``hot_k_hi``, ``hot_rows``, ``summary`` (a dict), ``error``, ``hot_state`` (the bucket
        map: ``set_bucket_map``; being current: ``make_current``)."""
        unknown = set(values) - _LOAD_UPDATES
        if unknown:
            raise ValueError(f"update_load cannot set {', '.join(sorted(unknown))}")
        t = loads_table
        with self._transaction() as conn:
            conn.execute(t.update().where(t.c.load_id == load_id).values(**values))

    def set_bucket_map(self, load_id: str, bucket_map: BucketMap) -> None:
        """Record the load's bucket map (decided once, before its first chunk is bucketed)."""
        t = loads_table
        with self._transaction() as conn:
            conn.execute(t.update().where(t.c.load_id == load_id)
                         .values(bucket_map=bucket_map.to_dict()))

    def load(self, load_id: str | None = None) -> LoadRecord | None:
        """A load; without an id the newest one by start time (which may still be loading: the
        one being served is ``current``). None if there is none."""
        t = loads_table
        query = sa.select(t).order_by(t.c.started.desc()).limit(1)
        if load_id is not None:
            query = query.where(t.c.load_id == load_id)
        with self._transaction() as conn:
            row = conn.execute(query).mappings().first()
        return None if row is None else load_record(row)

    def get(self, load_id: str) -> LoadRecord:
        """The load *load_id*, which must be recorded: LoadStateError naming it if it is not."""
        load = self.load(load_id)
        if load is None:
            raise LoadStateError(f"no load {load_id} in the catalog")
        return load

    def loads(self) -> list[LoadRecord]:
        """Every load, newest first."""
        t = loads_table
        with self._transaction() as conn:
            return [load_record(row) for row in
                    conn.execute(sa.select(t).order_by(t.c.started.desc())).mappings()]

    # -- the current load

    def current(self) -> LoadRecord | None:
        """The load every coordinator serves (None before the first load is up)."""
        with self._transaction() as conn:
            return read_current(conn)

    def previous(self) -> str | None:
        """The load the current one replaced, while its stores exist and cleanup has not begun
        dropping them (else None)."""
        with self._transaction() as conn:
            return _read_previous(conn)

    def days(self) -> tuple[list[LoadRecord], LoadRecord | None, str | None]:
        """Every load (newest first), the current one and the previous one (while its stores
        exist and are not being dropped), read in one transaction: what cleanup decides on (a
        switch between separate reads could pair one moment's current load with another's
        previous)."""
        t = loads_table
        with self._transaction() as conn:
            loads = [load_record(row) for row in
                     conn.execute(sa.select(t).order_by(t.c.started.desc())).mappings()]
            current = read_current(conn)
            previous = _read_previous(conn)
        return loads, current, previous

    def make_current(self, load_id: str, uptime: float, summary: dict | None = None) -> None:
        """The load is up: record its uptime and make it the current load, in one transaction,
        so that every coordinator moves to it at its next poll and no reader ever sees it up
        but not current (or current but not up). The load it replaces becomes the previous.

        Raises LoadStateError, changing nothing, for a load whose stores cleanup dropped (or
        began dropping) or that a later load superseded: a load that lost its lock while another
        ran once became current with its tables gone (docs/RELIABILITY.md, "Concurrency")."""
        now = time.time()
        t, c = loads_table, current_table
        values: dict[str, Any] = {"state": LoadState.UP, "uptime": uptime, "switched": now}
        if summary is not None:
            values["summary"] = summary
        with self._transaction() as conn:
            conn.execute(sa.select(c.c.slot).where(c.c.slot == _SLOT).with_for_update())
            row = conn.execute(sa.select(t.c.started, t.c.dropping, t.c.dropped)
                               .where(t.c.load_id == load_id).with_for_update()).first()
            if row is None:
                raise LoadStateError(f"no load {load_id}: it cannot become current")
            if row.dropping is not None or row.dropped is not None:
                raise LoadStateError(f"load {load_id} cannot become current: its stores were "
                                     "dropped (or are being dropped) by cleanup (a newer load "
                                     "superseded it); run `debl load` anew")
            newer = conn.execute(sa.select(t.c.load_id).where(t.c.started > row.started)
                                 .order_by(t.c.started.desc()).limit(1)).scalar()
            if newer is not None:
                raise LoadStateError(f"load {load_id} cannot become current: load {newer} "
                                     "started after it and supersedes it (`debl status`)")
            conn.execute(t.update().where(t.c.load_id == load_id).values(**values))
            old = conn.execute(sa.select(c.c.load_id).where(c.c.slot == _SLOT)
                               .with_for_update()).scalar()
            previous = old if old is not None and old != load_id else None
            upsert = mysql.insert(c).values(slot=_SLOT, load_id=load_id, previous=previous,
                                            switched=now)
            conn.execute(upsert.on_duplicate_key_update(load_id=load_id, previous=previous,
                                                        switched=now))

    def rollback(self) -> tuple[str, str]:
        """Make the previous load current again, in one transaction; returns (the load that
        was current, the one that is now). Raises LoadStateError when there is no previous
        load whose stores still exist: none, dropped, or being dropped (a cleanup killed
        mid-drop leaves some of its stores gone)."""
        t, c = loads_table, current_table
        now = time.time()
        with self._transaction() as conn:
            row = conn.execute(sa.select(c.c.load_id, c.c.previous).where(c.c.slot == _SLOT)
                               .with_for_update()).first()
            if row is None or row.previous is None:
                raise LoadStateError("there is no previous load to roll back to: only one load "
                                     "has been up since the stores were last cleaned")
            previous = conn.execute(sa.select(t.c.state, t.c.dropping, t.c.dropped)
                                    .where(t.c.load_id == row.previous)).first()
            if previous is not None and previous.dropped is None and previous.dropping:
                raise LoadStateError(f"the previous load {row.previous} can no longer be "
                                     "served: a cleanup began dropping its stores "
                                     f"{now - previous.dropping:.0f} s ago and has not finished "
                                     "(it was stopped, or still runs), so some may be gone; "
                                     "`debl cleanup` finishes the drop; to serve that day "
                                     "again, load its dump anew (`debl load SOURCE`)")
            if previous is None or previous.dropped is not None or previous.state != LoadState.UP:
                raise LoadStateError(f"the previous load {row.previous} can no longer be "
                                     "served: its stores were dropped by cleanup (the "
                                     "keep_previous_load setting says how long they are kept); "
                                     "to serve that day again, load its dump anew (`debl load "
                                     "SOURCE`)")
            conn.execute(c.update().where(c.c.slot == _SLOT)
                         .values(load_id=row.previous, previous=row.load_id, switched=now))
            conn.execute(t.update().where(t.c.load_id == row.previous).values(switched=now))
        return row.load_id, row.previous

    # -- the hot path

    def take_over_hot(self, load_id: str, bytes: int, rows: int, k_lo: int | None,
                      k_hi: int | None, counts: dict[int, tuple[int, int]] | None,
                      hot_keys: KeyFilter | None = None) -> None:
        """MySQL holds the load's hot rows (merged and indexed): end the hot phase, record the
        per-file counts (*counts*, when the hot path is the one that counted the hot files'
        lines), the load's hot range, rows and key filter, and hand the hot keys to MySQL
        (``hot_state`` mysql), in one transaction. A resumed load skips the hot path once its
        phase has ended, and coordinators read MySQL for hot keys from then on, so what sends
        queries to MySQL must be recorded with that end, never after it (a kill in between
        once hid MySQL's rows)."""
        p, fc, loads, hk = phases_table, file_counts_table, loads_table, hot_keys_table
        now = time.time()
        with self._transaction() as conn:
            conn.execute(hk.delete().where(hk.c.load_id == load_id))
            if hot_keys is not None:
                conn.execute(hk.insert().values(load_id=load_id, bits=hot_keys.bits))
            conn.execute(p.update().where(p.c.load_id == load_id, p.c.phase == "hot",
                                          p.c.item == "all")
                         .values(ended=now, bytes=bytes, rows=rows))
            if counts is not None:
                conn.execute(fc.delete().where(fc.c.load_id == load_id, fc.c.part == "hot"))
                if counts:
                    conn.execute(fc.insert(), [{"load_id": load_id, "file_seq": seq,
                                                "part": "hot", "rows": n, "rejects": bad}
                                               for seq, (n, bad) in counts.items()])
            conn.execute(loads.update().where(loads.c.load_id == load_id)
                         .values(hot_k_lo=k_lo, hot_k_hi=k_hi, hot_rows=rows,
                                 hot_state=HotState.MYSQL, taken_over=now))

    def hot_keys(self, load_id: str) -> KeyFilter | None:
        """The key filter of the load's hot rows in MySQL; None if it has none (no hot file,
        or MySQL has not taken the hot keys over): then every key in the hot range may be in
        MySQL."""
        t = hot_keys_table
        with self._transaction() as conn:
            bits = conn.execute(sa.select(t.c.bits).where(t.c.load_id == load_id)).scalar()
        return None if bits is None else KeyFilter(bits)

    # -- dropping a load's stores

    def clear_current(self) -> None:
        """No load is current any more: coordinators wait for the next uptime (a bench before
        each approach; never part of serving)."""
        with self._transaction() as conn:
            conn.execute(current_table.delete())

    def mark_dropping(self, load_id: str, current: LoadRecord | None) -> bool:
        """Cleanup is about to drop the load's stores: mark it dropping, in one transaction
        with a last look at the days, and only while *current* (what cleanup decided on) is
        still the current load, switched at the same instant (a rollback or a new day's uptime
        since may have made the load current or previous). Returns whether it is marked; also
        True, changing nothing, for a load a cleanup killed mid-drop marked before (its drop is
        to be finished). From then on the load is never current again (``make_current``,
        ``rollback`` refuse it) and is no previous day (docs/LOADING.md, "Days")."""
        t, c = loads_table, current_table
        with self._transaction() as conn:
            slot = conn.execute(sa.select(c.c.load_id, c.c.switched).where(c.c.slot == _SLOT)
                                .with_for_update()).first()
            row = conn.execute(sa.select(t.c.dropping, t.c.dropped).where(t.c.load_id == load_id)
                               .with_for_update()).first()
            if row is None or row.dropped is not None:
                return False
            if row.dropping is not None:
                return True
            seen = None if current is None else (current.load_id, current.switched)
            if (None if slot is None else tuple(slot)) != seen or (
                    seen is not None and load_id == seen[0]):
                return False
            conn.execute(t.update().where(t.c.load_id == load_id).values(dropping=time.time()))
        return True

    def being_dropped(self) -> list[LoadRecord]:
        """The loads marked dropping and not dropped yet, oldest mark first: a cleanup is
        dropping their stores, or was stopped doing it (the next one finishes)."""
        t = loads_table
        query = (sa.select(t).where(t.c.dropping.is_not(None), t.c.dropped.is_(None))
                 .order_by(t.c.dropping))
        with self._transaction() as conn:
            return [load_record(row) for row in conn.execute(query).mappings()]

    def forget_dataset(self, load_id: str) -> None:
        """Cleanup dropped the load's stores: delete its dataset rows (buckets, jobs, demand,
        answers, asks, key filter) and mark it dropped, in one transaction. Its loads, files,
        counts, chunks and phases rows stay for the reports. Refused for the current load."""
        t = loads_table
        with self._transaction() as conn:
            current = read_current(conn)
            if current is not None and current.load_id == load_id:
                raise LoadStateError(f"load {load_id} is the current load: it is never dropped")
            for table in DATASET_TABLES:
                conn.execute(table.delete().where(table.c.load_id == load_id))
            conn.execute(t.update().where(t.c.load_id == load_id).values(dropped=time.time()))


class FilesCatalog:
    """A load's source files and the rows and rejects each part took from each:
    ``Catalog.files``."""

    def __init__(self, engine: CatalogEngine):
        self._transaction = engine.transaction

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
        with self._transaction() as conn:
            write_file_counts(conn, load_id, part, counts)

    def file_counts(self, load_id: str) -> list[FileCount]:
        t = file_counts_table
        query = (sa.select(t.c.file_seq, t.c.part, t.c.rows, t.c.rejects)
                 .where(t.c.load_id == load_id).order_by(t.c.file_seq, t.c.part))
        with self._transaction() as conn:
            return [FileCount(*row) for row in conn.execute(query)]


class PhasesCatalog:
    """A load's timed phases (for the reports, and a resumed load's steps done):
    ``Catalog.phases``."""

    def __init__(self, engine: CatalogEngine):
        self._transaction = engine.transaction

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
        with self._transaction() as conn:
            write_phase(conn, load_id, phase, item, started, ended, bytes, rows)

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


def read_current(conn) -> LoadRecord | None:
    """In the transaction of *conn*: the current load (None before the first is up)."""
    c, t = current_table, loads_table
    row = conn.execute(sa.select(t).select_from(t.join(c, c.c.load_id == t.c.load_id))
                       .where(c.c.slot == _SLOT)).mappings().first()
    return None if row is None else load_record(row)


def _read_previous(conn) -> str | None:
    """In the transaction of *conn*: the load the current one replaced, while its stores exist
    and are not being dropped (else None)."""
    c, t = current_table, loads_table
    return conn.execute(
        sa.select(c.c.previous).select_from(c.join(t, t.c.load_id == c.c.previous))
        .where(c.c.slot == _SLOT, t.c.dropping.is_(None), t.c.dropped.is_(None))).scalar()


def write_file_counts(conn, load_id: str, part: str, counts: dict[int, tuple[int, int]]) -> None:
    """In the transaction of *conn*: replace one part's (rows, rejects) per file."""
    t = file_counts_table
    rows = [{"load_id": load_id, "file_seq": seq, "part": part, "rows": n, "rejects": bad}
            for seq, (n, bad) in counts.items()]
    conn.execute(t.delete().where(t.c.load_id == load_id, t.c.part == part))
    if rows:
        conn.execute(t.insert(), rows)


def write_phase(conn, load_id: str, phase: str, item: str, started: float,
                ended: float | None, bytes: int | None, rows: int | None) -> None:
    """In the transaction of *conn*: record a phase item, replacing it."""
    values = {"started": started, "ended": ended, "bytes": bytes, "rows": rows}
    conn.execute(mysql.insert(phases_table)
                 .values(load_id=load_id, phase=phase, item=item, **values)
                 .on_duplicate_key_update(**values))
