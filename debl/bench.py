"""``debl bench``: one experiment, every approach on the same input, load then query phase.

For one ``BenchSpec`` (reproducible from it alone):

1. the input: ``debl generate`` of the spec into ``data_dir``, reused when the directory already
   holds that exact spec (a hidden ``.bench-input.json`` marker records it);
2. the source: the input served over HTTP on loopback (``loaders.serve``) at ``source_rate``
   MB/s for the whole experiment (12.5 = the paper's 100 Mbit/s; None: uncapped);
3. for each approach in turn: empty the stores of the namespace; load (``run_approach``) up to
   the approach's uptime; then, from its uptime, the query phase: the LinkBench client with the
   same threads, requests and seed for every approach, against the approach's target (the
   coordinator for DeBL, MySQL or HBase for the baselines, none for fileCopy). For the DeBL
   approaches ``debl gen-hf --until-complete`` runs as a subprocess (its own Spark JVM) from
   uptime on, and the bench waits for it to finish: full availability;
4. results under ``<state_dir>/bench/<bench_id>/``: ``bench.json`` (the spec, the command line
   that repeats it, the machine, the input), per approach ``<approach>.json`` (load summary,
   phases in seconds since the load started, uptime, query result, waits, full availability) and
   ``<approach>.timeline.csv`` (requests completed per second, since the load started).

Input: by default the paper's setting (docs/WORKLOAD.md): a ``ranges`` dump (each file a
contiguous id1 range, the newest ids in the newest files) and requests of which
``recency_share`` (``DEFAULT_RECENCY_SHARE``) follow recency; ``days`` and ``recency_share=0``
(LinkBench alone) are the other scenarios. debl's hot files are the newest files whose bytes come
closest to ``hot_share`` of the input (``hot_bytes_for_share``: whole files, at least one hot and
one cold), the paper's "2g mysql" of 10 GB.

Scale: the configured chunk size and bucket target are sized for inputs of many GB. Unless the
spec gives them, a bench cuts its input into about 16 chunks and each approach's cold bytes into
``buckets`` (16) buckets (``bucket_target_bytes`` = cold bytes / ``buckets``, and
``bucket_target_covers_heaviest`` off, so that LinkBench's heaviest id does not merge them into
fewer), so a small bench keeps the shape of a large load: copy and dist_ch pipelined, and enough
buckets for the order of gen_HF to matter. The values used are in ``bench.json`` (``effective``).

Times: every approach's clock starts when its load starts (``debl_loads.started``). "all served"
is when the last of the requests completed; the query phase starts at uptime, so it includes the
client's own run time.

When gen_HF starts: ``gen_hf_start="uptime"`` (the default) spawns the subprocess at uptime, so
its JVM start (15-20 s on a 2-core machine) is part of the DeBL approaches' waits;
``gen_hf_start="load"`` spawns it as soon as the load is recorded, as an always-running gen_HF
service would be (its JVM start then competes with the load for the CPUs).

Pitfalls:

- Everything happens in the namespace of *config*: its MySQL database, HBase table and HDFS
  root are emptied before each approach. Never point a bench at a namespace others are using.
- Spark is started once, before the first approach that needs it, so that no approach pays the
  JVM start inside its load (as with a running cluster).
- A gen_HF subprocess that exits with an error (a crash, or the lock of the namespace still
  held by an earlier gen_HF) is restarted a few times, 5 s apart; its log is kept.
- Queries through the coordinator get ``query_timeout`` seconds each: a stuck gen_HF turns into
  counted errors, never a hang.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import platform
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, fields
from pathlib import Path

from debl.catalog import Catalog
from debl.config import Config
from debl.errors import ConfigError, LoadStateError
from debl.workload.spec import GenerateSpec
from loaders.baselines import APPROACHES, copy_dir, get_approach, run_approach
from loaders.load import LoadOptions, LoadProgress
from loaders.source import LocalSource, SourceFile
from loaders.split import split_files

BENCH_FILE = "bench.json"
INPUT_MARKER = ".bench-input.json"
DEFAULT_APPROACHES = ("fileCopy", "bulkLoad-mysql", "bulkLoad-hbase", "batchPut-hbase",
                      "debl-cold", "debl")
# Size model of `debl generate` (10 files, default shares), measured at 0.1M, 1M and 2.25M ids:
# the 961,963-link id of LinkBench's rank rule is about 53 MB, every further id about 255 bytes.
_HEAVY_ID_BYTES = 53_000_000
_BYTES_PER_ID = 255
GEN_HF_STARTS = ("uptime", "load")
# The bench's share of requests by recency (docs/WORKLOAD.md, "Recency share": why 0.9).
DEFAULT_RECENCY_SHARE = 0.9
DEFAULT_LAYOUT = "ranges"  # the paper's setting (docs/DESIGN.md section 3)
_HOT_APPROACHES = ("debl", "debl-fifo", "debl-raw")
_GEN_HF_RESTARTS = 5
_STOP_GRACE_S = 30.0


@dataclass(frozen=True)
class BenchSpec:
    """One experiment. ``source_rate`` in MB/s (None: uncapped); ``requests`` and ``duration``
    bound each query phase (whichever first); ``hot_share`` is debl's hot share of the bytes;
    ``recency_share`` the requests' share by recency; the layout is ``input.layout``."""

    input: GenerateSpec
    data_dir: Path
    approaches: tuple[str, ...] = DEFAULT_APPROACHES
    source_rate: float | None = None
    threads: int = 16
    requests: int = 10000
    duration: float | None = None
    seed: int = 1
    chunk_size: int | None = None
    bucket_width: int | None = None
    hot_share: float = 0.2
    buckets: int = 16  # without bucket_width: bucket_target_bytes = cold bytes / buckets
    recency_share: float = DEFAULT_RECENCY_SHARE
    query_timeout: float = 600.0
    full_timeout: float = 3600.0
    gen_hf_start: str = "uptime"  # or "load": the gen_HF service is started with the load

    def __post_init__(self) -> None:
        if self.gen_hf_start not in GEN_HF_STARTS:
            raise ConfigError(f"gen_hf_start must be one of {', '.join(GEN_HF_STARTS)}")
        if not self.approaches:
            raise ConfigError("a bench needs at least one approach")
        for name in self.approaches:
            get_approach(name)
        if len(set(self.approaches)) != len(self.approaches):
            raise ConfigError("an approach is listed twice")
        if self.threads < 1 or self.requests < 1:
            raise ConfigError("--threads and --requests must be at least 1")
        if self.buckets < 1:
            raise ConfigError(f"--buckets must be at least 1, not {self.buckets}")
        if not 0.0 < self.hot_share < 1.0:
            raise ConfigError(f"--hot-share must be in (0, 1), not {self.hot_share}")
        if self.source_rate is not None and self.source_rate <= 0:
            raise ConfigError("--source-rate must be positive (leave it out for uncapped)")
        if not 0.0 <= self.recency_share <= 1.0:
            raise ConfigError(f"--recency-share must be in [0, 1], not {self.recency_share}")

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["data_dir"] = str(self.data_dir)
        d["approaches"] = list(self.approaches)
        return d

    @staticmethod
    def from_dict(d: dict) -> "BenchSpec":
        """Also reads the bench.json of benches made before layouts and recency existed
        (days, LinkBench's requests alone)."""
        d = dict(d)
        d.setdefault("recency_share", 0.0)
        d["input"] = GenerateSpec(**{"layout": "days", **d["input"]})
        d["data_dir"] = Path(d["data_dir"])
        d["approaches"] = tuple(d["approaches"])
        return BenchSpec(**d)

    def command_line(self) -> str:
        """The ``debl bench`` command that repeats this experiment."""
        g = self.input
        args = ["debl", "bench", "--approaches", ",".join(self.approaches),
                "--max-id", str(g.max_id), "--files", str(g.files), "--days", str(g.days),
                "--layout", g.layout, "--input-seed", str(g.seed), "--data", str(self.data_dir),
                "--threads", str(self.threads), "--requests", str(self.requests),
                "--seed", str(self.seed), "--hot-share", f"{self.hot_share:g}",
                "--recency-share", f"{self.recency_share:g}"]
        if g.max_degree is not None:
            args += ["--max-degree", str(g.max_degree)]
        if self.source_rate is not None:
            args += ["--source-rate", f"{self.source_rate:g}"]
        if self.duration is not None:
            args += ["--duration", f"{self.duration:g}"]
        if self.chunk_size is not None:
            args += ["--chunk-size", str(self.chunk_size)]
        if self.bucket_width is not None:
            args += ["--bucket-width", str(self.bucket_width)]
        else:
            args += ["--buckets", str(self.buckets)]
        if self.gen_hf_start != "uptime":
            args += ["--gen-hf-start", self.gen_hf_start]
        defaults = {f.name: f.default for f in fields(GenerateSpec)}
        for name in ("start_id", "update_share", "hidden_share", "link_types", "bad_lines", "ids"):
            if getattr(g, name) != defaults[name]:
                raise ConfigError(f"{name} is not a `debl bench` option; "
                                  "use run_bench() for such inputs")
        return shlex.join(args)


def effective_chunk_size(config: Config, spec: BenchSpec, input_bytes: int) -> int:
    """The cold chunk size of the bench: ``spec.chunk_size``, else the input cut into about
    16 chunks (whole MiB, at least 4 MiB, at most ``config.chunk_size``), so that a small bench
    pipelines copy and dist_ch as a 10 GB load does with the default 256 MiB chunks."""
    if spec.chunk_size:
        return spec.chunk_size
    mib = 1 << 20
    return max(4 * mib, min(config.chunk_size, input_bytes // 16 // mib * mib))


def hot_bytes_for_share(files: list[SourceFile], share: float) -> int:
    """The bytes of the newest files that come closest to *share* of all bytes: the ``hot_bytes``
    that makes ``split_files`` take exactly those files. At least one file is hot and one cold.

    Whole files, so the hot share is only about *share*: the newest files of a ``ranges`` dump
    differ in size (LinkBench's heavy-tailed degrees), and "at most share" could leave one
    file of ten hot instead of the paper's 2 GB of 10."""
    newest = sorted(files, key=lambda f: (f.mtime, f.name), reverse=True)
    if len(newest) < 2:
        raise ConfigError("debl needs at least two input files: one hot, one cold")
    target = share * sum(f.size for f in newest)
    best, total = None, 0
    for f in newest[:-1]:
        total += f.size
        if best is None or abs(total - target) < abs(best - target):
            best = total
    return best


def cold_bytes(files: list[SourceFile], hot_bytes: int | None) -> int:
    """The bytes that a load with *hot_bytes* (None: every file cold) leaves cold."""
    return sum(f.size for f in split_files(files, hot_bytes).cold)


def bucket_target_bytes(spec: BenchSpec, cold: int) -> int:
    """``bucket_target_bytes`` for a load with *cold* cold bytes: ``spec.buckets`` buckets of
    about equal bytes (the loader sizes buckets by this target, docs/DESIGN.md section 4)."""
    return max(1, -(-cold // spec.buckets))


def load_options(spec: BenchSpec, name: str, files: list[SourceFile],
                 chunk_size: int) -> tuple[LoadOptions, int | None]:
    """The load options of approach *name* in the bench, and the bucket target of its cold
    bytes (None with a fixed ``bucket_width``)."""
    hot = hot_bytes_for_share(files, spec.hot_share) if name in _HOT_APPROACHES else None
    options = LoadOptions(chunk_size=chunk_size, bucket_width=spec.bucket_width or 0,
                          approach=name, hot_bytes=hot)
    if spec.bucket_width:
        return options, None
    if APPROACHES[name].target in (None, "mysql"):  # no cold bytes to bucket
        return options, None
    return options, bucket_target_bytes(spec, cold_bytes(files, hot))


def max_id_for_size(size: int, max_degree: int | None = None) -> int:
    """The ``--max-id`` whose input is about *size* bytes (10 files, default shares).

    Without a degree cap LinkBench's heaviest id alone is about 53 MB, so smaller inputs are
    mostly that one id: give ``max_degree`` for those."""
    rest = size if max_degree is not None else size - _HEAVY_ID_BYTES
    return max(1001, int(rest / _BYTES_PER_ID)) + 1


@dataclass(frozen=True)
class PhaseSpan:
    """One recorded phase item, in seconds since its load started."""

    phase: str
    item: str
    start_s: float
    end_s: float | None
    bytes: int | None
    rows: int | None


@dataclass(frozen=True)
class ApproachRun:
    """What one approach did in a bench. Times are seconds since its load started; the
    ``query`` dict is ``ClientResult.to_dict()`` without its timeline (kept in ``timeline``:
    ``(t_s, completed, errors, mean_ms, p95_ms)`` per second, ``t_s`` since the load start)."""

    approach: str
    load_id: str
    load_started: float  # epoch seconds
    uptime_s: float
    summary: dict
    phases: tuple[PhaseSpan, ...]
    target: str | None
    query_start_s: float | None = None
    all_served_s: float | None = None
    full_availability_s: float | None = None
    query: dict | None = None
    waits: dict | None = None  # coordinator stats (DeBL approaches)
    gen_hf: dict | None = None  # order, exit code, restarts, log
    timeline: tuple[tuple[float, int, int, float, float], ...] = ()

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @staticmethod
    def from_dict(d: dict) -> "ApproachRun":
        d = dict(d)
        d["phases"] = tuple(PhaseSpan(**p) for p in d["phases"])
        d["timeline"] = tuple(tuple(p) for p in d["timeline"])
        return ApproachRun(**d)


@dataclass(frozen=True)
class BenchResult:
    bench_id: str
    directory: Path
    spec: BenchSpec
    runs: tuple[ApproachRun, ...]
    input_bytes: int
    input_files: int
    seconds: float


class BenchProgress:
    """Callbacks for a progress display; the defaults do nothing. ``finished`` is called after
    an approach's query phase (and full availability), before the next approach resets the
    stores: the moment to inspect them."""

    def message(self, text: str) -> None: ...
    def approach(self, name: str, index: int, total: int) -> None: ...
    def phase(self, name: str, phase: str) -> None: ...
    def moved(self, nbytes: int, total: int) -> None: ...
    def queried(self, done: int, total: int, elapsed: float) -> None: ...
    def finished(self, run: ApproachRun, config: Config) -> None: ...


def bench_root(config: Config) -> Path:
    return config.state_dir / "bench"


def new_bench_id() -> str:
    return time.strftime("B%Y%m%d-%H%M%S")


def find_bench(config: Config, bench: str | None = None) -> Path:
    """The directory of bench *bench* (an id or a path), or of the latest bench."""
    if bench:
        for path in (Path(bench), bench_root(config) / bench):
            if (path / BENCH_FILE).is_file():
                return path
        raise LoadStateError(f"no bench {bench!r}: neither {bench} nor "
                             f"{bench_root(config) / bench} holds a {BENCH_FILE}")
    found = sorted(p.parent for p in bench_root(config).glob(f"*/{BENCH_FILE}"))
    if not found:
        raise LoadStateError(f"no bench under {bench_root(config)}: run `debl bench` first")
    return found[-1]


def read_bench(directory: Path) -> tuple[dict, list[ApproachRun]]:
    """bench.json and the runs of the approaches that finished, in the bench's order."""
    meta = json.loads((directory / BENCH_FILE).read_text())
    runs = []
    for name in meta["spec"]["approaches"]:
        path = directory / f"{name}.json"
        if path.is_file():
            runs.append(ApproachRun.from_dict(json.loads(path.read_text())))
    return meta, runs


# ---------------------------------------------------------------------------- the experiment


def run_bench(config: Config, spec: BenchSpec, progress: BenchProgress = BenchProgress(),
              bench_id: str | None = None, directory: Path | None = None) -> BenchResult:
    """Run the experiment of *spec* in *config*'s namespace; see the module docstring.

    Results go to *directory* (default ``<state_dir>/bench/<bench_id>``), which must not exist.
    """
    from loaders.serve import make_server

    t0 = time.time()
    bench_id = bench_id or new_bench_id()
    directory = Path(directory) if directory else bench_root(config) / bench_id
    directory.mkdir(parents=True, exist_ok=False)
    input_bytes, input_files = ensure_input(spec.input, spec.data_dir, progress)
    chunk_size = effective_chunk_size(config, spec, input_bytes)
    listed = LocalSource(spec.data_dir).list()
    plans = {name: load_options(spec, name, listed, chunk_size) for name in spec.approaches}
    meta = {"bench_id": bench_id, "spec": spec.to_dict(), "command": spec.command_line()
            if _cli_expressible(spec) else None,
            "namespace": {"mysql_database": config.mysql_database,
                          "hbase_table": config.hbase_table, "link_table": config.link_table,
                          "hdfs_root": config.hdfs_root},
            "machine": machine(), "code": code_version(),
            "input": {"bytes": input_bytes, "files": input_files},
            "effective": {"chunk_size": chunk_size, "bucket_width": spec.bucket_width,
                          "buckets": None if spec.bucket_width else spec.buckets,
                          "hot_bytes": {n: o.hot_bytes for n, (o, _) in plans.items()
                                        if o.hot_bytes is not None},
                          "bucket_target_bytes": {n: t for n, (_, t) in plans.items()
                                                  if t is not None}},
            "started": t0, "ended": None, "state": "running"}
    _write_json(directory / BENCH_FILE, meta)

    server = make_server(spec.data_dir, port=0, rate_mb_s=spec.source_rate)
    serving = threading.Thread(target=server.serve_forever, name="bench-source", daemon=True)
    serving.start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    runs = []
    try:
        if any(APPROACHES[a].uses_spark for a in spec.approaches):
            progress.message("starting Spark (once, before the first load)")
            from debl.spark import spark_session

            spark_session(config, "debl-bench")
        for index, name in enumerate(spec.approaches):
            progress.approach(name, index, len(spec.approaches))
            progress.phase(name, "reset")
            reset_stores(config)
            run = _run_one(config, spec, name, url, input_bytes, plans[name], directory,
                           progress)
            runs.append(run)
            progress.finished(run, config)
        meta["state"] = "done"
    except BaseException as exc:
        meta["state"] = "failed"
        meta["error"] = f"{type(exc).__name__}: {exc}"[:2000]
        raise
    finally:
        server.shutdown()
        server.server_close()
        meta["ended"] = time.time()
        _write_json(directory / BENCH_FILE, meta)
    return BenchResult(bench_id, directory, spec, tuple(runs), input_bytes, input_files,
                       time.time() - t0)


def _cli_expressible(spec: BenchSpec) -> bool:
    try:
        spec.command_line()
        return True
    except ConfigError:
        return False


def ensure_input(gen: GenerateSpec, data_dir: Path, progress: BenchProgress) -> tuple[int, int]:
    """Generate the input into *data_dir* unless it already holds exactly *gen*; returns
    (bytes, files)."""
    from debl.workload.generator import generate

    marker = data_dir / INPUT_MARKER
    want = dataclasses.asdict(gen)
    have = json.loads(marker.read_text()) if marker.is_file() else None
    if have != want:
        progress.message(f"generating the input into {data_dir} (max-id {gen.max_id})")
        marker.unlink(missing_ok=True)
        generate(data_dir, gen, overwrite=True)
        marker.write_text(json.dumps(want, indent=2) + "\n")
    else:
        progress.message(f"reusing the input in {data_dir}")
    names = [gen.file_name(k) for k in range(gen.files)]
    return sum((data_dir / n).stat().st_size for n in names), len(names)


def reset_stores(config: Config) -> None:
    """Empty the namespace: the MySQL link table (recreated empty), the HBase link table, the
    HDFS chunks, buckets and HFiles, the fileCopy directory."""
    from debl.store.hbase import HBaseStore
    from debl.store.mysql import MySQLStore
    from loaders.webhdfs import WebHDFS

    with MySQLStore(config) as mysql:
        mysql.drop_table()
        mysql.create_table()
    with HBaseStore(config) as hbase:
        hbase.drop_table()
    hdfs = WebHDFS(config)
    root = config.hdfs_root.rstrip("/")
    for sub in ("loads", "buckets", "hfiles"):
        hdfs.delete(f"{root}/{sub}", recursive=True)
    shutil.rmtree(copy_dir(config), ignore_errors=True)


class _LoadBytes(LoadProgress):
    """Load progress for the bench; ``on_start`` runs once the load is recorded."""

    def __init__(self, progress: BenchProgress, total: int, on_start=lambda: None):
        self.progress, self.total, self.done, self.on_start = progress, total, 0, on_start

    def start(self, hot_bytes: int, cold_bytes: int) -> None:
        self.on_start()

    def hot(self, nbytes: int) -> None:
        self.done += nbytes
        self.progress.moved(self.done, self.total)

    copied = hot

    def message(self, text: str) -> None:
        self.progress.message(text)


def _run_one(config: Config, spec: BenchSpec, name: str, url: str, input_bytes: int,
             plan: tuple[LoadOptions, int | None], directory: Path,
             progress: BenchProgress) -> ApproachRun:
    approach = APPROACHES[name]
    progress.phase(name, "load")
    options, target_bytes = plan
    if target_bytes is not None:  # spec.buckets buckets, a giant id alone in the largest
        config = config.replace(bucket_target_bytes=target_bytes,
                                bucket_target_covers_heaviest=False)
    service = None
    if approach.gen_hf_order:
        service = GenHFProcess(config, approach.gen_hf_order,
                               directory / f"{approach.name}.gen_hf.log", progress.message)
    # With gen_hf_start "load", the service starts once the new load is recorded (it then
    # waits for uptime), never before: it would see the previous load complete and exit.
    early = service.start if service is not None and spec.gen_hf_start == "load" else None
    try:
        summary = run_approach(config, url, options,
                               progress=_LoadBytes(progress, input_bytes, early or (lambda: None)))
    except BaseException:
        if service is not None:
            service.stop()
        raise
    with Catalog(config) as catalog:
        started = catalog.load(summary.load_id).started
        phases = tuple(PhaseSpan(p.phase, p.item, p.started - started,
                                 None if p.ended is None else p.ended - started, p.bytes, p.rows)
                       for p in catalog.phases(summary.load_id))
    run = ApproachRun(name, summary.load_id, started, summary.uptime_s, summary.as_dict(),
                      phases, approach.target)
    if approach.target is not None:
        run = _query_phase(config, spec, approach, run, service, progress)
    else:
        run = dataclasses.replace(run, full_availability_s=run.uptime_s)
    _write_json(directory / f"{name}.json", run.to_dict())
    _write_timeline(directory / f"{name}.timeline.csv", run.timeline)
    return run


def _query_phase(config: Config, spec: BenchSpec, approach, run: ApproachRun,
                 service: "GenHFProcess | None", progress: BenchProgress) -> ApproachRun:
    from debl.workload.client import ClientSpec, default_processes, run_client
    from debl.workload.requests import RequestSpec
    from debl.workload.targets import target_source

    gen = spec.input
    client_spec = ClientSpec(RequestSpec(max_id=gen.max_id, start_id=gen.start_id,
                                         link_types=gen.link_types, seed=spec.seed,
                                         recency_share=spec.recency_share),
                             threads=spec.threads, total=spec.requests, duration=spec.duration,
                             processes=default_processes(spec.threads, config.client_processes))
    # Each client process opens its own target; a coordinator's counters are zeroed when the
    # run starts (its first minute is the query phase's) and merged over the processes after.
    if approach.target == "debl":
        source = target_source(coordinator_config(config, approach.raw_route), "debl",
                               default_timeout=spec.query_timeout)
    else:
        source = target_source(config, approach.target)
    if service is not None and not service.started:
        service.start()
    try:
        progress.phase(approach.name, "query")
        result = run_client(source, client_spec, progress=lambda done, elapsed:
                            progress.queried(done, spec.requests, elapsed))
        waits = None
        if approach.target == "debl":
            from coordinator.stats import WaitCounters

            waits = WaitCounters.merge(list(result.target_reports)).stats().to_dict()
        gen_hf = None
        if service is not None:
            progress.phase(approach.name, "gen_HF to full availability")
            gen_hf = service.wait(spec.full_timeout)
    finally:
        if service is not None:
            service.stop()
    offset = result.started_at - run.load_started
    timeline = tuple((round(offset + p.second, 3), p.completed, p.errors, p.mean_ms, p.p95_ms)
                     for p in result.timeline)
    query = result.to_dict()
    query.pop("timeline")
    full = _full_availability(config, run) if service is not None else run.uptime_s
    return dataclasses.replace(run, query_start_s=offset,
                               all_served_s=offset + result.elapsed_s,
                               full_availability_s=full, query=query, waits=waits,
                               gen_hf=gen_hf, timeline=timeline)


def coordinator_config(config: Config, raw_route: bool) -> Config:
    """The config of an approach's coordinator: the paper's (raw route off) for debl,
    debl-cold and debl-fifo; for debl-raw the configured ``raw_after``, or the default one if
    the configuration turned the route off."""
    if not raw_route:
        return config.replace(raw_after=None)
    if config.raw_after is None:
        return config.replace(raw_after=Config.raw_after)
    return config


def _full_availability(config: Config, run: ApproachRun) -> float | None:
    """Seconds from the load start to the last bucket loaded; None if some are not loaded."""
    with Catalog(config) as catalog:
        jobs = catalog.jobs()
    if any(j.state != "loaded" for j in jobs):
        return None
    last = max((j.ended for j in jobs if j.ended is not None), default=None)
    return (last - run.load_started) if last is not None else run.uptime_s


def config_env(config: Config) -> dict[str, str]:
    """``DEBL_*`` variables that make a child process load exactly *config*."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEBL_")}
    for f in fields(Config):
        value = getattr(config, f.name)
        if value is not None:
            env[f"DEBL_{f.name.upper()}"] = str(value)
    return env


class GenHFProcess:
    """``debl gen-hf --until-complete`` as a subprocess with its own Spark JVM, in *config*'s
    namespace. Restarted (5 s later, a few times) if it exits with an error, e.g. because
    another gen_HF held the lock. ``wait`` returns its record; ``stop`` ends it (SIGINT, then
    SIGKILL of its process group: the JVM included)."""

    def __init__(self, config: Config, order: str, log: Path, report=lambda text: None):
        self.config, self.order, self.log, self.report = config, order, log, report
        self.proc: subprocess.Popen | None = None
        self.restarts = 0
        self.started = 0.0
        self._stop = threading.Event()
        self._done = threading.Event()
        self._watch: threading.Thread | None = None
        self.returncode: int | None = None

    def _spawn(self) -> None:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "debl", "gen-hf", "--until-complete", "--order",
                 self.order, "--exit-with-parent"], env=config_env(self.config), stdout=out,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)

    def start(self) -> None:
        self.started = time.time()
        self._spawn()
        self._watch = threading.Thread(target=self._watcher, name="gen-hf-watch", daemon=True)
        self._watch.start()

    def _watcher(self) -> None:
        while not self._stop.is_set():
            code = self.proc.poll()
            if code is None:
                self._stop.wait(0.5)
                continue
            self.returncode = code
            if code == 0 or self.restarts >= _GEN_HF_RESTARTS:
                break
            self.restarts += 1
            self.report(f"gen-hf exited with {code} (see {self.log}); restarting")
            if self._stop.wait(5.0):
                break
            self._spawn()
        self._done.set()

    def wait(self, timeout: float) -> dict:
        finished = self._done.wait(timeout)
        return {"order": self.order, "started_at": self.started,
                "exit_code": self.returncode if finished else None,
                "completed": finished and self.returncode == 0, "restarts": self.restarts,
                "seconds": time.time() - self.started, "log": str(self.log)}

    def stop(self) -> None:
        self._stop.set()
        proc = self.proc
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGINT)
                proc.wait(_STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            except ProcessLookupError:
                pass
        if self._watch is not None:
            self._watch.join()


# ---------------------------------------------------------------------------- files


def machine() -> dict:
    """What the figures were measured on."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
        mem_kib = int(Path("/proc/meminfo").read_text().split()[1])
    except (OSError, ValueError, IndexError):
        mem_kib = 0
    return {"cpus": os.cpu_count(), "cpu_model": model, "memory_gib": round(mem_kib / 2**20, 1),
            "system": f"{platform.system()} {platform.release()}",
            "python": platform.python_version()}


def code_version() -> str | None:
    """The git commit DeBL runs from, with "+changes" if its work tree differs (None outside a
    git checkout): benches on different code do not compare."""
    root = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, check=True,
                              capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=root, check=True, capture_output=True, text=True,
                               timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head + ("+changes" if dirty else "")


def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
    tmp.replace(path)


def _write_timeline(path: Path, timeline) -> None:
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["t_s", "completed", "errors", "mean_ms", "p95_ms"])
        writer.writerows(timeline)
