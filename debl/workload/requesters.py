"""The request loop: the threads of one client process (``Part``), each a requester replaying
its own request stream against the target, closed loop or at the instants of its own Poisson
schedule (docs/WORKLOAD.md); under a mix of reads each request is the read its draws choose
(``debl.workload.mix.ReadDraws``), on the same ``(id1, link_type)``. Each thread keeps its
completions in compact arrays; the part turns them into histograms (``RunCounts``, and one per
read) at the end, never keeping raw samples beyond the run. Each request runs in a record of
where its time went (``debl.measure.request_cost``); the process keeps its slowest and every
route's latencies (``debl.workload.tail``).

Pitfall: a request blocked inside the target cannot be interrupted; the threads are daemons, and
a stopped part waits ``STOP_GRACE_S`` for them before it gives up.
"""

from __future__ import annotations

import gc
import sys
import threading
import time
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from debl.measure import request_cost
from debl.workload.answer_log import AnswerLog, ThreadLog
from debl.workload.client_spec import ClientSpec, LinkListTarget
from debl.workload.latency import LatencyHistogram, RunCounts
from debl.workload.mix import COUNT_LINK, READ_OPS, ReadDraws, mix_named
from debl.workload.pacing import PoissonSchedule
from debl.workload.requests import RequestStream
from debl.workload.tail import TailCounts, TailKeeper, tail_capacity

MAX_ERROR_SAMPLES = 5
COUNT = READ_OPS.index(COUNT_LINK)
PROGRESS_INTERVAL_S = 0.2
STOP_GRACE_S = 5.0
# The interpreter's switch interval while requesters run (Python's default: 0.005 s). A thread
# whose answer came back (a socket, a read thread) waits for the interpreter lock up to one
# interval when others are busy; many threads handing work between them each wait that long
# (docs/WORKLOAD.md, "Worker processes").
SWITCH_INTERVAL_S = 0.001
# While the requesters run, the objects the process built before (its target: a coordinator's
# opened buckets, its connections; the request streams) are frozen out of the garbage
# collector: a full collection scanned them all, every thread stopped meanwhile, and such pauses
# overlapped most of the slowest answers (docs/WORKLOAD.md, "Worker processes").


class _Shared:
    """What the threads of one process share: the start instant, the deadline, the stop flag,
    the sampled errors, the slowest requests."""

    def __init__(self, tail: TailKeeper) -> None:
        self.t0_ns = 0
        self.deadline_ns: int | None = None
        self.stop = threading.Event()
        self._lock = threading.Lock()
        self.errors: list[str] = []
        self.tail = tail

    def sample_error(self, exc: BaseException) -> None:
        text = f"{type(exc).__name__}: {exc}"[:300]
        with self._lock:
            if len(self.errors) < MAX_ERROR_SAMPLES and text not in self.errors:
                self.errors.append(text)


class _Requester(threading.Thread):
    def __init__(self, thread: int, target: LinkListTarget, spec: ClientSpec,
                 shared: _Shared, log: ThreadLog | None = None) -> None:
        super().__init__(name=f"debl-client-{thread}", daemon=True)
        self.target, self.shared, self.log = target, shared, log
        self.quota = spec.quota(thread)
        self.stream = RequestStream(spec.requests, stream=thread)
        mix = mix_named(spec.mix)  # get_link_list alone: no draw, LinkBench's requests as ever
        self.reads = None if mix.only_get_link_list else ReadDraws(mix, spec.requests, thread)
        self.schedule = (PoissonSchedule(spec.rate / spec.threads, spec.requests.seed, thread)
                         if spec.rate else None)
        self.end_ns, self.latency_ns, self.ok = array("q"), array("q"), array("b")
        self.route, self.full_gc = array("b"), array("b")  # per request: route_of, a full GC
        self.op = array("b")  # per request: its place in READ_OPS
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
        try:
            self._run()
        finally:
            if self.log is not None:
                self.log.flush()

    def _run(self) -> None:
        sh, get, clock, log = (self.shared, self.target.get_link_list, time.perf_counter_ns,
                               self.log)
        t0, deadline, stop, schedule = sh.t0_ns, sh.deadline_ns, sh.stop, self.schedule
        begin, finish, tail, reads = request_cost.begin, request_cost.finish, sh.tail, self.reads
        calls: tuple[Callable[..., Any], ...] = (
            (get,) if reads is None else (get, self.target.count_link, self.target.multiget_link))
        op, more = 0, ()
        while self.quota is None or self.done < self.quota:
            if stop.is_set():
                return
            id1, link_type = next(self.stream)
            if reads is not None:
                op, more = reads.draw(id1, link_type)
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
            cost = begin()
            sent = clock()
            if schedule is not None:  # sent this late: the client's own queue, not the target's
                cost.spent[request_cost.LATE] = (sent - start) / 1e9
            result = None
            try:
                result = get(id1, link_type) if op == 0 else calls[op](id1, link_type, *more)
                ok = True
            except Exception as exc:  # noqa: BLE001 -- counted, never fatal
                ok = False
                sh.sample_error(exc)
            end = clock()
            finish()
            if log is not None:  # the instant it was sent, not the intended one (answer_log)
                log.add(op, id1, link_type, more[0] if more else (), sent, end, result, ok)
            route = tail.route_of(cost)
            if ok:
                n = 0  # count_link returns no link
                if op != COUNT:
                    n = len(result) if result is not None else 0
                    self.rows += n
                    self.empty += n == 0
                tail.offer(end - start, end - t0, id1, link_type, n, cost, route)
            self.end_ns.append(end - t0)
            self.latency_ns.append(end - start)
            self.ok.append(ok)
            self.op.append(op)
            self.route.append(route)
            self.full_gc.append(cost.gc_full > 0)
            self.done += 1


@dataclass(frozen=True)
class PartResult:
    """What one process's threads did; picklable, small (histograms, not samples)."""

    counts: RunCounts
    rows: int
    empty: int
    errors: tuple[str, ...]
    finished_ns: int  # perf_counter_ns when its last thread ended
    cpu_s: float  # this process's CPU time (user + system) during the run
    # ns since the run's start when its first successful request completed (None: none did);
    # errors and timeouts are not answers
    first_ok_ns: int | None = None
    tail: TailCounts | None = None  # its slowest requests and every route's latencies
    # per read (READ_OPS order): the successful requests' latencies, and the errors
    op_latency: tuple[LatencyHistogram, ...] = ()
    op_errors: tuple[int, ...] = ()


class Part:
    """The threads of one process, built (streams drawn, schedules seeded) before the start."""

    def __init__(self, target: LinkListTarget, spec: ClientSpec, threads: Sequence[int],
                 name: str = "target", process: int = 0) -> None:
        """*name*: the route of a request whose target names none (``debl.workload.tail``);
        *process*: this process's index, which names its answer log (``spec.answer_log``)."""
        self.shared = _Shared(TailKeeper(tail_capacity(spec.total), name))
        self.log = (AnswerLog(spec.answer_log, process, threads)
                    if spec.answer_log is not None else None)
        self.requesters = [_Requester(t, target, spec, self.shared,
                                      None if self.log is None else self.log.thread(t))
                           for t in threads]

    def done(self) -> int:
        return sum(r.done for r in self.requesters)

    def run(self, t0_ns: int, deadline_ns: int | None, tick: Callable[[int], None],
            stopped: Callable[[], bool] = lambda: False) -> PartResult:
        """Run from ``t0_ns`` (perf_counter_ns); ``tick(done)`` about five times a second from
        the calling thread, and once at the end; ``stopped()`` asks the threads to stop.
        Any exception here (Ctrl-C) stops the threads, waits a grace period and re-raises."""
        sh = self.shared
        sh.t0_ns, sh.deadline_ns = t0_ns, deadline_ns
        cpu0 = time.process_time()
        switch = sys.getswitchinterval()
        sys.setswitchinterval(SWITCH_INTERVAL_S)
        gc.freeze()
        request_cost.watch_gc()
        for r in self.requesters:
            r.start()
        try:
            running = True
            while running:  # at least one tick, the final one, however fast the run
                for r in self.requesters:
                    r.join(PROGRESS_INTERVAL_S / len(self.requesters))
                running = any(r.is_alive() for r in self.requesters)
                if stopped():
                    sh.stop.set()
                tick(self.done())
        except BaseException:
            sh.stop.set()
            for r in self.requesters:  # a request blocked in the target cannot be interrupted:
                r.join(STOP_GRACE_S)  # daemon threads, so give up after a grace period
            raise
        finally:
            sys.setswitchinterval(switch)
            gc.unfreeze()
            if self.log is not None:
                self.log.close()
        finished, cpu = time.perf_counter_ns(), time.process_time() - cpu0
        rs = self.requesters

        def joined(name: str, dtype) -> np.ndarray:
            return np.concatenate([np.frombuffer(getattr(r, name), dtype=dtype) for r in rs])

        end_ns, latency_ns = joined("end_ns", np.int64), joined("latency_ns", np.int64)
        ok = joined("ok", np.int8).astype(bool)
        counts = RunCounts.of(end_ns, latency_ns, ok)
        first_ok = int(end_ns[ok].min()) if ok.any() else None
        tail = sh.tail.counts(latency_ns, joined("route", np.int8), ok,
                              joined("full_gc", np.int8).astype(bool))
        ops = joined("op", np.int8)
        return PartResult(counts, sum(r.rows for r in rs), sum(r.empty for r in rs),
                          tuple(sh.errors), finished, cpu, first_ok, tail,
                          tuple(LatencyHistogram.of(latency_ns[ok & (ops == k)])
                                for k in range(len(READ_OPS))),
                          tuple(int((~ok & (ops == k)).sum()) for k in range(len(READ_OPS))))


def threads_of(spec: ClientSpec, process: int) -> list[int]:
    """The threads of worker process *process*: every P-th from it (P = ``spec.processes``)."""
    return list(range(process, spec.threads, spec.processes))
