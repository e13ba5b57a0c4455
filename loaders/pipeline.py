"""The copy pipeline of ``debl load``: files streamed from the source into HDFS chunk by chunk
(``loaders.chunker``, a thread), each copied chunk bucketed by dist_ch (``loaders.dist_ch``, in
the calling thread) while the next one is copied, in one long-lived Spark application.

The hot files are copied first, in chunks of their own, and bucketed into the load's hot
directory, so that the raw route answers their keys as soon as they are bucketed, long before
MySQL has taken them in (docs/LOADING.md, "Uptime without MySQL"); once the last hot chunk is in
HDFS, ``on_hot_copied`` hands the hot chunks to the hot path, which reads them back from HDFS
instead of crossing the wire again. The cold files follow into the bucket directory.

Each chunk step is one catalog transaction (``chunk_copied``, ``chunk_bucketed``), so a resumed
load reads one consistent state: the chunks recorded as bucketed are done, the copy goes on
after the last of them.

Chunk size (docs/DESIGN.md section 4: small enough that the last dist_ch is short, large enough
that copying a chunk takes longer than bucketing it): the configured size is the start. A
dist_ch that took longer than its chunk's copy means the pipeline is bucketing-bound, so the
next chunk doubles (up to 4x) to amortise Spark's per-job overhead; a grown chunk is cut into
more slices, never larger ones (``dist_ch.slices_for``), and its slices fill whole waves of
dist_ch's tasks (``dist_ch.whole_waves``), so that no core waits through a last slice alone:
4x 65 MiB was three slices on two cores, 256 MiB is two (docs/LOADING.md, "Decisions where
DESIGN is silent"). Towards the end chunks taper (at most half of what remains of the input), so
the last dist_ch is short.
"""

from __future__ import annotations

import contextlib
import itertools
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from debl.format.bucket_map import HOT_MAP
from debl.catalog import Catalog, ChunkState
from debl.config import Config
from debl.errors import BadInputError
from debl.faultpoints import reached
from debl.hdfs import HdfsClient
from debl.measure import thread_cpu
from debl.spark.session import spark_session
from loaders import dist_ch
from loaders.chunker import Chunk, ChunkCopier, WireTurn, chunk_name
from loaders.coverage import Coverage
from loaders.dist_ch import DistResult
from loaders.demand import DemandFetcher
from loaders.early import EarlyAnswers
from loaders.load_context import CopyState, LoadContext, LoadIO
from loaders.local_dist_ch import LOCAL_MAX, bucket_locally
from loaders.rejects import RejectWriter, chunk_part
from loaders.source import SourceFile

MIN_CHUNK = 4 << 20
FIRST_CHUNK = 2 << 20  # a load that answers early starts with chunks this small, doubling
# HDFS calls at once: the copy's chunk, dist_ch's bucket files in this process
# (loaders.local_dist_ch: four at a time) and a fetch on demand's chunk.
HDFS_THREADS = 8


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
    them, the paper's way) then *cold* ones, but for the bytes of the chunks *done*.
    *ramp*: start with small chunks, doubling up to *chunk_size* (a load that answers before
    its copy ends: docs/LOADING.md, "Answers before the copy ends")."""

    hot: list[tuple[int, SourceFile]]
    cold: list[tuple[int, SourceFile]]
    done: list[Chunk]  # bucketed before a resume, in any order
    chunk_size: int
    ramp: bool = False


class _ChunkSize:
    """The next chunk's size: the configured one, doubled (up to 4x) each time dist_ch lags
    behind the copy, a grown size trimmed by *fit* (``dist_ch.whole_waves``; see the module);
    with a ramp, from FIRST_CHUNK up to the configured one."""

    def __init__(self, size: int, ramp: bool = False,
                 fit: Callable[[int], int] = lambda size: size):
        self.first, self.fit = size, fit
        self.next = min(FIRST_CHUNK, size) if ramp else size

    def took(self, chunk_bytes: int) -> None:
        """A chunk was cut: the ramp's next step."""
        if self.next < self.first:
            self.next = min(self.first, max(self.next, chunk_bytes) * 2)

    def grow(self) -> None:
        if self.first <= self.next < 4 * self.first:
            self.next = max(self.next, self.fit(min(2 * self.next, 4 * self.first)))


class Bucketer:
    """Buckets the load's chunks, each as soon as it is in HDFS, and records them: by dist_ch
    in Spark, or in this process (``loaders.local_dist_ch``) for a chunk of at most
    ``LOCAL_MAX`` bytes while Spark is still starting, and for every chunk fetched on demand.
    Records one chunk at a time (the bucket index sums every chunk of a bucket)."""

    def __init__(self, state: CopyState, spark: Future, decided: Future):
        self.config, self.load_id = state.load.config, state.load.load_id
        self.namespace = state.load.namespace
        self.index, self.hdfs, self.spark, self.decided = state.index, state.hdfs, spark, decided
        self.rejects, self.early = state.io.rejects, state.early
        self._recording = threading.Lock()

    def bucket(self, chunk: Chunk, data: bytes | None = None, local: bool | None = None,
               phase: str | None = None) -> DistResult:
        """Bucket *chunk* (*data*: its bytes, when the caller holds them) and record it;
        *local*: in this process (None: when Spark has not started yet and it is small)."""
        t0 = time.time()
        # A hot chunk needs no sample: its lines go into the one hot bucket
        # (debl.format.bucket_map).
        bucket_map = HOT_MAP if chunk.hot else self.decided.result()  # raises the sample's error
        where = self.namespace.hot_dir if chunk.hot else self.namespace.bucket_dir
        if local is None:
            local = chunk.bytes <= LOCAL_MAX and not self.spark.done()
        early = self.early
        if local:
            with thread_cpu.counted(thread_cpu.BUCKETING):
                out = bucket_locally(self.config, self.hdfs, chunk, bucket_map, where, data,
                                     early.manifests if early else None,
                                     early.sizes if early else None)
        else:
            out = dist_ch.bucket_chunk(self.spark.result(), self.config, chunk, bucket_map,
                                       where, early.claims(chunk) if early else None)
        reached(self.config, "dist_ch-done")
        self.rejects.write_part(chunk_part(chunk.chunk_no),
                                [(r.file, r.line_no, r.reason, r.line) for r in out.rejects])
        with self._recording:
            # A claim found false is recorded with its chunk, in one transaction
            # (docs/LOADING.md, "Answers before the copy ends", row "A claim found false").
            claim = early.false_claim(out.violations) if early else None
            self.index.chunk_bucketed(self.load_id, chunk.record(ChunkState.BUCKETED), bucket_map,
                                      out.parts, where, chunk_name(chunk.chunk_no),
                                      out.per_file, t0, time.time(), phase=phase,
                                      false_claim=claim)
            if out.violations:
                reached(self.config, "false-claim")
            if early is not None:
                early.bucketed(chunk, claim)
        return out


def copy_and_bucket(load: LoadContext, io: LoadIO, plan: PipelinePlan, decided: Future,
                    early: EarlyAnswers | None, stop: Callable[[], bool],
                    on_hot_copied: Callable[[list[Chunk]], None]) -> Copied:
    """Copy the plan's files chunk by chunk, bucket each chunk as soon as it is in HDFS (with
    the bucket map *decided* resolves to); returns when every chunk is bucketed, or early,
    before the next chunk's dist_ch, once *stop* says so (the caller raises why). Raises what
    the copy, dist_ch or the catalog raised (the copy stops at its next chunk boundary).
    *early*: the load answers before its uptime (its answerable keys follow each chunk).
    *on_hot_copied* is called in the copy thread with the hot chunks once they are all in
    HDFS, unless the copy stopped before."""
    config, progress, rejects, max_bad = load.config, io.progress, io.rejects, load.max_bad
    copied: queue.Queue = queue.Queue(maxsize=2)
    abort = threading.Event()
    catalog = Catalog(config)  # thread-safe: the threads' of the copy, of dist_ch, of fetches
    size = _ChunkSize(plan.chunk_size, plan.ramp, lambda n: dist_ch.whole_waves(config, n))
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
            with thread_cpu.counted(thread_cpu.COPY):
                _copy(state, plan, size, hand_over, lambda: stop() or abort.is_set(),
                      on_hot_copied)
        finally:
            hand_over(None)

    # Leaving the pools waits for the copy thread, which stops at its next chunk boundary once
    # `abort` is set, for Spark's start, and for a fetch on demand's round.
    stop_fetching = threading.Event()
    with HdfsClient(config, threads=HDFS_THREADS) as hdfs, \
            ThreadPoolExecutor(max_workers=3, thread_name_prefix="chunk-copy") as pool:
        state = CopyState(load, io, hdfs, catalog.index, ledger(plan), _numbers(plan.done),
                          WireTurn(), early)
        hdfs.mkdirs(load.namespace.chunk_dir)
        copying = pool.submit(copy_all)
        # Spark starts while the first chunks are copied (and bucketed here meanwhile).
        spark = pool.submit(spark_session, config, "debl-dist_ch")
        bucketer = Bucketer(state, spark, decided)
        fetcher = fetching = None
        if early is not None and config.loading.demand_fetch:
            fetcher = DemandFetcher(state, early, bucketer.bucket)
            fetching = pool.submit(fetcher.run, stop_fetching)
        try:
            while (item := _next(copied, fetching)) is not None:
                if stop():  # the caller says why (a lost lock, a failed hot path)
                    abort.set()
                    break
                chunk, copy_seconds = item
                t0 = time.time()
                out = bucketer.bucket(chunk)
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
            stop_fetching.set()  # every byte is taken: a round under way ends, recorded
            if fetching is not None and fetcher is not None:  # (started together)
                fetching.result()
                result.chunks += fetcher.chunks
        except BaseException:
            abort.set()
            stop_fetching.set()
            raise
    copying.result()  # raises what the copy raised
    return result


def _next(copied: queue.Queue, fetching: Future | None):
    """The next copied chunk (None: the copy is done); raises what the fetches on demand
    raised as soon as they do."""
    while True:
        if fetching is not None and fetching.done():
            fetching.result()  # raises; a fetcher that ended well ends once all is taken
        try:
            return copied.get(timeout=0.5)
        except queue.Empty:
            pass


def ledger(plan: PipelinePlan) -> Coverage:
    """The copy's ledger (``loaders.coverage``) of the plan's files, with the bytes of the
    chunks already bucketed taken."""
    coverage = Coverage({seq: f.size for seq, f in (*plan.hot, *plan.cold)})
    for chunk in plan.done:
        for s in chunk.segments:
            coverage.add(s.file_seq, s.start, s.end, s.lines)
    return coverage


def _numbers(done: list[Chunk]) -> Callable[[], int]:
    """Chunk numbers after the done chunks', one at a time, for any thread."""
    counter = itertools.count(max((c.chunk_no for c in done), default=-1) + 1)
    lock = threading.Lock()

    def next_number() -> int:
        with lock:
            return next(counter)
    return next_number


def _copy(state: CopyState, plan: PipelinePlan, size: _ChunkSize,
          hand_over: Callable[[tuple[Chunk, float] | None], None], stopped: Callable[[], bool],
          on_hot_copied: Callable[[list[Chunk]], None]) -> None:
    """The copy thread: the hot files, then the cold ones, each chunk handed to dist_ch once
    its file is closed, which goes on while the next chunk is sent (``ChunkCopier.start_next``).
    A resumed load copies only the bytes its bucketed chunks do not hold."""
    config, load_id = state.load.config, state.load.load_id
    hot_chunks = [c for c in plan.done if c.hot]
    # Chunks taper towards the end of the whole input, not of the hot files: cold chunks follow
    # those at once, and a run of small hot chunks would cost a Spark job each.
    remaining = (sum(f.size for _, f in (*plan.hot, *plan.cold))
                 - sum(c.bytes for c in plan.done))
    for hot, files in ((True, plan.hot), (False, plan.cold)):
        copier = ChunkCopier(state.io.source, files, state.hdfs, state.load.namespace.chunk_dir,
                             state.coverage, state.numbers, state.io.progress.copied, hot=hot,
                             turn=state.turn)
        sent: list = []  # (chunk, its copy's start and end, wait for its close): one at most

        def settle() -> None:
            """The chunk sent before, once closed: recorded and handed to dist_ch. Its copy
            took its own sending and the wait for its close, not the next chunk's sending."""
            for chunk, t0, t1, finished in sent:  # noqa: B023 -- called in this iteration only
                waited = time.time()
                finished()
                t1 += time.time() - waited
                state.index.chunk_copied(load_id, chunk.record(ChunkState.COPIED), t0, t1,
                                         chunk.lines)
                if chunk.hot:
                    hot_chunks.append(chunk)
                hand_over((chunk, t1 - t0))
            sent.clear()  # noqa: B023 -- called in this iteration only

        try:
            while files and not stopped():
                t0 = time.time()
                want = tapered(size.next, remaining)
                try:
                    chunk, finished = copier.start_next(want, dist_ch.slices_for(config, want))
                except BaseException:
                    with contextlib.suppress(Exception):
                        settle()  # the chunk before is in HDFS: it is bucketed all the same
                    raise
                t1 = time.time()
                settle()
                if chunk is None:
                    break
                remaining -= chunk.bytes
                size.took(chunk.bytes)
                sent.append((chunk, t0, t1, finished))
            settle()
        finally:
            for _, _, _, finished in sent:  # failed: no call left under way
                try:
                    finished()
                except Exception:  # noqa: BLE001 -- the copy's own error is the one raised
                    pass
            copier.close()
        if stopped():
            return
        if hot:
            on_hot_copied(hot_chunks)


def number_lines(config: Config, load_id: str, rejects: RejectWriter) -> None:
    """Once every byte is bucketed: give the rejects of pieces fetched out of their files'
    order (named by ``loaders.rejects.pending_line``) their line numbers, from the lines of
    every segment before theirs."""
    with Catalog(config) as catalog:
        chunks = [Chunk.of(c) for c in catalog.index.chunks(load_id)
                  if c.state == ChunkState.BUCKETED]
    first: dict[tuple[str, int], int] = {}
    by_file: dict[int, list] = {}
    for chunk in chunks:
        for s in chunk.segments:
            by_file.setdefault(s.file_seq, []).append(s)
    for segments in by_file.values():
        line = 1
        for s in sorted(segments, key=lambda s: s.start):
            first[(s.name, s.start)] = line
            line += s.lines
    rejects.resolve(lambda name, start: first[(name, start)])
