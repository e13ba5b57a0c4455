"""What the catalog returns: frozen dataclasses, never driver rows."""

from __future__ import annotations

from dataclasses import dataclass

from debl.buckets import BucketMap

@dataclass(frozen=True)
class LoadRecord:
    """A load. ``params`` and ``summary`` are the JSON objects the load stored."""

    load_id: str
    approach: str
    source: str
    state: str  # running / up / failed
    bucket_map: BucketMap | None  # None: not decided yet, or no cold file
    chunk_size: int
    params: dict
    started: float
    uptime: float | None
    ended: float | None
    hot_k_lo: int | None
    hot_k_hi: int | None
    hot_rows: int
    summary: dict | None
    error: str | None


@dataclass(frozen=True)
class LoadFile:
    """A source file of a load; ``file_seq`` is its place in the source's listing."""

    file_seq: int
    name: str
    size: int
    mtime: float
    hot: bool


@dataclass(frozen=True)
class FileCount:
    """Rows and rejects that one part of a load (``hot``, ``chunk-NNNNN``) took from a file."""

    file_seq: int
    part: str
    rows: int
    rejects: int


@dataclass(frozen=True)
class ChunkRecord:
    """A cold chunk. ``layout`` is the chunker's own description of the chunk's segments
    (written by ``loaders.chunker.Chunk.record``, read back by ``Chunk.of``)."""

    chunk_no: int
    path: str
    bytes: int
    layout: dict
    state: str  # copied / bucketed


@dataclass(frozen=True)
class Phase:
    """A timed item of a load's phase; ``ended`` is None while it runs (or if it was killed)."""

    phase: str
    item: str
    started: float
    ended: float | None
    bytes: int | None
    rows: int | None


@dataclass(frozen=True)
class Bucket:
    """A bucket's index row with its job state (``pending`` if it has no job row)."""

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


@dataclass(frozen=True)
class Job:
    """A bucket's job status. gen_HF sets the three counts when the bucket is ``loaded``."""

    b_index: int
    state: str
    run_id: str | None
    queued: float | None
    started: float | None
    ended: float | None
    attempts: int
    error: str | None
    rows_loaded: int | None
    superseded: int | None
    checksum_loaded: int | None


@dataclass(frozen=True)
class DemandRow:
    """What one coordinator published for one bucket, and when."""

    coordinator: str
    b_index: int
    waiting: int
    updated: float
