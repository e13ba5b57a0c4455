#!/usr/bin/env python
"""HBase's own Java client against the Thrift path, on the same requests (docs/BENCHMARKS.md,
"HBase's own client: the anchor").

Writes the requests that ``debl query --target hbase`` would send with the same ids, link types,
seed, threads and request count (``debl.workload.requests.RequestStream`` per thread, each
thread's quota as the client's), as scan bounds (``debl.store.hbase_layout.scan_bounds``), and
runs ``debl.jobs.GetLinkListBench`` (loaders/jvm) on them: one JVM, the same threads, each
request one bounded scan with the visibility filter and the row limit, through HBase's Java
client straight to the region server. Prints its JSON line (requests, req/s, p50/p99/max ms).

    python scripts/hbase_anchor.py --threads 50 --requests 50000 --max-id 4002910 \\
        --recency-share 0.9 [--table TABLE]          # then, for the Thrift path:
    debl query --target hbase --threads 50 --requests 50000 --max-id 4002910 --recency-share 0.9

The table defaults to the current load's HBase table (``debl load --approach bulkLoad-hbase``
in the namespace of ``DEBL_*``). Needs the stack up and ``.debl/lib/debl-jobs.jar`` built from
this checkout (``bash scripts/build_jobs_jar.sh``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from debl.catalog import Catalog  # noqa: E402
from debl.config import load_config  # noqa: E402
from debl.format.link import DEFAULT_LIMIT, MAX_TIME  # noqa: E402
from debl.stack.hbase import HBase  # noqa: E402
from debl.store.hbase_layout import scan_bounds  # noqa: E402
from debl.workload.client_spec import ClientSpec  # noqa: E402
from debl.workload.requests import RequestSpec, RequestStream  # noqa: E402


def write_requests(path: Path, spec: ClientSpec) -> int:
    """The client's requests, thread by thread, as ``thread TAB start TAB stop`` in hex."""
    n = 0
    with open(path, "w") as out:
        for thread in range(spec.threads):
            stream = RequestStream(spec.requests, stream=thread)
            for _ in range(spec.quota(thread) or 0):
                id1, link_type = next(stream)
                bounds = scan_bounds(id1, link_type, 0, MAX_TIME)
                if bounds is not None:
                    out.write(f"{thread}\t{bounds[0].hex()}\t{bounds[1].hex()}\n")
                    n += 1
    return n


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--max-id", type=int, required=True)
    parser.add_argument("--start-id", type=int, default=1)
    parser.add_argument("--link-types", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--recency-share", type=float, default=0.0)
    parser.add_argument("--table", help="default: the current load's HBase table")
    args = parser.parse_args()
    config = load_config()
    table = args.table
    if table is None:
        with Catalog(config) as catalog:
            load = catalog.loads.current()
        if load is None:
            sys.exit("no load is current: load the input first (debl load DIR --approach "
                     "bulkLoad-hbase), or pass --table")
        table = load.namespace.hbase_table
    spec = ClientSpec(RequestSpec(max_id=args.max_id, start_id=args.start_id,
                                  link_types=args.link_types, seed=args.seed,
                                  recency_share=args.recency_share),
                      threads=args.threads, total=args.requests, processes=1)
    with tempfile.NamedTemporaryFile("w", suffix=".tsv") as requests:
        write_requests(Path(requests.name), spec)
        result = run_anchor(config, table, Path(requests.name), args.threads)
    print(json.dumps(result))
    return 0


def run_anchor(config, table: str, requests: Path, threads: int,
               limit: int = DEFAULT_LIMIT) -> dict:
    """``debl.jobs.GetLinkListBench`` on *requests* (``write_requests``' file) against *table*:
    its JSON result (requests, threads, seconds, req_s, rows, p50_ms, p99_ms, max_ms). Raises
    SystemExit naming the cause when the jar is missing or the program fails."""
    jar = config.lib_dir / "debl-jobs.jar"
    if not jar.exists():
        sys.exit(f"{jar} is missing: run bash scripts/build_jobs_jar.sh")
    argv = HBase(config).java_argv("debl.jobs.GetLinkListBench", config.hbase.zookeeper_quorum,
                                   str(config.hbase.zookeeper_port), table, str(requests),
                                   str(threads), str(limit), heap="1g")
    cp = argv.index("-cp") + 1
    argv[cp] = f"{argv[cp]}:{jar.absolute()}"
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"GetLinkListBench failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    sys.exit(main())
