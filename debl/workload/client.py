"""A LinkBench-style request client: T threads calling ``get_link_list``, over P processes;
with a mix (``debl.workload.mix``) the readers send LinkBench's other reads too, and a writer
pool its writes to the source database (``debl.workload.writers``).

Closed loop by default, as LinkBench's requesters: each thread sends its next request as soon as
the previous one returns. With ``rate`` the client is open loop: each thread sends at the instants
of its own Poisson schedule (``debl.workload.pacing``, mean rate ``rate / threads``), a thread
that falls behind sends at once, and latency counts from the intended instant, so a stall shows
in the percentiles as every user who arrived during it would see it.

Processes. Python threads share one interpreter lock, so one process's requests per second stop
growing however many threads wait on sockets (docs/WORKLOAD.md, "Worker processes": where). With
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
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from debl.errors import ConfigError
from debl.store.linkbench_writes import SourceLinks
from debl.workload.answer_log import prepare_dir
from debl.workload.client_processes import run_processes
from debl.workload.client_spec import (ClientSpec, LinkListTarget, Progress, TargetSource,
                                       default_processes)
from debl.workload.latency import LatencyHistogram, LatencySummary, RunCounts, TimelinePoint
from debl.workload.mix import READ_OPS, mix_named
from debl.workload.requesters import MAX_ERROR_SAMPLES, Part, threads_of
from debl.workload.tail import TailCounts
from debl.workload.writers import WriterPool, WritesResult

# The client's API; the spec and the target's source are defined in debl.workload.client_spec.
__all__ = ["ClientResult", "ClientSpec", "LinkListTarget", "Progress", "TargetSource",
           "default_processes", "run_client", "write_result"]


@dataclass(frozen=True)
class ClientResult:
    """One run. ``completed``, ``errors``, ``latency`` and ``timeline`` count the readers'
    requests (every read of the mix; ``operations`` has each operation apart, the writes
    included, and ``writes`` the writer pool's run); latencies cover successful requests only;
    ``started_at`` is epoch seconds, timeline seconds count from it. ``first_answer_s``: when
    the first successful request completed, in seconds since ``started_at`` to the clock's
    resolution (the timeline's seconds only bound it); None if none succeeded: errors and
    timeouts are not answers. ``counts`` holds the merged histograms the figures come from,
    ``tail`` the slowest requests and every route's latencies (``debl.workload.tail``: its
    ``breakdown()``); ``to_dict`` leaves them and ``target_reports`` out."""

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
    first_answer_s: float | None = None
    counts: RunCounts | None = field(default=None, repr=False, compare=False)
    target_reports: tuple[Any, ...] = field(default=(), repr=False, compare=False)
    tail: TailCounts | None = field(default=None, repr=False, compare=False)
    # per operation sent (``debl.workload.mix``: the reads, then the writes): the successful
    # ones' latencies (a write's from its intended instant), and the errors
    operations: dict[str, LatencySummary] = field(default_factory=dict)
    operation_errors: dict[str, int] = field(default_factory=dict)
    writes: WritesResult | None = None  # the writer pool's run, its records, the rate held

    @property
    def throughput(self) -> float:
        """Successful requests per second over the whole run."""
        return self.completed / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def to_dict(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
             if f.name not in ("counts", "target_reports", "tail", "writes")}
        d = json.loads(json.dumps(d, default=_plain))
        d["throughput"] = self.throughput
        if self.writes is not None:
            d["writes"] = self.writes.to_dict()
        return d


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    raise TypeError(f"not serializable: {type(value).__name__}")


def run_client(target: LinkListTarget | TargetSource, spec: ClientSpec,
               progress: Progress | None = None,
               writes_to: SourceLinks | None = None) -> ClientResult:
    """Run the requests of ``spec`` against ``target`` and summarize them; with a mix that has
    writes, its writer pool sends them to *writes_to* (the source database) from the run's
    start instant until the readers are done (``debl.workload.writers``).

    ``target`` is a live target (threads in this process; ``spec.processes`` must be 1; the
    caller closes it) or a ``TargetSource`` (opened, used and closed here, in this process when
    ``spec.processes == 1``, else once in each worker process).

    ``progress(done, elapsed_s)`` is called from the calling thread about five times a second
    from the run's start instant on, never before it (while worker processes get ready), and
    never from a worker, so a UI need not be thread-safe. Ctrl-C stops the workers (waiting
    at most a few seconds for requests in flight) and re-raises. A worker process that cannot
    open its target or dies stops the run with a ServiceError (or the worker's own DeblError).
    """
    if spec.processes > 1 and not isinstance(target, TargetSource):
        raise ConfigError("a client with several processes needs a TargetSource (each "
                          "process opens its own target); a live target cannot be shared")
    mix = mix_named(spec.mix)
    pool = None
    if mix.write_share:
        if writes_to is None:
            raise ConfigError(f"--mix {spec.mix} sends writes: name the source database they "
                              "go to (a SourceLinks; `debl query` takes the source_db settings)")
        rate = spec.writes_per_s
        assert rate is not None  # a ClientSpec whose mix writes has a rate (it checks)
        pool = WriterPool(writes_to, mix, spec.requests, rate, spec.writers)
    if spec.answer_log is not None:
        prepare_dir(spec.answer_log)
    try:
        result = _run(target, spec, progress, pool)
    finally:
        if pool is not None:
            pool.close()
    return result


def _run(target: LinkListTarget | TargetSource, spec: ClientSpec, progress: Progress | None,
         pool: WriterPool | None) -> ClientResult:
    reports: list[Any] = []
    if spec.processes > 1:
        assert isinstance(target, TargetSource)  # run_client refuses a live one
        parts, reports, t0, started_at = run_processes(
            target, spec, progress, None if pool is None else pool.start)
    else:
        source = target if isinstance(target, TargetSource) else None
        live: Any = source.open() if source is not None else target
        try:
            part = Part(live, spec, threads_of(spec, 0),
                        source.name if source is not None else type(live).__name__)
            if source is not None and source.on_start is not None:
                source.on_start(live)
            started_at = time.time()
            t0 = time.perf_counter_ns()
            deadline = t0 + int(spec.duration * 1e9) if spec.duration is not None else None

            def tick(done: int) -> None:
                if progress is not None:
                    progress(done, (time.perf_counter_ns() - t0) / 1e9)

            if pool is not None:
                pool.start(t0, deadline)
            parts = [part.run(t0, deadline, tick)]
            if source is not None and source.report is not None:
                reports = [source.report(live)]
        finally:
            if source is not None:
                live.close()

    writes = pool.stop() if pool is not None else None
    counts = RunCounts.merge([p.counts for p in parts])
    operations, operation_errors = {}, {}
    for k, op in enumerate(READ_OPS):
        histogram = LatencyHistogram.merge([p.op_latency[k] for p in parts])
        errors_k = sum(p.op_errors[k] for p in parts)
        if histogram.count or errors_k:
            operations[op], operation_errors[op] = histogram.summary(), errors_k
    if writes is not None:
        operations.update(writes.latency)
        operation_errors.update(writes.op_errors)
    errors = int(counts.second_errors.sum())
    completed = counts.latency.count
    if progress is not None:
        progress(completed + errors, (max(p.finished_ns for p in parts) - t0) / 1e9)
    samples: list[str] = []
    for p in parts:
        samples += [e for e in p.errors if e not in samples]
    seconds = int(np.ceil(spec.duration)) if spec.duration is not None else None
    firsts = [p.first_ok_ns for p in parts if p.first_ok_ns is not None]
    return ClientResult(
        spec=spec, started_at=started_at,
        elapsed_s=(max(p.finished_ns for p in parts) - t0) / 1e9,
        completed=completed, errors=errors,
        rows=sum(p.rows for p in parts), empty=sum(p.empty for p in parts),
        cpu_s=sum(p.cpu_s for p in parts), latency=counts.latency.summary(),
        timeline=counts.timeline(seconds),
        error_samples=tuple(samples[:MAX_ERROR_SAMPLES]),
        first_answer_s=min(firsts) / 1e9 if firsts else None, counts=counts,
        target_reports=tuple(reports),
        tail=TailCounts.merge([p.tail for p in parts if p.tail is not None]),
        operations=operations, operation_errors=operation_errors, writes=writes)


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
