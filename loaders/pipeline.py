"""The copy pipeline of ``debl load``: files streamed from the source into HDFS chunk by chunk
(``loaders.chunker``, a thread), each copied chunk bucketed by dist_ch (``loaders.dist_ch``, in
the calling thread) while the next one is copied, in one long-lived Spark application.

The hot files are copied first, in chunks of their own, and bucketed into the load's hot
directory, so that the raw route answers their keys as soon as they are bucketed, long before
MySQL has taken them in (docs/LOADING.md, "Uptime without MySQL"); once the last hot chunk is in
HDFS, ``on_hot_copied`` hands the hot chunks to the hot path, which reads them back from HDFS
instead of crossing the link again. The cold files follow into the bucket directory.

Each chunk step is one catalog transaction (``chunk_copied``, ``chunk_bucketed``), so a resumed
load reads one consistent state: the chunks recorded as bucketed are done, the copy goes on
after the last of them.

Chunk size (docs/DESIGN.md section 4: small enough that the last dist_ch is short, large enough
that copying a chunk takes longer than bucketing it): the configured size is the start. A
dist_ch that took longer than its chunk's copy means the pipeline is bucketing-bound, so the
next chunk doubles (up to 4x) to amortise Spark's per-job overhead; a grown chunk is cut into
more slices, never larger ones (``dist_ch.slices_for``). Towards the end chunks taper (at most
half of what remains of the input), so the last dist_ch is short.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from debl.catalog import Catalog
from debl.config import Config
from debl.errors import BadInputError
from debl.faultpoints import reached
from debl.namespace import Namespace
from debl.spark import spark_session
from debl.webhdfs import WebHDFS
from loaders import dist_ch
from loaders.chunker import Chunk, ChunkCopier, Position, chunk_name
from loaders.rejects import RejectWriter, chunk_part
from loaders.source import Source, SourceFile

MIN_CHUNK = 4 << 20


def tapered(size: int, remaining: int) -> int:
    """The next chunk's size: *size*, but at most half of what remains (and not below
    MIN_CHUNK, or *size* if that is smaller), so the chunks shrink towards the end and the last
    dist_ch, which nothing overlaps, stays short."""
    return max(min(MIN_CHUNK, size), min(size, remaining // 2))


@dataclass
class Copied:
    """What the pipeline did: every chunk bucketed (done ones included), rows per kind."""

    chunks: int = 0
    hot_rows: int = 0  # rows dist_ch wrote into the hot buckets
    cold_rows: int = 0


@dataclass(frozen=True)
class PipelinePlan:
    """What to copy: *hot* files (bucketed into the hot directory; empty when MySQL alone takes
    them, the paper's way) then *cold* ones, from chunk *done*'s end."""

    hot: list[tuple[int, SourceFile]]
    cold: list[tuple[int, SourceFile]]
    done: list[Chunk]  # bucketed before a resume, in order from chunk 0
    chunk_size: int


class _ChunkSize:
    """The next chunk's size: the configured one, doubled (up to 4x) each time dist_ch lags
    behind the copy (see the module)."""

    def __init__(self, size: int):
        self.first = self.next = size

    def grow(self) -> None:
        if self.next < 4 * self.first:
            self.next *= 2


def copy_and_bucket(config: Config, source: Source, load_id: str, namespace: Namespace,
                    plan: PipelinePlan, decided: Future, rejects: RejectWriter, max_bad: int,
                    progress, stop: Callable[[], bool],
                    on_hot_copied: Callable[[list[Chunk]], None]) -> Copied:
    """Copy the plan's files chunk by chunk, bucket each chunk as soon as it is in HDFS (with
    the bucket map *decided* resolves to); returns when every chunk is bucketed, or early,
    before the next chunk's copy or dist_ch, once *stop* says so (the caller raises why).
    Raises what the copy, dist_ch or the catalog raised (the copy stops at its next chunk
    boundary)."""
    copied: queue.Queue = queue.Queue(maxsize=2)
    abort = threading.Event()
    catalog = Catalog(config)  # thread-safe: the copy thread's and this one's
    hdfs = WebHDFS(config)
    hdfs.mkdirs(namespace.chunk_dir)
    size = _ChunkSize(plan.chunk_size)
    result = Copied(chunks=len(plan.done))
    for chunk in plan.done:
        progress.copied(chunk.bytes)

    def hand_over(item: tuple[Chunk, float] | None) -> None:
        while not abort.is_set():
            try:
                copied.put(item, timeout=0.5)
                return
            except queue.Full:
                pass

    def copy_all() -> None:
        try:
            _copy(config, source, hdfs, catalog, load_id, namespace, plan, size, hand_over,
                  progress, lambda: stop() or abort.is_set(), on_hot_copied)
        finally:
            hand_over(None)

    # Leaving the pool waits for the copy thread, which stops at its next chunk boundary once
    # `abort` is set.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="chunk-copy") as pool:
        copying = pool.submit(copy_all)
        try:
            spark = spark_session(config, "debl-dist_ch")  # starts while chunk 0 is copied
            bucket_map = decided.result()  # raises what the sample raised
            while (item := copied.get()) is not None:
                if stop():  # the caller says why (a lost lock, a failed hot path)
                    abort.set()
                    break
                chunk, copy_seconds = item
                t0 = time.time()
                where = namespace.hot_dir if chunk.hot else namespace.bucket_dir
                out = dist_ch.bucket_chunk(spark, config, chunk, bucket_map, where)
                reached(config, "dist_ch-done")
                rejects.write_part(chunk_part(chunk.chunk_no),
                                   [(r.file, r.line_no, r.reason, r.line) for r in out.rejects])
                catalog.chunk_bucketed(load_id, chunk.record("bucketed"), bucket_map, out.parts,
                                       where, chunk_name(chunk.chunk_no), out.per_file, t0,
                                       time.time())
                seconds = time.time() - t0
                result.chunks += 1
                if chunk.hot:
                    result.hot_rows += out.rows
                else:
                    result.cold_rows += out.rows
                progress.bucketed(chunk.chunk_no, out.rows, seconds)
                if seconds > copy_seconds:
                    size.grow()
                rejected = rejects.count
                if 0 <= max_bad < rejected:
                    raise BadInputError(f"more than {max_bad} bad lines ({rejected} so far); "
                                        f"see {rejects.path}")
        except BaseException:
            abort.set()
            raise
    copying.result()  # raises what the copy raised
    return result


def _copy(config: Config, source: Source, hdfs: WebHDFS, catalog: Catalog, load_id: str,
          namespace: Namespace, plan: PipelinePlan, size: _ChunkSize, hand_over, progress,
          stopped: Callable[[], bool], on_hot_copied: Callable[[list[Chunk]], None]) -> None:
    """The copy thread: the hot files, then the cold ones, each chunk handed to dist_ch. A
    resumed load goes on after its last bucketed chunk (the hot files done if it was cold)."""
    last = plan.done[-1] if plan.done else None
    next_no = last.chunk_no + 1 if last else 0
    hot_chunks = [c for c in plan.done if c.hot]
    # Chunks taper towards the end of the whole input, not of the hot files: cold chunks follow
    # those at once, and a run of small hot chunks would cost a Spark job each.
    remaining = (sum(f.size for _, f in (*plan.hot, *plan.cold))
                 - sum(c.bytes for c in plan.done))
    for hot, files in ((True, plan.hot), (False, plan.cold)):
        if hot and last is not None and not last.hot:  # resumed after the hot files' end
            on_hot_copied(hot_chunks)
            continue
        start = Position.after(last, files) if last is not None and last.hot == hot else Position()
        copier = ChunkCopier(source, files, hdfs, namespace.chunk_dir, start, next_no,
                             progress.copied, hot=hot)
        try:
            while files and not stopped():
                t0 = time.time()
                want = tapered(size.next, remaining)
                chunk = copier.copy_next(want, dist_ch.slices_for(config, want))
                if chunk is None:
                    break
                remaining -= chunk.bytes
                catalog.chunk_copied(load_id, chunk.record("copied"), t0, time.time(),
                                     chunk.lines)
                if hot:
                    hot_chunks.append(chunk)
                hand_over((chunk, time.time() - t0))
        finally:
            copier.close()
        next_no = copier.chunk_no
        if stopped():
            return
        if hot:
            on_hot_copied(hot_chunks)
