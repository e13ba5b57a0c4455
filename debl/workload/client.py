"""A LinkBench-style request client: T threads calling ``get_link_list`` on one target.

Closed loop by default, as LinkBench's requesters: each thread sends its next request as soon as
the previous one returns. With ``rate`` the client is open loop: each thread sends at Poisson
arrival times with mean rate ``rate / threads`` (LinkBench's ``requestrate``), and a thread that
falls behind sends at once without sleeping until it has caught up; latency is measured from the
actual send, as LinkBench does.

The target is any object with ``get_link_list(id1, link_type)``: a ``LinkStore`` or the
coordinator. It must be safe to share between threads (the coordinator is; a store should hold a
connection per thread). A request that raises is counted as an error with its message sampled,
never fatal: a run against a half-loaded system reports errors instead of dying.

Pitfall: latencies are wall-clock per request in this process, so with many threads on few cores
the GIL and the client's own work are part of what is measured. For a Python target (the memory
store) that dominates; for MySQL and HBase the threads mostly wait on sockets.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import threading
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from debl.errors import ConfigError
from debl.workload.latency import LatencySummary, TimelinePoint, timeline
from debl.workload.requests import RequestSpec, RequestStream

_MAX_ERROR_SAMPLES = 5
_PROGRESS_INTERVAL_S = 0.2
_STOP_GRACE_S = 5.0

Progress = Callable[[int, float], None]  # (requests done, seconds elapsed)


class LinkListTarget(Protocol):
    def get_link_list(self, id1: int, link_type: int) -> Any: ...


@dataclass(frozen=True)
class ClientSpec:
    """How to drive the target. At least one of ``total`` (requests over all threads) and
    ``duration`` (seconds); with both, the run stops at whichever comes first."""

    requests: RequestSpec
    threads: int = 1
    total: int | None = 1000
    duration: float | None = None
    rate: float | None = None  # requests per second over all threads; None: closed loop

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


@dataclass(frozen=True)
class ClientResult:
    """One run. ``latency`` and ``timeline`` latencies cover successful requests only;
    ``started_at`` is epoch seconds, timeline seconds count from it."""

    spec: ClientSpec
    started_at: float
    elapsed_s: float
    completed: int
    errors: int
    rows: int  # links returned, over all successful requests
    empty: int  # successful requests that returned no link
    latency: LatencySummary
    timeline: tuple[TimelinePoint, ...]
    error_samples: tuple[str, ...]

    @property
    def throughput(self) -> float:
        """Successful requests per second over the whole run."""
        return self.completed / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["throughput"] = self.throughput
        return d


class _Worker(threading.Thread):
    def __init__(self, index: int, target: LinkListTarget, spec: ClientSpec, quota: int | None,
                 shared: "_Shared") -> None:
        super().__init__(name=f"debl-client-{index}", daemon=True)
        self.target, self.quota, self.shared = target, quota, shared
        self.stream = RequestStream(spec.requests, stream=index)
        self.gap = spec.threads / spec.rate if spec.rate else None
        self.arrivals = np.random.default_rng([spec.requests.seed, index, 0xA221])
        self.end_s, self.latency_ms, self.ok = array("d"), array("d"), array("b")
        self.done = self.rows = self.empty = 0

    def _wait_turn(self, next_at: float) -> bool:
        """Sleep until ``next_at``; False if the run ends first."""
        sh = self.shared
        while True:
            now = time.perf_counter()
            if next_at <= now:
                return True
            if sh.deadline is not None and next_at >= sh.deadline:
                return False
            if sh.stop.wait(next_at - now):
                return False

    def run(self) -> None:
        sh = self.shared
        next_at, gaps = sh.t0, iter(())
        while self.quota is None or self.done < self.quota:
            if sh.stop.is_set() or (sh.deadline is not None and time.perf_counter() >= sh.deadline):
                return
            if self.gap is not None:
                gap = next(gaps, None)
                if gap is None:
                    gaps = iter(self.arrivals.exponential(self.gap, 1024).tolist())
                    gap = next(gaps)
                next_at += gap
                if not self._wait_turn(next_at):
                    return
            id1, link_type = next(self.stream)
            start = time.perf_counter()
            try:
                result = self.target.get_link_list(id1, link_type)
                ok = True
            except Exception as exc:  # noqa: BLE001 -- counted, never fatal
                ok = False
                sh.sample_error(exc)
            end = time.perf_counter()
            if ok:
                n = len(result) if result is not None else 0
                self.rows += n
                self.empty += n == 0
            self.end_s.append(end - sh.t0)
            self.latency_ms.append((end - start) * 1000.0)
            self.ok.append(ok)
            self.done += 1


class _Shared:
    def __init__(self) -> None:
        self.t0 = 0.0
        self.deadline: float | None = None
        self.stop = threading.Event()
        self._lock = threading.Lock()
        self.errors: list[str] = []

    def sample_error(self, exc: BaseException) -> None:
        text = f"{type(exc).__name__}: {exc}"[:300]
        with self._lock:
            if len(self.errors) < _MAX_ERROR_SAMPLES and text not in self.errors:
                self.errors.append(text)


def run_client(target: LinkListTarget, spec: ClientSpec,
               progress: Progress | None = None) -> ClientResult:
    """Run the requests of ``spec`` against ``target`` and summarize them.

    ``progress(done, elapsed_s)`` is called from the calling thread about five times a second
    (never from a worker, so a UI need not be thread-safe). Ctrl-C stops the workers (waiting
    at most a few seconds for requests in flight) and re-raises.
    """
    shared = _Shared()
    quotas: list[int | None]
    if spec.total is None:
        quotas = [None] * spec.threads
    else:
        quotas = [spec.total // spec.threads + (i < spec.total % spec.threads)
                  for i in range(spec.threads)]
    workers = [_Worker(i, target, spec, quotas[i], shared) for i in range(spec.threads)]
    started_at = time.time()
    shared.t0 = time.perf_counter()
    if spec.duration is not None:
        shared.deadline = shared.t0 + spec.duration
    for w in workers:
        w.start()
    try:
        running = True
        while running:  # at least one report, the final one, however fast the run
            for w in workers:
                w.join(_PROGRESS_INTERVAL_S / len(workers))
            running = any(w.is_alive() for w in workers)
            if progress is not None:
                progress(sum(w.done for w in workers), time.perf_counter() - shared.t0)
    except BaseException:
        shared.stop.set()
        for w in workers:  # a request blocked in the target cannot be interrupted: daemon
            w.join(_STOP_GRACE_S)  # threads, so give up waiting after a grace period
        raise
    elapsed = time.perf_counter() - shared.t0

    end_s = np.concatenate([np.frombuffer(w.end_s, dtype=np.float64) for w in workers])
    lat = np.concatenate([np.frombuffer(w.latency_ms, dtype=np.float64) for w in workers])
    ok = np.concatenate([np.frombuffer(w.ok, dtype=np.int8) for w in workers]).astype(bool)
    seconds = int(np.ceil(spec.duration)) if spec.duration is not None else None
    return ClientResult(
        spec=spec, started_at=started_at, elapsed_s=elapsed,
        completed=int(ok.sum()), errors=int((~ok).sum()),
        rows=sum(w.rows for w in workers), empty=sum(w.empty for w in workers),
        latency=LatencySummary.of(lat[ok]),
        timeline=timeline(end_s, lat, ok, seconds),
        error_samples=tuple(shared.errors))


def write_result(result: ClientResult, path: Path | str) -> Path:
    """Save a run for reports: ``*.csv`` gets the per-second timeline (second, completed,
    errors, mean_ms, p95_ms); anything else gets the whole result as JSON."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() == ".csv":
        with path.open("w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow([field.name for field in dataclasses.fields(TimelinePoint)])
            for p in result.timeline:
                writer.writerow(dataclasses.astuple(p))
    else:
        path.write_text(json.dumps(result.to_dict(), indent=2) + "\n")
    return path
