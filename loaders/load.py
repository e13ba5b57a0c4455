"""``debl load``: the offline phase, from a source to uptime, and on to MySQL's take-over of the
hot keys (docs/LOADING.md).

1. List the source, split the files into hot and cold (``loaders.split``); record the load in a
   namespace of its own (``debl.namespace``): nothing of the current load changes, it keeps
   serving until this one is up.
2. Decide the bucket map (``debl.format.bucket_map``): a fixed width if configured, else split
   points from a sample of the cold files (``loaders.sampling``), beside the copy and Spark's
   start: only dist_ch needs the map. Recorded with the load; a resumed load keeps it.
3. The copy pipeline (``loaders.pipeline``): the hot files, then the cold ones, copied into HDFS
   chunk by chunk and bucketed by dist_ch, the hot chunks into the load's hot buckets. As soon
   as the hot chunks are in HDFS, MySQL's hot path reads them back (``loaders.hot_phase``, a
   thread).
4. **Uptime** when every chunk is bucketed: every key is answerable exactly, the hot keys from
   the hot buckets by the merge rule. The load becomes the current one in one transaction
   (``catalog.loads.make_current``); every coordinator moves to it at its next poll.
5. The hot path goes on; when MySQL has merged and indexed the hot rows it takes the hot keys
   over (one transaction), the hot bucket files go once no coordinator reads them, and the
   stores of loads nobody serves any more are dropped (``loaders.cleanup``).

With ``wait_for_hot`` (``--wait-for-hot``: the paper's uptime, and bulkLoad-mysql) the hot files
stream from the source into MySQL alone, and the load is up only once MySQL has them.

``run_load`` does it all; ``LoadRun`` returns at uptime (``wait_up``) and finishes later
(``finish``), which is how the bench starts its query phase at uptime. Every phase's start and
end goes to ``debl_phases``.

Concurrency and resume (docs/RELIABILITY.md, "Concurrency"):

- One load per dataset at a time: a load (new or resumed) holds the MySQL named lock
  ``debl_load.<database>`` until it finishes; a second one is refused with LoadStateError.
  The lock lives on a session the server may close (a restart): the load checks that it still
  holds it before each chunk's copy and dist_ch and before it becomes current, and stops with
  LoadStateError (resumable) once it does not, since a second load may be running then (issue
  38.5; ``make_current`` refuses a superseded or dropped load anyway); a load that is up leaves
  its end's cleanup to a later one.
- A killed or failed load leaves the current day serving; ``resume=LOAD_ID`` continues it
  (``loaders.resume``: only the newest load; chunks bucketed are skipped; a hot path that had
  not handed its keys to MySQL is redone, after uptime too).
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from debl.format.bucket_map import BucketMap
from debl.catalog import Catalog, LoadFile, NamedLock, Phase, named_lock
from debl.config import Config
from debl.errors import (BadInputError, ConfigError, DeblError, LoadStateError, ServiceError,
                         SourceError)
from debl.hdfs import HdfsClient
from debl.namespace import Namespace
from loaders.chunker import Chunk
from loaders.cleanup import cleanup
from loaders.hot_phase import drop_hot_buckets, load_hot_files
from loaders.early import early_summary, note_manifests, open_early
from loaders.pipeline import MIN_CHUNK, PipelinePlan, copy_and_bucket, number_lines
from loaders.rejects import HOT_PART, RejectWriter, chunk_part, escape_name
from loaders.resume import ResumeState, drop_stale_files, resume_state
from loaders.sampling import sample_bucket_map
from loaders.source import Source, SourceFile, open_source
from loaders.source_url import redact_url
from loaders.split import split_files


@dataclass(frozen=True)
class LoadOptions:
    hot_bytes: int | None = None
    hot_since: float | None = None
    chunk_size: int | None = None  # None: config.loading.chunk_size
    bucket_width: int | None = None  # None: config.loading.bucket_width (0: sampled split points)
    max_bad: int | None = None  # None: config.loading.max_bad
    approach: str = "debl"
    wait_for_hot: bool = False  # the paper's uptime: up once MySQL holds the hot rows


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


DEBL_APPROACHES = ("debl", "debl-cold")  # DeBL's own loads; the others: debl.bench.baselines
# The loads that may answer before their uptime: DeBL's own, and the bench's variants of them
# (the baselines' loads do not: docs/LOADING.md, "Answers before the copy ends").
EARLY_APPROACHES = (*DEBL_APPROACHES, "debl-fifo", "debl-raw")
DEFAULT_HOT_SHARE = 0.2  # the paper's "2g mysql" of a 10 GB input


def load_debl(config: Config, source_spec: str, options: LoadOptions = LoadOptions(),
              resume: str | None = None, progress: LoadProgress = LoadProgress()) -> LoadSummary:
    """``debl load``: DeBL's own load (``options.approach`` ``debl`` or ``debl-cold``), by
    ``run_load``. For ``debl`` with no hot split given, the newest ``DEFAULT_HOT_SHARE`` of the
    bytes are hot; ``debl-cold`` has no hot file.

    Raises ConfigError for another approach (the baselines are ``debl.bench.baselines``) or a
    hot split given to ``debl-cold``; LoadStateError for a resume of no load or of a load of
    another approach."""
    if options.approach not in DEBL_APPROACHES:
        raise ConfigError(f"approach {options.approach!r} is not DeBL's own load "
                          f"({', '.join(DEBL_APPROACHES)}): the baselines run through "
                          "debl.bench.baselines.run_approach")
    check_resume_approach(config, resume, options.approach)
    if options.approach == "debl-cold":
        if options.hot_bytes is not None or options.hot_since is not None:
            raise ConfigError("approach debl-cold: every file is cold; drop "
                              "--hot-bytes/--hot-since")
    else:
        options = with_default_hot_share(config, source_spec, options, resume)
    return run_load(config, source_spec, options, resume, progress)


def with_default_hot_share(config: Config, source_spec: str, options: LoadOptions,
                           resume: str | None) -> LoadOptions:
    """*options* with the newest ``DEFAULT_HOT_SHARE`` of the source's bytes hot when they give
    no hot split (a resumed load keeps its own split: unchanged). Lists the source."""
    if options.hot_bytes is not None or options.hot_since is not None or resume:
        return options
    total = sum(f.size for f in open_source(source_spec, config).list())
    return replace(options, hot_bytes=int(total * DEFAULT_HOT_SHARE))


def check_resume_approach(config: Config, resume: str | None, approach: str) -> None:
    """Raise LoadStateError unless *resume* is None or a load of *approach* in the catalog."""
    if not resume:
        return
    with Catalog(config) as catalog:
        row = catalog.loads.load(resume)
    if row is None:
        raise LoadStateError(f"no load {resume!r}; `debl status` lists the latest load")
    if row.approach != approach:
        raise LoadStateError(f"load {resume} is a {row.approach} load: resume it with "
                             f"--approach {row.approach}")


def run_load(config: Config, source_spec: str, options: LoadOptions = LoadOptions(),
             resume: str | None = None, progress: LoadProgress = LoadProgress()) -> LoadSummary:
    """Run (or resume) the offline phase to its end: uptime, then MySQL's take-over of the hot
    keys. Raises LoadStateError while another load of the dataset runs."""
    with LoadRun(config, source_spec, options, resume, progress) as run:
        run.wait_up()
        return run.finish()


class LoadRun:
    """One load, in two halves: ``wait_up()`` returns the summary at uptime, ``finish()`` the
    final one once MySQL holds the hot keys (see the module). Use with ``with``: leaving it
    releases the load lock."""

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
        self._namespace: Namespace  # the load's, known from wait_up() on

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
                load_id, t_start = state.load.load_id, state.load.started
                wait_for_hot = state.load.wait_for_hot
                namespace = state.load.namespace
            else:
                state = self._begin(catalog, source, t_start, max_bad)
                load_id, wait_for_hot = state.load.load_id, options.wait_for_hot
                namespace = state.load.namespace
        self._namespace = namespace
        hot = [(seq, f) for seq, f in state.files if seq in state.hot_seqs]
        cold = [(seq, f) for seq, f in state.files if seq not in state.hot_seqs]
        summary = self.summary = LoadSummary(
            load_id, state.load.approach, source.describe(), hot_files=len(hot),
            cold_files=len(cold), hot_bytes=sum(f.size for _, f in hot),
            cold_bytes=sum(f.size for _, f in cold))
        rejects = RejectWriter(reject_path(config, load_id))
        summary.reject_file = str(rejects.path)
        if state.load.state == "up":  # resumed after uptime: the hot path only
            self._hot_path = self._background.submit(
                self._run_hot, source, hot, rejects, max_bad,
                None if wait_for_hot else self._hot_chunks(load_id))
            summary.uptime_s = (state.load.uptime or t_start) - t_start  # up: it has one
            return summary
        try:
            self._to_uptime(source, state, hot, cold, rejects, max_bad, wait_for_hot, t_start)
        except BaseException as exc:
            self._background.shutdown(wait=True)
            _failed(config, load_id, self.source_spec, exc)
            raise
        return summary

    def _begin(self, catalog: Catalog, source: Source, t_start: float,
               max_bad: int) -> ResumeState:
        """Record a new load in its own namespace; returns it as a state to go on from."""
        options, config = self.options, self.config
        load_id = new_load_id()
        listed = source.list()
        if not listed:
            raise DeblError(f"source {source.describe()} holds no files")
        split = split_files(listed, options.hot_bytes, options.hot_since)
        hot_names = {f.name for f in split.hot}
        files = list(enumerate(listed))
        hot_seqs = {seq for seq, f in files if f.name in hot_names}
        width = (options.bucket_width if options.bucket_width is not None
                 else config.loading.bucket_width)
        # The load's clock (uptime_s, the bench's times) starts here, listing included.
        catalog.loads.begin_load(load_id, options.approach, source.describe(),
                                 options.chunk_size or config.loading.chunk_size,
                                 {"hot_bytes": options.hot_bytes, "hot_since": options.hot_since,
                            "max_bad": max_bad, "wait_for_hot": options.wait_for_hot},
                                 Namespace.of(config, load_id), started=t_start, hot=bool(hot_seqs))
        catalog.files.add_files(load_id, [LoadFile(seq, escape_name(f.name), f.size, f.mtime,
                                                   seq in hot_seqs) for seq, f in files])
        note_manifests(self.config, catalog, load_id, files, self.progress.message,
                       options.approach in EARLY_APPROACHES and not options.wait_for_hot)
        bucket_map = BucketMap.fixed(width) if width else None
        if bucket_map is not None:
            catalog.loads.set_bucket_map(load_id, bucket_map)
        return ResumeState(catalog.loads.get(load_id), files, hot_seqs, bucket_map, [],
                           not hot_seqs)

    def _to_uptime(self, source: Source, state: ResumeState, hot: list, cold: list,
                   rejects: RejectWriter, max_bad: int, wait_for_hot: bool,
                   t_start: float) -> None:
        config, summary, progress = self.config, self.summary, self.progress
        load_id, namespace = summary.load_id, state.load.namespace
        if self.resume:  # the parts to redo start afresh
            rejects.keep(([HOT_PART] if state.hot_done else [])
                         + [chunk_part(c.chunk_no) for c in state.done])
            drop_stale_files(HdfsClient(config), namespace.chunk_dir,
                             [namespace.bucket_dir, namespace.hot_dir],
                             {c.chunk_no for c in state.done})
        chunk_size = self.options.chunk_size or config.loading.chunk_size
        if not self.options.chunk_size:
            # The configured size is for big inputs; a small one still gets a pipeline of chunks.
            chunk_size = min(chunk_size, max(MIN_CHUNK, (summary.cold_bytes
                                                         + summary.hot_bytes) // 8))
        progress.start(summary.hot_bytes, summary.cold_bytes)
        if hot and not state.hot_done and wait_for_hot:  # the paper's way: from the source
            self._hot_path = self._background.submit(self._run_hot, source, hot, rejects,
                                                     max_bad, None)
        to_bucket = [] if wait_for_hot else hot
        hot_chunks: list[Chunk] = []
        if to_bucket or cold:
            decided = (self._background.submit(self._sample, source, [f for _, f in cold])
                       if state.bucket_map is None else _done(state.bucket_map))

            early = open_early(self.config, state.load.load_id, state.files, state.done)

            def hot_copied(chunks: list[Chunk]) -> None:
                hot_chunks[:] = chunks
                # With fetches on demand, a hot piece may still be on its way: the hot path
                # then starts at uptime.
                if (chunks and not state.hot_done and early is None
                        and config.loading.hot_path_start == "copied"):
                    self._hot_path = self._background.submit(self._run_hot, source, hot,
                                                             rejects, max_bad, chunks)
            copied = copy_and_bucket(
                config, source, load_id, namespace,
                PipelinePlan(to_bucket, cold, state.done, chunk_size, ramp=early is not None),
                decided, rejects, max_bad, progress,
                stop=lambda: self._lock_lost() or (wait_for_hot and self._hot_failed_before_up()),
                on_hot_copied=hot_copied, early=early)
            summary.chunks = copied.chunks
            number_lines(config, load_id, rejects)
            if hot_chunks:
                hot_chunks[:] = self._hot_chunks(load_id)  # with the pieces fetched on demand
            summary.bucket_map = decided.result().to_dict()
        if wait_for_hot and self._hot_path is not None:
            self._hot_path.result()  # raises what the hot path raised
        self._check_lock("it became current")  # the copy stopped early if it was lost
        summary.rejects = rejects.count
        if 0 <= max_bad < summary.rejects:
            raise BadInputError(f"{summary.rejects} bad lines, more than --max-bad {max_bad}; "
                                f"see {rejects.path}")
        t_up = time.time()
        summary.uptime_s = t_up - t_start
        with Catalog(config) as catalog:
            buckets = catalog.index.buckets(load_id)
            summary.buckets = len(buckets)
            summary.cold_rows = sum(b.rows for b in buckets)
            summary.hot_rows = catalog.loads.get(load_id).hot_rows
            summary.phases = phase_sums(catalog.phases.phases(load_id))
            summary.early = early_summary(catalog, load_id, dict(state.files))
            catalog.loads.make_current(load_id, t_up, summary.as_dict())
        progress.up(summary)
        if hot_chunks and not state.hot_done and self._hot_path is None:
            # loading.hot_path_start "uptime": MySQL takes the hot files in once nothing else of the
            # load competes with it for the CPU (docs/LOADING.md, "Uptime without MySQL").
            self._hot_path = self._background.submit(self._run_hot, source, hot, rejects,
                                                     max_bad, hot_chunks)

    def _hot_failed_before_up(self) -> bool:
        return (self._hot_path is not None and self._hot_path.done()
                and self._hot_path.exception() is not None)

    def _sample(self, source: Source, cold: list[SourceFile]) -> BucketMap:
        """Split points from a sample of the cold files, recorded with the load."""
        load_id = self.summary.load_id
        with Catalog(self.config) as catalog:
            catalog.phases.phase_start(load_id, "sample", "all")
            bucket_map = sample_bucket_map(self.config, source, cold)
            catalog.loads.set_bucket_map(load_id, bucket_map)
            catalog.phases.phase_end(load_id, "sample", "all", rows=bucket_map.count)
        self.progress.message(f"bucket map: {bucket_map.describe()}")
        return bucket_map

    def _run_hot(self, source: Source, hot: list, rejects: RejectWriter, max_bad: int,
                 chunks: list[Chunk] | None) -> None:
        result = load_hot_files(self.config, self.summary.load_id, self._namespace, source, hot,
                                rejects, max_bad, chunks, self.progress)
        self.summary.hot_rows = result.rows

    def _hot_chunks(self, load_id: str) -> list[Chunk]:
        with Catalog(self.config) as catalog:
            return [Chunk.of(c) for c in catalog.index.chunks(load_id)
                    if c.hot and c.state == "bucketed"]

    # -- after uptime

    def finish(self) -> LoadSummary:
        """Wait for MySQL to take the hot keys over, remove the hot bucket files once no
        coordinator reads them, drop the stores of loads nobody serves any more; returns the
        final summary. A hot path that fails after uptime leaves the load serving its hot keys
        from the hot buckets and raises the failure, with how to resume."""
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
                drop_hot_buckets(config, load_id, self._namespace, self.progress)
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
            catalog.loads.update_load(load_id, state="failed", error=str(exc)[:2000])
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
