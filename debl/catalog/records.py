"""What the catalog returns: frozen dataclasses, never driver rows."""

from __future__ import annotations

from dataclasses import dataclass

from debl.catalog.schema import HotState
from debl.format.bucket_map import BucketMap
from debl.format.link import Link
from debl.keys.key_filter import KeyFilter
from debl.namespace import Namespace
from debl.position import DumpPosition


@dataclass(frozen=True)
class LoadRecord:
    """A load. ``params`` and ``summary`` are the JSON objects the load stored."""

    load_id: str
    approach: str
    source: str
    state: str  # a LoadState: running / up / failed
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
    link_table: str = ""
    hbase_table: str = ""
    hdfs_dir: str = ""
    hot_state: str = HotState.NONE  # none / loading / mysql (MySQL took the hot keys over) / failed
    taken_over: float | None = None
    switched: float | None = None  # when it last became the current load
    dropped: float | None = None  # when cleanup dropped its stores
    dropping: float | None = None  # when cleanup began dropping them (it may have been killed)
    dump_gtid: str | None = None  # the dump's position (None: its listing carries none)
    dump_source: str | None = None

    @property
    def position(self) -> DumpPosition | None:
        """The dump's position the load's listing carried (docs/FRESHNESS.md, "Positions")."""
        if self.dump_gtid is None or self.dump_source is None:
            return None
        return DumpPosition(self.dump_gtid, self.dump_source)

    @property
    def namespace(self) -> Namespace:
        """The stores this load wrote (docs/LOADING.md, "Days")."""
        return Namespace(self.link_table, self.hbase_table, self.hdfs_dir)

    @property
    def wait_for_hot(self) -> bool:
        """The paper's uptime: up only once MySQL has taken the hot files in (no hot buckets)."""
        return bool(self.params.get("wait_for_hot"))

    @property
    def hot_in_mysql(self) -> bool:
        """Whether queries read the load's hot keys from MySQL (else from its hot buckets)."""
        return self.hot_state == HotState.MYSQL


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
    """A chunk of hot or cold files. ``layout`` is the chunker's own description of the chunk's
    segments (written by ``loaders.chunker.Chunk.record``, read back by ``Chunk.of``)."""

    chunk_no: int
    path: str
    bytes: int
    layout: dict
    state: str  # a ChunkState: copied / bucketed
    hot: bool = False


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
    """A bucket's index row with its job state (``pending`` if it has no job row). A hot
    bucket (``hot``) holds the hot files' rows of the range; it has no job: it is read raw
    until MySQL takes the hot keys over."""

    b_index: int
    k_lo: int
    k_hi: int
    rows: int
    bytes: int
    checksum: int
    location: str
    state: str  # a JobState; "hot" for a hot bucket (it has no job)
    c_lo: int  # the lowest and highest id1 of the bucket's rows
    c_hi: int
    hot: bool = False


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
    hot: bool = False


@dataclass(frozen=True)
class Job:
    """A bucket's job status. gen_HF sets the three counts when the bucket is ``loaded``."""

    b_index: int
    state: str  # a JobState
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


@dataclass(frozen=True)
class ServingState:
    """What a coordinator serves, read in one transaction: the current load, its cold buckets
    (with job states), its hot buckets (read until MySQL takes the hot keys over) and, once
    MySQL has, its hot key filter."""

    load: LoadRecord
    buckets: list[Bucket]
    hot_buckets: list[Bucket]
    hot_keys: KeyFilter | None


@dataclass(frozen=True)
class EarlyState:
    """What a coordinator serves before a load's uptime (docs/LOADING.md, "Answers before the
    copy ends"), read in one transaction: the load, its buckets so far (cold and hot), and its
    answerable keys (a ``debl.keys.keyspace.KeySet``'s JSON; None when the generation is the one the
    caller already has). *state*: ``on``, or ``stopped`` once a claim was found false."""

    load: LoadRecord
    state: str  # an EarlyAnswering
    gen: int
    answerable: list | None
    buckets: list[Bucket]
    hot_buckets: list[Bucket]
    ids: tuple[int, int] | None = None  # the id1s the manifests claim (None: any)


@dataclass(frozen=True)
class EarlyProgress:
    """How much of a load is answerable before its uptime, for `debl status` and the page."""

    state: str  # an EarlyAnswering
    key_share: float  # of the ids the manifests claim, the share answerable
    answerable_bytes: int  # the bytes of the pieces whose keys are all answerable
    total_bytes: int
    demand_bytes: int  # bytes fetched on demand
    keys_waiting: int  # distinct id1s queries wait for now


@dataclass(frozen=True)
class FalseClaim:
    """A claim of a load's manifest found false: the file, where, what, and the id1s whose
    early answers it may have made wrong (``[affected_lo, affected_hi]``)."""

    claim_no: int
    file_seq: int
    kind: str  # span / order / point / offset
    offset: int
    detail: str
    affected_lo: int
    affected_hi: int


@dataclass(frozen=True)
class Change:
    """One committed row change of the source's link table (docs/FRESHNESS.md, "Changes"): its
    position (*seq*, the transaction's GTID sequence; *row_no*, the row's order in it), its key,
    and the row after it (*link*), or None for a deletion; the source's commit time and when
    the follower captured it (epoch seconds)."""

    seq: int
    row_no: int
    id1: int
    link_type: int
    id2: int
    link: Link | None
    commit_ts: float
    captured_ts: float

    @property
    def key(self) -> tuple[int, int, int]:
        return (self.id1, self.link_type, self.id2)


@dataclass(frozen=True)
class FollowerState:
    """A source's follower as the catalog has it: the position captured up to (*gtid*, *seq*:
    every change at or before it is in the change log), the last captured commit's time and
    when it was captured, its last sign of life, its state (``following``, ``catching-up``,
    ``failed``, ``stopped``) and the error that stopped or slows it, with what to do; the
    source's head as the follower last read it (*head_gtid*, *head_seq*, at *head_ts*), the
    *changes* it has captured in all, and *kept_from*: the change log holds every change of
    the source past it (a load whose dump's position is older cannot be kept fresh)."""

    source: str
    gtid: str
    seq: int
    commit_ts: float | None
    captured_ts: float | None
    heartbeat: float
    state: str
    error: str | None
    host: str | None
    pid: int | None
    head_gtid: str | None = None
    head_seq: int | None = None
    head_ts: float | None = None
    changes: int = 0
    kept_from: int = 0

    def keeps(self, dump_seq: int) -> bool:
        """Whether the change log holds every change past the dump at *dump_seq* (else a load
        of that dump cannot be kept fresh: pruned, or lost by the source's log)."""
        return self.kept_from <= dump_seq
