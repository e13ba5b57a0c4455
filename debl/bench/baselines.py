"""The approaches of the paper's comparison (docs/DESIGN.md section 7): each one a load from the
same source that ends at its uptime, recorded in the catalog like ``run_load`` records DeBL's.

=================  ==========================================================  ===============
approach           what runs (all from the same source)                          uptime at
=================  ==========================================================  ===============
``fileCopy``       every file streamed to ``<state_dir>/filecopy/<db>/<load>``   copy end
``bulkLoad-mysql`` ``run_load`` with every file hot, streamed from the source    index built
                   into MySQL (``wait_for_hot``): LOAD DATA, merge, index
``bulkLoad-hbase`` ``run_load`` with every file cold, then one gen_HF run over   last HFile
                   every bucket (unlimited run size), HFiles bulk-loaded          bulk-loaded
``batchPut-hbase`` ``run_load`` with every file cold, then one Spark job: merge  last put
                   by the merge rule, batched client puts per partition
``debl-cold``      ``run_load`` with no hot file (the paper's "DeBL (no mysql)") last dist_ch
``debl``           the paper's DeBL: ``run_load`` with the newest files hot       hot load and
                   (``--hot-bytes`` / ``--hot-since``, else 20% of the bytes:     last dist_ch
                   "DeBL (2g mysql)"), up once MySQL holds them
                   (``wait_for_hot``); buffered queries, no raw route
``debl-fifo``      the load of ``debl``; the bench runs its gen_HF in plain      as ``debl``
                   bucket order (the demand-order ablation)
``debl-raw``       DeBL as it ships: the hot files bucketed beside the cold      last dist_ch
                   ones, up when every chunk is bucketed, MySQL taking the hot
                   keys over later; queries whose bucket is not loaded
                   answered from the raw HDFS files (docs/COORDINATOR.md)
=================  ==========================================================  ===============

``run_approach`` dispatches on ``LoadOptions.approach`` and returns the ``LoadSummary`` of
``run_load`` with ``uptime_s`` and ``phases`` covering the approach's own steps. Every approach
writes ``debl_loads`` (approach, state ``up``, uptime) and ``debl_phases``: the phases of
``run_load`` (``copy``, ``dist_ch``, ``hot``, ``mysql_load``, ``mysql_merge``, ``mysql_index``),
plus ``copy`` per file for fileCopy, ``gen_hf`` (and ``gen_hf_<step>`` for each step the run
times itself, e.g. ``gen_hf_hfiles``, ``gen_hf_bulkload``) for bulkLoad-hbase, ``batch_put`` for
batchPut-hbase.

Pitfalls:

- Every approach but fileCopy is a load in a namespace of its own (debl.namespace) that becomes
  the current load at its uptime; fileCopy is recorded as a load but never becomes current (it
  has nothing to serve). The bench drops every other load's stores before each approach.
- bulkLoad-hbase runs gen_HF in this process and takes gen_HF's MySQL lock: it waits (up to ten
  minutes) while another gen_HF holds it.
- The load state is ``up`` as soon as the bucketing ends, because gen_HF only converts buckets of
  a load that is up; for bulkLoad-hbase and batchPut-hbase the recorded uptime is moved to the
  end of their last step afterwards.
- ``resume`` continues the ``run_load`` part of an approach and then redoes its last step (both
  are idempotent); a fileCopy cannot be resumed.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tenacity import Retrying, retry_if_exception_type, stop_after_delay, wait_fixed

from debl.format.bucket_file import bucket_file_stem, file_rows
from debl.catalog import Catalog, LoadFile, LoadState
from debl.config import Config
from debl.errors import ConfigError, DeblError, GenHFLockHeld, LoadStateError
from debl.format.link import Link
from debl.namespace import Namespace
from debl.spark.session import spark_session
from debl.store.hbase_layout import CELL_TS, COLUMN, cell_value, row_key
from loaders.gen_hf import GenHF, RunResult
from loaders.hbase_bulk import bucket_split_keys, create_table
from loaders.hfile import merge_links
from loaders.jobs import job_group
from loaders.load import (LoadOptions, LoadProgress, LoadSummary, check_resume_approach,
                          load_lock, new_load_id, phase_sums, run_load,
                          with_default_hot_share)
from loaders.source import SourceFile, open_source, path_in

COPY_BLOCK = 1 << 20
PUT_BATCH = 1000
GEN_HF_LOCK_WAIT_S = 600.0
GEN_HF_LOCK_POLL_S = 5.0
_ALL_HOT = 1 << 62  # hot_bytes that every input fits in


@dataclass(frozen=True)
class Approach:
    """One approach: how it loads, what the query phase reads, and the paper's figure."""

    name: str
    load: Callable[[Config, str, LoadOptions, str | None, LoadProgress], LoadSummary]
    target: str | None  # debl / mysql / hbase: the query target; None: no query phase
    gen_hf_order: str | None  # the order of the gen_HF that runs during the query phase
    paper: str | None  # the paper's name for it (docs/DESIGN.md section 11)
    paper_uptime_s: float | None
    uses_spark: bool
    description: str
    # the coordinator of the query phase answers raw after coordinator.raw_after
    raw_route: bool = False
    # The bench loads it up only once MySQL holds the hot rows (the paper's uptime); `debl load`
    # does so with --wait-for-hot, whatever the approach's name.
    wait_for_hot: bool = False


def run_approach(config: Config, source_spec: str, options: LoadOptions = LoadOptions(),
                 resume: str | None = None,
                 progress: LoadProgress = LoadProgress()) -> LoadSummary:
    """Load *source_spec* the way ``options.approach`` names; returns at its uptime.

    Raises ConfigError for an unknown approach or options that contradict it (a hot split for
    an approach that has none), LoadStateError for a resume that cannot be done."""
    approach = get_approach(options.approach)
    check_resume_approach(config, resume, approach.name)
    return approach.load(config, source_spec, options, resume, progress)


def get_approach(name: str) -> Approach:
    try:
        return APPROACHES[name]
    except KeyError:
        raise ConfigError(f"unknown approach {name!r}: choose one of "
                          f"{', '.join(APPROACHES)}") from None


# ---------------------------------------------------------------------------- the loads


def _no_hot_options(options: LoadOptions, why: str) -> None:
    if options.hot_bytes is not None or options.hot_since is not None:
        raise ConfigError(f"approach {options.approach}: {why}; drop --hot-bytes/--hot-since")


def _load_debl(config: Config, source_spec: str, options: LoadOptions, resume: str | None,
               progress: LoadProgress) -> LoadSummary:
    """debl, debl-fifo, debl-raw: DeBL's own load (as ``loaders.load.load_debl``), recorded
    under the approach's name."""
    options = with_default_hot_share(config, source_spec, options, resume)
    return run_load(config, source_spec, options, resume, progress)


def _load_debl_cold(config: Config, source_spec: str, options: LoadOptions,
                    resume: str | None, progress: LoadProgress) -> LoadSummary:
    _no_hot_options(options, "every file is cold")
    return run_load(config, source_spec, options, resume, progress)


def _load_bulk_mysql(config: Config, source_spec: str, options: LoadOptions,
                     resume: str | None, progress: LoadProgress) -> LoadSummary:
    _no_hot_options(options, "every file is hot")
    return run_load(config, source_spec, dataclasses.replace(options, hot_bytes=_ALL_HOT,
                                                             wait_for_hot=True),
                    resume, progress)


class _UpLater(LoadProgress):
    """The progress of a load whose approach is up only after a last step of its own: the
    load's uptime is not the approach's (``_finish`` reports that)."""

    def __init__(self, progress: LoadProgress):
        # the wrapped progress's own methods, bound to it
        self.start, self.hot, self.copied = (  # type: ignore[method-assign]
            progress.start, progress.hot, progress.copied)
        self.bucketed, self.message = (  # type: ignore[method-assign]
            progress.bucketed, progress.message)

    def up(self, summary: LoadSummary) -> None:
        """Not the approach's uptime yet."""


def _cold_then(config: Config, source_spec: str, options: LoadOptions, resume: str | None,
               progress: LoadProgress, last_step: str) -> LoadSummary:
    """The all-cold ``run_load`` of the HBase baselines. A resumed load whose bucketing was
    done (it was killed in *last_step*) comes back with its recorded summary; one whose
    *last_step* had ended is refused, as ``run_load`` refuses a load that is up."""
    _no_hot_options(options, "every file is cold")
    if resume:
        with Catalog(config) as catalog:
            row = catalog.loads.get(resume)
            ended = catalog.phases.phase_ended(resume, last_step)
        if ended:
            raise LoadStateError(f"load {resume} is already up; nothing to resume")
        if row.state == LoadState.UP and row.summary:
            return LoadSummary(**row.summary)
    return run_load(config, source_spec, options, resume, _UpLater(progress))


def _load_bulk_hbase(config: Config, source_spec: str, options: LoadOptions,
                     resume: str | None, progress: LoadProgress) -> LoadSummary:
    summary = _cold_then(config, source_spec, options, resume, progress, "gen_hf")
    _one_big_gen_hf(config, summary.load_id, progress)
    return _finish(config, summary, progress)


def _load_batch_put(config: Config, source_spec: str, options: LoadOptions,
                    resume: str | None, progress: LoadProgress) -> LoadSummary:
    summary = _cold_then(config, source_spec, options, resume, progress, "batch_put")
    _put_everything(config, summary.load_id, summary.cold_bytes, progress)
    return _finish(config, summary, progress)


def _finish(config: Config, summary: LoadSummary, progress: LoadProgress) -> LoadSummary:
    """Move the load's uptime to now (the approach's own uptime), recompute its phase sums
    from the catalog, and say it is up."""
    t_up = time.time()
    with Catalog(config) as catalog:
        summary.uptime_s = t_up - catalog.loads.get(summary.load_id).started
        summary.phases = phase_sums(catalog.phases.phases(summary.load_id))
        catalog.loads.update_load(summary.load_id, state=LoadState.UP, uptime=t_up,
                                  summary=summary.as_dict())
    progress.up(summary)
    return summary


# ---------------------------------------------------------------------------- fileCopy


def copy_dir(config: Config) -> Path:
    """Where fileCopy puts its copies: one directory per MySQL database (namespace)."""
    return config.state_dir / "filecopy" / config.mysql.database


def _load_file_copy(config: Config, source_spec: str, options: LoadOptions,
                    resume: str | None, progress: LoadProgress) -> LoadSummary:
    """Stream every file to local disk, one after another, as the chunk copier reads them."""
    _no_hot_options(options, "nothing is loaded, files are only copied")
    if resume:
        raise LoadStateError("a fileCopy cannot be resumed: start it again")
    with load_lock(config):  # it replaces the dataset's catalog rows as a load does
        return _copy_files(config, source_spec, options, progress)


def _copy_files(config: Config, source_spec: str, options: LoadOptions,
                progress: LoadProgress) -> LoadSummary:
    source = open_source(source_spec, config)
    files = source.list()
    if not files:
        raise DeblError(f"source {source.describe()} holds no files")
    load_id = new_load_id()
    dest = copy_dir(config) / load_id  # dropped with the load (loaders.cleanup)
    dest.mkdir(parents=True)
    summary = LoadSummary(load_id, options.approach, source.describe(), cold_files=len(files),
                          cold_bytes=sum(f.size for f in files))
    with Catalog(config, replace_older=True) as catalog:  # a new dataset, as run_load's
        catalog.loads.begin_load(load_id, options.approach, source.describe(), 0,
                                 {"destination": str(dest)}, Namespace.of(config, load_id))
        catalog.files.add_files(load_id, [LoadFile(seq, f.name, f.size, f.mtime, False)
                                          for seq, f in enumerate(files)])
        progress.start(0, summary.cold_bytes)
        try:
            for seq, f in enumerate(files):
                item = f"{seq:05d}"
                catalog.phases.phase_start(load_id, "copy", item)
                path = path_in(dest, f.name)  # the listing's names are checked; so is this
                copied = _copy_file(source, f, path, progress)
                os.utime(path, (f.mtime, f.mtime))
                catalog.phases.phase_end(load_id, "copy", item, bytes=copied)
                summary.chunks += 1
        except BaseException as exc:
            catalog.loads.update_load(load_id, state=LoadState.FAILED, error=str(exc)[:2000])
            raise
    progress.message(f"copied {len(files)} files to {dest}")
    return _finish(config, summary, progress)


def _copy_file(source, file: SourceFile, path: Path, progress: LoadProgress) -> int:
    n = 0
    with source.open(file.name, listed=file) as stream, open(path, "wb") as out:
        while block := stream.read(COPY_BLOCK):
            out.write(block)
            n += len(block)
            progress.copied(len(block))
    return n


# ---------------------------------------------------------------------------- bulkLoad-hbase


def open_gen_hf(config: Config, order: str, report: Callable[[str], None],
                wait_s: float = GEN_HF_LOCK_WAIT_S):
    """A GenHF service; while another gen_HF holds the lock (GenHFLockHeld), try again every
    GEN_HF_LOCK_POLL_S seconds, raising GenHFLockHeld after *wait_s*."""
    retrying = Retrying(retry=retry_if_exception_type(GenHFLockHeld),
                        stop=stop_after_delay(wait_s), wait=wait_fixed(GEN_HF_LOCK_POLL_S),
                        before_sleep=lambda _: report("another gen_HF holds the lock; waiting"),
                        reraise=True)
    return retrying(GenHF, config, order=order, report=report)


def _one_big_gen_hf(config: Config, load_id: str, progress: LoadProgress) -> None:
    """Every bucket in one gen_HF run: HFiles of the whole input, then one bulk load."""
    big = config.replace(gen_hf_run_buckets=10**9, gen_hf_run_bytes=2**62)
    runs: list[RunResult] = []
    with Catalog(config) as catalog:
        catalog.phases.phase_start(load_id, "gen_hf", "all")
        progress.message("gen_HF over every bucket")
        with open_gen_hf(big, "fifo", progress.message) as service:
            service.serve(until_complete=True, on_run=runs.append)
        cells = sum(r.cells for r in runs)
        catalog.phases.phase_end(load_id, "gen_hf", "all", rows=cells)
        jobs = catalog.jobs.jobs(load_id)
        for r in runs:  # the run's own steps, back to back, ending when the run ended
            t = max((j.ended for j in jobs if j.run_id == r.run_id and j.ended is not None),
                    default=time.time())
            t -= sum(r.phases.values())
            for step, seconds in r.phases.items():
                catalog.phases.record_phase(load_id, f"gen_hf_{step}", r.run_id, t, t + seconds,
                                            rows=r.cells)
                t += seconds


# ---------------------------------------------------------------------------- batchPut-hbase


def _put_everything(config: Config, load_id: str, cold_bytes: int,
                    progress: LoadProgress) -> None:
    """Merge every bucket's rows by the merge rule in Spark (one shuffle), then write the
    winners with batched client puts, one Thrift connection per partition, into a table
    pre-split at the bucket boundaries as gen_HF's is."""
    spark = spark_session(config, "debl-batchPut")
    sc = spark.sparkContext
    with Catalog(config) as catalog:
        catalog.phases.phase_start(load_id, "batch_put", "all")
        load = catalog.loads.get(load_id)
        table = load.namespace.hbase_table
        buckets = catalog.index.buckets(load_id)
        paths = [f"{config.hdfs.uri}{p}.*" for b in buckets
                 for p in catalog.index.bucket_paths(b.b_index, load_id)]
        create_table(spark, config, bucket_split_keys(load.bucket_map,
                                                      [b.b_index for b in buckets])
                     if load.bucket_map else [], table)
        cells = 0
        if paths:
            progress.message(f"batchPut: merging and putting {len(buckets)} buckets")
            job_group(spark, f"batchPut-{load_id}", "batchPut-hbase")
            partitions = max(2, cold_bytes // (64 << 20))
            # Whole files, not text lines: a bucket file ends with its index
            # (debl.format.bucket_file), and a dist_ch temporary file (``._COPYING_``) matches the
            # glob but is no data.
            raw = (sc.binaryFiles(",".join(paths))
                   .filter(lambda f: bucket_file_stem(f[0].rsplit("/", 1)[1]) is not None)
                   .flatMap(lambda f: file_rows(f[0], f[1])))
            cells = int(merge_links(raw, partitions)
                        .mapPartitions(lambda links: _put_partition(config, table, links)).sum())
        catalog.phases.phase_end(load_id, "batch_put", "all", bytes=cold_bytes, rows=cells)
    progress.message(f"batchPut: {cells} rows put")


def _put_partition(config: Config, table: str, links: Iterator[Link]) -> Iterator[int]:
    """Spark task: batched puts of merged links into *table* through one Thrift connection."""
    # lazy import: happybase would cost every `debl` command's start-up (docs/ARCHITECTURE.md,
    # "Lazy imports"); only this Spark task needs it
    import happybase

    conn = happybase.Connection(config.hbase.thrift_host, config.hbase.thrift_port,
                                timeout=300_000)
    n = 0
    try:
        with conn.table(table).batch(batch_size=PUT_BATCH,
                                                  timestamp=CELL_TS) as batch:
            for link in links:
                batch.put(row_key(link), {COLUMN: cell_value(link)})
                n += 1
    finally:
        conn.close()
    yield n


APPROACHES: dict[str, Approach] = {a.name: a for a in (
    Approach("fileCopy", _load_file_copy, None, None, "fileCopy", 893.0, False,
             "copy the input from the source to local disk: the floor for any load"),
    Approach("bulkLoad-mysql", _load_bulk_mysql, "mysql", None, "bulkLoad (MySQL)", 2565.0,
             False, "every file into MySQL: LOAD DATA, merge, index rebuild"),
    Approach("bulkLoad-hbase", _load_bulk_hbase, "hbase", None, "bulkLoad (HBase)", 1978.0,
             True, "every file into HDFS buckets, one gen_HF over everything, bulk load"),
    Approach("batchPut-hbase", _load_batch_put, "hbase", None, None, None, True,
             "every file into HDFS buckets, merged, written with batched client puts"),
    Approach("debl-cold", _load_debl_cold, "debl", "demand", "DeBL (no mysql)", 952.0, True,
             "DeBL with no hot file"),
    Approach("debl", _load_debl, "debl", "demand", "DeBL (2g mysql)", 1257.0, True,
             "the paper's DeBL: the newest 20% of the bytes hot in MySQL, up once MySQL holds "
             "them; queries buffered until their bucket is converted", wait_for_hot=True),
    Approach("debl-fifo", _load_debl, "debl", "fifo", None, None, True,
             "the load of debl; gen_HF in plain bucket order (the demand-order ablation)",
             wait_for_hot=True),
    Approach("debl-raw", _load_debl, "debl", "demand", None, None, True,
             "DeBL as it ships: the newest 20% of the bytes hot, up once every chunk is "
             "bucketed (MySQL takes the hot keys over later); queries whose bucket is not "
             "loaded answered from the raw HDFS files", raw_route=True),
)}
