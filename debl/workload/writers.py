"""The query client's writer pool: W threads sending the mix's writes to the source database at a
fixed rate, open loop, beside the readers (docs/WORKLOAD.md, "The write rate").

Each writer holds one connection to the source (``debl.store.linkbench_writes``), opened before
the run starts, and sends its writes (``debl.workload.writes``) at the instants of its own
Poisson schedule (``debl.workload.pacing``, rate ``rate / W``): a writer that falls behind sends
at once, and a write's latency counts from its intended instant, so the rate the source could
not take shows in the latencies and in the rate held (writes acknowledged per second of the
run, against the rate asked). Every write is kept as a ``WriteRecord``: its key, its GTID,
whether it found and changed a row, and the client's monotonic instants (intended, sent,
acknowledged), which a check of fresh answers compares with the answers' (docs/FRESHNESS.md,
"The contract").

Pitfalls: instants are ``time.perf_counter_ns()`` and ``time.monotonic_ns()``, one clock on Linux
(``CLOCK_MONOTONIC``) for every process of the machine, the coordinator's included. The pool runs
in the client's calling process whatever the readers' processes. A write blocked in the
source cannot be interrupted: ``stop`` waits ``STOP_GRACE_S`` for the writers, then gives up.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import numpy as np

from debl.format.link import Link
from debl.store.linkbench_writes import SourceLinks, SourceSession, WriteAck
from debl.workload.latency import LatencyHistogram, LatencySummary
from debl.workload.mix import ADD_LINK, DELETE_LINK, WRITE_OPS, Mix
from debl.workload.pacing import PoissonSchedule
from debl.workload.requests import RequestSpec
from debl.workload.writes import WRITER_STREAMS, Write, WriteStream

STOP_GRACE_S = 5.0
MAX_ERROR_SAMPLES = 5


@dataclass(frozen=True)
class WriteRecord:
    """One write as the client saw it. Instants are CLOCK_MONOTONIC nanoseconds: ``intended``
    its place in the schedule; ``sent`` / ``acked`` just before its first statement and just
    after the commit returned (None when it failed before or there). ``gtid`` its commit's (None
    if it wrote nothing, failed, or the source keeps no binary log). ``row``: the row add_link
    and update_link wrote (the key's row after it, if it changed one); None for delete_link,
    which hides the row it finds (visibility 0, the rest kept)."""

    op: str
    id1: int
    link_type: int
    id2: int
    intended_ns: int
    sent_ns: int | None = None
    acked_ns: int | None = None
    gtid: str | None = None
    found: bool | None = None
    changed: bool | None = None
    error: str | None = None
    row: Link | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class WritesResult:
    """What the writer pool did: writes per operation (``latency`` from each write's intended
    instant to its acknowledgement, successful ones; ``errors``), the writes acknowledged per
    second of the schedule's span (``per_s``, ``elapsed_s`` from the start to the deadline or
    the stop, against ``rate`` asked: a Poisson count varies, more so in a short run) and the
    rate held (``held``: the share of the writes the schedule
    had due by the end that were acknowledged; ``behind`` those due and never sent).
    ``records`` every write (left out of ``to_dict``)."""

    rate: float
    writers: int
    elapsed_s: float
    completed: int
    errors: int
    behind: int
    latency: dict[str, LatencySummary]
    op_errors: dict[str, int]
    error_samples: tuple[str, ...]
    records: tuple[WriteRecord, ...] = field(default=(), repr=False, compare=False)

    @property
    def per_s(self) -> float:
        return self.completed / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def held(self) -> float:
        """The share of the writes due by the end that were acknowledged (1.0: held)."""
        due = self.completed + self.errors + self.behind
        return self.completed / due if due else 1.0

    @property
    def gtids(self) -> int:
        """The writes acknowledged with their commit's GTID."""
        return sum(r.gtid is not None for r in self.records)

    def to_dict(self) -> dict:
        return {"rate": self.rate, "writers": self.writers, "elapsed_s": self.elapsed_s,
                "completed": self.completed, "errors": self.errors, "behind": self.behind,
                "per_s": self.per_s, "held": self.held, "gtids": self.gtids,
                "error_samples": list(self.error_samples)}


def send(session: SourceSession, write: Write) -> WriteAck:
    """Send one write with LinkBench's semantics."""
    if write.op == DELETE_LINK:
        return session.delete_link(write.id1, write.link_type, write.id2)
    if write.link is None:
        raise ValueError(f"a {write.op} without the link's row to write")
    if write.op == ADD_LINK:
        return session.add_link(write.link)
    return session.update_link(write.link)


class _Writer(threading.Thread):
    def __init__(self, pool: "WriterPool", writer: int, session: SourceSession) -> None:
        super().__init__(name=f"debl-writer-{writer}", daemon=True)
        self.pool, self.session = pool, session
        self.stream = WriteStream(pool.mix, pool.requests, writer)
        # schedule WRITER_STREAMS + w of the seed: not a reader's
        self.schedule = PoissonSchedule(pool.rate / pool.writers, pool.requests.seed,
                                        WRITER_STREAMS + writer)
        self.records: list[WriteRecord] = []
        self.unsent: int | None = None  # the first scheduled instant not sent

    def run(self) -> None:
        pool = self.pool
        while True:
            intended = pool.t0_ns + next(self.schedule)
            self.unsent = intended
            if pool.deadline_ns is not None and intended >= pool.deadline_ns:
                return
            wait = (intended - time.perf_counter_ns()) / 1e9
            if (wait > 0 and pool.stopping.wait(wait)) or pool.stopping.is_set():
                return
            self.unsent = None
            write = self.stream.next_write()
            key = (write.op, write.id1, write.link_type, write.id2, intended)
            sent = time.monotonic_ns()
            try:
                ack = send(self.session, write)
            except Exception as exc:  # noqa: BLE001 -- counted, never fatal
                text = f"{type(exc).__name__}: {exc}"[:300]
                pool.sample_error(text)
                # Sent: whether it committed is unknown (a connection lost in its commit), and
                # the checker says so.
                self.records.append(WriteRecord(*key, sent_ns=sent, error=text, row=write.link))
                continue
            self.records.append(WriteRecord(*key, ack.sent_ns, ack.acked_ns, ack.gtid,
                                            ack.found, ack.changed, row=write.link))

    def due_unsent(self, until_ns: int) -> int:
        """Scheduled instants before *until_ns* it did not send (once it has stopped): the
        writes it fell behind by. 0 for a writer still stuck in a write (its schedule is its
        own)."""
        if self.is_alive():
            return 0
        due = 0
        instant = self.unsent
        while instant is not None and instant < until_ns:
            due += 1
            instant = self.pool.t0_ns + next(self.schedule)
        return due


class WriterPool:
    """*writers* threads sending *mix*'s writes to *source* at *rate* writes per second over
    all of them. Opens the writers' connections at once (ServiceError if the source cannot be
    reached); ``start(t0_ns, deadline_ns)`` at the run's start instant, ``stop()`` when the
    readers are done: the result. Use it with ``with``: leaving closes the connections."""

    def __init__(self, source: SourceLinks, mix: Mix, requests: RequestSpec, rate: float,
                 writers: int) -> None:
        self.mix, self.requests, self.rate, self.writers = mix, requests, rate, writers
        self.where = source.where
        self.t0_ns = 0
        self.deadline_ns: int | None = None  # (set by start)
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._errors: list[str] = []
        self._threads: list[_Writer] = []
        try:
            for w in range(writers):
                self._threads.append(_Writer(self, w, source.session()))
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> "WriterPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def sample_error(self, text: str) -> None:
        with self._lock:
            if len(self._errors) < MAX_ERROR_SAMPLES and text not in self._errors:
                self._errors.append(text)

    def start(self, t0_ns: int, deadline_ns: int | None) -> None:
        self.t0_ns, self.deadline_ns = t0_ns, deadline_ns
        for thread in self._threads:
            thread.start()

    def stop(self) -> WritesResult:
        """Stop sending (a write in flight is waited for) and sum up."""
        stopped = time.perf_counter_ns()
        self.stopping.set()
        for thread in self._threads:
            thread.join(STOP_GRACE_S)
        until = stopped if self.deadline_ns is None else min(stopped, self.deadline_ns)
        elapsed = (until - self.t0_ns) / 1e9  # the schedule's span: writes due in it are sent
        behind = sum(thread.due_unsent(until) for thread in self._threads)
        records = sorted((r for t in self._threads for r in t.records),
                         key=lambda r: r.intended_ns)
        latency, errors = {}, {}
        for op in WRITE_OPS:
            mine = [r for r in records if r.op == op]
            ns = np.array([r.acked_ns - r.intended_ns for r in mine  # acknowledged: the ok ones
                           if r.acked_ns is not None], dtype=np.int64)
            latency[op] = LatencyHistogram.of(ns).summary()
            errors[op] = sum(not r.ok for r in mine)
        completed = sum(r.ok for r in records)
        return WritesResult(self.rate, self.writers, elapsed, completed,
                            len(records) - completed, behind, latency, errors,
                            tuple(self._errors), tuple(records))

    def close(self) -> None:
        self.stopping.set()
        for thread in self._threads:
            thread.session.close()
