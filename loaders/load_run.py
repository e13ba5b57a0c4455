"""One load's run, stage by stage (docs/LOADING.md, "How a load runs"): ``LoadRun`` takes a load
from its listing to its uptime (``wait_up``) and on to MySQL's take-over of the hot keys
(``finish``), through the stages of ``Stage``:

    LISTED -> COPYING -> HOT_COPIED -> BUCKETED -> UP -> HOT_TAKEN_OVER

and COPYING -> BUCKETED when nothing goes into HDFS, LISTED -> UP for a load resumed after its
uptime, any stage before UP -> FAILED. ``NEXT`` holds every transition; ``LoadRun._enter`` is
the one place a stage is entered, and the one place MySQL's hot path starts: once, as the load
enters the stage ``hot_path_start`` names, or the first one past it (a resumed load enters UP
at once). The bucket map's sample is no stage: it runs beside COPYING, and only the cold
chunks' dist_ch waits for it.

The load's record in the catalog keeps its own states, which the reports and ``debl status``
read (``state``: running, up, failed; ``hot_state``: none, loading, mysql, failed; the phases
in ``debl_phases``): the stages are the run's, in this process, and change none of them.

Pitfalls:

- HOT_COPIED is entered from the copy thread, while the main thread waits in COPYING; the
  stage lock keeps the transitions and the hot path's start in one order.
- The run holds the load lock (``load_lock``: one load per dataset) from its start to its end,
  and stops once the server has released it (``loaders.load``, "Concurrency and resume").
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from enum import Enum

from debl.catalog import Catalog, ChunkState, LoadFile, LoadState, NamedLock, named_lock
from debl.config import Config
from debl.errors import BadInputError, DeblError, LoadStateError, ServiceError, SourceError
from debl.format.bucket_map import BucketMap
from debl.hdfs import HdfsClient
from debl.namespace import Namespace
from loaders.chunker import Chunk
from loaders.cleanup import cleanup
from loaders.early import early_summary, note_manifests, open_early
from loaders.hot_phase import drop_hot_buckets, load_hot_files
from loaders.listing import listing_position
from loaders.load_context import (EARLY_APPROACHES, LoadContext, LoadIO, LoadOptions,
                                  LoadProgress, LoadSummary, new_load_id, phase_sums,
                                  reject_path)
from loaders.pipeline import MIN_CHUNK, PipelinePlan, copy_and_bucket, number_lines
from loaders.rejects import HOT_PART, RejectWriter, chunk_part, escape_name
from loaders.resume import ResumeState, drop_stale_files, resume_state
from loaders.sampling import sample_bucket_map
from loaders.source import Source, open_source
from loaders.source_url import redact_url
from loaders.split import split_files

class Stage(Enum):
    """Where a load's run is (see the module; docs/LOADING.md, "How a load runs")."""

    LISTED = 1  # recorded in its namespace, files split hot and cold (or read back: resumed)
    COPYING = 2  # the copy pipeline runs; with wait_for_hot the hot files stream into MySQL
    HOT_COPIED = 3  # every hot chunk is in HDFS (the cold ones follow)
    BUCKETED = 4  # every chunk bucketed, bad lines within the limit (wait_for_hot: MySQL too)
    UP = 5  # the current load: every key answered exactly
    HOT_TAKEN_OVER = 6  # MySQL holds the hot keys (at once without hot files); the end
    FAILED = 7  # stopped before its uptime, recorded failed: `--resume` continues it


NEXT: dict[Stage | None, frozenset[Stage]] = {
    None: frozenset({Stage.LISTED}),
    Stage.LISTED: frozenset({Stage.COPYING, Stage.UP, Stage.FAILED}),
    Stage.COPYING: frozenset({Stage.HOT_COPIED, Stage.BUCKETED, Stage.FAILED}),
    Stage.HOT_COPIED: frozenset({Stage.BUCKETED, Stage.FAILED}),
    Stage.BUCKETED: frozenset({Stage.UP, Stage.FAILED}),
    Stage.UP: frozenset({Stage.HOT_TAKEN_OVER}),  # a hot path failed after uptime: stays UP
    Stage.HOT_TAKEN_OVER: frozenset({Stage.HOT_TAKEN_OVER}),  # finish() again: the same end
    Stage.FAILED: frozenset(),
}


def hot_path_start(has_hot: bool, wait_for_hot: bool, answers_early: bool,
                   setting: str) -> Stage | None:
    """The stage at whose entry MySQL's hot path starts (docs/LOADING.md, "How a load runs"):
    None when MySQL has no hot file to take (*has_hot* false: none, or taken before a resume);
    COPYING with *wait_for_hot* (from the source, beside the copy); HOT_COPIED with *setting*
    (``loading.hot_path_start``) ``copied``, unless the load answers early (a hot piece may
    still be on its way from a fetch on demand); UP otherwise, once nothing else of the load
    competes with MySQL for the CPU ("Uptime without MySQL")."""
    if not has_hot:
        return None
    if wait_for_hot:
        return Stage.COPYING
    if setting == "copied" and not answers_early:
        return Stage.HOT_COPIED
    return Stage.UP


LOAD_LOCK = "debl_load"
# How long a load waits for the lock before it says another load holds it: a load killed in the
# middle of a statement keeps its session, and the lock, until the server has ended that
# statement (a resume right after the kill found it still held, under load).
LOAD_LOCK_WAIT_S = 5.0


@contextmanager
def load_lock(config: Config) -> Iterator[NamedLock]:
    """Hold the dataset's load lock (one ``debl load`` per MySQL database at a time), or raise
    LoadStateError if another load holds it."""
    name = f"{LOAD_LOCK}.{config.mysql.database}"  # named locks are server-wide
    lock = named_lock(config, name, wait=LOAD_LOCK_WAIT_S)
    if lock is None:
        raise LoadStateError(f"another `debl load` is running on this dataset (MySQL database "
                             f"{config.mysql.database!r}, lock {name}): wait for it to end (`debl "
                             "status`), or give this load another mysql.database")
    try:
        yield lock
    finally:
        lock.release()


class LoadRun:
    """One load, in two halves: ``wait_up()`` returns the summary at uptime, ``finish()`` the
    final one once MySQL holds the hot keys (see the module). Use with ``with``: leaving it
    releases the load lock. ``stage`` says where it is (None before its listing)."""

    # What the load is and its open ends: set as it is listed (``wait_up``), before any stage.
    load: LoadContext
    _io: LoadIO

    def __init__(self, config: Config, source_spec: str, options: LoadOptions = LoadOptions(),
                 resume: str | None = None, progress: LoadProgress = LoadProgress()):
        self.config, self.source_spec, self.options = config, source_spec, options
        self.resume, self.progress = resume, progress
        self._lock = load_lock(config)
        self._held = self._lock.__enter__()
        self._checking = threading.Lock()  # the lock's session serves one thread at a time
        self._lost = False
        self._background = ThreadPoolExecutor(max_workers=2, thread_name_prefix="debl-load")
        self._hot_path: Future | None = None
        self.summary: LoadSummary  # made by wait_up(); the hot path and finish() read it
        self.stage: Stage | None = None
        self._stage_lock = threading.Lock()
        self._hot_start: Stage | None = None  # hot_path_start's answer, once the load is listed

    def __enter__(self) -> "LoadRun":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        # Threads still writing would race a later load of this process: let them finish.
        self._background.shutdown(wait=True)
        self._lock.__exit__(None, None, None)

    def _lock_lost(self) -> bool:
        """Whether the server closed the load lock's session (and released the lock). Once
        lost, lost for good: the copy stopped on it, and the load must not go on."""
        with self._checking:
            self._lost = self._lost or not self._held.held()
            return self._lost

    def _check_lock(self, before: str) -> None:
        """LoadStateError, naming the lock and how to go on, if the load lock is lost."""
        if self._lock_lost():
            load_id = self.summary.load_id if hasattr(self, "summary") else "?"
            raise LoadStateError(
                f"load {load_id} lost its MySQL lock {self._held.name}: the server closed the "
                "lock's session (a restart?), so another `debl load` may have started on this "
                f"dataset; this load stopped before {before}. If no other load started since "
                f"(`debl status`), continue it: debl load {redact_url(self.source_spec)} "
                f"--resume {load_id}")

    # -- the stages

    def _enter(self, stage: Stage, hot_chunks: list[Chunk] | None = None) -> None:
        """Enter *stage* (a transition of ``NEXT``), and start MySQL's hot path if it is due:
        once, at the stage ``hot_path_start`` named or the first one past it. *hot_chunks*:
        what the copy handed over with HOT_COPIED."""
        with self._stage_lock:
            if stage not in NEXT[self.stage]:
                raise RuntimeError(f"a load goes from {self.stage} to one of "
                                   f"{sorted(s.name for s in NEXT[self.stage])}, not to "
                                   f"{stage.name}")
            self.stage = stage
            start = self._hot_start
            if (start is None or self._hot_path is not None
                    or not start.value <= stage.value <= Stage.UP.value):
                return
            if start is Stage.COPYING:  # wait_for_hot: from the source
                chunks = None
            elif stage is Stage.HOT_COPIED:
                chunks = hot_chunks
            else:  # with the pieces fetched on demand, which the copy did not hand over
                chunks = self._hot_chunks()
            self._hot_path = self._background.submit(self._run_hot, chunks)

    # -- to uptime

    def wait_up(self) -> LoadSummary:
        """Run the load to its uptime; returns its summary then (the hot path may still run)."""
        config, options = self.config, self.options
        t_start = time.time()
        source = open_source(self.source_spec, config)
        max_bad = config.loading.max_bad if options.max_bad is None else options.max_bad
        with Catalog(config, replace_older=not self.resume) as catalog:
            if self.resume:
                state = resume_state(catalog, source, self.resume)
                t_start = state.load.started
            else:
                state = self._begin(catalog, source, t_start, max_bad)
        load = self.load = LoadContext(config, state.load.load_id, state.load.namespace,
                                       tuple(state.files), frozenset(state.hot_seqs), max_bad,
                                       state.load.wait_for_hot)
        hot, cold = load.hot, load.cold
        summary = self.summary = LoadSummary(
            load.load_id, state.load.approach, source.describe(), hot_files=len(hot),
            cold_files=len(cold), hot_bytes=sum(f.size for _, f in hot),
            cold_bytes=sum(f.size for _, f in cold))
        rejects = RejectWriter(reject_path(config, load.load_id))
        summary.reject_file = str(rejects.path)
        self._io = LoadIO(source, rejects, self.progress)
        self._enter(Stage.LISTED)
        if state.load.state == LoadState.UP:  # resumed after uptime: the hot path only
            self._hot_start = hot_path_start(True, load.wait_for_hot, False,
                                             config.loading.hot_path_start)
            self._enter(Stage.UP)
            summary.uptime_s = (state.load.uptime or t_start) - t_start  # up: it has one
            return summary
        try:
            self._to_bucketed(state)
            self._make_current(state, t_start)
        except BaseException as exc:
            self._background.shutdown(wait=True)
            self._enter(Stage.FAILED)
            _failed(config, load.load_id, self.source_spec, exc)
            raise
        self.progress.up(summary)
        self._enter(Stage.UP)
        return summary

    def _begin(self, catalog: Catalog, source: Source, t_start: float,
               max_bad: int) -> ResumeState:
        """Record a new load in its own namespace; returns it as a state to go on from."""
        options, config, say = self.options, self.config, self.progress.message
        load_id = new_load_id()
        listed = source.list()
        if not listed:
            raise DeblError(f"source {source.describe()} holds no files")
        hot_names = {f.name for f in split_files(listed, options.hot_bytes, options.hot_since).hot}
        files = list(enumerate(listed))
        hot_seqs = {seq for seq, f in files if f.name in hot_names}
        width = (options.bucket_width if options.bucket_width is not None
                 else config.loading.bucket_width)
        # The load's clock (uptime_s, the bench's times) starts here, listing included.
        catalog.loads.begin_load(load_id, options.approach, source.describe(),
                                 options.chunk_size or config.loading.chunk_size,
                                 {"hot_bytes": options.hot_bytes, "hot_since": options.hot_since,
                                  "max_bad": max_bad, "wait_for_hot": options.wait_for_hot},
                                 Namespace.of(config, load_id), started=t_start,
                                 hot=bool(hot_seqs), position=listing_position(listed, say))
        catalog.files.add_files(load_id, [LoadFile(seq, escape_name(f.name), f.size, f.mtime,
                                                   seq in hot_seqs) for seq, f in files])
        note_manifests(self.config, catalog, load_id, files, say,
                       options.approach in EARLY_APPROACHES and not options.wait_for_hot)
        bucket_map = BucketMap.fixed(width) if width else None
        if bucket_map is not None:
            catalog.loads.set_bucket_map(load_id, bucket_map)
        return ResumeState(catalog.loads.get(load_id), files, hot_seqs, bucket_map, [],
                           not hot_seqs)

    def _to_bucketed(self, state: ResumeState) -> None:
        """LISTED -> COPYING (-> HOT_COPIED) -> BUCKETED: copy and bucket every chunk (the
        chunks *state* holds as done are kept); the bad lines must be within the limit."""
        load, io, summary, progress = self.load, self._io, self.summary, self.progress
        config, rejects = self.config, io.rejects
        if self.resume:  # the parts to redo start afresh
            rejects.keep(([HOT_PART] if state.hot_done else [])
                         + [chunk_part(c.chunk_no) for c in state.done])
            drop_stale_files(HdfsClient(config), load.namespace.chunk_dir,
                             [load.namespace.bucket_dir, load.namespace.hot_dir],
                             {c.chunk_no for c in state.done})
        chunk_size = self.options.chunk_size or config.loading.chunk_size
        if not self.options.chunk_size:
            # The configured size is for big inputs; a small one still gets a pipeline of chunks.
            chunk_size = min(chunk_size, max(MIN_CHUNK, (summary.cold_bytes
                                                         + summary.hot_bytes) // 8))
        progress.start(summary.hot_bytes, summary.cold_bytes)
        to_bucket = [] if load.wait_for_hot else load.hot
        copies = bool(to_bucket or load.cold)
        early = (open_early(config, load.load_id, state.files, state.done) if copies
                 else None)
        self._hot_start = hot_path_start(bool(load.hot) and not state.hot_done,
                                         load.wait_for_hot, early is not None,
                                         config.loading.hot_path_start)
        self._enter(Stage.COPYING)
        if copies:
            decided = (self._background.submit(self._sample)
                       if state.bucket_map is None else _done(state.bucket_map))
            copied = copy_and_bucket(
                load, io, PipelinePlan(to_bucket, load.cold, state.done, chunk_size,
                                       ramp=early is not None),
                decided, early,
                stop=lambda: self._lock_lost() or (load.wait_for_hot
                                                   and self._hot_failed_before_up()),
                on_hot_copied=lambda chunks: self._enter(Stage.HOT_COPIED, chunks))
            summary.chunks = copied.chunks
            number_lines(config, load.load_id, rejects)
            summary.bucket_map = decided.result().to_dict()
        if load.wait_for_hot and self._hot_path is not None:
            self._hot_path.result()  # raises what the hot path raised
        self._check_lock("it became current")  # the copy stopped early if it was lost
        summary.rejects = rejects.count
        if 0 <= load.max_bad < summary.rejects:
            raise BadInputError(f"{summary.rejects} bad lines, more than --max-bad "
                                f"{load.max_bad}; see {rejects.path}")
        self._enter(Stage.BUCKETED)

    def _make_current(self, state: ResumeState, t_start: float) -> None:
        """BUCKETED, then the load's uptime: its summary, and the load made current in one
        transaction (``catalog.loads.make_current``)."""
        load_id, summary = self.load.load_id, self.summary
        t_up = time.time()
        summary.uptime_s = t_up - t_start
        with Catalog(self.config) as catalog:
            buckets = catalog.index.buckets(load_id)
            summary.buckets = len(buckets)
            summary.cold_rows = sum(b.rows for b in buckets)
            summary.hot_rows = catalog.loads.get(load_id).hot_rows
            summary.phases = phase_sums(catalog.phases.phases(load_id))
            summary.early = early_summary(catalog, load_id, dict(state.files))
            catalog.loads.make_current(load_id, t_up, summary.as_dict())

    def _hot_failed_before_up(self) -> bool:
        return (self._hot_path is not None and self._hot_path.done()
                and self._hot_path.exception() is not None)

    def _sample(self) -> BucketMap:
        """Split points from a sample of the cold files, recorded with the load."""
        load_id = self.load.load_id
        with Catalog(self.config) as catalog:
            catalog.phases.phase_start(load_id, "sample", "all")
            bucket_map = sample_bucket_map(self.config, self._io.source,
                                           [f for _, f in self.load.cold])
            catalog.loads.set_bucket_map(load_id, bucket_map)
            catalog.phases.phase_end(load_id, "sample", "all", rows=bucket_map.count)
        self.progress.message(f"bucket map: {bucket_map.describe()}")
        return bucket_map

    def _run_hot(self, chunks: list[Chunk] | None) -> None:
        result = load_hot_files(self.load, self._io, chunks)
        self.summary.hot_rows = result.rows

    def _hot_chunks(self) -> list[Chunk]:
        with Catalog(self.config) as catalog:
            return [Chunk.of(c) for c in catalog.index.chunks(self.load.load_id)
                    if c.hot and c.state == ChunkState.BUCKETED]

    # -- after uptime

    def finish(self) -> LoadSummary:
        """UP -> HOT_TAKEN_OVER: wait for MySQL to take the hot keys over, remove the hot
        bucket files once no coordinator reads them, drop the stores of loads nobody serves any
        more; returns the final summary. A hot path that fails after uptime leaves the load
        serving its hot keys from the hot buckets (still UP) and raises the failure, with how
        to resume."""
        config, summary = self.config, self.summary
        load_id = summary.load_id
        if self._hot_path is not None:
            try:
                self._hot_path.result()
            except BaseException as exc:
                if isinstance(exc, DeblError):
                    exc.add_note(f"load {load_id} is up and answers its hot keys from the hot "
                                 "files' buckets in HDFS; once the cause is fixed, hand them "
                                 f"to MySQL: debl load {redact_url(self.source_spec)} --resume "
                                 f"{load_id}")
                raise
            with Catalog(config) as catalog:
                load = catalog.loads.get(load_id)
                summary.taken_over_s = (load.taken_over or load.started) - load.started
                summary.phases = phase_sums(catalog.phases.phases(load_id))
                catalog.loads.update_load(load_id, summary=summary.as_dict())
            if not load.wait_for_hot:
                drop_hot_buckets(self.load, self.progress)
        self._enter(Stage.HOT_TAKEN_OVER)
        if self._lock_lost():  # another load may run: its own cleanup, or gen_HF's, drops them
            self.progress.message(f"load {load_id} lost its MySQL lock {self._held.name} (the "
                                  "server closed its session): the stores of older loads are "
                                  "left to a later cleanup (`debl cleanup`)")
            return summary
        try:
            cleanup(config, wait=True, report=self.progress.message)
        except DeblError as exc:  # the load is up and done: older stores wait for a later cleanup
            self.progress.message(f"the stores of older loads were not dropped ({exc}); "
                                  "`debl cleanup` drops them later, as the gen_HF service does")
        return summary


def _done(bucket_map: BucketMap) -> Future:
    future: Future = Future()
    future.set_result(bucket_map)
    return future


def _failed(config: Config, load_id: str, source_spec: str, exc: BaseException) -> None:
    """Record the load as failed, and tell the user how to go on: a load stopped by a service
    or its source continues where it stopped (docs/LOADING.md, "Decisions where DESIGN is
    silent", row "Resume"); the current day keeps
    serving meanwhile. If MySQL itself is what failed, the state cannot be recorded; the load
    stays ``running``, which a resume takes as well."""
    try:
        with Catalog(config) as catalog:
            catalog.loads.update_load(load_id, state=LoadState.FAILED, error=str(exc)[:2000])
    except ServiceError:
        pass  # the original error says what happened; it is the one raised
    if isinstance(exc, (ServiceError, SourceError)):
        exc.add_note(f"load {load_id} stopped there; once that is fixed (`debl stack up` for a "
                     f"service of the stack), continue it: debl load {redact_url(source_spec)} "
                     f"--resume {load_id}")
