"""The client's worker processes (``ClientSpec.processes`` > 1): each opens its own target from a
``TargetSource``, runs its share of the threads (thread ``t`` in process ``t % P``) from one
common start instant, and sends back histograms; a worker ends with its parent, however the
parent ended.

Pitfalls: workers start with ``forkserver`` (never ``fork``: the caller may hold threads, a JVM
or open sockets), preloaded with this module; the start instant is a ``perf_counter_ns`` value,
``CLOCK_MONOTONIC`` on Linux, one clock for every process of the machine.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import queue
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from debl.errors import DeblError, ServiceError
from debl.workload.client_spec import ClientSpec, Progress, TargetSource
from debl.workload.requesters import (PROGRESS_INTERVAL_S, STOP_GRACE_S, Part, PartResult,
                                      threads_of)

_NO_DEADLINE = -1


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
        part = Part(target, spec, threads_of(spec, process), source.name)
        ch.results.put((process, "ready", None))
        while not ch.start.wait(PROGRESS_INTERVAL_S):
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


def run_processes(source: TargetSource, spec: ClientSpec, progress: Progress | None,
                  started: Callable[[int, int | None], None] | None = None,
                  ) -> tuple[list[PartResult], list[Any], int, float]:
    """Run *spec* over ``spec.processes`` workers: their parts' results and target reports (in
    process order), the start instant (``perf_counter_ns``) and the start in epoch seconds.
    ``started(t0_ns, deadline_ns)``, if given, is called in this process at the start instant
    (the writer pool starts there)."""
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
    results: dict[int, tuple[PartResult, Any]] = {}

    def receive(kind_wanted: str, count: int, t0: int | None) -> None:
        got = 0
        while got < count:
            try:
                process, kind, payload = ch.results.get(timeout=PROGRESS_INTERVAL_S)
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
        if started is not None:
            started(t0, None if ch.clock[1] == _NO_DEADLINE else ch.clock[1])
        receive("done", n, t0)
    except BaseException:
        ch.stop.set()
        for p in procs:
            p.join(STOP_GRACE_S)
            if p.is_alive():
                p.terminate()
        raise
    for p in procs:
        p.join(STOP_GRACE_S)
    alive_w.close()  # the workers have ended: their watch may stop
    parts = [results[i][0] for i in range(n)]
    return parts, [results[i][1] for i in range(n)], t0, started_at
