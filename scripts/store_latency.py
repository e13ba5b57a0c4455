#!/usr/bin/env python
"""Micro benchmark of get_link_list on each store: single thread, latency percentiles.

Writes --links links (default 100,000) over --id1s id1 values (default 10,000; out-degrees
drawn from a Pareto-like distribution, mean about links/id1s) plus one heavy id1 with --heavy
links, through each store's write_links, then runs --queries random default queries
(``get_link_list(id1, link_type)``: limit 10,000, full time range) on uniformly drawn id1s, and
two series on the heavy id1: the default query and one with limit=10 (LIMIT pushdown).

Run from the repository root with the local stack up (tables are its own, dropped at the end
unless --keep):

    python scripts/store_latency.py [--stores mysql,hbase,memory] [--links N] [--queries Q]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from debl.config import load_config  # noqa: E402
from debl.format.link import Link, Origin  # noqa: E402
from debl.store.base import LinkStore  # noqa: E402
from debl.store.memory import MemoryStore  # noqa: E402

LT = 123456789
HEAVY_ID1 = 10_000_000


def make_links(n: int, id1s: int, heavy: int, seed: int) -> list[Link]:
    rnd = random.Random(seed)
    weights = [rnd.paretovariate(1.5) for _ in range(id1s)]
    scale = n / sum(weights)
    links = []
    for id1, w in enumerate(weights, start=1):
        for id2 in rnd.sample(range(1, 10_000_000), max(1, round(w * scale))):
            links.append(_link(rnd, id1, id2))
    links += [_link(rnd, HEAVY_ID1, id2) for id2 in range(1, heavy + 1)]
    return links


def _link(rnd: random.Random, id1: int, id2: int) -> Link:
    data = bytes(rnd.randrange(32, 101) for _ in range(rnd.randrange(0, 40)))
    return Link(id1, LT, id2, int(rnd.random() < 0.97), data,
                1_300_000_000_000 + rnd.randrange(10**10), rnd.randrange(3))


def open_store(kind: str, table: str) -> LinkStore:
    config = load_config()
    if kind == "mysql":
        from debl.store.mysql import MySQLStore
        return MySQLStore(config, table=table)
    if kind == "hbase":
        from debl.store.hbase import HBaseStore
        return HBaseStore(config, table=table)
    return MemoryStore()


def percentiles(ms: list[float]) -> str:
    ms = sorted(ms)
    pick = lambda q: ms[min(len(ms) - 1, int(q * len(ms)))]  # noqa: E731
    return (f"p50 {pick(0.50):7.2f}  p90 {pick(0.90):7.2f}  p99 {pick(0.99):7.2f}  "
            f"max {ms[-1]:7.2f}  mean {statistics.fmean(ms):7.2f} ms")


def timed(store: LinkStore, queries: list[tuple[int, int]], **kw: int) -> tuple[list[float], int]:
    out, rows = [], 0
    for id1, lt in queries:
        t0 = time.perf_counter()
        rows += len(store.get_link_list(id1, lt, **kw))
        out.append((time.perf_counter() - t0) * 1000)
    return out, rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stores", default="mysql,hbase")
    ap.add_argument("--links", type=int, default=100_000)
    ap.add_argument("--id1s", type=int, default=10_000)
    ap.add_argument("--heavy", type=int, default=50_000)
    ap.add_argument("--queries", type=int, default=2000)
    ap.add_argument("--heavy-queries", type=int, default=50)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--table", default="latency_links")
    ap.add_argument("--keep", action="store_true", help="keep the tables")
    args = ap.parse_args()

    links = make_links(args.links, args.id1s, args.heavy, args.seed)
    rnd = random.Random(args.seed + 1)
    queries = [(rnd.randrange(1, args.id1s + 1), LT) for _ in range(args.queries)]
    heavy = [(HEAVY_ID1, LT)] * args.heavy_queries
    print(f"{len(links)} links ({args.heavy} on id1 {HEAVY_ID1}), {args.id1s} id1s, "
          f"{args.queries} queries, single thread")
    for kind in args.stores.split(","):
        with open_store(kind, args.table) as store:
            store.reset()
            t0 = time.perf_counter()
            for i in range(0, len(links), 5000):
                store.write_links((l, Origin(0, 0, i + j)) for j, l in enumerate(links[i:i + 5000]))
            load = time.perf_counter() - t0
            timed(store, queries[:200])  # warm caches and connections
            ms, rows = timed(store, queries)
            print(f"{kind:6} write_links {load:6.1f} s, {store.count()} rows")
            print(f"  default query, random id1 ({rows / len(ms):.1f} rows): {percentiles(ms)}")
            ms, rows = timed(store, heavy)
            print(f"  heavy id1, limit 10000 ({rows // len(ms)} rows):  {percentiles(ms)}")
            ms, rows = timed(store, heavy, limit=10)
            print(f"  heavy id1, limit 10 ({rows // len(ms)} rows):        {percentiles(ms)}")
            if not args.keep and hasattr(store, "drop_table"):
                store.drop_table()


if __name__ == "__main__":
    main()
