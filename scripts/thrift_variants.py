#!/usr/bin/env python
"""The Thrift path under other settings of the Thrift server and its clients (docs/BENCHMARKS.md,
"The Thrift path and its variants"): the query client's requests through ``HBaseStore`` against
the stack's Thrift server as configured (binary protocol, buffered transport) and against a
second Thrift1 server started here with the compact protocol and the framed transport (``-c
-f``), the happybase connections set to match; alternated, ``--rounds`` times each.

    python scripts/thrift_variants.py --threads 50 --requests 50000 --max-id 4002910 \\
        --recency-share 0.9 [--table TABLE] [--rounds 2] [--port 9091]

The table defaults to the current load's HBase table. Worker processes (``--processes``, one
per core by default) each run their share of the threads, as ``debl query`` does. The second
server is stopped at the end. Prints one line per run: variant, req/s, p50 / p99 / max ms.
"""

from __future__ import annotations

import argparse
import functools
import multiprocessing
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from debl.catalog import Catalog  # noqa: E402
from debl.config import load_config  # noqa: E402
from debl.stack.hbase import HBase  # noqa: E402
from debl.workload.client_spec import ClientSpec  # noqa: E402
from debl.workload.requesters import threads_of  # noqa: E402
from debl.workload.requests import RequestSpec, RequestStream  # noqa: E402

VARIANTS = {"binary, buffered (the stack's)": {},
            "compact, framed": {"protocol": "compact", "transport": "framed"}}


def _worker(config, table: str, spec: ClientSpec, process: int, port: int, options: dict,
            out) -> None:
    import happybase

    from debl.store.hbase import HBaseStore

    if options:  # every connection the store's pool opens speaks the variant's protocol
        happybase.ConnectionPool = functools.partial(happybase.ConnectionPool, **options)
    store = HBaseStore(config.replace(hbase_thrift_port=port), table=table, pool_size=64)
    mine = threads_of(spec, process)
    latencies: list[list[int]] = [[] for _ in mine]
    store.get_link_list(1, 123456789)  # the pool's first connection, before the clock

    def run(k: int, thread: int) -> None:
        stream = RequestStream(spec.requests, stream=thread)
        for _ in range(spec.quota(thread) or 0):
            id1, link_type = next(stream)
            t0 = time.perf_counter_ns()
            store.get_link_list(id1, link_type)
            latencies[k].append(time.perf_counter_ns() - t0)

    sys.setswitchinterval(0.001)  # as the query client (debl.workload.requesters)
    threads = [threading.Thread(target=run, args=(k, t)) for k, t in enumerate(mine)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out.put((time.perf_counter() - started, [x for lat in latencies for x in lat]))
    store.close()


def run_variant(config, table: str, spec: ClientSpec, port: int, options: dict) -> dict:
    context = multiprocessing.get_context("fork")  # this process holds no thread or JVM
    out = context.Queue()
    procs = [context.Process(target=_worker, args=(config, table, spec, p, port, options, out))
             for p in range(spec.processes)]
    for p in procs:
        p.start()
    results = [out.get() for _ in procs]
    for p in procs:
        p.join()
    wall = max(r[0] for r in results)
    ms = np.array([x for r in results for x in r[1]]) / 1e6
    return {"requests": len(ms), "req_s": len(ms) / wall, "p50_ms": float(np.percentile(ms, 50)),
            "p99_ms": float(np.percentile(ms, 99)), "max_ms": float(ms.max())}


def _wait_port(port: int, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 1).close()
            return
        except OSError:
            time.sleep(0.5)
    sys.exit(f"the second Thrift server did not listen on {port} within {timeout:.0f} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--processes", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--max-id", type=int, required=True)
    parser.add_argument("--start-id", type=int, default=1)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--recency-share", type=float, default=0.0)
    parser.add_argument("--table", help="default: the current load's HBase table")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--port", type=int, help="the second server's (default: Thrift's + 1)")
    args = parser.parse_args()
    config = load_config()
    table = args.table
    if table is None:
        with Catalog(config) as catalog:
            load = catalog.loads.current()
        if load is None:
            sys.exit("no load is current: load the input first, or pass --table")
        table = load.namespace.hbase_table
    spec = ClientSpec(RequestSpec(max_id=args.max_id, start_id=args.start_id, seed=args.seed,
                                  recency_share=args.recency_share),
                      threads=args.threads, total=args.requests, processes=args.processes)
    port = args.port or config.hbase.thrift_port + 1
    hbase = HBase(config)
    log = open(hbase.home / "thrift-variant.log", "ab")
    server = subprocess.Popen(hbase.java_argv(
        "org.apache.hadoop.hbase.thrift.ThriftServer", "-b", config.hbase.thrift_bind,
        "-p", str(port), "-c", "-f", "start", heap="256m"), stdout=log, stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        _wait_port(port)
        for round_ in range(args.rounds):
            for name, options in VARIANTS.items():
                r = run_variant(config, table, spec, port if options else
                                config.hbase.thrift_port, options)
                print(f"round {round_ + 1}, {name}: {r['req_s']:,.0f} req/s; p50 "
                      f"{r['p50_ms']:.2f} / p99 {r['p99_ms']:.1f} / max {r['max_ms']:.0f} ms",
                      flush=True)
    finally:
        server.terminate()
        server.wait(30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
