"""``debl bench --writes``: fresh answers while the source takes writes (docs/FRESHNESS.md, "The
bench with writes").

Every run, for each round, mix and freshness setting in turn (alternated, so that a drift of the
machine falls on every setting alike), starts from the same state:

1. the source database's link table filled from the generated input (``debl source db init``)
   and dumped (``debl source dump``: the dump's position goes into its listing);
2. the dump is loaded from the bench's rate-capped source server as DeBL ships; gen_HF and the
   follower (``debl follow``) start as soon as the load is recorded, and the query client once
   the follower follows the source (its writes then meet a follower that runs, as a service
   does; its reads wait in the coordinator until the load answers them); the client runs
   ``duration`` seconds;
3. once gen_HF has converted every bucket and the follower has caught up: the load compared with
   the source row by row (``debl verify --against-source``) and every answer checked against
   the contract (``debl check-fresh``).

Per run, in all and per phase (``load``: until uptime; ``conversion``: until every bucket is in
HBase; ``after``): the reads answered and their latency p50/p99/max (from each read's send:
the answer logs'), the writes held, the follower's lag from a write's acknowledgement to its
capture p50/p99, and the changes applied on demand and in the background. ``fresh.json``,
``fresh.md``, ``<run>.timeline.csv`` (per second since the load's start: reads, their p99,
writes, their lag p99) and ``fresh.png`` (the read latency and the lag over time) go to
``<state_dir>/bench/<bench_id>/``.

Pitfall: every run drops every load of the namespace and replaces the source's link table
(``source_db.table``): point the bench at a namespace and a source table of their own.
"""

from __future__ import annotations

import csv
import json
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from debl.bench.approach import reset_stores
from debl.bench.cpu import CpuMeter
from debl.bench.fresh_report import PHASES, plot, render
from debl.bench.gen_hf_process import GenHFProcess
from debl.bench.inputs import hot_bytes_for_share
from debl.bench.results import BenchProgress, bench_root, code_version, machine, new_bench_id
from debl.bench.service_process import ServiceProcess
from debl.bench.source_server import make_server, manifest_cache_dir
from debl.bench.tail import tail_line, write_tail
from debl.catalog import FRESH_COUNTS, Catalog, JobState
from debl.config import Config
from debl.errors import ConfigError
from debl.position import parse_gtid
from debl.store.linkbench_writes import SourceLinks
from debl.workload.answer_log import read_answer_logs
from debl.workload.client import ClientResult, ClientSpec, default_processes, run_client
from debl.workload.fresh_check import check_run
from debl.workload.generator import generate
from debl.workload.mix import mix_named
from debl.workload.requests import RequestSpec
from debl.workload.spec import GenerateSpec
from debl.workload.targets import target_source
from debl.workload.write_log import save_writes
from loaders.cleanup import rollback
from loaders.load import LoadOptions, LoadProgress, LoadRun
from loaders.source import LocalSource
from loaders.source_dump import dump_source
from loaders.source_init import init_source
from loaders.verify_source import compare_with_source

MODES = ("off", "serial", "on")
_CATCH_UP_S = 300.0  # the follower reaching the last write once the writes stopped


@dataclass(frozen=True)
class FreshSpec:
    """One bench with writes: the source filled from ``input`` (generated into ``data_dir``),
    dumped into ``input.files`` files of ``input.layout``; per run ``duration`` seconds of the
    ``mix``'s reads at ``read_rate`` over ``threads`` threads and its writes at ``write_rate``
    over ``writers`` connections, for every mode of ``modes`` and mix of ``mixes``, ``rounds``
    times."""

    input: GenerateSpec
    data_dir: Path
    modes: tuple[str, ...] = MODES
    mixes: tuple[str, ...] = ("linkbench", "update-heavy")
    rounds: int = 1
    read_rate: float = 300.0
    write_rate: float = 1000.0
    threads: int = 16
    writers: int = 4
    duration: float = 120.0
    source_rate: float | None = None
    hot_share: float = 0.2
    chunk_size: int | None = None
    seed: int = 1
    query_timeout: float = 600.0
    full_timeout: float = 1800.0
    # a third into the client's run the source dumped again and loaded as the next day; two
    # thirds into it, a rollback to today's load
    next_day: bool = False

    def __post_init__(self) -> None:
        for mode in self.modes:
            if mode not in MODES:
                raise ConfigError(f"--modes: {mode!r} is not a freshness setting: choose from "
                                  f"{', '.join(MODES)}")
        for mix in self.mixes:
            if not mix_named(mix).write_share:
                raise ConfigError(f"--mixes: {mix!r} sends no writes: choose linkbench or "
                                  "update-heavy")
        if self.rounds < 1 or not self.modes or not self.mixes:
            raise ConfigError("a bench with writes runs at least one round of one mode and mix")


class _Services(LoadProgress):
    """Once the load is recorded (before it, the follower would find no load to follow and
    gen_HF a previous load complete): gen_HF and the follower started, and once the follower
    follows the source, *then* (the client: its writes meet a follower already running, as
    in a service that runs day after day). Keeps the uptime and when the client started."""

    def __init__(self, config: Config, services: list[ServiceProcess], source: str, then,
                 report) -> None:
        self.config, self.services, self.source = config, services, source
        self.then, self.report = then, report
        self.up_at: float | None = None
        self.client_at: float | None = None

    def start(self, hot_bytes: int, cold_bytes: int) -> None:
        for service in self.services:
            service.start()
        threading.Thread(target=self._when_following, name="bench-fresh-start",
                         daemon=True).start()

    def _when_following(self) -> None:
        deadline = time.monotonic() + _CATCH_UP_S
        try:
            with Catalog(self.config) as catalog:
                while time.monotonic() < deadline:
                    follower = catalog.changes.follower(self.source)
                    if follower is not None and follower.state == "following":
                        break
                    time.sleep(0.1)
                else:
                    self.report(f"the follower did not follow within {_CATCH_UP_S:g} s (see "
                                "its log): the client starts anyway")
        finally:  # whatever happened, the client runs: the run waits for its result
            self.client_at = time.time()
            self.then()

    def up(self, summary) -> None:
        self.up_at = time.time()
        self.report(f"load {summary.load_id} up after {summary.uptime_s:.1f} s")

    def message(self, text: str) -> None:
        self.report(text)


def run_fresh(config: Config, spec: FreshSpec, progress: BenchProgress = BenchProgress(),
              directory: Path | None = None) -> dict:
    """Run the bench (see the module); returns its result, also written as ``fresh.json``
    (with ``fresh.md``, the runs' timelines and ``fresh.png``) in its directory."""
    bench_id = new_bench_id()
    directory = Path(directory) if directory else bench_root(config) / bench_id
    directory.mkdir(parents=True, exist_ok=False)
    if not (spec.data_dir / ".complete").exists():
        progress.message(f"generating the input into {spec.data_dir}")
        generate(spec.data_dir, spec.input, overwrite=True)
        (spec.data_dir / ".complete").write_text("")
    result: dict = {"bench_id": bench_id, "spec": _spec_dict(spec), "machine": machine(),
                    "code": code_version(), "runs": []}
    plan = [(r, mix, mode) for r in range(spec.rounds) for mix in spec.mixes
            for mode in spec.modes]
    for k, (round_no, mix, mode) in enumerate(plan):
        name = f"{mix}-{mode}-r{round_no + 1}"
        progress.approach(name, k, len(plan))
        run = _run_one(config.replace(fresh_mode=mode), spec, mix, directory / name, progress)
        result["runs"].append({"name": name, "mix": mix, "mode": mode, "round": round_no + 1,
                               **run})
        (directory / "fresh.json").write_text(json.dumps(result, indent=2, default=str))
    (directory / "fresh.md").write_text(render(result))
    plot(result, directory)
    result["directory"] = str(directory)
    return result


def _run_one(config: Config, spec: FreshSpec, mix: str, directory: Path,
             progress: BenchProgress) -> dict:
    directory.mkdir()
    progress.phase(directory.name, "source")
    reset_stores(config)
    init_source(config, str(spec.data_dir), replace=True)
    dump = dump_source(config, directory / "dump", files=spec.input.files,
                       layout=spec.input.layout)
    dump_dir = Path(dump.out_dir)
    server = make_server(dump_dir, port=0, rate_mb_s=spec.source_rate,
                         manifest_cache=manifest_cache_dir(config), progress=progress.message)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    # with a next day, gen_HF serves whichever load is current, as a service does
    gen_hf = GenHFProcess(config, "demand", directory / "gen_hf.log", progress.message,
                          until_complete=not spec.next_day)
    follower = ServiceProcess(config, ["follow"], directory / "follow.log", progress.message)
    client = _Client(config, spec, mix, directory / "answers")
    today_done = threading.Event()
    next_day = _NextDay(config, spec, directory, today_done, progress) if spec.next_day else None

    def queries() -> None:
        if next_day is not None:  # started first: the client's result() waits for the start
            next_day.start()
        client.start()

    services = _Services(config, [gen_hf, follower], dump.position.source, queries,
                         progress.message)
    try:
        progress.phase(directory.name, "load, queries and writes")
        url = f"http://127.0.0.1:{server.server_address[1]}"
        hot_bytes = hot_bytes_for_share(LocalSource(dump_dir).list(), spec.hot_share)
        with LoadRun(config, url, LoadOptions(hot_bytes=hot_bytes, chunk_size=spec.chunk_size),
                     progress=services) as load:
            load.wait_up()
            final = load.finish()
        today_done.set()
        done = client.result()
        if next_day is not None:
            next_day.finish()
        progress.phase(directory.name, "gen_HF to full availability")
        conversion = (gen_hf.wait(spec.full_timeout) if next_day is None
                      else _converted(config, final.load_id, spec.full_timeout))
        assert done.writes is not None  # FreshSpec's mixes all write
        save_writes(done.writes.records, directory / "writes.csv")
        progress.phase(directory.name, "verify and check")
        against = compare_with_source(config, final.load_id, wait_s=_CATCH_UP_S)
        check = check_run(config, dump_dir, done.writes.records, directory / "answers")
    finally:
        gen_hf.stop()
        follower.stop()
        server.shutdown()
        server.server_close()
    with Catalog(config) as catalog:
        record = catalog.loads.get(final.load_id)
        jobs = catalog.jobs.jobs(final.load_id)
        answered, _ = catalog.serving.answers(final.load_id)
        captured = _captured(catalog, dump.position.source, done)
    converted = (max((j.ended for j in jobs if j.ended is not None), default=None)
                 if jobs and all(j.state == JobState.LOADED for j in jobs) else None)
    up_at = services.up_at or record.uptime
    assert up_at is not None  # the load is up: wait_up returned
    bounds = {"started": record.started, "uptime": up_at, "converted": converted}
    reads = _reads(directory / "answers")
    lag = _lag(done, captured)
    _write_timeline(directory / "timeline.csv", reads, lag, bounds)
    tail = None if done.tail is None else tail_line(write_tail(directory, "reads", done.tail))
    writes = done.writes
    return {
        "load_id": final.load_id, "dump_position": dump.position.gtid,
        "client_started_s": None if services.client_at is None
        else services.client_at - record.started,
        "uptime_s": up_at - record.started,
        "converted_s": None if converted is None else converted - record.started,
        "conversion": conversion,
        "reads": _summaries(reads, bounds), "client_latency": asdict(done.latency),
        "read_errors": done.errors, "error_samples": list(done.error_samples),
        "slowest_reads": tail, "cpu": client.cpu(),
        "writes": {"acknowledged": writes.completed, "errors": writes.errors,
                   "per_s": writes.per_s, "asked_per_s": writes.rate, "held": writes.held},
        "lag": _summaries(lag, bounds),
        "fresh": {name: answered.get(route, 0) for name, route in FRESH_COUNTS.items()},
        "check": {"answers": check.answers, "checked": check.checked, "failed": check.failed,
                  "violations": check.violations.to_dict(),
                  "history_problems": check.history.to_dict()},
        "against_source": against.to_dict(),
        "next_day": None if next_day is None else next_day.moments(record.started),
    }


def _converted(config: Config, load_id: str, timeout: float) -> dict:
    """Wait until every bucket of *load_id* is in HBase (gen_HF serving whichever load is
    current); its record as ``GenHFProcess.wait`` gives one."""
    started = time.time()
    deadline = time.monotonic() + timeout
    with Catalog(config) as catalog:
        while time.monotonic() < deadline:
            jobs = catalog.jobs.jobs(load_id)
            if all(j.state == JobState.LOADED for j in jobs):
                return {"completed": True, "seconds": time.time() - started}
            time.sleep(1.0)
    return {"completed": False, "seconds": time.time() - started}


class _NextDay(threading.Thread):
    """A third into the client's run: the source dumped again (a snapshot while the writes go
    on) and the dump loaded as the next day, current at its uptime; two thirds into it, the
    rollback to today's load (``debl rollback``). Starts with the client; ``finish`` joins it
    and raises what it raised."""

    def __init__(self, config: Config, spec: FreshSpec, directory: Path,
                 today_done: threading.Event, progress: BenchProgress) -> None:
        super().__init__(name="bench-fresh-next-day", daemon=True)
        self.config, self.spec, self.directory = config, spec, directory
        self.today_done, self.progress = today_done, progress
        self.at: dict[str, float] = {}
        self.load_id: str | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            started = time.monotonic()
            time.sleep(self.spec.duration / 3)
            self.today_done.wait()  # one load at a time
            self.at["dumped"] = time.time()
            dump = dump_source(self.config, self.directory / "dump-next-day",
                               files=self.spec.input.files, layout=self.spec.input.layout)
            hot_bytes = hot_bytes_for_share(LocalSource(Path(dump.out_dir)).list(),
                                            self.spec.hot_share)
            with LoadRun(self.config, dump.out_dir, LoadOptions(hot_bytes=hot_bytes)) as load:
                self.load_id = load.wait_up().load_id
                self.at["current"] = time.time()
                self.progress.message(f"the next day {self.load_id} is current")
                load.finish()
            time.sleep(max(0.0, started + 2 * self.spec.duration / 3 - time.monotonic()))
            rollback(self.config)
            self.at["rolled_back"] = time.time()
            self.progress.message("rolled back to today's load")
        except BaseException as exc:  # noqa: BLE001 -- raised again by finish()
            self.error = exc

    def finish(self) -> None:
        self.join()
        if self.error is not None:
            raise self.error

    def moments(self, since: float) -> dict:
        """The next day's load and its moments in seconds after today's load started."""
        return {"load_id": self.load_id,
                **{f"{name}_s": round(at - since, 1) for name, at in self.at.items()}}


class _Client:
    """The run's query client in a thread of its own: the mix's reads through the coordinator
    (open loop, each answer logged for the checker) and its writes to the source."""

    def __init__(self, config: Config, spec: FreshSpec, mix: str, answers: Path) -> None:
        requests = RequestSpec(max_id=spec.input.max_id, start_id=spec.input.start_id,
                               link_types=spec.input.link_types, seed=spec.seed)
        self.spec = ClientSpec(requests, threads=spec.threads, total=None,
                               duration=spec.duration, rate=spec.read_rate,
                               processes=default_processes(spec.threads,
                                                           config.client.processes),
                               mix=mix, write_rate=spec.write_rate, writers=spec.writers,
                               answer_log=str(answers))
        self.source = target_source(config, "debl", default_timeout=spec.query_timeout)
        self.writes_to = SourceLinks(config.source_db_url(with_password=True),
                                     config.source_db.table)
        self.config = config
        self._result: ClientResult | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="bench-fresh-client",
                                        daemon=True)
        self._cpu: dict | None = None
        self._started = threading.Event()

    def start(self) -> None:
        self._thread.start()
        self._started.set()

    def cpu(self) -> dict | None:
        """Where the CPU went while the client ran (``debl.bench.cpu``; its worker processes,
        ended by then, counted by the meter)."""
        return self._cpu

    def _run(self) -> None:
        with CpuMeter(self.config) as meter:
            first = meter.snapshot()
            try:
                self._result = run_client(self.source, self.spec, writes_to=self.writes_to)
            except BaseException as exc:  # noqa: BLE001 -- raised again by result()
                self._error = exc
            self._cpu = meter.snapshot().since(first)

    def result(self) -> ClientResult:
        """Its result, once it started (a small load may end before the follower follows,
        which starts the client) and ended; raises what it raised."""
        self._started.wait()
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result


def _captured(catalog: Catalog, source: str, done: ClientResult) -> dict[int, float]:
    """When the change log captured each of the run's writes: position -> epoch seconds."""
    assert done.writes is not None  # a mix with writes
    seqs = [parse_gtid(r.gtid)[2] for r in done.writes.records if r.gtid is not None]
    if not seqs:
        return {}
    after, last = min(seqs) - 1, max(seqs)
    found: dict[int, float] = {}
    while after < last:
        changes, reached = catalog.changes.since(source, after, limit=100_000)
        found.update((c.seq, c.captured_ts) for c in changes)
        if reached <= after:
            break
        after = reached
    return found


def _epoch_offset() -> float:
    """Epoch seconds minus CLOCK_MONOTONIC seconds (the clients' instants)."""
    return time.time() - time.monotonic_ns() / 1e9


def _reads(answers: Path) -> np.ndarray:
    """(answered at, epoch seconds; latency from its send, ms) of every answered read."""
    records = read_answer_logs(answers).records
    records = records[records["ok"] == 1]
    at = records["recv_ns"] / 1e9 + _epoch_offset()
    return np.column_stack([at, (records["recv_ns"] - records["sent_ns"]) / 1e6])


def _lag(done: ClientResult, captured: dict[int, float]) -> np.ndarray:
    """(acknowledged at, epoch seconds; lag to its capture, ms) of every captured write."""
    assert done.writes is not None  # a mix with writes
    offset = _epoch_offset()
    rows = []
    for r in done.writes.records:
        if r.gtid is None or r.acked_ns is None:
            continue
        at = r.acked_ns / 1e9 + offset
        seq = parse_gtid(r.gtid)[2]
        if seq in captured:
            rows.append((at, (captured[seq] - at) * 1000))
    return np.array(rows, dtype=float).reshape(-1, 2)


def _phase_of(at: np.ndarray, bounds: dict) -> np.ndarray:
    """0 (load), 1 (conversion) or 2 (after) per instant."""
    converted = bounds["converted"] if bounds["converted"] is not None else np.inf
    return np.where(at < bounds["uptime"], 0, np.where(at < converted, 1, 2))


def _summary(values: np.ndarray) -> dict:
    if not len(values):
        return {"n": 0, "p50_ms": None, "p99_ms": None, "max_ms": None}
    p50, p99, top = np.percentile(values, [50, 99, 100])
    return {"n": int(len(values)), "p50_ms": round(float(p50), 2),
            "p99_ms": round(float(p99), 2), "max_ms": round(float(top), 2)}


def _summaries(samples: np.ndarray, bounds: dict) -> dict:
    """In all and per phase."""
    phase = _phase_of(samples[:, 0], bounds)
    return {"all": _summary(samples[:, 1]),
            **{name: _summary(samples[phase == k, 1]) for k, name in enumerate(PHASES)}}


def _write_timeline(path: Path, reads: np.ndarray, lag: np.ndarray, bounds: dict) -> None:
    start = bounds["started"]
    by_second: dict[int, tuple[list, list]] = {}
    for samples, side in ((reads, 0), (lag, 1)):
        for at, ms in samples:
            by_second.setdefault(int(at - start), ([], []))[side].append(ms)
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["t_s", "reads", "read_p99_ms", "writes", "lag_p99_ms"])
        for s in sorted(by_second):
            r, w = by_second[s]
            writer.writerow([s, len(r), round(float(np.percentile(r, 99)), 2) if r else "",
                             len(w), round(float(np.percentile(w, 99)), 2) if w else ""])


def _spec_dict(spec: FreshSpec) -> dict:
    d = asdict(spec)
    d["data_dir"] = str(spec.data_dir)
    return d
