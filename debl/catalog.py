"""The catalog: DeBL's own tables in MySQL, shared by the loader, gen_HF and every coordinator.

=====================  =============================================================
table                  one row per
=====================  =============================================================
debl_loads             load: approach, source, bucket map, state, uptime, summary
debl_load_files        source file of a load: size, mtime, hot or cold
debl_file_counts       (file, part): rows and rejects a part of the load took from it
debl_chunks            cold chunk: bytes, lines, file segments, copied / bucketed
debl_phases            timed phase (copy of a chunk, one dist_ch, MySQL load, index...)
debl_bucket_chunks     (bucket, chunk): what one dist_ch wrote into one bucket
debl_buckets           bucket: the bucket index (k_lo, k_hi, rows, bytes, location, and
                       c_lo, c_hi: the real id1 span of its cold rows)
debl_jobs              bucket: the job status (pending/queued/running/loaded/failed)
debl_demand            (coordinator, bucket): buffered queries waiting on the bucket
=====================  =============================================================

The bucket index row of a bucket is recomputed from its ``debl_bucket_chunks`` rows, so re-running
the dist_ch of a chunk replaces exactly that chunk's share. One dataset lives in a database at a
time: a new load clears the bucket, job and demand tables (the previous day's dump is replaced).

Pitfall: a Catalog holds one connection; give each thread its own Catalog.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from debl.buckets import MAX_ID, BucketMap
from debl.config import Config
from debl.mysql import connect

if TYPE_CHECKING:
    from loaders.chunker import Chunk

STATES = ("pending", "queued", "running", "loaded", "failed")

DDL = [
    """CREATE TABLE IF NOT EXISTS debl_loads (
        load_id VARCHAR(40) PRIMARY KEY, approach VARCHAR(32) NOT NULL,
        source VARCHAR(1024) NOT NULL, state VARCHAR(16) NOT NULL,
        chunk_size BIGINT NOT NULL, params TEXT NOT NULL,
        started DOUBLE NOT NULL, uptime DOUBLE NULL, ended DOUBLE NULL,
        hot_k_lo BIGINT NULL, hot_k_hi BIGINT NULL, hot_rows BIGINT NOT NULL DEFAULT 0,
        summary TEXT NULL, error TEXT NULL,
        bucket_map MEDIUMTEXT NULL) DEFAULT CHARSET=utf8mb4""",
    """CREATE TABLE IF NOT EXISTS debl_load_files (
        load_id VARCHAR(40) NOT NULL, file_seq INT NOT NULL, name VARCHAR(1024) NOT NULL,
        size BIGINT NOT NULL, mtime DOUBLE NOT NULL, hot TINYINT NOT NULL,
        PRIMARY KEY (load_id, file_seq)) DEFAULT CHARSET=utf8mb4""",
    """CREATE TABLE IF NOT EXISTS debl_file_counts (
        load_id VARCHAR(40) NOT NULL, file_seq INT NOT NULL, part VARCHAR(32) NOT NULL,
        `rows` BIGINT NOT NULL, rejects BIGINT NOT NULL,
        PRIMARY KEY (load_id, file_seq, part)) DEFAULT CHARSET=utf8mb4""",
    """CREATE TABLE IF NOT EXISTS debl_chunks (
        load_id VARCHAR(40) NOT NULL, chunk_no INT NOT NULL, bytes BIGINT NOT NULL,
        segments TEXT NOT NULL, path VARCHAR(512) NOT NULL, state VARCHAR(16) NOT NULL,
        PRIMARY KEY (load_id, chunk_no)) DEFAULT CHARSET=utf8mb4""",
    """CREATE TABLE IF NOT EXISTS debl_phases (
        load_id VARCHAR(40) NOT NULL, phase VARCHAR(32) NOT NULL, item VARCHAR(64) NOT NULL,
        started DOUBLE NOT NULL, ended DOUBLE NULL, bytes BIGINT NULL, `rows` BIGINT NULL,
        PRIMARY KEY (load_id, phase, item)) DEFAULT CHARSET=utf8mb4""",
    """CREATE TABLE IF NOT EXISTS debl_bucket_chunks (
        b_index BIGINT NOT NULL, chunk_no INT NOT NULL, load_id VARCHAR(40) NOT NULL,
        `rows` BIGINT NOT NULL, bytes BIGINT NOT NULL, checksum BIGINT UNSIGNED NOT NULL,
        path VARCHAR(512) NOT NULL, c_lo BIGINT NOT NULL, c_hi BIGINT NOT NULL,
        PRIMARY KEY (b_index, chunk_no)) DEFAULT CHARSET=utf8mb4""",
    """CREATE TABLE IF NOT EXISTS debl_buckets (
        b_index BIGINT PRIMARY KEY, k_lo BIGINT NOT NULL, k_hi BIGINT NOT NULL,
        `rows` BIGINT NOT NULL, bytes BIGINT NOT NULL, checksum BIGINT UNSIGNED NOT NULL,
        location VARCHAR(512) NOT NULL, load_id VARCHAR(40) NOT NULL,
        c_lo BIGINT NOT NULL, c_hi BIGINT NOT NULL) DEFAULT CHARSET=utf8mb4""",
    """CREATE TABLE IF NOT EXISTS debl_jobs (
        b_index BIGINT PRIMARY KEY, state VARCHAR(16) NOT NULL, run_id VARCHAR(40) NULL,
        queued DOUBLE NULL, started DOUBLE NULL, ended DOUBLE NULL,
        attempts INT NOT NULL DEFAULT 0, error TEXT NULL, rows_loaded BIGINT NULL,
        superseded BIGINT NULL, checksum_loaded BIGINT UNSIGNED NULL) DEFAULT CHARSET=utf8mb4""",
    """CREATE TABLE IF NOT EXISTS debl_demand (
        coordinator VARCHAR(64) NOT NULL, b_index BIGINT NOT NULL, waiting INT NOT NULL,
        updated DOUBLE NOT NULL, PRIMARY KEY (coordinator, b_index)) DEFAULT CHARSET=utf8mb4""",
]

DATASET_TABLES = ("debl_bucket_chunks", "debl_buckets", "debl_jobs", "debl_demand")

# Columns added with the bucket map (docs/LOADING.md, "Bucket boundaries"), for a catalog made
# before it: (table, column, definition). An old bucket's span defaults to the whole id range (a
# query there needs the bucket, as before), and an old load's width becomes its map.
_ADDED_COLUMNS = (
    ("debl_loads", "bucket_map", "MEDIUMTEXT NULL"),
    ("debl_bucket_chunks", "c_lo", "BIGINT NOT NULL DEFAULT 0"),
    ("debl_bucket_chunks", "c_hi", f"BIGINT NOT NULL DEFAULT {MAX_ID}"),
    ("debl_buckets", "c_lo", "BIGINT NOT NULL DEFAULT 0"),
    ("debl_buckets", "c_hi", f"BIGINT NOT NULL DEFAULT {MAX_ID}"),
)


@dataclass(frozen=True)
class Bucket:
    b_index: int
    k_lo: int
    k_hi: int
    rows: int
    bytes: int
    checksum: int
    location: str
    state: str
    c_lo: int  # the lowest and highest id1 of the bucket's cold rows
    c_hi: int


@dataclass(frozen=True)
class BucketChunk:
    """What one dist_ch wrote into one bucket."""

    b_index: int
    chunk_no: int
    rows: int
    bytes: int
    checksum: int
    path: str
    c_lo: int  # the lowest and highest id1 of these rows
    c_hi: int


class Catalog:
    """DeBL's tables in MySQL. Use with ``with``; one per thread."""

    def __init__(self, config: Config):
        self.config = config
        self.conn = connect(config)
        self._ensure()

    def __enter__(self) -> "Catalog":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.conn.open:
            self.conn.close()

    def _ensure(self) -> None:
        with self.conn.cursor() as cur:
            cur.execute("SHOW TABLES LIKE 'debl\\_%%'")
            present = {row[0] for row in cur.fetchall()}
            for ddl in DDL:
                name = ddl.split("EXISTS", 1)[1].split("(", 1)[0].strip()
                if name not in present:
                    cur.execute(ddl)
            for table, column, definition in _ADDED_COLUMNS:
                if table in present:
                    cur.execute(f"SHOW COLUMNS FROM {table} LIKE %s", (column,))
                    if not cur.fetchall():
                        cur.execute(f"ALTER TABLE {table} ADD COLUMN {column} {definition}")
                        if column == "bucket_map":
                            cur.execute("UPDATE debl_loads SET bucket_map = CONCAT('{\"width\":',"
                                        " bucket_width, '}') WHERE bucket_width > 0")

    def execute(self, sql: str, args: Iterable | None = None) -> list[tuple]:
        with self.conn.cursor() as cur:
            cur.execute(sql, args)
            return list(cur.fetchall())

    def executemany(self, sql: str, rows: list[tuple]) -> None:
        if rows:
            with self.conn.cursor() as cur:
                cur.executemany(sql, rows)

    # -- loads

    def begin_load(self, load_id: str, approach: str, source: str, chunk_size: int,
                   params: dict) -> None:
        """Record a new load and clear the previous dataset's buckets, jobs and demand."""
        for table in DATASET_TABLES:
            self.execute(f"DELETE FROM {table}")
        self.execute("INSERT INTO debl_loads (load_id, approach, source, state, chunk_size, params,"
                     " started) VALUES (%s, %s, %s, 'running', %s, %s, %s)",
                     (load_id, approach, source, chunk_size, json.dumps(params), time.time()))

    def update_load(self, load_id: str, **values: object) -> None:
        allowed = {"state", "uptime", "ended", "hot_k_lo", "hot_k_hi", "hot_rows", "summary",
                   "error"}
        assert set(values) <= allowed, values
        sets = ", ".join(f"{k} = %s" for k in values)
        self.execute(f"UPDATE debl_loads SET {sets} WHERE load_id = %s", (*values.values(), load_id))

    def set_bucket_map(self, load_id: str, bucket_map: BucketMap) -> None:
        """Record the load's bucket map (decided once, before its first chunk)."""
        self.execute("UPDATE debl_loads SET bucket_map = %s WHERE load_id = %s",
                     (bucket_map.to_json(), load_id))

    def load(self, load_id: str | None = None) -> dict | None:
        """A load's row as a dict (the latest load if no id)."""
        where, args = ("WHERE load_id = %s", (load_id,)) if load_id else ("", ())
        with self.conn.cursor(dict_cursor()) as cur:
            cur.execute(f"SELECT * FROM debl_loads {where} ORDER BY started DESC LIMIT 1", args)
            return cur.fetchone()

    def add_files(self, load_id: str, files: list[tuple[int, str, int, float, bool]]) -> None:
        self.executemany("REPLACE INTO debl_load_files VALUES (%s, %s, %s, %s, %s, %s)",
                         [(load_id, seq, name, size, mtime, int(hot))
                          for seq, name, size, mtime, hot in files])

    def set_file_counts(self, load_id: str, part: str,
                        counts: dict[int, tuple[int, int]]) -> None:
        """Record, for one part of the load, (rows, rejects) taken from each file."""
        self.execute("DELETE FROM debl_file_counts WHERE load_id = %s AND part = %s",
                     (load_id, part))
        self.executemany("INSERT INTO debl_file_counts VALUES (%s, %s, %s, %s, %s)",
                         [(load_id, seq, part, rows, rej) for seq, (rows, rej) in counts.items()])

    # -- phases (for the reports)

    def phase_start(self, load_id: str, phase: str, item: str = "") -> None:
        self.execute("REPLACE INTO debl_phases (load_id, phase, item, started) "
                     "VALUES (%s, %s, %s, %s)", (load_id, phase, item, time.time()))

    def phase_end(self, load_id: str, phase: str, item: str = "", bytes: int | None = None,
                  rows: int | None = None) -> None:
        self.execute("UPDATE debl_phases SET ended = %s, bytes = %s, `rows` = %s "
                     "WHERE load_id = %s AND phase = %s AND item = %s",
                     (time.time(), bytes, rows, load_id, phase, item))

    def phases(self, load_id: str) -> list[dict]:
        with self.conn.cursor(dict_cursor()) as cur:
            cur.execute("SELECT * FROM debl_phases WHERE load_id = %s ORDER BY started",
                        (load_id,))
            return list(cur.fetchall())

    # -- chunks

    def record_chunk(self, load_id: str, chunk: "Chunk", state: str) -> None:
        layout = {"segments": [dataclasses.asdict(s) for s in chunk.segments],
                  "slices": chunk.slices}
        self.execute("REPLACE INTO debl_chunks VALUES (%s, %s, %s, %s, %s, %s)",
                     (load_id, chunk.chunk_no, chunk.bytes, json.dumps(layout), chunk.path, state))

    def chunks(self, load_id: str) -> list[dict]:
        """The load's chunks: chunk_no, state and the Chunk itself (under "chunk")."""
        from loaders.chunker import Chunk, Segment

        with self.conn.cursor(dict_cursor()) as cur:
            cur.execute("SELECT * FROM debl_chunks WHERE load_id = %s ORDER BY chunk_no",
                        (load_id,))
            rows = list(cur.fetchall())
        for row in rows:
            layout = json.loads(row.pop("segments"))
            row["chunk"] = Chunk(row["chunk_no"], row["path"], row["bytes"],
                                 tuple(Segment(**s) for s in layout["segments"]),
                                 tuple(tuple(x) for x in layout["slices"]))
        return rows

    # -- the bucket index

    def record_bucket_chunks(self, load_id: str, chunk_no: int, bucket_map: BucketMap,
                             parts: list[BucketChunk], location: str) -> None:
        """Replace a chunk's share of every bucket, then recompute those buckets' index rows
        (``k_lo``, ``k_hi`` from *bucket_map*; the cold span over the chunks) and make sure each
        has a job status row (``pending`` if new)."""
        self.conn.begin()
        try:
            with self.conn.cursor() as cur:
                cur.execute("SELECT b_index FROM debl_bucket_chunks WHERE chunk_no = %s",
                            (chunk_no,))
                touched = {r[0] for r in cur.fetchall()} | {p.b_index for p in parts}
                cur.execute("DELETE FROM debl_bucket_chunks WHERE chunk_no = %s", (chunk_no,))
                if parts:
                    cur.executemany(
                        "INSERT INTO debl_bucket_chunks VALUES "
                        "(%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                        [(p.b_index, chunk_no, load_id, p.rows, p.bytes, p.checksum, p.path,
                          p.c_lo, p.c_hi) for p in parts])
                for b in sorted(touched):
                    cur.execute(
                        "REPLACE INTO debl_buckets SELECT %s, %s, %s, SUM(`rows`), SUM(bytes), "
                        "CAST(SUM(checksum) %% 18446744073709551616 AS UNSIGNED), %s, %s, "
                        "MIN(c_lo), MAX(c_hi) "
                        "FROM debl_bucket_chunks WHERE b_index = %s HAVING COUNT(*) > 0",
                        (b, *bucket_map.range_of(b), f"{location}/{b}", load_id, b))
                    cur.execute("INSERT IGNORE INTO debl_jobs (b_index, state) "
                                "VALUES (%s, 'pending')", (b,))
            self.conn.commit()
        except BaseException:
            self.conn.rollback()
            raise

    def buckets(self) -> list[Bucket]:
        rows = self.execute(
            "SELECT b.b_index, b.k_lo, b.k_hi, b.`rows`, b.bytes, b.checksum, b.location, "
            "COALESCE(j.state, 'pending'), b.c_lo, b.c_hi FROM debl_buckets b "
            "LEFT JOIN debl_jobs j ON j.b_index = b.b_index ORDER BY b.b_index")
        return [Bucket(*row) for row in rows]

    def bucket_paths(self, b_index: int) -> list[str]:
        return [r[0] for r in self.execute(
            "SELECT path FROM debl_bucket_chunks WHERE b_index = %s ORDER BY chunk_no",
            (b_index,))]

    # -- job status

    def job_states(self) -> dict[int, str]:
        return dict(self.execute("SELECT b_index, state FROM debl_jobs"))

    def set_job_state(self, buckets: Iterable[int], state: str, run_id: str | None = None,
                      error: str | None = None) -> None:
        assert state in STATES, state
        now = time.time()
        column = {"queued": "queued", "running": "started", "loaded": "ended",
                  "failed": "ended"}.get(state)
        stamp = f", {column} = %s" if column else ""
        extra = ", attempts = attempts + 1" if state == "running" else ""
        for b in buckets:
            args = (state, run_id, error, *([now] if column else []), b)
            self.execute(f"UPDATE debl_jobs SET state = %s, run_id = %s, error = %s{stamp}{extra} "
                         "WHERE b_index = %s", args)

    def record_loaded(self, b_index: int, rows: int, superseded: int, checksum: int) -> None:
        self.execute("UPDATE debl_jobs SET rows_loaded = %s, superseded = %s, checksum_loaded = %s"
                     " WHERE b_index = %s", (rows, superseded, checksum, b_index))

    # -- demand

    def publish_demand(self, coordinator: str, waiting: dict[int, int]) -> None:
        """Replace this coordinator's published demand with *waiting* (bucket -> queries)."""
        now = time.time()
        self.conn.begin()
        with self.conn.cursor() as cur:
            cur.execute("DELETE FROM debl_demand WHERE coordinator = %s", (coordinator,))
            rows = [(coordinator, b, n, now) for b, n in waiting.items() if n > 0]
            if rows:
                cur.executemany("INSERT INTO debl_demand VALUES (%s, %s, %s, %s)", rows)
        self.conn.commit()

    def demand(self, max_age: float = 60.0) -> dict[int, int]:
        """Demand per bucket summed over every coordinator that published recently."""
        return {b: int(n) for b, n in self.execute(
            "SELECT b_index, SUM(waiting) FROM debl_demand WHERE updated >= %s GROUP BY b_index",
            (time.time() - max_age,))}


def dict_cursor():
    import pymysql.cursors

    return pymysql.cursors.DictCursor
