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

Chunk size (DESIGN section 4: small enough that the last dist_ch is short, large enough that
copying a chunk takes longer than bucketing it): the configured size (``--chunk-size``, else
``chunk_size`` but at most an eighth of the cold bytes, so a small input still pipelines) is the
start. A dist_ch that took longer than its chunk's copy means the pipeline is bucketing-bound, so
the next chunk doubles (up to 4x) to amortise Spark's per-job overhead. Towards the end chunks
taper (at most half of what remains), so the last dist_ch, which no copy overlaps, is short.
"""

from __future__ import annotations

import json
import queue
import secrets
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path

from debl.buckets import BucketMap
from debl.catalog import Catalog
from debl.config import Config
from debl.errors import BadInputError, DeblError, LoadStateError
from loaders.chunker import Chunk, ChunkCopier, Position
from loaders.rejects import RejectWriter
from loaders.sampling import sample_bucket_map
from loaders.source import Source, SourceFile, open_source
from loaders.split import split_files
from loaders.webhdfs import WebHDFS


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
    return config.state_dir / "loads" / load_id / "rejects.tsv"


def run_load(config: Config, source_spec: str, options: LoadOptions = LoadOptions(),
             resume: str | None = None, progress: LoadProgress = LoadProgress()) -> LoadSummary:
    """Run (or resume) the offline phase; returns at uptime with the load's summary."""
    t_start = time.time()
    source = open_source(source_spec)
    max_bad = config.max_bad if options.max_bad is None else options.max_bad
    chunk_size = options.chunk_size or config.chunk_size
    explicit_chunk_size = options.chunk_size is not None
    hdfs = WebHDFS(config)

    with Catalog(config) as catalog:
        if resume:
            load_id, files, hot_seqs, bucket_map, done_chunks, hot_done = _resume_state(catalog,
                                                                                      resume)
            t_start = catalog.load(load_id)["started"]
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
            catalog.begin_load(load_id, options.approach, source.describe(), chunk_size,
                               {"hot_bytes": options.hot_bytes, "hot_since": options.hot_since,
                                "max_bad": max_bad})
            catalog.add_files(load_id, [(seq, f.name, f.size, f.mtime, seq in hot_seqs)
                                        for seq, f in files])
            chunk_dir, bucket_dir = hdfs_paths(config, load_id)
            hdfs.delete(bucket_dir, recursive=True)
            hdfs.mkdirs(bucket_dir)
            if bucket_map is not None:
                catalog.set_bucket_map(load_id, bucket_map)

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
    # The previous dataset's HBase table goes (gen_HF creates the new one pre-split); dropping
    # takes seconds, so it runs beside the load instead of delaying it.
    dropping = None if resume else _background(_drop_hbase_table, config)
    hot_path: Future | None = None
    sampling: Future | None = None
    try:
        if hot and not hot_done:
            for seq, f in hot:
                rejects.forget(f.name, 1, 1 << 62)
            hot_path = _background(_hot_path, config, source, hot, rejects, max_bad, load_id,
                                   summary, progress)
        elif hot_done:
            with Catalog(config) as catalog:
                summary.hot_rows = catalog.load(load_id)["hot_rows"]

        if cold:
            sampling = (_background(_sample, config, source, [f for _, f in cold], load_id,
                                    progress) if bucket_map is None else _decided(bucket_map))
            _cold_path(config, source, cold, rejects, max_bad, load_id, sampling, chunk_size,
                       done_chunks, summary, progress,
                       stop=lambda: hot_path is not None and hot_path.done()
                       and hot_path.exception() is not None)
        if hot_path:
            hot_path.result()  # raises what the hot path raised
        if dropping:
            dropping.result()  # raises what the drop raised
        summary.rejects = _count_rejects(rejects)
        if 0 <= max_bad < summary.rejects:
            raise BadInputError(f"{summary.rejects} bad lines, more than --max-bad {max_bad}; "
                                f"see {rejects.path}")
    except BaseException as exc:
        # Threads still writing would race a later load of this process: let them finish.
        wait([f for f in (hot_path, dropping, sampling) if f is not None])
        with Catalog(config) as catalog:
            catalog.update_load(load_id, state="failed", error=str(exc)[:2000])
        raise
    finally:
        rejects.close()

    t_up = time.time()
    summary.uptime_s = t_up - t_start
    with Catalog(config) as catalog:
        for p in catalog.phases(load_id):
            if p["ended"]:
                key = p["phase"]
                summary.phases[key] = summary.phases.get(key, 0.0) + p["ended"] - p["started"]
        catalog.update_load(load_id, state="up", uptime=t_up, summary=json.dumps(summary.as_dict()))
    return summary


def _background(fn, *args) -> Future:
    """Run fn(*args) in a thread of its own; the Future re-raises its exception."""
    future: Future = Future()

    def run() -> None:
        try:
            future.set_result(fn(*args))
        except BaseException as exc:
            future.set_exception(exc)

    threading.Thread(target=run, name=fn.__name__, daemon=True).start()
    return future


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
    from debl.store.hbase import HBaseStore

    with HBaseStore(config) as hbase:
        if hbase.table_exists():
            hbase.drop_table()


def _count_rejects(rejects: RejectWriter) -> int:
    rejects.flush()
    with open(rejects.path, "rb") as f:
        return sum(1 for line in f if not line.startswith(b"#"))


def _hot_path(config: Config, source: Source, hot: list[tuple[int, SourceFile]],
              rejects: RejectWriter, max_bad: int, load_id: str, summary: LoadSummary,
              progress: LoadProgress) -> None:
    from loaders.mysql_bulk import load_hot

    with Catalog(config) as catalog:
        catalog.phase_start(load_id, "hot", "all")
        result = load_hot(config, source, hot, rejects, max_bad, progress=progress.hot)
        for phase, t0, t1 in result.phases:
            catalog.execute("REPLACE INTO debl_phases VALUES (%s, %s, 'all', %s, %s, %s, %s)",
                            (load_id, phase, t0, t1, result.bytes, result.lines))
        catalog.phase_end(load_id, "hot", "all", bytes=result.bytes, rows=result.rows)
        catalog.set_file_counts(load_id, "hot", result.per_file)
        catalog.update_load(load_id, hot_k_lo=result.k_lo, hot_k_hi=result.k_hi,
                            hot_rows=result.rows)
    summary.hot_rows = result.rows
    progress.message(f"hot path done: {result.rows} rows in MySQL")


def _cold_path(config: Config, source: Source, cold: list[tuple[int, SourceFile]],
               rejects: RejectWriter, max_bad: int, load_id: str, decided: Future,
               chunk_size: int,
               done_chunks: list[Chunk], summary: LoadSummary, progress: LoadProgress,
               stop: Callable[[], bool]) -> None:
    """Copy chunks in a thread; run dist_ch on each as soon as it is in HDFS, by the bucket map
    that *decided* yields."""
    from debl.spark import spark_session
    from loaders import dist_ch

    chunk_dir, bucket_dir = hdfs_paths(config, load_id)
    start = Position.after(done_chunks[-1], cold) if done_chunks else Position()
    first = done_chunks[-1].chunk_no + 1 if done_chunks else 0
    for chunk in done_chunks:  # a resumed load: these count as done
        summary.chunks += 1
        progress.copied(chunk.bytes)
    copied: queue.Queue = queue.Queue(maxsize=2)
    sizes = {"next": chunk_size}
    copied_bytes = [sum(c.bytes for c in done_chunks)]
    copy_failure: list[BaseException] = []
    abort = threading.Event()

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
            with Catalog(config) as catalog:
                while not (stop() or abort.is_set()):
                    item = f"{copier.chunk_no:05d}"
                    catalog.phase_start(load_id, "copy", item)
                    t0 = time.time()
                    remaining = summary.cold_bytes - copied_bytes[0]
                    size = tapered(sizes["next"], remaining)
                    chunk = copier.copy_next(size, config.dist_ch_tasks)
                    if chunk is None:
                        catalog.execute("DELETE FROM debl_phases WHERE load_id = %s AND "
                                        "phase = 'copy' AND item = %s", (load_id, item))
                        break
                    copied_bytes[0] += chunk.bytes
                    catalog.phase_end(load_id, "copy", item, bytes=chunk.bytes, rows=chunk.lines)
                    catalog.record_chunk(load_id, chunk, "copied")
                    hand_over((chunk, time.time() - t0))
        except BaseException as exc:
            copy_failure.append(exc)
        finally:
            copier.close()
            hand_over(None)

    copier_thread = threading.Thread(target=copy_all, name="chunk-copy", daemon=True)
    copier_thread.start()
    try:
        spark = spark_session(config, "debl-dist_ch")  # starts while the first chunk is copied
        bucket_map = decided.result()  # raises what the sample raised
        with Catalog(config) as catalog:
            while (item := copied.get()) is not None:
                chunk, copy_seconds = item
                catalog.phase_start(load_id, "dist_ch", f"{chunk.chunk_no:05d}")
                t0 = time.time()
                for seg in chunk.segments:
                    rejects.forget(seg.name, seg.first_line, seg.first_line + seg.lines - 1)
                result = dist_ch.bucket_chunk(spark, config, chunk, bucket_map, bucket_dir)
                for r in result.rejects:
                    rejects.write(r.file, r.line_no, r.reason, r.line)
                catalog.record_bucket_chunks(load_id, chunk.chunk_no, bucket_map, result.parts,
                                             bucket_dir)
                catalog.set_file_counts(load_id, f"chunk-{chunk.chunk_no:05d}", result.per_file)
                catalog.phase_end(load_id, "dist_ch", f"{chunk.chunk_no:05d}",
                                  bytes=chunk.bytes, rows=result.rows)
                catalog.record_chunk(load_id, chunk, "bucketed")
                seconds = time.time() - t0
                summary.chunks += 1
                progress.bucketed(chunk.chunk_no, result.rows, seconds)
                if seconds > copy_seconds and sizes["next"] < 4 * chunk_size:
                    sizes["next"] *= 2
                rejected = _count_rejects(rejects)
                if 0 <= max_bad < rejected:
                    raise BadInputError(f"more than {max_bad} bad lines ({rejected} so far); "
                                        f"see {rejects.path}")
    except BaseException:
        abort.set()  # the copier stops at its next chunk boundary
        raise
    finally:
        copier_thread.join()
    if copy_failure:
        raise copy_failure[0]
    with Catalog(config) as catalog:
        summary.buckets = len(catalog.buckets())
        summary.cold_rows = sum(b.rows for b in catalog.buckets())
    summary.bucket_map = bucket_map.to_dict()


def _resume_state(catalog: Catalog, load_id: str):
    load = catalog.load(load_id)
    if load is None:
        raise LoadStateError(f"no load {load_id!r}; `debl status` lists the latest load")
    if load["state"] == "up":
        raise LoadStateError(f"load {load_id} is already up; nothing to resume")
    rows = catalog.execute("SELECT file_seq, name, size, mtime, hot FROM debl_load_files "
                           "WHERE load_id = %s ORDER BY file_seq", (load_id,))
    files = [(seq, SourceFile(name, size, mtime)) for seq, name, size, mtime, _ in rows]
    hot_seqs = {seq for seq, _, _, _, hot in rows if hot}
    done = []
    for c in catalog.chunks(load_id):
        if c["state"] != "bucketed" or c["chunk_no"] != len(done):
            break
        done.append(c["chunk"])
    hot_done = bool(catalog.execute("SELECT 1 FROM debl_phases WHERE load_id = %s AND "
                                    "phase = 'hot' AND ended IS NOT NULL", (load_id,)))
    catalog.update_load(load_id, state="running", error=None)
    # The recorded map (None if the load was killed before it was decided: no chunk is bucketed
    # then, and a new sample decides it).
    return load_id, files, hot_seqs, BucketMap.from_catalog(load["bucket_map"]), done, hot_done
