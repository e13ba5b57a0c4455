#!/usr/bin/env python
"""Where a raw answer's time goes: LinkBench requests through coordinators whose every answer is
raw (no gen_HF has run), with counters around the reader's steps (docs/COORDINATOR.md, "Where a
raw answer's time goes").

Runs --threads closed-loop threads over --processes worker processes, each with its own
Coordinator (as ``debl query --target debl`` does), for --requests requests, and prints per
query: HDFS calls (ranges, bytes, latency, and the wait for a read thread), bucket opens and
the wait for them, listing checks, the filters' test, the key's run search, line parsing, the
block cache's hits, the client's CPU; with ``--watch PID`` also the CPU each of those processes
(the NameNode, the DataNode) used during the run. The slowest 1% of queries are broken down the
same way.

``--without STEP`` (repeatable) runs the reader with one of its optimisations undone, for an A/B
of what each buys: ``filters`` (each file's filter tested alone, all 7 positions computed),
``search`` (the key's run found by a regular expression scanning the block), ``pool`` (a single
read on the query's own thread, unbounded). (``native``, reads through WebHDFS by path, went
with DeBL's WebHDFS client.)

    DEBL_COORDINATOR_RAW_AFTER=0 python scripts/raw_profile.py --threads 16 --requests 20000 \\
        --max-id 4002910 [--recency-share 0.9] [--watch NAMENODE_PID DATANODE_PID]

Pitfall: the counters cost about 100 µs of the client's CPU per query; compare runs made with
this script with each other, not with ``debl query``. ``--without`` patches the reader's
functions in the worker processes: it is a measurement, not a way to run DeBL.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import re
import sys
import threading
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import psutil  # noqa: E402

WITHOUT = ("filters", "search", "pool")
_local = threading.local()
_lock = threading.Lock()
_counts: Counter = Counter()  # counts, and seconds (floats add all the same)


def _add(key: str, seconds: float, size: int = 0) -> None:
    with _lock:
        _counts[key + "_s"] += seconds  # type: ignore[assignment]
        _counts[key + "_n"] += 1
        _counts[key + "_b"] += size
    spent = getattr(_local, "spent", None)
    if spent is not None:
        spent[key] = spent.get(key, 0.0) + seconds


def _timed(owner, name: str, key: str, size=None) -> None:
    """Wrap owner.name to count its calls, their time (and *size* of their arguments)."""
    original = getattr(owner, name)

    def wrapper(*args, **kwargs):
        started = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            _add(key, time.perf_counter() - started, size(*args) if size else 0)
    setattr(owner, name, wrapper)


def _instrument(without: set[str]) -> None:
    """Counters around the reader's steps; the optimisations in *without* undone."""
    import coordinator.raw as raw
    import coordinator.raw_listing as listing
    import coordinator.raw_scan as scan
    import debl.hdfs.calls as calls
    import debl.hdfs.client as reads
    from debl.format.bucket_file import bloom_holds

    if "filters" in without:
        def holding(self, id1, link_type):
            return [i for i, (bloom, _) in enumerate(self._filters)
                    if bloom_holds(bloom, id1, link_type)]
        scan.FileFilters.holding = holding  # type: ignore[method-assign]  # the profile patches it
    if "search" in without:
        def key_lines(data, id1, link_type):
            run = re.compile(rb"(?m)^(?:0*%d\t0*%d\t[^\n]*\n)+" % (id1, link_type)).search(data)
            return run.group().split(b"\n")[:-1] if run else []
        raw.key_lines = key_lines
    if "pool" in without:
        many = reads.HdfsClient.read_many

        def read_many(self, ranges):
            return [reads.read_file(*ranges[0])] if len(ranges) == 1 else many(self, ranges)
        reads.HdfsClient.read_many = read_many  # type: ignore[method-assign]  # the profile patches it

    run = calls.CallThreads.run  # every call's way to the read threads

    def timed_run(self, calls, what):
        submitted = time.perf_counter()

        def waited(fn):
            def call(*args):
                _add("thread_wait", time.perf_counter() - submitted)
                return fn(*args)
            return call
        return run(self, [(waited(fn), args) for fn, args in calls], what)
    calls.CallThreads.run = timed_run  # type: ignore[method-assign]  # the profile patches it
    _timed(reads.HdfsClient, "read_many", "hdfs_call")
    _timed(reads, "read_file", "hdfs_range", lambda f, offset, length: length)
    raw.read_file = reads.read_file
    _timed(raw.RawReader, "_open", "bucket")
    _timed(raw.RawReader, "_read_files", "bucket_open")
    _timed(listing.ListingChecks, "check", "listing")
    _timed(scan.FileFilters, "holding", "filters")
    _timed(raw, "key_lines", "key_run")
    _timed(raw, "parse_row", "parse")


def _worker(args, part: int, out) -> None:
    from coordinator import Coordinator
    from debl.config import load_config
    from debl.workload.requests import RequestSpec, RequestStream

    _instrument(set(args.without))
    with Coordinator(load_config()) as coordinator:
        coordinator.wait_until_up(60)
        coordinator.wait_warm(60)  # as `debl query` does: its buckets opened before it starts
        spec = RequestSpec(max_id=args.max_id, start_id=args.start_id, seed=args.seed,
                           recency_share=args.recency_share)
        latencies: list[float] = []
        slowest: list[tuple[float, dict]] = []
        mine = list(range(part, args.threads, args.processes))

        def run(thread: int) -> None:
            stream = RequestStream(spec, stream=thread)
            for _ in range(args.requests // args.threads):
                id1, link_type = next(stream)
                _local.spent = {}
                started = time.perf_counter()
                coordinator.get_link_list(id1, link_type)
                took = time.perf_counter() - started
                with _lock:
                    latencies.append(took)
                    slowest.append((took, _local.spent))
        threads = [threading.Thread(target=run, args=(t,)) for t in mine]
        cpu, started = time.process_time(), time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        slowest.sort(key=lambda x: -x[0])
        cache = coordinator._raw.cache  # noqa: SLF001 -- a profile reads the reader's counters
        out.put((dict(_counts), latencies, wall, cpu, cache.hits, cache.misses,
                 slowest[:max(1, len(slowest) // 100)]))


def _cpu_s(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--processes", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--max-id", type=int, required=True)
    parser.add_argument("--start-id", type=int, default=1)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--recency-share", type=float, default=0.0)
    parser.add_argument("--without", action="append", default=[], choices=WITHOUT)
    parser.add_argument("--watch", type=int, nargs="*", default=[],
                        help="pids whose CPU during the run is reported (NameNode, DataNode)")
    args = parser.parse_args()
    context = multiprocessing.get_context("forkserver")
    out = context.Queue()
    before = {pid: _cpu_s(pid) for pid in args.watch}
    workers = [context.Process(target=_worker, args=(args, p, out))
               for p in range(args.processes)]
    for w in workers:
        w.start()
    results = [out.get() for _ in workers]
    for w in workers:
        w.join()
    watched = {pid: _cpu_s(pid) - cpu for pid, cpu in before.items()}
    _report(args, results, watched)
    return 0


def _report(args, results, watched: dict[int, float]) -> None:
    counts: Counter = Counter()
    latencies, slowest = [], []
    wall = cpu = hits = misses = 0.0
    for c, lat, w, u, h, m, slow in results:
        counts.update(c)
        latencies += lat
        slowest += slow
        wall, cpu, hits, misses = max(wall, w), cpu + u, hits + h, misses + m
    ms = np.array(latencies) * 1000
    n = len(ms)
    print(f"{n:,} queries, {args.threads} threads in {args.processes} processes, without "
          f"{','.join(args.without) or 'nothing'}: {n / wall:,.0f} req/s; latency p50 "
          f"{np.percentile(ms, 50):.2f} p99 {np.percentile(ms, 99):.1f} max {ms.max():.0f} ms; "
          f"client CPU {cpu / n * 1e6:.0f} µs per query")
    for pid, used in watched.items():
        print(f"  process {pid}: {used / n * 1e6:.0f} µs of CPU per query")
    print(f"  block cache: {hits / max(hits + misses, 1):.0%} of block lookups hit")
    print(f"  {'step':12s} {'per query':>10s} {'µs/query':>9s} {'µs/call':>8s}")
    for key in sorted({k[:-2] for k in counts}):
        calls, seconds = counts[key + "_n"], counts[key + "_s"]
        print(f"  {key:12s} {calls / n:10.3f} {seconds / n * 1e6:9.0f} "
              f"{seconds / max(calls, 1) * 1e6:8.0f}"
              + (f"  ({counts[key + '_b'] / max(calls, 1):,.0f} bytes each)"
                 if counts[key + "_b"] else ""))
    spent: Counter = Counter()
    for took, parts in slowest:
        spent.update(parts)
        spent["total"] += took
    k = len(slowest)
    print(f"  slowest 1% ({k} queries), ms per query: " + ", ".join(
        f"{name} {seconds / k * 1000:.1f}" for name, seconds in spent.most_common()))


if __name__ == "__main__":
    sys.exit(main())
