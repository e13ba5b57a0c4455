"""The catalog's chunks and bucket index: one transaction per chunk step (``chunk_copied``,
``chunk_bucketed``, with the claim its check found false), so that a resumed load reads one
consistent state, and the bucket index of each load (its cold buckets, and the buckets of its
hot files) with the job states.

A bucket's index row is recomputed from its ``debl_bucket_chunks`` rows, so re-running the
dist_ch of a chunk replaces exactly that chunk's share.
"""

from __future__ import annotations

import time
from dataclasses import asdict, replace

import sqlalchemy as sa
from sqlalchemy.dialects import mysql

from debl.format.bucket_map import BucketMap
from debl.catalog.base import CatalogEngine
from debl.catalog.loads import write_file_counts, write_phase
from debl.catalog.records import Bucket, BucketChunk, ChunkRecord, FalseClaim
from debl.catalog.schema import (EarlyAnswering, JobState, bucket_chunks_table, buckets_table,
                                 chunks_table, early_table, false_claims_table, jobs_table)

_CHECKSUM_MOD = 1 << 64  # as debl.format.link.CHECKSUM_MOD: checksums are sums mod 2^64


class IndexCatalog:
    """Chunks, and the bucket index of each load: ``Catalog.index``."""

    def __init__(self, engine: CatalogEngine):
        self._transaction = engine.transaction

    # -- chunks

    def chunk_copied(self, load_id: str, chunk: ChunkRecord, started: float, ended: float,
                     lines: int) -> None:
        """A chunk is in HDFS: its row (``copied``) and its copy phase, in one transaction."""
        with self._transaction() as conn:
            _write_chunk(conn, load_id, chunk)
            write_phase(conn, load_id, "copy", _item(chunk), started, ended, chunk.bytes, lines)

    def chunk_bucketed(self, load_id: str, chunk: ChunkRecord, bucket_map: BucketMap,
                       parts: list[BucketChunk], location: str, file_part: str,
                       per_file: dict[int, tuple[int, int]], started: float,
                       ended: float, phase: str | None = None,
                       false_claim: FalseClaim | None = None) -> None:
        """dist_ch bucketed a chunk: its share of every bucket and the buckets' index rows (a
        cold bucket new to the index gets a ``pending`` job), its per-file counts under
        *file_part*, its dist_ch phase, the chunk ``bucketed`` and *false_claim*, a claim its
        check found false (``write_false_claim``), in one transaction: a chunk is bucketed with
        all of that or not at all (a resume redoes it, and checks it again). *phase*: the phase
        it is timed under (``dist_ch`` unless said: ``demand`` for a chunk fetched on demand)."""
        with self._transaction() as conn:
            _write_bucket_chunks(conn, load_id, chunk.chunk_no, chunk.hot, bucket_map, parts,
                                 location)
            write_file_counts(conn, load_id, file_part, per_file)
            write_phase(conn, load_id, phase or "dist_ch", _item(chunk), started, ended,
                        chunk.bytes, sum(p.rows for p in parts))
            _write_chunk(conn, load_id, chunk)
            if false_claim is not None:
                write_false_claim(conn, load_id, false_claim)

    def forget_chunks(self, load_id: str, chunk_nos: list[int]) -> None:
        """Delete the rows of chunks a resumed load redoes (copied, never bucketed), in one
        transaction: their bytes are copied again, maybe cut otherwise."""
        if chunk_nos:
            with self._transaction() as conn:
                conn.execute(chunks_table.delete().where(chunks_table.c.load_id == load_id,
                                                         chunks_table.c.chunk_no.in_(chunk_nos)))

    def chunks(self, load_id: str) -> list[ChunkRecord]:
        """The load's chunks (hot and cold) by number."""
        t = chunks_table
        query = (sa.select(t.c.chunk_no, t.c.path, t.c.bytes, t.c.layout, t.c.state, t.c.hot)
                 .where(t.c.load_id == load_id).order_by(t.c.chunk_no))
        with self._transaction() as conn:
            return [ChunkRecord(*row) for row in conn.execute(query)]

    # -- the bucket index

    def buckets(self, load_id: str, hot: bool = False) -> list[Bucket]:
        """The load's bucket index with each bucket's job state, by b_index; *hot*: the
        buckets of its hot files instead (their state is ``hot``)."""
        with self._transaction() as conn:
            return read_buckets(conn, load_id, hot)

    def bucket_paths(self, b_index: int, load_id: str, hot: bool = False) -> list[str]:
        """The path prefixes of a bucket's files, one per chunk, in chunk order."""
        return [c.path for c in self.bucket_chunks(b_index, load_id, hot)]

    def bucket_chunks(self, b_index: int, load_id: str, hot: bool = False) -> list[BucketChunk]:
        """What each dist_ch wrote into the bucket of *load_id*, in chunk order; *hot*: into
        the bucket of its hot files."""
        t = bucket_chunks_table
        query = (sa.select(t.c.b_index, t.c.chunk_no, t.c.rows, t.c.bytes, t.c.checksum,
                           t.c.path, t.c.c_lo, t.c.c_hi, t.c.hot)
                 .where(t.c.load_id == load_id, t.c.hot == hot, t.c.b_index == b_index)
                 .order_by(t.c.chunk_no))
        with self._transaction() as conn:
            return [BucketChunk(*row) for row in conn.execute(query)]


def read_buckets(conn, load_id: str, hot: bool) -> list[Bucket]:
    """In the transaction of *conn*: the load's (hot) buckets with their job states."""
    b, j = buckets_table, jobs_table
    state = sa.literal("hot") if hot else sa.func.coalesce(j.c.state, JobState.PENDING)
    query = (sa.select(b.c.b_index, b.c.k_lo, b.c.k_hi, b.c.rows, b.c.bytes, b.c.checksum,
                       b.c.location, state, b.c.c_lo, b.c.c_hi, b.c.hot)
             .select_from(b.outerjoin(j, sa.and_(j.c.load_id == b.c.load_id,
                                                 j.c.b_index == b.c.b_index)))
             .where(b.c.load_id == load_id, b.c.hot == hot)
             .order_by(b.c.b_index))
    return [Bucket(*row) for row in conn.execute(query)]


def write_false_claim(conn, load_id: str, claim: FalseClaim) -> FalseClaim:
    """In the transaction of *conn*: *claim*, found false, recorded under the load's next
    number, and its early answers stopped. Here, with the chunks: a claim is found as a chunk
    is bucketed, and recorded with it (``chunk_bucketed``); recorded after it, a kill between
    the two left a resumed load answering early from a manifest shown to lie. Returns
    *claim* with its number."""
    t, e = false_claims_table, early_table
    n = conn.execute(sa.select(sa.func.count()).where(t.c.load_id == load_id)).scalar()
    claim = replace(claim, claim_no=int(n))
    now = time.time()
    conn.execute(t.insert().values(load_id=load_id, found=now, **asdict(claim)))
    conn.execute(e.update().where(e.c.load_id == load_id)
                 .values(state=EarlyAnswering.STOPPED, updated=now))
    return claim


def _item(chunk: ChunkRecord) -> str:
    return f"{chunk.chunk_no:05d}"


def _write_chunk(conn, load_id: str, chunk: ChunkRecord) -> None:
    values = {"path": chunk.path, "bytes": chunk.bytes, "layout": chunk.layout,
              "state": chunk.state, "hot": chunk.hot}
    conn.execute(mysql.insert(chunks_table).values(load_id=load_id, chunk_no=chunk.chunk_no,
                                                   **values).on_duplicate_key_update(**values))


def _write_bucket_chunks(conn, load_id: str, chunk_no: int, hot: bool, bucket_map: BucketMap,
                         parts: list[BucketChunk], location: str) -> None:
    """Replace a chunk's share of every bucket and recompute those buckets' index rows
    (``k_lo``, ``k_hi`` from *bucket_map*; sums and the span over the chunks; a bucket no chunk
    has rows of any more leaves the index); a new cold bucket gets a ``pending`` job row."""
    bc, index, jobs = bucket_chunks_table, buckets_table, jobs_table
    mine = [bc.c.load_id == load_id, bc.c.hot == hot]
    touched = set(conn.execute(sa.select(bc.c.b_index).where(*mine, bc.c.chunk_no == chunk_no))
                  .scalars())
    touched |= {p.b_index for p in parts}
    conn.execute(bc.delete().where(*mine, bc.c.chunk_no == chunk_no))
    if parts:
        conn.execute(bc.insert(), [
            {"load_id": load_id, "hot": hot, "b_index": p.b_index, "chunk_no": chunk_no,
             "rows": p.rows, "bytes": p.bytes, "checksum": p.checksum, "path": p.path,
             "c_lo": p.c_lo, "c_hi": p.c_hi} for p in parts])
    if not touched:
        return
    sums = conn.execute(
        sa.select(bc.c.b_index, sa.func.sum(bc.c.rows), sa.func.sum(bc.c.bytes),
                  sa.func.sum(bc.c.checksum), sa.func.min(bc.c.c_lo), sa.func.max(bc.c.c_hi))
        .where(*mine, bc.c.b_index.in_(touched)).group_by(bc.c.b_index)).all()
    emptied = touched - {b for b, *_ in sums}
    if emptied:
        conn.execute(index.delete().where(index.c.load_id == load_id, index.c.hot == hot,
                                          index.c.b_index.in_(emptied)))
    if not sums:
        return
    upsert = mysql.insert(index)
    conn.execute(
        upsert.on_duplicate_key_update({c.name: upsert.inserted[c.name]
                                        for c in index.columns if not c.primary_key}),
        [{"load_id": load_id, "hot": hot, "b_index": b, "k_lo": bucket_map.range_of(b)[0],
          "k_hi": bucket_map.range_of(b)[1], "rows": int(rows), "bytes": int(size),
          "checksum": int(checksum) % _CHECKSUM_MOD, "location": f"{location}/{b}",
          "c_lo": int(c_lo), "c_hi": int(c_hi)}
         for b, rows, size, checksum, c_lo, c_hi in sums])
    if not hot:
        conn.execute(mysql.insert(jobs).prefix_with("IGNORE"),
                     [{"load_id": load_id, "b_index": b, "state": JobState.PENDING}
                      for b, *_ in sums])
