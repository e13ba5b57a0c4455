"""A load's context: the records its steps share instead of a dozen arguments each
(docs/LOADING.md, "How a load runs").

By role:

- ``LoadOptions``: what the user asked (``debl load``'s options).
- ``LoadContext``: what the load is, fixed once it is recorded (or read back, when resumed):
  its settings, id and namespace, its files split hot and cold, its limit of bad lines and
  its kind of uptime. Settings and names only, frozen and picklable: the source, HDFS and the
  catalog are opened where they are used, and their connections are no part of it.
- ``LoadIO``: the load's open ends for the whole run: the source it reads, the reject files it
  writes, the progress it reports (the copy and the hot path share them).
- ``CopyState``: the running copy's shared parts, one per ``loaders.pipeline.copy_and_bucket``:
  its HDFS client, the bucket index, the copy's ledger, the chunk numbers, whose turn the wire
  is, the early answers. The copy thread, dist_ch's (the calling thread) and the fetches on
  demand's use them at once; each part is thread-safe.
- ``LoadProgress`` and ``LoadSummary``: what the load reports as it goes, and at its uptime
  and end.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from debl.catalog import IndexCatalog, Phase
from debl.config import Config
from debl.hdfs import HdfsClient
from debl.namespace import Namespace
from loaders.chunker import WireTurn
from loaders.coverage import Coverage
from loaders.early import EarlyAnswers
from loaders.rejects import RejectWriter
from loaders.source import Source, SourceFile

DEBL_APPROACHES = ("debl", "debl-cold")  # DeBL's own loads; the others: debl.bench.baselines
# The loads that may answer before their uptime: DeBL's own, and the bench's variants of them
# (the baselines' loads do not: docs/LOADING.md, "Answers before the copy ends").
EARLY_APPROACHES = (*DEBL_APPROACHES, "debl-fifo", "debl-raw")


@dataclass(frozen=True)
class LoadOptions:
    hot_bytes: int | None = None
    hot_since: float | None = None
    chunk_size: int | None = None  # None: config.loading.chunk_size
    bucket_width: int | None = None  # None: config.loading.bucket_width (0: sampled split points)
    max_bad: int | None = None  # None: config.loading.max_bad
    approach: str = "debl"
    wait_for_hot: bool = False  # the paper's uptime: up once MySQL holds the hot rows


@dataclass(frozen=True)
class LoadContext:
    """What one load is (see the module): picklable, the same in every thread of the load."""

    config: Config
    load_id: str
    namespace: Namespace
    files: tuple[tuple[int, SourceFile], ...]  # (file_seq, file) in listing order
    hot_seqs: frozenset[int]
    max_bad: int  # the bad lines it takes before it fails (negative: any number)
    wait_for_hot: bool  # the paper's uptime: up only once MySQL holds the hot rows

    @property
    def hot(self) -> list[tuple[int, SourceFile]]:
        """The hot files, in listing order."""
        return [(seq, f) for seq, f in self.files if seq in self.hot_seqs]

    @property
    def cold(self) -> list[tuple[int, SourceFile]]:
        """The cold files, in listing order."""
        return [(seq, f) for seq, f in self.files if seq not in self.hot_seqs]


@dataclass(frozen=True)
class LoadIO:
    """The load's open ends (see the module); not picklable (the source holds connections)."""

    source: Source
    rejects: RejectWriter
    progress: LoadProgress


@dataclass(frozen=True)
class CopyState:
    """The running copy's shared parts (see the module)."""

    load: LoadContext
    io: LoadIO
    hdfs: HdfsClient  # the copy's, with room for its calls at once (loaders.pipeline)
    index: IndexCatalog
    coverage: Coverage  # the copy's ledger: no byte taken twice
    numbers: Callable[[], int]  # the next chunk number, for any thread
    turn: WireTurn  # a fetch on demand reads before the bulk copy
    early: EarlyAnswers | None  # None: the load does not answer before its uptime


@dataclass
class LoadSummary:
    load_id: str
    approach: str
    source: str
    uptime_s: float = 0.0
    taken_over_s: float | None = None  # when MySQL took the hot keys over (None: no hot file)
    hot_files: int = 0
    cold_files: int = 0
    hot_bytes: int = 0
    cold_bytes: int = 0
    hot_rows: int = 0
    cold_rows: int = 0
    chunks: int = 0
    buckets: int = 0
    bucket_map: dict = field(default_factory=dict)  # BucketMap.to_dict(); empty: no cold file
    rejects: int = 0
    reject_file: str = ""
    phases: dict[str, float] = field(default_factory=dict)
    # A load that answered before its uptime (docs/LOADING.md, "Answers before the copy
    # ends"): its state at uptime, the bytes fetched on demand, and each claim found false with
    # the early answers given in the id1s it affects; empty for any other load.
    early: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


class LoadProgress:
    """Callbacks for progress display; the defaults do nothing."""

    def start(self, hot_bytes: int, cold_bytes: int) -> None: ...
    def hot(self, nbytes: int) -> None: ...
    def copied(self, nbytes: int) -> None: ...
    def bucketed(self, chunk_no: int, rows: int, seconds: float) -> None: ...
    def up(self, summary: LoadSummary) -> None: ...
    def message(self, text: str) -> None: ...


def new_load_id() -> str:
    return time.strftime("L%Y%m%d-%H%M%S-") + secrets.token_hex(2)


def reject_path(config: Config, load_id: str) -> Path:
    """The load's reject directory: one file per part (``loaders.rejects``)."""
    return config.state_dir / "loads" / load_id / "rejects"


def phase_sums(phases: list[Phase]) -> dict[str, float]:
    """Seconds per phase name, summed over its finished items."""
    sums: dict[str, float] = {}
    for p in phases:
        if p.ended:
            sums[p.phase] = sums.get(p.phase, 0.0) + p.ended - p.started
    return sums
