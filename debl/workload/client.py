"""A LinkBench-style request client: T threads calling ``get_link_list``, over P processes.

Closed loop by default, as LinkBench's requesters: each thread sends its next request as soon as
the previous one returns. With ``rate`` the client is open loop: each thread sends at the instants
of its own Poisson schedule (``debl.workload.pacing``, mean rate ``rate / threads``), a thread
that falls behind sends at once, and latency counts from the intended instant, so a stall shows
in the percentiles as every user who arrived during it would see it.

Processes. Python threads share one interpreter lock, so one process tops out at a few thousand
requests per second however many threads wait on sockets (docs/BENCHMARKS.md measures it). With
``processes = P > 1`` the threads are dealt round-robin to P worker processes (thread ``t`` to
process ``t % P``); each worker opens its *own* target from a picklable ``TargetSource`` (config
in, connections opened in the worker, as pyspark's DataSource does), waits until every worker is
ready, and starts at one common instant. Each worker sends back histograms (``RunCounts``),
never raw samples; merged, they give exactly the percentiles of the histogram of all requests.
Thread ``t`` always replays request stream ``t`` of the seed (and schedule ``t`` in open loop),
with the same quota, so the requests of a run do not depend on P.

The target is any object with ``get_link_list(id1, link_type)``: a ``LinkStore`` or the
coordinator. It must be safe to share between the threads of a process (the coordinator is; a
store holds a connection per thread). A request that raises is counted as an error with its
message sampled, never fatal: a run against a half-loaded system reports errors instead of dying.

Pitfalls:

- Worker processes start with ``forkserver`` (never ``fork``: the caller may hold threads, a
  JVM or open sockets). A ``TargetSource``'s callables must be importable module-level functions,
  classes or ``functools.partial`` of them, with picklable arguments (a ``Config`` is).
- Instants are ``time.perf_counter_ns()``, which on Linux is ``CLOCK_MONOTONIC``, one clock for
  every process of the machine: that is what lets the workers share a start instant.
- With few cores, the client's own CPU is part of what is measured: a worker process per core
  (the default of ``debl query``) is as far as it scales.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import multiprocessing
import os
import pickle
import queue
import signal
import threading
import time
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from debl.errors import ConfigError, DeblError, ServiceError
from debl.workload.latency import LatencySummary, RunCounts, TimelinePoint
from debl.workload.pacing import PoissonSchedule
from debl.workload.requests import RequestSpec, RequestStream

_MAX_ERROR_SAMPLES = 5
_PROGRESS_INTERVAL_S = 0.2
_STOP_GRACE_S = 5.0
_NO_DEADLINE = -1

Progress = Callable[[int, float], None]  # (requests done, seconds elapsed)


class LinkListTarget(Protocol):
    def get_link_list(self, id1: int, link_type: int) -> Any: ...


@dataclass(frozen=True)
class TargetSource:
    """How a worker process gets its own target. Every callable runs in the worker and must be
    picklable (see the module's pitfalls).

    ``open()`` returns a connected target (closed with ``close()`` after the run);
    ``on_start(target)``, if given, runs when the run starts (e.g. to zero the target's own
    counters); ``report(target)``, if given, runs after the last request, and its picklable
    result is returned in ``ClientResult.target_reports`` (one per process, in process order)."""

    open: Callable[[], Any]
    on_start: Callable[[Any], None] | None = None
    report: Callable[[Any], Any] | None = None


@dataclass(frozen=True)
class ClientSpec:
    """How to drive the target. At least one of ``total`` (requests over all threads) and
    ``duration`` (seconds); with both, the run stops at whichever comes first. ``processes``
    worker processes share the ``threads`` (1: the threads run in the calling process)."""

    requests: RequestSpec
    threads: int = 1
    total: int | None = 1000
    duration: float | None = None
    rate: float | None = None  # requests per second over all threads; None: closed loop
    processes: int = 1

    def __post_init__(self) -> None:
        if self.threads < 1:
            raise ConfigError(f"--threads must be at least 1, not {self.threads}")
        if self.total is None and self.duration is None:
            raise ConfigError("give --requests, --duration or both")
        if self.total is not None and self.total < 0:
            raise ConfigError(f"--requests must be >= 0, not {self.total}")
        if self.duration is not None and self.duration <= 0:
            raise ConfigError(f"--duration must be positive, not {self.duration}")
        if self.rate is not None and self.rate <= 0:
            raise ConfigError(f"--rate must be positive, not {self.rate}")
        if not 1 <= self.processes <= self.threads:
            raise ConfigError(f"--processes must be between 1 and --threads ({self.threads}), "
                              f"not {self.processes}: each process runs at least one thread")

    def quota(self, thread: int) -> int | None:
        """Requests of thread ``thread`` (None: until the duration ends)."""
        if self.total is None:
            return None
        return self.total // self.threads + (thread < self.total % self.threads)


def default_processes(threads: int, configured: int = 0) -> int:
    """Worker processes for ``threads`` threads: ``configured`` if positive, else one per core
    this process may run on; never more than the threads."""
    if configured < 0:
        raise ConfigError(f"--processes must be 0 (one per core) or positive, not {configured}")
    if configured > 0:
        return min(configured, threads)
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, threads))


@dataclass(frozen=True)
class ClientResult:
    """One run. ``latency`` and ``timeline`` latencies cover successful requests only;
    ``started_at`` is epoch seconds, timeline seconds count from it. ``counts`` holds the
    merged histograms the figures come from; ``to_dict`` leaves it and ``target_reports`` out."""

    spec: ClientSpec
    started_at: float
    elapsed_s: float
    completed: int
    errors: int
    rows: int  # links returned, over all successful requests
    empty: int  # successful requests that returned no link
    # CPU seconds (user + system) of the client's processes during the run, the target's
    # client-side work included: near cores x elapsed_s, the client is what limits the run.
    cpu_s: float
    latency: LatencySummary
    timeline: tuple[TimelinePoint, ...]
    error_samples: tuple[str, ...]
    counts: RunCounts | None = field(default=None, repr=False, compare=False)
    target_reports: tuple[Any, ...] = field(default=(), repr=False, compare=False)

    @property
    def throughput(self) -> float:
        """Successful requests per second over the whole run."""
        return self.completed / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def to_dict(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
             if f.name not in ("counts", "target_reports")}
        d = json.loads(json.dumps(d, default=_plain))
        d["throughput"] = self.throughput
        return d


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        return dataclasses.asdict(value)
    raise TypeError(f"not serializable: {type(value).__name__}")


# ---------------------------------------------------------------------------------- one part


class _Shared:
    """What the threads of one process share: the start instant, the deadline, the stop flag,
    the sampled errors."""

    def __init__(self) -> None:
        self.t0_ns = 0
        self.deadline_ns: int | None = None
        self.stop = threading.Event()
        self._lock = threading.Lock()
        self.errors: list[str] = []

    def sample_error(self, exc: BaseException) -> None:
        text = f"{type(exc).__name__}: {exc}"[:300]
        with self._lock:
            if len(self.errors) < _MAX_ERROR_SAMPLES and text not in self.errors:
                self.errors.append(text)


class _Requester(threading.Thread):
    def __init__(self, thread: int, target: LinkListTarget, spec: ClientSpec,
                 shared: _Shared) -> None:
        super().__init__(name=f"debl-client-{thread}", daemon=True)
        self.target, self.shared = target, shared
        self.quota = spec.quota(thread)
        self.stream = RequestStream(spec.requests, stream=thread)
        self.schedule = (PoissonSchedule(spec.rate / spec.threads, spec.requests.seed, thread)
                         if spec.rate else None)
        self.end_ns, self.latency_ns, self.ok = array("q"), array("q"), array("b")
        self.done = self.rows = self.empty = 0

    def _wait_until(self, instant: int) -> bool:
        """Sleep until ``instant``; False if the run is stopped first."""
        while True:
            now = time.perf_counter_ns()
            if instant <= now:
                return True
            if self.shared.stop.wait((instant - now) / 1e9):
                return False

    def run(self) -> None:
        sh, get, clock = self.shared, self.target.get_link_list, time.perf_counter_ns
        t0, deadline, stop, schedule = sh.t0_ns, sh.deadline_ns, sh.stop, self.schedule
        while self.quota is None or self.done < self.quota:
            if stop.is_set():
                return
            id1, link_type = next(self.stream)
            if schedule is not None:
                start = t0 + next(schedule)  # the intended instant, however late we are
                if deadline is not None and start >= deadline:
                    return
                if not self._wait_until(start):
                    return
            else:
                start = clock()
                if deadline is not None and start >= deadline:
                    return
            try:
                result = get(id1, link_type)
                ok = True
            except Exception as exc:  # noqa: BLE001 -- counted, never fatal
                ok = False
                sh.sample_error(exc)
            end = clock()
            if ok:
                n = len(result) if result is not None else 0
                self.rows += n
                self.empty += n == 0
            self.end_ns.append(end - t0)
            self.latency_ns.append(end - start)
            self.ok.append(ok)
            self.done += 1


@dataclass(frozen=True)
class _PartResult:
    """What one process's threads did; picklable, small (histograms, not samples)."""

    counts: RunCounts
    rows: int
    empty: int
    errors: tuple[str, ...]
    finished_ns: int  # perf_counter_ns when its last thread ended
    cpu_s: float  # this process's CPU time (user + system) during the run


class _Part:
    """The threads of one process, built (streams drawn, schedules seeded) before the start."""

    def __init__(self, target: LinkListTarget, spec: ClientSpec, threads: Sequence[int]) -> None:
        self.shared = _Shared()
        self.requesters = [_Requester(t, target, spec, self.shared) for t in threads]

    def done(self) -> int:
        return sum(r.done for r in self.requesters)

    def run(self, t0_ns: int, deadline_ns: int | None, tick: Callable[[int], None],
            stopped: Callable[[], bool] = lambda: False) -> _PartResult:
        """Run from ``t0_ns`` (perf_counter_ns); ``tick(done)`` about five times a second from
        the calling thread, and once at the end; ``stopped()`` asks the threads to stop.
        Any exception here (Ctrl-C) stops the threads, waits a grace period and re-raises."""
        sh = self.shared
        sh.t0_ns, sh.deadline_ns = t0_ns, deadline_ns
        cpu0 = time.process_time()
        for r in self.requesters:
            r.start()
        try:
            running = True
            while running:  # at least one tick, the final one, however fast the run
                for r in self.requesters:
                    r.join(_PROGRESS_INTERVAL_S / len(self.requesters))
                running = any(r.is_alive() for r in self.requesters)
                if stopped():
                    sh.stop.set()
                tick(self.done())
        except BaseException:
            sh.stop.set()
            for r in self.requesters:  # a request blocked in the target cannot be interrupted:
                r.join(_STOP_GRACE_S)  # daemon threads, so give up after a grace period
            raise
        finished, cpu = time.perf_counter_ns(), time.process_time() - cpu0
        rs = self.requesters
        counts = RunCounts.of(
            np.concatenate([np.frombuffer(r.end_ns, dtype=np.int64) for r in rs]),
            np.concatenate([np.frombuffer(r.latency_ns, dtype=np.int64) for r in rs]),
            np.concatenate([np.frombuffer(r.ok, dtype=np.int8) for r in rs]).astype(bool))
        return _PartResult(counts, sum(r.rows for r in rs), sum(r.empty for r in rs),
                           tuple(sh.errors), finished, cpu)


def _threads_of(spec: ClientSpec, process: int) -> list[int]:
    return list(range(process, spec.threads, spec.processes))


# ------------------------------------------------------------------------- worker processes


@dataclass
class _Channels:
    """What the parent and its workers share; passed at process creation (picklable then)."""

    results: Any  # multiprocessing Queue of (process, kind, payload)
    start: Any  # Event: the start instant is set
    stop: Any  # Event: stop now (Ctrl-C in the parent, or a failed worker)
    clock: Any  # RawArray('q', 2): t0_ns, deadline_ns (or _NO_DEADLINE)
    done: Any  # RawArray('q', processes): requests done so far, per process
    # The read end of a pipe whose write end only the parent holds: it reads EOF once the
    # parent is gone, however it ended (kill -9 included).
    parent_alive: Any = None


def _end_with_parent(alive: Any) -> None:
    """In a worker: block until the parent is gone, then end the worker at once. Its requests
    may be waiting in the target without a deadline (a coordinator's buffered queries) and
    nobody is left to read their results (docs/RELIABILITY.md: no orphan of a killed client)."""
    try:
        alive.recv()
    except (EOFError, OSError):
        pass
    os._exit(1)


def _worker(source: TargetSource, spec: ClientSpec, process: int, ch: _Channels) -> None:
    """One worker process: open its target, get ready, run its threads, report."""
    # Ctrl-C reaches the whole process group; the parent decides, and sets ``stop``.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if ch.parent_alive is not None:
        threading.Thread(target=_end_with_parent, args=(ch.parent_alive,), daemon=True,
                         name="debl-client-parent").start()
    target = None
    try:
        target = source.open()
        part = _Part(target, spec, _threads_of(spec, process))
        ch.results.put((process, "ready", None))
        while not ch.start.wait(_PROGRESS_INTERVAL_S):
            if ch.stop.is_set():
                return
        if ch.stop.is_set():
            return
        if source.on_start is not None:
            source.on_start(target)
        t0, deadline = ch.clock[0], ch.clock[1]

        def tick(n: int) -> None:
            ch.done[process] = n

        result = part.run(t0, None if deadline == _NO_DEADLINE else deadline, tick,
                          ch.stop.is_set)
        report = source.report(target) if source.report is not None else None
        ch.results.put((process, "done", (result, report)))
    except BaseException as exc:  # noqa: BLE001 -- sent to the parent, which raises it
        ch.results.put((process, "failed", _portable(exc, process)))
    finally:
        if target is not None:
            try:
                target.close()
            except Exception:  # noqa: BLE001 -- the run's result is already sent
                pass


def _portable(exc: BaseException, process: int) -> DeblError:
    """An error the parent can unpickle and show: DeBL's own as they are (if they pickle: some
    take more than a message), others as a ServiceError naming them."""
    if isinstance(exc, DeblError):
        try:
            pickle.loads(pickle.dumps(exc))
            return exc
        except Exception:  # noqa: BLE001 -- fall back to its text
            return ServiceError(str(exc))
    return ServiceError(f"client worker process {process} failed: {type(exc).__name__}: {exc}")


def _run_processes(source: TargetSource, spec: ClientSpec,
                   progress: Progress | None) -> tuple[list[_PartResult], list[Any], int, float]:
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload([__name__])
    n = spec.processes
    # Only this process holds parent_alive's write end (kept open until the workers are
    # joined); the workers get the read end.
    alive_r, alive_w = ctx.Pipe(duplex=False)
    ch = _Channels(results=ctx.Queue(), start=ctx.Event(), stop=ctx.Event(),
                   clock=ctx.RawArray("q", 2), done=ctx.RawArray("q", n), parent_alive=alive_r)
    procs = [ctx.Process(target=_worker, args=(source, spec, i, ch), name=f"debl-client-p{i}",
                         daemon=True) for i in range(n)]
    results: dict[int, tuple[_PartResult, Any]] = {}

    def receive(kind_wanted: str, count: int, t0: int | None) -> None:
        got = 0
        while got < count:
            try:
                process, kind, payload = ch.results.get(timeout=_PROGRESS_INTERVAL_S)
            except queue.Empty:
                dead = [p for p in procs if not p.is_alive() and p.exitcode not in (0, None)]
                if dead:
                    raise ServiceError(f"client worker process {dead[0].name} died "
                                       f"(exit code {dead[0].exitcode}) before reporting")
            else:
                if kind == "failed":
                    raise payload
                if kind == "done":
                    results[process] = payload
                got += kind == kind_wanted
            if t0 is not None and progress is not None:
                progress(sum(ch.done), (time.perf_counter_ns() - t0) / 1e9)

    for p in procs:
        p.start()
    try:
        receive("ready", n, None)
        started_at = time.time()
        t0 = time.perf_counter_ns()
        ch.clock[0] = t0
        ch.clock[1] = (t0 + int(spec.duration * 1e9) if spec.duration is not None
                       else _NO_DEADLINE)
        ch.start.set()
        receive("done", n, t0)
    except BaseException:
        ch.stop.set()
        for p in procs:
            p.join(_STOP_GRACE_S)
            if p.is_alive():
                p.terminate()
        raise
    for p in procs:
        p.join(_STOP_GRACE_S)
    alive_w.close()  # the workers have ended: their watch may stop
    parts = [results[i][0] for i in range(n)]
    return parts, [results[i][1] for i in range(n)], t0, started_at


# --------------------------------------------------------------------------------- the client


def run_client(target: LinkListTarget | TargetSource, spec: ClientSpec,
               progress: Progress | None = None) -> ClientResult:
    """Run the requests of ``spec`` against ``target`` and summarize them.

    ``target`` is a live target (threads in this process; ``spec.processes`` must be 1; the
    caller closes it) or a ``TargetSource`` (opened, used and closed here, in this process when
    ``spec.processes == 1``, else once in each worker process).

    ``progress(done, elapsed_s)`` is called from the calling thread about five times a second
    (never from a worker, so a UI need not be thread-safe). Ctrl-C stops the workers (waiting
    at most a few seconds for requests in flight) and re-raises. A worker process that cannot
    open its target or dies stops the run with a ServiceError (or the worker's own DeblError).
    """
    reports: list[Any] = []
    if spec.processes > 1:
        if not isinstance(target, TargetSource):
            raise ConfigError("a client with several processes needs a TargetSource (each "
                              "process opens its own target); a live target cannot be shared")
        parts, reports, t0, started_at = _run_processes(target, spec, progress)
    else:
        source = target if isinstance(target, TargetSource) else None
        live = source.open() if source is not None else target
        try:
            part = _Part(live, spec, _threads_of(spec, 0))
            if source is not None and source.on_start is not None:
                source.on_start(live)
            started_at = time.time()
            t0 = time.perf_counter_ns()
            deadline = t0 + int(spec.duration * 1e9) if spec.duration is not None else None

            def tick(done: int) -> None:
                if progress is not None:
                    progress(done, (time.perf_counter_ns() - t0) / 1e9)

            parts = [part.run(t0, deadline, tick)]
            if source is not None and source.report is not None:
                reports = [source.report(live)]
        finally:
            if source is not None:
                live.close()

    counts = RunCounts.merge([p.counts for p in parts])
    errors = int(counts.second_errors.sum())
    completed = counts.latency.count
    if progress is not None:
        progress(completed + errors, (max(p.finished_ns for p in parts) - t0) / 1e9)
    samples: list[str] = []
    for p in parts:
        samples += [e for e in p.errors if e not in samples]
    seconds = int(np.ceil(spec.duration)) if spec.duration is not None else None
    return ClientResult(
        spec=spec, started_at=started_at,
        elapsed_s=(max(p.finished_ns for p in parts) - t0) / 1e9,
        completed=completed, errors=errors,
        rows=sum(p.rows for p in parts), empty=sum(p.empty for p in parts),
        cpu_s=sum(p.cpu_s for p in parts), latency=counts.latency.summary(), timeline=counts.timeline(seconds),
        error_samples=tuple(samples[:_MAX_ERROR_SAMPLES]), counts=counts,
        target_reports=tuple(reports))


def write_result(result: ClientResult, path: Path | str) -> Path:
    """Save a run for reports: ``*.csv`` gets the per-second timeline (second, completed,
    errors, mean_ms, p95_ms); anything else gets the whole result as JSON."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() == ".csv":
        with path.open("w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow([f.name for f in dataclasses.fields(TimelinePoint)])
            for p in result.timeline:
                writer.writerow(dataclasses.astuple(p))
    else:
        path.write_text(json.dumps(result.to_dict(), indent=2) + "\n")
    return path
