"""``debl load``: the offline phase, from a source to uptime.

1. List the source, split the files into hot and cold (``loaders.split``).
2. Decide the bucket map (``debl.buckets``): a fixed width if one is configured, else split
   points from a sample of the cold files (``loaders.sampling``, beside the hot path, the first
   chunk's copy and Spark's start: only dist_ch needs the map). It is recorded with the load
   before the first chunk is bucketed, and a resumed load keeps it.
3. In parallel: the hot files go into MySQL (``loaders.mysql_bulk``, a thread); the cold files
   are copied chunk by chunk into HDFS (``loaders.chunker``, a thread) while the main thread runs
   dist_ch (``loaders.dist_ch``) on each copied chunk, in one long-lived Spark application.
4. When both paths are done the system is up: the load records its uptime and summary.

Every phase's start and end goes to ``debl_phases`` under the load id, for the reports. A killed
load is continued with ``resume=LOAD_ID``: chunks already bucketed are skipped, the copy restarts
after the last of them, and the hot path is redone if it had not finished.

Concurrency and resume (docs/RELIABILITY.md, "Concurrency"):

- One load per dataset at a time: a load (new or resumed) holds the MySQL named lock
  ``debl_load.<database>`` from start to end; a second one is refused with LoadStateError.
- A new load replaces the dataset under running coordinators: once it is recorded (the
  coordinators' next poll sees it and stops answering from the old one) it waits, at most
  ``coordinator_ack_timeout`` seconds, until every live coordinator says it has seen it with no
  query of the old dataset in flight, and only then empties the old stores.
- A resume refuses a source whose files changed (size or mtime) since the load listed them, and
  deletes the bucket files that chunks not yet recorded as bucketed may have left, before their
  dist_ch runs again: a chunk redone after a resume may be cut differently, and its old slice
  files must never be read beside the new ones.

Chunk size (docs/DESIGN.md section 4: small enough that the last dist_ch is short, large enough that
copying a chunk takes longer than bucketing it): the configured size (``--chunk-size``, else
``chunk_size`` but at most an eighth of the cold bytes, so a small input still pipelines) is the
start. A dist_ch that took longer than its chunk's copy means the pipeline is bucketing-bound, so
the next chunk doubles (up to 4x) to amortise Spark's per-job overhead; a grown chunk is cut
into more slices, never larger ones (``dist_ch.slices_for``: a slice is held in its task's
heap). Towards the end chunks taper (at most half of what remains), so the last dist_ch, which
no copy overlaps, is short.
"""

from __future__ import annotations

import queue
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from debl.buckets import BucketMap
from debl.catalog import Catalog, LoadFile, Phase, named_lock
from debl.config import Config
from debl.errors import (BadInputError, DeblError, LoadStateError, ServiceError,
                         SourceError)
from debl.faultpoints import reached
from debl.spark import spark_session
from debl.store.mysql import MySQLStore
from debl.webhdfs import WebHDFS
from loaders import dist_ch
from loaders.chunker import Chunk, ChunkCopier, Position
from loaders.mysql_bulk import load_hot
from loaders.rejects import HOT_PART, RejectWriter, chunk_part, escape_name, unescape_name
from loaders.sampling import sample_bucket_map
from loaders.source import Source, SourceFile, changed_files, open_source, redact_url
from loaders.split import split_files


@dataclass(frozen=True)
class LoadOptions:
    hot_bytes: int | None = None
    hot_since: float | None = None
    chunk_size: int | None = None  # None: config.chunk_size
    bucket_width: int | None = None  # None: config.bucket_width (0: sampled split points)
    max_bad: int | None = None  # None: config.max_bad
    approach: str = "debl"


@dataclass
class LoadSummary:
    load_id: str
    approach: str
    source: str
    uptime_s: float = 0.0
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

    def as_dict(self) -> dict:
        return asdict(self)


class LoadProgress:
    """Callbacks for progress display; the defaults do nothing."""

    def start(self, hot_bytes: int, cold_bytes: int) -> None: ...
    def hot(self, nbytes: int) -> None: ...
    def copied(self, nbytes: int) -> None: ...
    def bucketed(self, chunk_no: int, rows: int, seconds: float) -> None: ...
    def message(self, text: str) -> None: ...


MIN_CHUNK = 4 << 20


def tapered(size: int, remaining: int) -> int:
    """The next chunk's size: *size*, but at most half of what remains (and not below
    MIN_CHUNK, or *size* if that is smaller), so the chunks shrink towards the end and the last
    dist_ch, which nothing overlaps, stays short."""
    return max(min(MIN_CHUNK, size), min(size, remaining // 2))


def new_load_id() -> str:
    return time.strftime("L%Y%m%d-%H%M%S-") + secrets.token_hex(2)


def hdfs_paths(config: Config, load_id: str) -> tuple[str, str]:
    """(chunk directory of the load, bucket directory of the dataset) in HDFS."""
    root = config.hdfs_root.rstrip("/")
    return f"{root}/loads/{load_id}/chunks", f"{root}/buckets"


def reject_path(config: Config, load_id: str) -> Path:
    """The load's reject directory: one file per part (``loaders.rejects``)."""
    return config.state_dir / "loads" / load_id / "rejects"


LOAD_LOCK = "debl_load"


@contextmanager
def load_lock(config: Config) -> Iterator[None]:
    """Hold the dataset's load lock (one ``debl load`` per MySQL database at a time), or raise
    LoadStateError if another load holds it."""
    name = f"{LOAD_LOCK}.{config.mysql_database}"  # named locks are server-wide
    lock = named_lock(config, name)
    if lock is None:
        raise LoadStateError(f"another `debl load` is running on this dataset (MySQL database "
                             f"{config.mysql_database!r}, lock {name}): wait for it to end (`debl "
                             "status`), or give this load another mysql_database")
    try:
        yield
    finally:
        lock.release()


def run_load(config: Config, source_spec: str, options: LoadOptions = LoadOptions(),
             resume: str | None = None, progress: LoadProgress = LoadProgress()) -> LoadSummary:
    """Run (or resume) the offline phase; returns at uptime with the load's summary. Raises
    LoadStateError while another load of the dataset runs."""
    with load_lock(config):
        return _run_load(config, source_spec, options, resume, progress)


def _run_load(config: Config, source_spec: str, options: LoadOptions, resume: str | None,
              progress: LoadProgress) -> LoadSummary:
    t_start = time.time()
    source = open_source(source_spec, config)
    max_bad = config.max_bad if options.max_bad is None else options.max_bad
    chunk_size = options.chunk_size or config.chunk_size
    explicit_chunk_size = options.chunk_size is not None
    hdfs = WebHDFS(config)

    # A new load starts a new dataset: it may replace a catalog of an older DeBL.
    with Catalog(config, replace_older=not resume) as catalog:
        if resume:
            _check_unchanged(catalog, source, resume)
            load_id, files, hot_seqs, bucket_map, done_chunks, hot_done = _resume_state(catalog,
                                                                                      resume)
            t_start = catalog.load(load_id).started
            _drop_stale_bucket_files(hdfs, hdfs_paths(config, load_id)[1], len(done_chunks))
        else:
            load_id = new_load_id()
            listed = source.list()
            if not listed:
                raise DeblError(f"source {source.describe()} holds no files")
            split = split_files(listed, options.hot_bytes, options.hot_since)
            hot_names = {f.name for f in split.hot}
            files = list(enumerate(listed))
            hot_seqs = {seq for seq, f in files if f.name in hot_names}
            width = options.bucket_width if options.bucket_width is not None else config.bucket_width
            bucket_map = BucketMap.fixed(width) if width else None
            done_chunks, hot_done = [], False
            # The load's clock (uptime_s, the bench's times) starts here, listing included.
            catalog.begin_load(load_id, options.approach, source.describe(), chunk_size,
                               {"hot_bytes": options.hot_bytes, "hot_since": options.hot_since,
                                "max_bad": max_bad}, started=t_start)
            catalog.add_files(load_id, [LoadFile(seq, escape_name(f.name), f.size, f.mtime,
                                                 seq in hot_seqs) for seq, f in files])
            try:
                # Nothing of the old dataset is destroyed while a coordinator may still read it.
                _wait_for_coordinators(config, catalog, load_id, progress)
                chunk_dir, bucket_dir = hdfs_paths(config, load_id)
                hdfs.delete(bucket_dir, recursive=True)
                hdfs.mkdirs(bucket_dir)
                if bucket_map is not None:
                    catalog.set_bucket_map(load_id, bucket_map)
                if not hot_seqs:  # a hot path replaces the link table; without one, emptied
                    _empty_link_table(config)
            except BaseException as exc:
                _failed(config, load_id, source_spec, exc)
                raise

    hot = [(seq, f) for seq, f in files if seq in hot_seqs]
    cold = [(seq, f) for seq, f in files if seq not in hot_seqs]
    summary = LoadSummary(load_id, options.approach, source.describe(),
                          hot_files=len(hot), cold_files=len(cold),
                          hot_bytes=sum(f.size for _, f in hot),
                          cold_bytes=sum(f.size for _, f in cold))
    if not explicit_chunk_size:
        # The configured size is for big inputs; a small one still gets a pipeline of chunks.
        chunk_size = min(chunk_size, max(MIN_CHUNK, summary.cold_bytes // 8))
    progress.start(summary.hot_bytes, summary.cold_bytes)
    rejects = RejectWriter(reject_path(config, load_id))
    summary.reject_file = str(rejects.path)
    if resume:  # the parts to redo start afresh
        rejects.keep(([HOT_PART] if hot_done else [])
                     + [chunk_part(c.chunk_no) for c in done_chunks])
    # Beside the cold path (in this thread): the hot path, the drop of the previous dataset's
    # HBase table (gen_HF creates the new one pre-split; dropping takes seconds, so it does not
    # delay the load) and the split-point sample (only dist_ch needs the map).
    background = ThreadPoolExecutor(max_workers=3, thread_name_prefix="debl-load")
    dropping = None if resume else background.submit(_drop_hbase_table, config)
    hot_path: Future | None = None
    try:
        if hot and not hot_done:
            hot_path = background.submit(_hot_path, config, source, hot, rejects, max_bad,
                                         load_id, summary, progress)
        elif hot_done:
            with Catalog(config) as catalog:
                summary.hot_rows = catalog.load(load_id).hot_rows

        if cold:
            decided = (background.submit(_sample, config, source, [f for _, f in cold], load_id,
                                         progress) if bucket_map is None else _decided(bucket_map))
            _cold_path(config, source, cold, rejects, max_bad, load_id, decided, chunk_size,
                       done_chunks, summary, progress,
                       stop=lambda: hot_path is not None and hot_path.done()
                       and hot_path.exception() is not None)
        if hot_path:
            hot_path.result()  # raises what the hot path raised
        if dropping:
            dropping.result()  # raises what the drop raised
        summary.rejects = rejects.count
        if 0 <= max_bad < summary.rejects:
            raise BadInputError(f"{summary.rejects} bad lines, more than --max-bad {max_bad}; "
                                f"see {rejects.path}")
    except BaseException as exc:
        # Threads still writing would race a later load of this process: let them finish.
        background.shutdown(wait=True)
        _failed(config, load_id, source_spec, exc)
        raise
    finally:
        background.shutdown(wait=True)  # its threads have ended by now: returns at once

    t_up = time.time()
    summary.uptime_s = t_up - t_start
    with Catalog(config) as catalog:
        summary.phases = phase_sums(catalog.phases(load_id))
        catalog.update_load(load_id, state="up", uptime=t_up, summary=summary.as_dict())
    return summary


def _failed(config: Config, load_id: str, source_spec: str, exc: BaseException) -> None:
    """Record the load as failed, and tell the user how to go on: a load stopped by a service
    or its source continues where it stopped (docs/LOADING.md, "Resume"). If MySQL itself is
    what failed, the state cannot be recorded; the load stays ``running``, which a resume
    takes as well."""
    try:
        with Catalog(config) as catalog:
            catalog.update_load(load_id, state="failed", error=str(exc)[:2000])
    except ServiceError:
        pass  # the original error says what happened; it is the one raised
    if isinstance(exc, (ServiceError, SourceError)):
        exc.add_note(f"load {load_id} stopped there; once that is fixed (`debl stack up` for a "
                     f"service of the stack), continue it: debl load {redact_url(source_spec)} "
                     f"--resume {load_id}")


def phase_sums(phases: list[Phase]) -> dict[str, float]:
    """Seconds per phase name, summed over its finished items."""
    sums: dict[str, float] = {}
    for p in phases:
        if p.ended:
            sums[p.phase] = sums.get(p.phase, 0.0) + p.ended - p.started
    return sums


def _decided(bucket_map: BucketMap) -> Future:
    future: Future = Future()
    future.set_result(bucket_map)
    return future


def _sample(config: Config, source: Source, cold: list[SourceFile], load_id: str,
            progress: LoadProgress) -> BucketMap:
    """Split points from a sample of the cold files, recorded with the load."""
    with Catalog(config) as catalog:
        catalog.phase_start(load_id, "sample", "all")
        bucket_map = sample_bucket_map(config, source, cold)
        catalog.set_bucket_map(load_id, bucket_map)
        catalog.phase_end(load_id, "sample", "all", rows=bucket_map.count)
    progress.message(f"bucket map: {bucket_map.describe()}")
    return bucket_map


def _drop_hbase_table(config: Config) -> None:
    # lazy import: the HBase client (happybase, thriftpy2) would cost every `debl` command's
    # start-up (docs/ARCHITECTURE.md, "Lazy imports")
    from debl.store.hbase import HBaseStore

    with HBaseStore(config) as hbase:
        if hbase.table_exists():
            hbase.drop_table()


def _empty_link_table(config: Config) -> None:
    """The previous dataset's hot rows go: a load replaces the whole dataset, and verify and
    the coordinator take the MySQL link table to hold exactly this load's hot rows."""
    with MySQLStore(config) as mysql:
        mysql.reset()


def _hot_path(config: Config, source: Source, hot: list[tuple[int, SourceFile]],
              rejects: RejectWriter, max_bad: int, load_id: str, summary: LoadSummary,
              progress: LoadProgress) -> None:
    with Catalog(config) as catalog:
        catalog.phase_start(load_id, "hot", "all")
        with rejects.open_part(HOT_PART) as part:
            try:
                result = load_hot(config, source, hot, part, max_bad, progress=progress.hot)
            finally:  # before the phase counts as done; a failed one's rejects stay readable
                part.commit()
        reached(config, "hot-loaded")
        for phase, t0, t1 in result.phases:
            catalog.record_phase(load_id, phase, "all", t0, t1, result.bytes, result.lines)
        # One transaction: a resume skips the hot path once its phase has ended, so the key
        # range and key filter that send queries to MySQL are recorded with that end.
        catalog.end_hot_phase(load_id, result.bytes, result.rows, result.k_lo, result.k_hi,
                              result.per_file, result.hot_keys)
    summary.hot_rows = result.rows
    progress.message(f"hot path done: {result.rows} rows in MySQL")


def _cold_path(config: Config, source: Source, cold: list[tuple[int, SourceFile]],
               rejects: RejectWriter, max_bad: int, load_id: str, decided: Future,
               chunk_size: int, done_chunks: list[Chunk], summary: LoadSummary,
               progress: LoadProgress, stop: Callable[[], bool]) -> None:
    """Copy chunks in a thread; run dist_ch on each as soon as it is in HDFS."""
    chunk_dir, bucket_dir = hdfs_paths(config, load_id)
    start = Position.after(done_chunks[-1], cold) if done_chunks else Position()
    first = done_chunks[-1].chunk_no + 1 if done_chunks else 0
    for chunk in done_chunks:  # a resumed load: these count as done
        summary.chunks += 1
        progress.copied(chunk.bytes)
    copied: queue.Queue = queue.Queue(maxsize=2)
    sizes = {"next": chunk_size}
    copied_bytes = [sum(c.bytes for c in done_chunks)]
    abort = threading.Event()
    catalog = Catalog(config)  # thread-safe: the copy thread's and this one's

    def hand_over(item: tuple[Chunk, float] | None) -> None:
        while not abort.is_set():
            try:
                copied.put(item, timeout=0.5)
                return
            except queue.Full:
                pass
    hdfs = WebHDFS(config)
    hdfs.mkdirs(chunk_dir)

    def copy_all() -> None:
        copier = ChunkCopier(source, cold, hdfs, chunk_dir, start, first, progress.copied)
        try:
            while not (stop() or abort.is_set()):
                item = f"{copier.chunk_no:05d}"
                catalog.phase_start(load_id, "copy", item)
                t0 = time.time()
                remaining = summary.cold_bytes - copied_bytes[0]
                size = tapered(sizes["next"], remaining)
                chunk = copier.copy_next(size, dist_ch.slices_for(config, size))
                if chunk is None:
                    catalog.drop_phase(load_id, "copy", item)
                    break
                copied_bytes[0] += chunk.bytes
                catalog.phase_end(load_id, "copy", item, bytes=chunk.bytes, rows=chunk.lines)
                catalog.record_chunk(load_id, chunk.record("copied"))
                hand_over((chunk, time.time() - t0))
        finally:
            copier.close()
            hand_over(None)

    # Leaving the pool waits for the copy thread, which stops at its next chunk boundary once
    # `abort` is set.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="chunk-copy") as pool:
        copying = pool.submit(copy_all)
        try:
            spark = spark_session(config, "debl-dist_ch")  # starts while chunk 0 is copied
            bucket_map = decided.result()  # raises what the sample raised
            while (item := copied.get()) is not None:
                chunk, copy_seconds = item
                catalog.phase_start(load_id, "dist_ch", f"{chunk.chunk_no:05d}")
                t0 = time.time()
                result = dist_ch.bucket_chunk(spark, config, chunk, bucket_map, bucket_dir)
                reached(config, "dist_ch-done")
                rejects.write_part(chunk_part(chunk.chunk_no),
                                   [(r.file, r.line_no, r.reason, r.line) for r in result.rejects])
                catalog.record_bucket_chunks(load_id, chunk.chunk_no, bucket_map, result.parts,
                                             bucket_dir)
                reached(config, "index-recorded")
                catalog.set_file_counts(load_id, f"chunk-{chunk.chunk_no:05d}", result.per_file)
                catalog.phase_end(load_id, "dist_ch", f"{chunk.chunk_no:05d}",
                                  bytes=chunk.bytes, rows=result.rows)
                catalog.record_chunk(load_id, chunk.record("bucketed"))
                seconds = time.time() - t0
                summary.chunks += 1
                progress.bucketed(chunk.chunk_no, result.rows, seconds)
                if seconds > copy_seconds and sizes["next"] < 4 * chunk_size:
                    sizes["next"] *= 2
                rejected = rejects.count
                if 0 <= max_bad < rejected:
                    raise BadInputError(f"more than {max_bad} bad lines ({rejected} so far); "
                                        f"see {rejects.path}")
        except BaseException:
            abort.set()
            raise
    copying.result()  # raises what the copy raised
    buckets = catalog.buckets()
    summary.buckets = len(buckets)
    summary.cold_rows = sum(b.rows for b in buckets)
    summary.bucket_map = bucket_map.to_dict()


def _wait_for_coordinators(config: Config, catalog: Catalog, load_id: str,
                           progress: LoadProgress) -> None:
    """Until every live coordinator has seen *load_id* with no query of the old dataset in
    flight (it then waits for this load's uptime), at most ``coordinator_ack_timeout`` s."""
    deadline = time.monotonic() + config.coordinator_ack_timeout
    behind = catalog.coordinators_behind(load_id)
    if behind:
        progress.message(f"waiting for {len(behind)} running coordinator(s) to leave the old "
                         "dataset")
    while behind and time.monotonic() < deadline:
        time.sleep(0.05)
        behind = catalog.coordinators_behind(load_id)
    if behind:
        progress.message(f"coordinator(s) {', '.join(behind)} did not leave the old dataset "
                         f"within {config.coordinator_ack_timeout:.0f} s "
                         "(coordinator_ack_timeout): going on")


def _check_unchanged(catalog: Catalog, source: Source, load_id: str) -> None:
    """Refuse to resume from a source whose files changed since the load listed them: the
    recorded byte offsets would be read in another file (a fragment can parse as a valid line
    with another id1)."""
    recorded = [SourceFile(unescape_name(f.name), f.size, f.mtime)
                for f in catalog.files(load_id)]
    changed = changed_files(source, recorded)
    if changed:
        shown = "; ".join(changed[:5]) + (f"; and {len(changed) - 5} more"
                                          if len(changed) > 5 else "")
        raise LoadStateError(f"load {load_id} cannot be resumed: its source changed since it "
                             f"was listed ({shown}); start a new load (`debl load SOURCE`)")


def _drop_stale_bucket_files(hdfs: WebHDFS, bucket_dir: str, first: int) -> None:
    """Delete the bucket files of chunks numbered *first* and up (not recorded as bucketed:
    they are redone, maybe cut differently) that a killed dist_ch may have left."""
    if hdfs.status(bucket_dir) is None:
        return
    for directory in hdfs.list(bucket_dir):
        if not directory.is_dir:
            continue
        for status in hdfs.list(directory.path):
            name = status.path.rsplit("/", 1)[1]
            if name.startswith("chunk-") and name[6:11].isdigit() and int(name[6:11]) >= first:
                hdfs.delete(status.path)


def _resume_state(catalog: Catalog, load_id: str):
    load = catalog.load(load_id)
    if load is None:
        raise LoadStateError(f"no load {load_id!r}; `debl status` lists the latest load")
    if load.state == "up":
        raise LoadStateError(f"load {load_id} is already up; nothing to resume")
    recorded = catalog.files(load_id)
    files = [(f.file_seq, SourceFile(unescape_name(f.name), f.size, f.mtime)) for f in recorded]
    hot_seqs = {f.file_seq for f in recorded if f.hot}
    done = []
    for c in catalog.chunks(load_id):
        if c.state != "bucketed" or c.chunk_no != len(done):
            break
        done.append(Chunk.of(c))
    hot_done = catalog.phase_ended(load_id, "hot")
    catalog.update_load(load_id, state="running", error=None)
    # The recorded map (None if the load was killed before it was decided: no chunk is bucketed
    # then, and a new sample decides it).
    return load_id, files, hot_seqs, load.bucket_map, done, hot_done
