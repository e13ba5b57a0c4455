"""The worker side of scripts/tail_profile.py: a query target that records, per request, where
its time went (docs/BENCHMARKS.md, "The tool: scripts/tail_profile.py").

Imported by name in the query client's worker processes (forkserver: the scripts directory is
on their ``sys.path`` because it is on the parent's), so it must not be run as ``__main__``.

Per request it keeps: the start (``perf_counter_ns``, one clock for every process of the
machine) and the latency; for the coordinator the answer's route, hot side and buffered wait;
the thread's own CPU time (``time.thread_time_ns``: the rest of the latency is waiting, for a
socket, a read thread or the interpreter lock); and the time spent in each step of the stores:
``open`` (a raw bucket opened on the query's path), ``listing`` (the raw bucket's listing
check), ``hdfs`` (raw reads, the call's wall time), ``read_wait`` (of which waiting for a read
thread), ``hbase`` (Thrift calls), ``mysql`` (MySQL reads). Garbage collections of the process
are kept as (start, end) spans, to be laid over the requests afterwards.

Pitfall: the counters cost a few microseconds per step; compare runs made with this tracer with
each other, not with ``debl bench`` alone.
"""

from __future__ import annotations

import gc
import threading
import time

STEPS = ("open", "listing", "hdfs", "read_wait", "hbase", "mysql")
ROUTES = ("-", "mysql", "merged", "raw", "partial", "hbase")  # "hbase": the HBase target
HOTS = ("-", "mysql", "raw", "none")

_local = threading.local()
_gc_spans: list[tuple[int, int]] = []
_gc_started = [0]
_instrumented = [False]
_opened: dict[str, float] = {}  # epoch seconds: the worker's start, its target's open and ready


def _add(key: str, ns: int) -> None:
    spent = getattr(_local, "spent", None)
    if spent is not None:
        spent[key] = spent.get(key, 0) + ns


def _timed(owner, name: str, key: str) -> None:
    original = getattr(owner, name)

    def wrapper(*args, **kwargs):
        t = time.perf_counter_ns()
        try:
            return original(*args, **kwargs)
        finally:
            _add(key, time.perf_counter_ns() - t)
    setattr(owner, name, wrapper)


def _on_gc(phase: str, info: dict) -> None:
    if phase == "start":
        _gc_started[0] = time.perf_counter_ns()
    elif _gc_started[0]:
        _gc_spans.append((_gc_started[0], time.perf_counter_ns()))


def instrument() -> None:
    """Counters around the stores' steps, once per process."""
    if _instrumented[0]:
        return
    _instrumented[0] = True
    import coordinator.raw as raw
    import debl.hdfs.calls as calls
    import debl.hdfs.client as reads
    from debl.store.mysql import MySQLStore

    _timed(raw.RawReader, "_read_files", "open")
    _timed(raw.RawReader, "_check_listing", "listing")
    _timed(reads.HdfsClient, "read_many", "hdfs")
    run = calls.CallThreads.run  # every call's way to the read threads

    def timed_run(self, calls, what):
        submitted = time.perf_counter_ns()
        spent = getattr(_local, "spent", None)

        def waited(fn):
            def call(*args):
                if spent is not None:  # the query thread's dict, from the read thread
                    spent["read_wait"] = spent.get("read_wait", 0) + (
                        time.perf_counter_ns() - submitted)
                return fn(*args)
            return call
        return run(self, [(waited(fn), args) for fn, args in calls], what)
    calls.CallThreads.run = timed_run  # type: ignore[method-assign]  # the profile patches it
    _timed(MySQLStore, "_read", "mysql")
    try:
        from debl.store.hbase import HBaseStore
        _timed(HBaseStore, "_run", "hbase")
    except ImportError:  # no HBase client: nothing of it to count
        pass
    gc.callbacks.append(_on_gc)


class TracedTarget:
    """A target whose ``get_link_list`` records each request (``records``)."""

    def __init__(self, target, name: str) -> None:
        self.target, self.name = target, name
        self.records: list[tuple] = []
        self._query = getattr(target, "query", None) if name == "debl" else None

    def __getattr__(self, attr):  # reset_stats, wait_counters, id_range, wait_warm ...
        return getattr(self.target, attr)

    def get_link_list(self, id1: int, link_type: int):
        spent: dict[str, int] = {}
        _local.spent = spent
        t0, c0 = time.perf_counter_ns(), time.thread_time_ns()
        route = hot = 0
        waited = 0.0
        try:
            if self._query is not None:
                answer = self._query(id1, link_type)
                links = answer.links
                route = ROUTES.index(getattr(answer.route, "value", answer.route))
                hot = HOTS.index(getattr(answer.hot, "value", answer.hot))
                waited = answer.waited_s
            else:
                links = self.target.get_link_list(id1, link_type)
                route = ROUTES.index("hbase") if self.name == "hbase" else ROUTES.index("mysql")
            return links
        finally:
            t1, c1 = time.perf_counter_ns(), time.thread_time_ns()
            _local.spent = None
            self.records.append((t0, t1 - t0, c1 - c0, route, hot, int(waited * 1e9),
                                 *(spent.get(s, 0) for s in STEPS)))

    def close(self) -> None:
        self.target.close()


def open_traced(config, name: str, options: dict) -> TracedTarget:
    """In a worker: instrument, then open the target as ``debl.workload.targets`` does."""
    _opened["open"] = time.time()
    instrument()
    from debl.workload.targets import open_target
    target = TracedTarget(open_target(config, name, **options), name)
    _opened["ready"] = time.time()
    return target


def on_start(target: TracedTarget) -> None:
    reset = getattr(target.target, "reset_stats", None)
    if reset is not None:
        reset()
    target.records.clear()
    _gc_spans.clear()


def report(target: TracedTarget) -> dict:
    counters = getattr(target.target, "wait_counters", None)
    return {"counters": counters() if counters is not None else None,
            "records": target.records, "gc": list(_gc_spans),
            "clock": (time.perf_counter_ns(), time.time()), "opened": dict(_opened)}
