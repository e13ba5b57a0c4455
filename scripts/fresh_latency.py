#!/usr/bin/env python
"""Read latency of fresh answers with freshness on, serial and off, under writes at the source
(docs/FRESHNESS.md, "Measured: fresh answers' read latency").

    python scripts/fresh_latency.py --mix linkbench --read-rate 300 --write-rate 100 \\
        --threads 16 --writers 4 --seconds 60 --modes off,on,serial --rounds 2

On the configured stack (``debl stack up`` first), in a namespace of its own (the source's
table ``freshbench``, the catalog ``<mysql_database>_fresh``): the source filled from
``debl generate`` files (``--max-id``; ``debl source db init``), dumped (``debl source dump``)
and the dump loaded (``debl load``: hot keys in MySQL, cold buckets read raw, none converted),
then ``debl follow`` started; ``--reuse`` keeps a load made by an earlier run (its follower's
change log too). Then, in a process of their own, ``--writers`` connections send the mix's
writes (LinkBench's add_link, update_link, delete_link: ``debl.workload.writers``) to the
source at ``--write-rate``, captured by the follower, while this process reads: the mix's reads
(get_link_list, count_link, multiget_link in LinkBench's shares; ``--mix update-heavy``) through
one coordinator, open loop at ``--read-rate`` over ``--threads`` threads, each latency counted
from its intended instant. Each mode of ``--modes`` (``fresh.mode``) runs ``--warmup`` seconds
uncounted then ``--seconds``, with a coordinator of its own, in turn, ``--rounds`` times.

Printed, one JSON line per mode and round: the reads, errors, p50/p99/max latency, the reads'
CPU per read in this process and what the coordinator applied on demand and in the
background; at the end the writes held per second and the follower's lag from each write's
acknowledgement to its capture (p50/p99/max; the change log's ``captured_ts``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from coordinator import Coordinator, CountLink, LinkList, MultigetLink  # noqa: E402
from debl.catalog import Catalog  # noqa: E402
from debl.config import load_config  # noqa: E402
from debl.position import parse_gtid  # noqa: E402
from debl.store.linkbench_writes import SourceLinks  # noqa: E402
from follow_lag import debl_service, run_debl  # noqa: E402  (this script's directory)
from debl.workload.mix import READ_OPS, ReadDraws, mix_named  # noqa: E402
from debl.workload.requests import RequestSpec, RequestStream  # noqa: E402
from debl.workload.writers import WriterPool  # noqa: E402
from loaders.cleanup import drop_every_load  # noqa: E402

TABLE = "freshbench"
CATCH_UP_S = 120.0


def _namespace(base):
    return base.replace(source_db_table=TABLE, mysql_database=f"{base.mysql.database}_fresh",
                        mysql_link_table="fresh_links", hbase_table="fresh_links",
                        hdfs_root=f"{base.hdfs.root.rstrip('/')}-fresh")


def _follower(config, source: str):
    with Catalog(config) as catalog:
        return catalog.changes.follower(source)


def _current(config):
    with Catalog(config) as catalog:
        load = catalog.loads.current()
    return None if load is None or load.position is None else load


def prepare(config, args, work: Path) -> None:
    """The source filled from generated files, dumped, and the dump loaded (see the module)."""
    log = work / "commands.log"
    Catalog(config, replace_older=True).close()  # made if missing (or of an older DeBL)
    drop_every_load(config)
    run_debl(config, "generate", str(work / "input"), "--max-id", str(args.max_id), "--files", "4",
         "--days", "4", "--seed", str(args.seed), log=log)
    run_debl(config, "source", "db", "init", str(work / "input"), "--replace", log=log)
    run_debl(config, "source", "dump", str(work / "dump"), "--files", str(args.files), log=log)
    run_debl(config, "load", str(work / "dump"), log=log)


def reader(c: Coordinator, spec: RequestSpec, mix, stream: int, rate: float, until: float,
           latencies: list, errors: list) -> None:
    requests, draws = RequestStream(spec, stream), ReadDraws(mix, spec, stream)
    rng = random.Random(stream)
    next_at = time.monotonic()
    while True:
        next_at += rng.expovariate(rate)
        if next_at >= until:
            return
        pause = next_at - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        id1, link_type = next(requests)
        op, args = draws.draw(id1, link_type)
        operation = (LinkList(id1, link_type) if READ_OPS[op] == "get_link_list" else
                     CountLink(id1, link_type) if READ_OPS[op] == "count_link" else
                     MultigetLink(id1, link_type, *args))
        try:
            c.ask(operation, timeout=30)
        except Exception as exc:  # noqa: BLE001 -- counted, a sample kept
            errors.append(f"{type(exc).__name__}: {exc}"[:200])
            continue
        latencies.append(time.monotonic() - next_at)


def run_mode(config, mode: str, args, spec: RequestSpec, mix, round_no: int) -> dict:
    latencies: list[float] = []
    errors: list[str] = []
    with Coordinator(config.replace(fresh_mode=mode)) as c:
        load_id = c.load_id
        assert load_id is not None  # _current found it
        # first a warm-up, not counted: the ranges read, the stores' connections opened
        for phase, (period, kept) in enumerate(((args.warmup, []), (args.seconds, latencies))):
            cpu = time.process_time()
            until = time.monotonic() + period
            threads = [threading.Thread(target=reader, args=(
                c, spec, mix, 1000 * round_no + 100 * phase + t, args.read_rate / args.threads,
                until, kept, errors)) for t in range(args.threads)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        cpu = time.process_time() - cpu
        counts = c.fresh.published(load_id)
    ms = (np.percentile(np.array(latencies) * 1000, [50, 99, 100]) if latencies
          else [None, None, None])
    return {"mode": mode, "round": round_no, "reads": len(latencies), "errors": len(errors),
            "error_sample": errors[:3], "p50_ms": ms[0], "p99_ms": ms[1], "max_ms": ms[2],
            "reads_per_s": len(latencies) / args.seconds,
            "cpu_ms_per_read": 1000 * cpu / max(len(latencies), 1), "fresh": counts}


def write_process(args) -> None:
    """The writers, in a process of their own (as a client's are), until stdin closes; then,
    once the follower has captured the last write, the writes per second and the capture
    lag printed as one JSON line."""
    config = load_config()  # the parent's namespace, from its environment (child_env)
    mix = mix_named(args.mix)
    spec = RequestSpec(max_id=args.max_id_loaded, start_id=args.start_id, seed=args.seed)
    source = SourceLinks(config.source_db_url(with_password=True), config.source_db.table)
    offset = time.time() - time.monotonic()  # CLOCK_MONOTONIC -> epoch seconds
    with WriterPool(source, mix, spec, args.write_rate, args.writers) as pool:
        pool.start(time.perf_counter_ns(), None)
        sys.stdin.read()
        result = pool.stop()
    acked = {parse_gtid(r.gtid)[2]: r.acked_ns / 1e9 + offset for r in result.records
             if r.gtid is not None and r.acked_ns is not None}
    lag = {}
    if acked:
        load = _current(config)
        deadline = time.monotonic() + CATCH_UP_S
        while (f := _follower(config, load.position.source)) is None or f.seq < max(acked):
            if time.monotonic() > deadline:
                sys.exit(f"the follower did not capture seq {max(acked)} in {CATCH_UP_S} s")
            time.sleep(0.1)
        with Catalog(config) as catalog:
            changes, _ = catalog.changes.since(load.position.source, min(acked) - 1,
                                               limit=10**7)
        captured = {c.seq: c.captured_ts for c in changes}
        ms = np.array([captured[s] - t for s, t in acked.items() if s in captured]) * 1000
        lag = {q: round(float(np.percentile(ms, p)), 2)
               for q, p in (("p50_ms", 50), ("p99_ms", 99), ("max_ms", 100))}
    print(json.dumps({"writes": result.completed, "errors": result.errors,
                      "writes_per_s": round(result.per_s, 1), "write_rate": args.write_rate,
                      "capture_lag": lag}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mix", default="linkbench", choices=["linkbench", "update-heavy"])
    parser.add_argument("--max-id", type=int, default=20_001,
                        help="The generated source's ids (debl generate --max-id).")
    parser.add_argument("--files", type=int, default=8, help="The dump's files.")
    parser.add_argument("--reuse", action="store_true",
                        help="Keep the namespace's current load and change log if there is one.")
    parser.add_argument("--read-rate", type=float, default=300.0)
    parser.add_argument("--write-rate", type=float, default=100.0)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--warmup", type=float, default=5.0,
                        help="Seconds of reads first, not counted, per mode and round.")
    parser.add_argument("--modes", default="off,on,serial")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--writes-only", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--start-id", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--max-id-loaded", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.writes_only:
        write_process(args)
        return
    config = _namespace(load_config())
    work = Path(tempfile.mkdtemp(prefix="debl-fresh-latency-"))
    log = work / "commands.log"
    if not (args.reuse and _current(config)):
        prepare(config, args, work)
    load = _current(config)
    follower = debl_service(config, "follow", log=log)
    deadline = time.monotonic() + CATCH_UP_S
    while (f := _follower(config, load.position.source)) is None or f.state != "following":
        if follower.poll() is not None or time.monotonic() > deadline:
            sys.exit(f"debl follow ended or did not catch up: see {log}")
        time.sleep(0.2)
    mix = mix_named(args.mix)
    with Coordinator(config) as c:
        id_range = c.id_range()
    if id_range is None:
        sys.exit("the load serves no id range: nothing to read")
    start_id, max_id = id_range
    spec = RequestSpec(max_id=max_id, start_id=start_id, seed=args.seed)
    writes = subprocess.Popen(
        [sys.executable, __file__, "--writes-only", "--start-id", str(start_id),
         "--max-id-loaded", str(max_id), "--mix", args.mix, "--write-rate",
         str(args.write_rate), "--writers", str(args.writers), "--seed", str(args.seed)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=config.child_env())
    try:
        for round_no in range(args.rounds):
            for mode in args.modes.split(","):
                print(json.dumps(run_mode(config, mode, args, spec, mix, round_no)),
                      flush=True)
    finally:
        out, _ = writes.communicate("", timeout=CATCH_UP_S + 60)
        print(out.strip(), flush=True)
        os.kill(follower.pid, signal.SIGTERM)
        follower.wait(60)
        print(json.dumps({"load_average": os.getloadavg()[0], "log": str(log)}), flush=True)


if __name__ == "__main__":
    main()
