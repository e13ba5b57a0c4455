"""One approach in a bench: empty the namespace's stores, load up to the approach's uptime, then
from its uptime the query phase (while the load goes on where it does: MySQL taking the hot keys
over), and for the DeBL approaches gen_HF to full availability.

The query phase is the LinkBench client with the same threads, requests and seed for every
approach, against the approach's target (the coordinator for DeBL, MySQL or HBase for the
baselines, none for fileCopy); "all served" is when the last request completed, so it includes
the client's own run time. Queries through the coordinator get ``coordinator.query_timeout`` seconds
each: a stuck gen_HF turns into counted errors, never a hang.

With ``queries_from`` "load" the client of an approach served by the coordinator runs beside the
load, in a thread of its own, and the load starts once its first requests are sent: they wait in
the coordinator (no load is current after the reset) until the load is recorded and their key
is answerable (docs/COORDINATOR.md, "Answers before uptime") or the load is up, each within
``query_timeout`` of its sending, which then includes the load. The client is ready first so
that its own start (worker processes, each opening a coordinator: many seconds on a busy
machine) is not measured as the load's; times still count from the load's start (the client's
``query_start_s`` is then just below 0). The baselines' clients start at their uptime as
always: MySQL and HBase answer nothing before.

Pitfall: everything happens in the namespace of *config*: every load of its MySQL database is
dropped before each approach (``reset_stores``), with its HBase table and HDFS directory. Never
point a bench at a namespace others are using.
"""

from __future__ import annotations

import dataclasses
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from debl.bench.baselines import APPROACHES, run_approach
from debl.bench.cpu import CpuMeter
from debl.bench.gen_hf_process import GenHFProcess
from debl.bench.results import (ApproachRun, BenchProgress, PhaseSpan, write_json,
                                write_timeline)
from debl.bench.spec import BenchSpec
from debl.bench.tail import write_tail
from debl.catalog import Catalog, JobState
from debl.config import Config
from debl.hdfs import HdfsClient
from debl.workload.client import ClientResult, ClientSpec, default_processes, run_client
from debl.workload.requests import RequestSpec
from debl.workload.targets import merged_reports, target_source
from loaders.cleanup import drop_every_load
from loaders.load import LoadOptions, LoadProgress


def reset_stores(config: Config) -> None:
    """Empty the namespace: every load's stores (MySQL tables, HBase table, HDFS directory,
    fileCopy's copies) dropped and no load current, the HDFS HFiles of old runs gone."""
    drop_every_load(config)
    HdfsClient(config).delete(f"{config.hdfs.root.rstrip('/')}/hfiles", recursive=True)


class _LoadBytes(LoadProgress):
    """Load progress for the bench: ``on_start`` runs once the load is recorded, ``on_up``
    at the approach's uptime (the load may go on: MySQL taking the hot keys over)."""

    def __init__(self, progress: BenchProgress, total: int, on_start=lambda: None,
                 on_up=lambda summary: None):
        self.progress, self.total, self.done = progress, total, 0
        self.on_start, self.on_up = on_start, on_up

    def start(self, hot_bytes: int, cold_bytes: int) -> None:
        self.on_start()

    def hot(self, nbytes: int) -> None:
        self.done += nbytes
        self.progress.moved(self.done, self.total)

    copied = hot

    def up(self, summary) -> None:
        self.on_up(summary)

    def message(self, text: str) -> None:
        self.progress.message(text)


class _QueryClient:
    """An approach's query client: ``start`` runs it in a daemon thread of its own (its
    requests sent at once, beside the load); ``result`` waits for its ``ClientResult`` and
    raises what it raised, running it in the calling thread if it was not started (the query
    phase from uptime, as it always ran: Ctrl-C stops its workers there).

    Pitfall: a started client cannot be stopped from outside. If the load fails meanwhile, its
    requests get the coordinator's error for a failed load and it ends on its own (a load that
    failed before it was recorded: they wait out their ``query_timeout``); a daemon thread
    never holds the process's exit."""

    def __init__(self, source, spec: ClientSpec, progress: BenchProgress) -> None:
        self.source, self.spec, self.progress = source, spec, progress
        self.started = False
        self._running = threading.Event()  # its first requests are sent
        self._done = threading.Event()
        self._result: ClientResult | None = None
        self._error: BaseException | None = None

    def start(self) -> None:
        if not self.started:
            self.started = True
            threading.Thread(target=self._run, name="bench-query", daemon=True).start()

    def wait_running(self) -> None:
        """Block until the started client sends its requests (its workers ready, its targets
        opened) or has ended."""
        while not (self._running.wait(0.2) or self._done.is_set()):
            pass

    def _queried(self, done: int, elapsed: float) -> None:
        # run_client reports progress from its start instant on, never while its workers get
        # ready: the first report says its requests are sent.
        self._running.set()
        self.progress.queried(done, self.spec.total, elapsed)

    def _run(self) -> None:
        try:
            self._result = run_client(self.source, self.spec, progress=self._queried)
        except BaseException as exc:  # noqa: BLE001 -- raised again by result()
            self._error = exc
        finally:
            self._done.set()

    def result(self):
        if not self.started:
            self.started = True
            self._run()
        self._done.wait()
        if self._error is not None:
            raise self._error
        return self._result


class _Loading:
    """An approach's load in a thread of its own: ``wait_up`` returns its summary at uptime (the
    query phase starts then), ``finish`` its final summary."""

    def __init__(self, config: Config, url: str, options: LoadOptions, progress: BenchProgress,
                 input_bytes: int, on_start):
        self._up = threading.Event()
        self._summary = None
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bench-load")
        self._future = self._pool.submit(
            run_approach, config, url, options,
            progress=_LoadBytes(progress, input_bytes, on_start, self._reached_up))

    def _reached_up(self, summary) -> None:
        self._summary = summary
        self._up.set()

    def wait_up(self):
        while not self._up.wait(0.2):
            if self._future.done():
                return self._future.result()  # raises what the load raised
        return self._summary

    def finish(self):
        try:
            return self._future.result()
        finally:
            self._pool.shutdown(wait=True)


def run_one(config: Config, spec: BenchSpec, name: str, url: str, input_bytes: int,
            plan: tuple[LoadOptions, int | None], directory: Path,
            progress: BenchProgress) -> ApproachRun:
    """Approach *name* of the bench, its stores already emptied: the load from *url* with its
    *plan* (``debl.bench.inputs.load_options``), the query phase and full availability; its
    ``<name>.json``, ``<name>.timeline.csv`` and ``<name>.tail.json`` (``debl.bench.tail``)
    written into *directory*."""
    approach = APPROACHES[name]
    progress.phase(name, "load")
    options, target_bytes = plan
    options = dataclasses.replace(options, wait_for_hot=approach.wait_for_hot)
    if target_bytes is not None:  # spec.buckets buckets, a giant id alone in the largest
        config = config.replace(loading_bucket_target_bytes=target_bytes,
                                loading_bucket_target_covers_heaviest=False)
    service = None
    if approach.gen_hf_order:
        service = GenHFProcess(config, approach.gen_hf_order,
                               directory / f"{approach.name}.gen_hf.log", progress.message)
    client = _query_client(config, spec, approach, progress)
    from_load = client is not None and spec.queries_from == "load" and approach.target == "debl"

    # With gen_hf_start "load", the service starts once the new load is recorded (it then
    # waits for uptime), never before: it would see the previous load complete and exit.
    early = service.start if service is not None and spec.gen_hf_start == "load" else None
    # its requests wait in the coordinator: no load is current after the reset
    if client is not None and from_load:
        progress.message(f"{name}: starting the query client; the load starts once it asks")
        client.start()
        client.wait_running()
    with CpuMeter(config) as meter:
        cpu = [meter.snapshot()]
        loading = _Loading(config, url, options, progress, input_bytes,
                           early or (lambda: None))
        try:
            summary = loading.wait_up()
        except BaseException:
            if service is not None:
                service.stop()
            raise
        cpu.append(meter.snapshot())
        with Catalog(config) as catalog:
            started = catalog.loads.get(summary.load_id).started
        run = ApproachRun(name, summary.load_id, started, summary.uptime_s, summary.as_dict(),
                          (), approach.target, queries_from=None if client is None
                          else "load" if from_load else "uptime")
        try:
            if client is not None:
                run = _query_phase(config, spec, approach, run, service, client, progress)
                if client.result().tail is not None:  # the query phase's, kept by the client
                    write_tail(directory, name, client.result().tail)
            else:
                run = dataclasses.replace(run, full_availability_s=run.uptime_s)
        finally:
            final = loading.finish()
        cpu.append(meter.snapshot())
    with Catalog(config) as catalog:
        phases = tuple(PhaseSpan(p.phase, p.item, p.started - started,
                                 None if p.ended is None else p.ended - started, p.bytes, p.rows)
                       for p in catalog.phases.phases(summary.load_id))
    run = dataclasses.replace(run, summary=final.as_dict(), phases=phases,
                              taken_over_s=final.taken_over_s,
                              cpu={"to_uptime": cpu[1].since(cpu[0]),
                                   "after_uptime": cpu[2].since(cpu[1])})
    write_json(directory / f"{name}.json", run.to_dict())
    write_timeline(directory / f"{name}.timeline.csv", run.timeline)
    return run


def query_client_spec(spec: BenchSpec, config: Config) -> ClientSpec:
    """The query phase's client: the same for every approach of *spec*."""
    gen = spec.input
    return ClientSpec(RequestSpec(max_id=gen.max_id, start_id=gen.start_id,
                                  link_types=gen.link_types, seed=spec.seed,
                                  recency_share=spec.recency_share),
                      threads=spec.threads, total=spec.requests, duration=spec.duration,
                      rate=spec.request_rate,
                      processes=default_processes(spec.threads, config.client.processes))


def _query_client(config: Config, spec: BenchSpec, approach,
                  progress: BenchProgress) -> _QueryClient | None:
    """The query client of *approach* (None: it has no query phase), not started."""
    if approach.target is None:
        return None
    # Each client process opens its own target; a coordinator's counters are zeroed when the
    # run starts (its first minute is the query phase's) and merged over the processes after.
    if approach.target == "debl":
        source = target_source(coordinator_config(config, approach.raw_route), "debl",
                               default_timeout=spec.query_timeout)
    else:
        source = target_source(config, approach.target)
    return _QueryClient(source, query_client_spec(spec, config), progress)


def _query_phase(config: Config, spec: BenchSpec, approach, run: ApproachRun,
                 service: "GenHFProcess | None", client: _QueryClient,
                 progress: BenchProgress) -> ApproachRun:
    """From the uptime: gen_HF started if it waited for it, the client's result (the client
    started now unless it started with the load), full availability."""
    if service is not None and not service.started:
        service.start()
    try:
        progress.phase(approach.name, "query")
        result = client.result()
        waits = merged_reports(result.target_reports)
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
    first = None if result.first_answer_s is None else offset + result.first_answer_s
    return dataclasses.replace(run, query_start_s=offset, first_answer_s=first,
                               all_served_s=offset + result.elapsed_s,
                               full_availability_s=full, query=query, waits=waits,
                               gen_hf=gen_hf, timeline=timeline)


def coordinator_config(config: Config, raw_route: bool) -> Config:
    """The config of an approach's coordinator: the paper's (raw route off) for debl,
    debl-cold and debl-fifo; for debl-raw the configured ``coordinator.raw_after``, or the default
    one if the configuration turned the route off."""
    if not raw_route:
        return config.replace(coordinator_raw_after=None)
    if config.coordinator.raw_after is None:
        return config.replace(coordinator_raw_after=Config().coordinator.raw_after)
    return config


def _full_availability(config: Config, run: ApproachRun) -> float | None:
    """Seconds from the load start to the last bucket loaded; None if some are not loaded."""
    with Catalog(config) as catalog:
        jobs = catalog.jobs.jobs(run.load_id)
    if any(j.state != JobState.LOADED for j in jobs):
        return None
    last = max((j.ended for j in jobs if j.ended is not None), default=None)
    return (last - run.load_started) if last is not None else run.uptime_s
