"""gen_HF: the online phase. A long-lived Spark application that turns buckets into HBase HFiles
and bulk-loads them, the buckets that the most waiting queries need first.

Each run: pick buckets (``pick_buckets``), mark them ``running`` in the job status table, read
their HDFS files, apply the merge rule, write real HFiles with HBase's ``HFileOutputFormat2``
(``loaders.hfile``, on the JVM), bulk-load them with HBase's ``BulkLoadHFiles`` (a rename: the
HFiles are on the HBase root's HDFS), and mark the buckets ``loaded`` with their row count,
superseded count and checksum (for ``debl verify``).

Pitfalls and guarantees:

- Nothing is visible before ``loaded``: the coordinator reads HBase only for loaded buckets, so
  a crash between the bulk load and the state change shows nothing half-loaded. A restarted
  gen_HF redoes the ``running`` buckets; loading a bucket twice writes the same cells (same row
  keys, same timestamp, same values), so the table is the same.
- One gen_HF per dataset: a MySQL named lock (``GET_LOCK``, named after the database) refuses
  a second one. The lock lives on an idle session: each run first checks that the session still
  holds it (a server that closed the session released the lock), and stops if not.
- gen_HF converts the buckets of the current load (``catalog.loads.current``), into that load's own
  HBase table (``debl.namespace``): a run still converting a day when the next day becomes
  current writes only into its own day's table, and its bulk load is told never to create a
  table, so it cannot resurrect a day whose stores were dropped (docs/RELIABILITY.md). A run
  marks buckets only where its own run id still holds them ``running`` (``finish_run``).
- At a new day's uptime nobody has asked for its buckets yet: its first runs take the buckets
  that the previous day's queries asked for most (``carried_demand``), then follow today's.
- Between runs it drops the stores of loads nobody serves any more (``loaders.cleanup``).
- The HBase table is created pre-split at the bucket boundaries (one region per bucket) through
  the JVM admin API (``debl.jobs.Tables``); Thrift1 cannot pre-split.
- Client puts never happen here (they are the ``batchPut`` baseline only).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from tenacity import (RetryCallState, Retrying, retry_if_exception_type,
                      retry_if_not_exception_type, wait_exponential)

from debl.catalog import Bucket, Catalog, JobState, LoadRecord
from debl.config import SPELLINGS, Config
from debl.errors import DeblError, GenHFLockHeld, JvmGone, ServiceError
from debl.faultpoints import reached
from debl.hdfs import HdfsClient
from debl.spark.session import spark_session, task_heap
from loaders import jobs
from loaders.cleanup import cleanup, days_lock
from loaders.hbase_bulk import bucket_split_keys, bulk_load, create_table
from loaders.hfile import write_bucket_hfiles

ORDERS = ("demand", "fifo")
LOCK = "debl_gen_hf"
RETRIES = 5  # failed runs in a row (ServiceError) before serve() gives up
CLEANUP_EVERY_S = 30.0
MAX_PAUSE_S = 60.0
# A bucket is merged in a task's memory, a few times its bytes (the file, one object per row,
# the sort: docs/ONLINE.md, "Decisions", row "A bucket too large for that"), and the tasks of
# one JVM share its heap (local[2]: two in the driver's; on a cluster spark.executor_cores in an
# executor's): keep a bucket under a quarter of a task's share.
HEAP_PER_BUCKET = 4


@dataclass(frozen=True)
class RunResult:
    run_id: str
    buckets: tuple[int, ...]
    demand: dict[int, int]
    rows: int  # raw rows read
    cells: int  # winners written
    seconds: float
    phases: dict[str, float] = field(default_factory=dict)


def pick_buckets(buckets: list[Bucket], demand: dict[int, int], run_buckets: int,
                 run_bytes: int, order: str = "demand",
                 max_bucket_bytes: int | None = None,
                 carried: dict[int, float] | None = None) -> list[Bucket]:
    """The next run's buckets among those not loaded.

    ``demand``: the most waiting queries first, then the most *carried* demand (the previous
    day's queries over the bucket's key range: ``carried_demand``), then the lowest b_index, so
    full availability always comes. ``fifo``: lowest b_index first, demand ignored (the
    ablation). ``running`` buckets (left by a crashed run) come before all others. At most
    *run_buckets*, and at most *run_bytes* in total unless the first alone is larger. A bucket
    over *max_bucket_bytes* is never taken (no task could merge it: ``GenHF.oversized``).
    """
    todo = [b for b in buckets if b.state != JobState.LOADED
            and (max_bucket_bytes is None or b.bytes <= max_bucket_bytes)]
    carried = carried or {}
    key: Callable[[Bucket], tuple]
    if order == "demand":
        key = lambda b: (b.state != JobState.RUNNING, -demand.get(b.b_index, 0),  # noqa: E731
                         -carried.get(b.b_index, 0.0), b.b_index)
    elif order == "fifo":
        key = lambda b: (b.state != JobState.RUNNING, b.b_index)  # noqa: E731
    else:
        raise DeblError(f"unknown order {order!r}: choose one of {', '.join(ORDERS)}")
    chosen: list[Bucket] = []
    total = 0
    for b in sorted(todo, key=key):
        if len(chosen) >= run_buckets or (chosen and total + b.bytes > run_bytes):
            break
        chosen.append(b)
        total += b.bytes
    return chosen


def carried_demand(old: list[Bucket], asked: dict[int, int], new: list[Bucket]) -> dict[int, float]:
    """The previous day's queries (*asked*, per bucket of its bucket index *old*) mapped onto
    today's buckets *new*: each old bucket's count spread evenly over the id1 span of its rows,
    each new bucket taking the share of that span its own span overlaps (docs/ONLINE.md,
    "Demand carried over"). The two days' bucket maps may cut the id space anywhere."""
    carried: dict[int, float] = {}
    for ob in old:
        n = asked.get(ob.b_index, 0)
        if not n:
            continue
        width = ob.c_hi - ob.c_lo + 1
        for nb in new:
            overlap = min(nb.c_hi, ob.c_hi) - max(nb.c_lo, ob.c_lo) + 1
            if overlap > 0:
                carried[nb.b_index] = carried.get(nb.b_index, 0.0) + n * overlap / width
    return carried


class GenHF:
    """The gen_HF service. ``with GenHF(config) as g: g.serve()``; ``run_once()`` for one run."""

    def __init__(self, config: Config, order: str = "demand",
                 report: Callable[[str], None] = lambda _: None):
        if order not in ORDERS:
            raise DeblError(f"unknown order {order!r}: choose one of {', '.join(ORDERS)}")
        self.config, self.order, self.report = config, order, report
        self.catalog = Catalog(config)
        # Named locks are server-wide: the database name keeps datasets apart.
        lock = f"{LOCK}.{config.mysql.database}"
        held = self.catalog.named_lock(lock)
        if held is None:
            raise GenHFLockHeld(f"another gen_HF is running on this dataset (MySQL lock {lock} "
                                "is held); it stops by itself once every bucket is loaded")
        self._lock = held
        try:
            self.spark = spark_session(config, "debl-gen_HF")
        except BaseException:
            self.close()
            raise
        self._table_for: str | None = None  # the load whose table we made sure exists
        self._carried: tuple[str, dict[int, float]] | None = None  # (load, its carried demand)
        self._cleaned = 0.0  # when the last cleanup ran (time.monotonic())
        self._first_failure = 0.0  # when the run retried now first failed (time.monotonic())

    def close(self) -> None:
        self.catalog.close()
        self._lock.release()

    def __enter__(self) -> "GenHF":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the HBase table

    def ensure_table(self, load: LoadRecord, buckets: list[Bucket]) -> None:
        """Create the load's HBase table pre-split at every bucket boundary, once per load."""
        if self._table_for == load.load_id:
            return
        splits = (bucket_split_keys(load.bucket_map, [b.b_index for b in buckets])
                  if load.bucket_map else [])
        table = load.namespace.hbase_table
        if create_table(self.spark, self.config, splits, table):
            self.report(f"created HBase table {table} with {len(splits) + 1} regions")
        self._table_for = load.load_id

    # -- runs

    def pending(self) -> list[Bucket]:
        """Buckets of the current load still to convert: not loaded, and not too large to
        convert."""
        load = self.catalog.loads.current()
        if load is None:
            return []
        limit = self.bucket_limit()
        return [b for b in self.catalog.index.buckets(load.load_id)
                if b.state != JobState.LOADED and b.bytes <= limit]

    def bucket_limit(self) -> int:
        """The largest bucket (bytes) one task can merge in its share of the heap."""
        return task_heap(self.config).per_task // HEAP_PER_BUCKET

    def carried(self, load: LoadRecord, buckets: list[Bucket]) -> dict[int, float]:
        """The previous day's demand mapped onto *load*'s buckets (``carried_demand``), read
        once per load: what its first runs convert before today's queries show their own."""
        if not self.config.gen_hf.carry_demand:
            return {}
        if self._carried is None or self._carried[0] != load.load_id:
            previous = self.catalog.loads.previous()
            carried = (carried_demand(self.catalog.index.buckets(previous),
                                      self.catalog.serving.asks(previous), buckets)
                       if previous is not None else {})
            self._carried = (load.load_id, carried)
        return self._carried[1]

    def run_once(self) -> RunResult | None:
        """One run over the current load's buckets; None when every bucket is loaded or too
        large to convert (or no load is up yet)."""
        load = self.catalog.loads.current()
        if load is None:
            return None
        buckets = self.catalog.index.buckets(load.load_id)
        self._refuse_oversized(load.load_id, buckets)
        demand, carried = {}, {}
        if self.order == "demand":
            demand = self.catalog.serving.demand(load.load_id)
            carried = self.carried(load, buckets)
        chosen = pick_buckets(buckets, demand, self.config.gen_hf.run_buckets,
                              self.config.gen_hf.run_bytes,
                              self.order, self.bucket_limit(), carried)
        if not chosen:
            return None
        self._keep_lock()
        run_id = time.strftime("R%H%M%S-") + secrets.token_hex(2)
        self.ensure_table(load, buckets)
        moved = set(self.catalog.jobs.set_job_state(load.load_id, [b.b_index for b in chosen],
                                                    JobState.RUNNING, run_id))
        chosen = [b for b in chosen if b.b_index in moved]
        ids = [b.b_index for b in chosen]
        if not chosen:
            return None
        t0 = time.time()
        try:
            rows, cells, per_bucket, phases = self._convert(load, run_id, chosen)
        except BaseException as exc:
            self.catalog.jobs.set_job_state(load.load_id, ids, JobState.FAILED, run_id,
                                            error=str(exc)[:2000], of_run=run_id)
            current = self.catalog.loads.current()
            if isinstance(exc, Exception) and (current is None
                                               or current.load_id != load.load_id):
                # Its day is over: cleanup may drop its stores under the run, as it should.
                self.report(f"run {run_id} ended: load {load.load_id} is not the current load "
                            f"any more ({exc})")
                self._forget_run_output(load, run_id)
                return None
            raise
        loaded = {}
        for b in chosen:
            winners, checksum = per_bucket.get(b.b_index, (0, 0))
            loaded[b.b_index] = (winners, b.rows - winners, checksum)
        marked = self.catalog.jobs.finish_run(load.load_id, run_id, loaded)
        if len(marked) < len(ids):
            self.report(f"run {run_id}: buckets {sorted(set(ids) - set(marked))} were not "
                        "held by this run any more (their load's stores were dropped): not "
                        "marked loaded")
        result = RunResult(run_id, tuple(ids), {b: demand.get(b, 0) for b in ids}, rows, cells,
                           time.time() - t0, phases)
        self.report(f"run {run_id}: buckets {ids} (demand {[demand.get(b, 0) for b in ids]}), "
                    f"{rows} rows -> {cells} cells in {result.seconds:.1f} s")
        return result

    def _forget_run_output(self, load: LoadRecord, run_id: str) -> None:
        """Delete the HFiles of a run whose day is over. The HFile writer makes its directory,
        and with it the load's, again if cleanup deleted them under the run: once the load is
        dropped (or marked dropping by a cleanup killed mid-drop), all of its directory goes.
        Under the days lock, so that a live cleanup of the load is either done or not begun;
        failing, it is reported (the directory is then
        ``debl verify``'s and the next cleanup's to find)."""
        fs, lock = HdfsClient(self.config), None
        try:
            lock = days_lock(self.config, wait=self.config.service_timeout)
            record = self.catalog.loads.load(load.load_id)
            dropped = record is None or record.dropping is not None or record.dropped is not None
            fs.delete(load.namespace.hdfs_dir if dropped
                      else f"{load.namespace.hdfs_dir}/hfiles/{run_id}", recursive=True)
        except DeblError as exc:
            self.report(f"run {run_id}: its HFiles were not deleted ({exc})")
        finally:
            if lock is not None:
                lock.release()

    def _keep_lock(self) -> None:
        """Make sure this gen_HF still holds the dataset's lock before a run: a server that
        closed the lock's idle session (a restart, ``wait_timeout``) released it. Take it
        again, or stop if another gen_HF took it meanwhile."""
        if self._lock.held():
            return
        self._lock.release()
        again = self.catalog.named_lock(self._lock.name)
        if again is None:
            raise GenHFLockHeld(f"gen_HF lost its MySQL lock {self._lock.name} (the server "
                                "closed its session) and another gen_HF holds it now: this one "
                                "stops")
        self._lock = again
        self.report(f"took the MySQL lock {self._lock.name} again (the server had closed its "
                    "session)")

    def oversized(self, buckets: list[Bucket]) -> dict[int, str]:
        """The buckets too large to merge in a task's memory, each with the reason and what
        to do (raise the heap, or load again with smaller buckets)."""
        heap = task_heap(self.config)
        limit = self.bucket_limit()
        value = self.config.setting(heap.setting)
        return {b.b_index: (
            f"bucket {b.b_index} holds {b.bytes / 1e6:.0f} MB: gen_HF merges a bucket in "
            f"memory, at most {limit / 1e6:.0f} MB with {heap.setting} {value} shared by "
            f"{heap.tasks} task(s). Raise {heap.setting} ({SPELLINGS.from_name(heap.setting).env})"
            f" to at least {-(-b.bytes * HEAP_PER_BUCKET * heap.tasks // (1 << 30))}g and "
            "restart `debl gen-hf`, or load again with smaller buckets "
            "(loading.bucket_target_bytes, or debl load --bucket-width)")
            for b in buckets if b.state != JobState.LOADED and b.bytes > limit}

    def _refuse_oversized(self, load_id: str, buckets: list[Bucket]) -> None:
        """Mark the buckets too large to convert ``failed`` with the reason, once, so that
        coordinators release the queries buffered on them with it (none waits forever); the
        other buckets go on being converted (one such bucket once stopped gen_HF for good)."""
        for b_index, reason in self.oversized(buckets).items():
            state = next(b.state for b in buckets if b.b_index == b_index)
            if state != JobState.FAILED:
                self.catalog.jobs.set_job_state(load_id, [b_index], JobState.FAILED,
                                                error=reason)
                self.report(f"not converted: {reason}")

    def _convert(self, load: LoadRecord, run_id: str, chosen: list[Bucket]):
        """One Spark task per bucket (on the JVM): read, merge, sort, write HFiles; then one
        bulk load into the load's own table. Both steps are recorded in ``debl_phases`` under
        the load, item the run id (``debl status`` shows them; a kill leaves the step it hit
        open)."""
        config, load_id, table = self.config, load.load_id, load.namespace.hbase_table
        jobs.job_group(self.spark, f"gen_HF-{run_id}", f"gen_HF run {run_id}")
        phases: dict[str, float] = {}
        t = time.time()
        self.catalog.phases.phase_start(load_id, "hfiles", run_id)
        out = f"{load.namespace.hdfs_dir}/hfiles/{run_id}"
        written = write_bucket_hfiles(
            self.spark, [[f"{config.hdfs.uri}{p}"
                          for p in self.catalog.index.bucket_paths(b.b_index, load_id)]
                         for b in chosen], f"{config.hdfs.uri}{out}", table)
        phases["hfiles"] = time.time() - t
        self.catalog.phases.phase_end(load_id, "hfiles", run_id, bytes=sum(b.bytes for b in chosen),
                                      rows=sum(w.rows for w in written))
        for b, w in zip(chosen, written):
            if w.rows != b.rows:  # before the bulk load: nothing of it becomes visible
                raise DeblError(f"bucket {b.b_index}: {w.rows} rows in its HDFS files, the bucket "
                                f"index says {b.rows}: its files changed after dist_ch wrote "
                                "them (see debl verify); reload the input")
        t = time.time()
        cells = sum(w.winners for w in written)
        self.catalog.phases.phase_start(load_id, "bulkload", run_id)
        if cells:
            bulk_load(self.spark, config, f"{config.hdfs.uri}{out}", table)
        phases["bulkload"] = time.time() - t
        self.catalog.phases.phase_end(load_id, "bulkload", run_id, rows=cells)
        reached(config, "bulk-loaded")
        HdfsClient(config).delete(out, recursive=True)
        per_bucket = {b.b_index: (w.winners, w.checksum) for b, w in zip(chosen, written)}
        return sum(w.rows for w in written), cells, per_bucket, phases

    def serve(self, until_complete: bool = False, should_stop: Callable[[], bool] = lambda: False,
              on_run: Callable[[RunResult], None] = lambda r: None) -> int:
        """Run until stopped (or, with until_complete, until every bucket is loaded); returns
        the number of runs.

        A run failing with ServiceError (a service unreachable, a Spark job failing) leaves its
        buckets ``failed`` and is retried (through tenacity) after 2, 4, 8... times
        ``coordinator.poll_interval``, at most a minute; the error is raised when the run fails
        again after RETRIES retries, or once runs have failed for ``service_timeout``. Any other
        error (a bucket whose files disagree with the index, a dead Spark JVM: JvmGone) is raised at
        once: retrying cannot fix it."""
        retrying = Retrying(
            # A dead Spark JVM stays dead: no retry in this process can run a job.
            retry=retry_if_exception_type(ServiceError) & retry_if_not_exception_type(JvmGone),
            stop=self._gives_up,
            wait=wait_exponential(multiplier=2 * self.config.coordinator.poll_interval,
                                  max=MAX_PAUSE_S),
            before_sleep=self._report_retry, reraise=True)
        runs = 0
        while not should_stop():
            try:
                result = retrying(self.run_once)
            except ServiceError as exc:
                exc.add_note("gen_HF stopped; once that is fixed (`debl stack up` for a service "
                             "of the stack), start `debl gen-hf` again: it redoes the buckets "
                             "left running or failed")
                raise
            if result is not None:
                runs += 1
                on_run(result)
                continue
            load = self.catalog.loads.current()
            if until_complete and load is not None and not self.pending():
                refused = self.oversized(self.catalog.index.buckets(load.load_id))
                if refused:
                    raise DeblError(f"every bucket is loaded but {len(refused)}, too large to "
                                    f"convert: {'; '.join(refused.values())}")
                break
            self._clean_up()
            jobs.ensure_driver_alive("gen_HF (idle)")
            time.sleep(self.config.coordinator.poll_interval)
        return runs

    def _clean_up(self) -> None:
        """Between runs, at most every CLEANUP_EVERY_S: drop the stores of loads nobody serves
        any more (loaders.cleanup), so that a day is dropped even when no load follows it."""
        if time.monotonic() - self._cleaned < CLEANUP_EVERY_S:
            return
        self._cleaned = time.monotonic()
        try:
            cleanup(self.config, report=self.report)
        except DeblError as exc:  # a service away now, a load in another state: the next
            self.report(f"cleanup failed: {exc}")  # cleanup tries again; gen_HF goes on

    def _gives_up(self, state: RetryCallState) -> bool:
        """Whether serve() stops retrying: after RETRIES retries, or once runs have failed for
        ``service_timeout`` since the first failure (a service that stays away ends gen_HF
        within a few service_timeouts, each failed run having waited up to one or two, not
        after every retry; a long run that fails once is still retried). Tenacity asks after
        each failed attempt of one call, the first numbered 1: that one starts the count."""
        now = state.outcome_timestamp  # (set once the call failed)
        if now is None:
            now = time.monotonic()
        if state.attempt_number == 1:
            self._first_failure = now
        return (state.attempt_number > RETRIES
                or now - self._first_failure >= self.config.service_timeout)

    def _report_retry(self, state: RetryCallState) -> None:
        outcome, action = state.outcome, state.next_action
        assert outcome is not None and action is not None  # (before a sleep: both are known)
        self.report(f"run failed: {outcome.exception()}; retry {state.attempt_number} of "
                    f"{RETRIES} in {action.sleep:.1f} s")
