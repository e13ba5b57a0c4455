"""The client's worker processes (``ClientSpec.processes`` > 1): each opens its own target from a
``TargetSource``, runs its share of the threads (thread ``t`` in process ``t % P``) from one
common start instant, and sends back histograms; a worker ends with its parent, however the
parent ended, and the parent ends a run whose worker died, however it died.

Pitfalls: workers start with ``forkserver`` (never ``fork``: the caller may hold threads, a JVM
or open sockets), preloaded with this module; the start instant is a ``perf_counter_ns`` value,
``CLOCK_MONOTONIC`` on Linux, one clock for every process of the machine. The parent and each
worker talk over a pipe of their own, never over a lock they share (a ``multiprocessing`` Queue,
Event or Lock): a worker killed while it held one left it held for good, and the parent's next
``stop.set()`` waited for ever (docs/RELIABILITY.md, "Kill campaign").
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import signal
import threading
import time
from multiprocessing.connection import wait
from collections.abc import Callable
from typing import Any

from debl.errors import DeblError, ServiceError
from debl.workload.client_spec import ClientSpec, Progress, TargetSource
from debl.workload.requesters import (PROGRESS_INTERVAL_S, STOP_GRACE_S, Part, PartResult,
                                      threads_of)


def _end_with_parent(alive: Any) -> None:
    """In a worker: block until the parent is gone, then end the worker at once. Its requests
    may be waiting in the target without a deadline (a coordinator's buffered queries) and
    nobody is left to read their results (docs/RELIABILITY.md: no orphan of a killed client)."""
    try:
        alive.recv()
    except (EOFError, OSError):
        pass
    os._exit(1)


def _worker(source: TargetSource, spec: ClientSpec, process: int, parent: Any, done: Any,
            alive: Any) -> None:
    """One worker process: open its target, report ready, wait for the start instant, run its
    threads, report. *parent*: its end of its pipe to the parent, which sends ``(t0, deadline)``
    to start and anything later to stop; *done*: requests done so far, per process (shared
    memory without a lock); *alive*: the read end of a pipe whose write end only the parent
    holds (it reads EOF once the parent is gone, however it ended: kill -9 included)."""
    # Ctrl-C reaches the whole process group; the parent decides, and says stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_end_with_parent, args=(alive,), daemon=True,
                     name="debl-client-parent").start()
    target = None
    try:
        target = source.open()
        part = Part(target, spec, threads_of(spec, process), source.name, process)
        parent.send(("ready", None))
        start = parent.recv()
        if start is None:  # stopped before the start
            return
        if source.on_start is not None:
            source.on_start(target)
        t0, deadline = start

        def tick(n: int) -> None:
            done[process] = n

        result = part.run(t0, deadline, tick, parent.poll)
        report = source.report(target) if source.report is not None else None
        parent.send(("done", (result, report)))
    except BaseException as exc:  # noqa: BLE001 -- sent to the parent, which raises it
        try:
            parent.send(("failed", _portable(exc, process)))
        except OSError:  # the parent is gone: nobody to tell
            pass
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


def _died(process: Any) -> ServiceError:
    """The error of a worker that ended without its report."""
    process.join(STOP_GRACE_S)  # its pipe may close a moment before it is reaped
    code = process.exitcode
    how = (f"killed by signal {-code}" if code is not None and code < 0
           else f"exit code {code}")
    return ServiceError(f"client worker process {process.name} (pid {process.pid}) died "
                        f"({how}) before reporting; the run is stopped (its requests' results "
                        f"are lost): run the client again")


def run_processes(source: TargetSource, spec: ClientSpec, progress: Progress | None,
                  started: Callable[[int, int | None], None] | None = None,
                  ) -> tuple[list[PartResult], list[Any], int, float]:
    """Run *spec* over ``spec.processes`` workers: their parts' results and target reports (in
    process order), the start instant (``perf_counter_ns``) and the start in epoch seconds. A
    worker that fails raises its error here; one that dies raises a ServiceError naming it,
    within a poll interval of its death; either way the others are stopped.
    ``started(t0_ns, deadline_ns)``, if given, is called in this process at the start instant
    (the writer pool starts there)."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload([__name__])
    n = spec.processes
    # Only this process holds alive_w (kept open until the workers are joined); each worker
    # gets alive_r and its own pipe's end.
    alive_r, alive_w = ctx.Pipe(duplex=False)
    done = ctx.RawArray("q", n)
    pipes = [ctx.Pipe() for _ in range(n)]
    procs = [ctx.Process(target=_worker, args=(source, spec, i, pipes[i][1], done, alive_r),
                         name=f"debl-client-p{i}", daemon=True) for i in range(n)]
    conns = [mine for mine, _ in pipes]
    results: dict[int, tuple[PartResult, Any]] = {}

    def receive(kind_wanted: str, t0: int | None) -> None:
        """Until every worker sent *kind_wanted*: a message, or its pipe's end, or its
        process's end, whichever comes first, wakes this up."""
        waiting = set(range(n))
        while waiting:
            wait([conns[i] for i in waiting] + [procs[i].sentinel for i in waiting],
                 PROGRESS_INTERVAL_S)
            for i in sorted(waiting):
                if conns[i].poll():  # a message (read before its sender's end) or EOF
                    try:
                        kind, payload = conns[i].recv()
                    except (EOFError, OSError):  # its pipe closed: a message cut short too
                        raise _died(procs[i]) from None
                    if kind == "failed":
                        raise payload
                    if kind == "done":
                        results[i] = payload
                    if kind == kind_wanted:
                        waiting.discard(i)
                elif not procs[i].is_alive():
                    raise _died(procs[i])
            if t0 is not None and progress is not None:
                progress(sum(done), (time.perf_counter_ns() - t0) / 1e9)

    def tell(message: Any) -> None:
        for conn in conns:
            try:
                conn.send(message)
            except OSError:  # that worker is gone already
                pass

    try:
        for p, (_, theirs) in zip(procs, pipes):
            p.start()
            theirs.close()  # the worker holds its end: its death closes the pipe
        receive("ready", None)
        started_at = time.time()
        t0 = time.perf_counter_ns()
        deadline = t0 + int(spec.duration * 1e9) if spec.duration is not None else None
        tell((t0, deadline))
        if started is not None:
            started(t0, deadline)
        receive("done", t0)
    except BaseException:
        tell(None)
        for p in procs:
            if p.is_alive():
                p.join(STOP_GRACE_S)
            if p.is_alive():
                p.terminate()
                p.join(STOP_GRACE_S)
            if p.is_alive():  # the interpreter's exit would join it without a limit
                p.kill()
        raise
    for p in procs:
        p.join(STOP_GRACE_S)
    alive_w.close()  # the workers have ended: their watch may stop
    parts = [results[i][0] for i in range(n)]
    return parts, [results[i][1] for i in range(n)], t0, started_at
