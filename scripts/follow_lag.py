"""The follower's lag under a steady write rate: from each write's commit to its capture in the
change log (docs/FRESHNESS.md, "Measured: the follower's lag").

    python scripts/follow_lag.py [--rate 1000] [--seconds 60] [--writers 4] [--json]

On the configured stack (``debl stack up`` first), in a namespace of its own (the source's
table ``lagbench``, the catalog ``<mysql_database>_lag``): the table made anew with a few rows,
every load of the namespace dropped, the table dumped and loaded (``debl source dump``, ``debl
load --no-hot``: the position the follower starts at), then ``debl follow`` started and, once
it follows, *writers* connections write LinkBench's ``add_link`` of new keys at *rate* writes
a second in all (each its own transaction, one change each) for *seconds*; the follower is
stopped once it has caught up.

Per change it prints two lags: **acked** = its ``captured_ts`` minus the instant the writer's
commit returned (``time.time()`` in this process; the commit happened just before, so this is
the commit-to-capture time within a fraction of a millisecond), and **log** = ``captured_ts``
minus ``commit_ts``, the commit time the source's log gives, which has whole seconds (so it
reads up to a second high). Also the writes held per second, the catalog transactions, the
follower's CPU seconds meanwhile and the machine's load average (a shared machine's other work
shows in the lag, not in the CPU seconds).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import psutil

from debl.catalog import Catalog
from debl.config import load_config
from debl.format.link import Link
from debl.position import parse_gtid
from debl.store import source_db
from debl.store.linkbench_writes import SourceLinks
from loaders.cleanup import drop_every_load

TABLE = "lagbench"


def debl_service(config, *argv: str, log: Path) -> subprocess.Popen:
    """``debl ARGV`` in a session of its own, as a service runs (with the kernel's autogroup
    scheduling, a session shares the cores with the others as one)."""
    out = open(log, "ab")
    return subprocess.Popen([sys.executable, "-m", "debl", *argv], env=config.child_env(),
                            stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def run_debl(config, *argv: str, log: Path) -> None:
    if debl_service(config, *argv, log=log).wait() != 0:
        sys.exit(f"debl {' '.join(argv)} failed: see {log}")


def _cpu_s(pid: int) -> float:
    """The CPU seconds (user + system) process *pid* has used (psutil)."""
    t = psutil.Process(pid).cpu_times()
    return t.user + t.system


def _follower(config):
    with Catalog(config) as catalog:
        return next(iter(catalog.changes.followers()), None)


def _writer(links: SourceLinks, rate: float, deadline: float, first_id1: int,
            acks: list) -> None:
    """add_link of new keys at *rate* writes a second (fixed pacing) until *deadline*."""
    offset = time.time() - time.monotonic()
    pause, n = 1.0 / rate, 0
    start = time.monotonic()
    with links.session() as session:
        while (due := start + n * pause) < deadline:
            wait = due - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            link = Link(first_id1 + n, 1, 1, 1, b"lag", int(time.time() * 1000), 0)
            ack = session.add_link(link)
            if ack.gtid is None:
                raise SystemExit(f"{links.where} keeps no binary log: there is nothing to follow")
            acks.append((parse_gtid(ack.gtid)[2], ack.acked_ns / 1e9 + offset))
            n += 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", type=float, default=1000.0)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--writers", type=int, default=4)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    base = load_config()
    config = base.replace(source_db_table=TABLE, mysql_database=f"{base.mysql.database}_lag",
                          mysql_link_table="lag_links", hbase_table="lag_links",
                          hdfs_root=f"{base.hdfs.root.rstrip('/')}-lag")
    work = Path(tempfile.mkdtemp(prefix="debl-follow-lag-"))
    log = work / "commands.log"
    conn = source_db.connect(config)
    with conn.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS `{TABLE}`")
        cur.execute(source_db.table_ddl(TABLE))
        cur.executemany(f"INSERT INTO `{TABLE}` VALUES (%s, 1, 1, 1, 'x', 1, 0)",
                        [(i,) for i in range(1, 101)])
    conn.close()
    Catalog(config, replace_older=True).close()  # made if missing (or of an older DeBL)
    drop_every_load(config)  # the follower starts at this run's dump
    run_debl(config, "source", "dump", str(work / "dump"), "--files", "2", log=log)
    run_debl(config, "load", str(work / "dump"), "--no-hot", log=log)
    follower = debl_service(config, "follow", log=log)
    while (f := _follower(config)) is None or f.state != "following":
        if follower.poll() is not None:
            sys.exit(f"debl follow ended: see {log}")
        time.sleep(0.2)
    links = SourceLinks(config.source_db_url(with_password=True), TABLE)
    acks: list[list] = [[] for _ in range(args.writers)]
    deadline = time.monotonic() + args.seconds
    threads = [threading.Thread(target=_writer, args=(links, args.rate / args.writers, deadline,
                                                      10**9 * (w + 1), acks[w]))
               for w in range(args.writers)]
    cpu = _cpu_s(follower.pid)
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    written = sorted(a for w in acks for a in w)
    while _follower(config).seq < written[-1][0]:
        time.sleep(0.1)
    cpu = _cpu_s(follower.pid) - cpu
    after = _follower(config)
    os.kill(follower.pid, signal.SIGTERM)
    follower.wait(60)
    with Catalog(config) as catalog:
        changes, _ = catalog.changes.since(after.source, written[0][0] - 1, limit=10**7)
    by_seq = {c.seq: c for c in changes}
    acked = np.array([by_seq[s].captured_ts - t for s, t in written]) * 1000
    logged = np.array([by_seq[s].captured_ts - by_seq[s].commit_ts for s, _ in written]) * 1000

    def summary(ms: np.ndarray) -> dict:
        return {q: round(float(np.percentile(ms, p)), 2)
                for q, p in (("p50_ms", 50), ("p99_ms", 99), ("max_ms", 100))}

    result = {"rate": args.rate, "seconds": args.seconds, "writers": args.writers,
              "writes": len(written), "held_per_s": round(len(written) / args.seconds, 1),
              # a batch's changes share their captured_ts
              "catalog_transactions": len({by_seq[s].captured_ts for s, _ in written}),
              "follower_cpu_s": round(cpu, 1), "load_average": os.getloadavg()[0],
              "lag_acked": summary(acked), "lag_log": summary(logged)}
    if args.json:
        print(json.dumps(result, indent=2))
        return
    a, g = result["lag_acked"], result["lag_log"]
    print(f"{result['writes']:,} writes in {args.seconds:g} s ({result['held_per_s']:,}/s "
          f"held, {args.rate:g}/s asked), captured in {result['catalog_transactions']:,} "
          f"catalog transactions; the follower used {result['follower_cpu_s']} CPU s "
          f"(load average {result['load_average']:.1f})")
    print(f"lag from the commit's acknowledgement: p50 {a['p50_ms']} ms, p99 {a['p99_ms']} ms, "
          f"max {a['max_ms']} ms")
    print(f"lag from the log's commit time (whole seconds): p50 {g['p50_ms']} ms, p99 "
          f"{g['p99_ms']} ms, max {g['max_ms']} ms")


if __name__ == "__main__":
    main()
