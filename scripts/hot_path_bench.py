"""Time the hot path alone: ``loaders.mysql_bulk.load_hot`` on the newest files of a directory.

    python scripts/hot_path_bench.py DIR [--files 2] [--table hot_bench] [--run-bytes N]
                                         [--streams N] [--server-pid PID] [--json]

Loads the *files* newest files of DIR (oldest first, as ``debl load`` numbers them) into the
table *table* of the configured MySQL (``debl.toml`` / ``DEBL_*``), then prints the bytes, lines,
rows, each phase's seconds, MB/s over the whole call, the process's peak RSS (``ru_maxrss``:
the client only; the server's memory is its own) and CPU seconds, and with ``--server-pid`` the
CPU seconds the local server spent meanwhile: on a shared machine the CPU seconds vary less
than the wall time. docs/LOADING.md, "The hot path's cost", quotes
it. It runs against any checkout: old code without the ``table`` parameter gets the table through
``link_table`` instead, so an A/B of two checkouts is ``PYTHONPATH=A python ...`` then
``PYTHONPATH=B python ...``, alternated.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

from debl.config import load_config
from loaders import mysql_bulk
from loaders.rejects import RejectWriter
from loaders.source import LocalSource


def _cpu_seconds(pid: int | None) -> float:
    """User + system CPU seconds of process *pid* so far (Linux ``/proc``); 0 without one."""
    if not pid:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--files", type=int, default=2, help="how many of the newest files")
    parser.add_argument("--table", default="hot_bench")
    parser.add_argument("--run-bytes", type=int, help="merge in runs of this many input bytes")
    parser.add_argument("--streams", type=int, help="LOAD DATA statements side by side")
    parser.add_argument("--server-pid", type=int,
                        help="also report the CPU seconds this local MariaDB spent meanwhile")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    config = load_config()
    source = LocalSource(args.directory)
    listed = source.list()
    files = list(enumerate(listed))[-args.files:]
    kwargs = {"run_bytes": args.run_bytes} if args.run_bytes else {}
    if args.streams:
        mysql_bulk.STREAMS = args.streams
    if "table" in inspect.signature(mysql_bulk.load_hot).parameters:
        kwargs["table"] = args.table
    else:
        config = dataclasses.replace(config, link_table=args.table)
    with tempfile.TemporaryDirectory(prefix="hot-bench-") as tmp:
        with RejectWriter(Path(tmp)).open_part("hot") as part:
            t0, server0, client0 = time.time(), _cpu_seconds(args.server_pid), _own_cpu()
            result = mysql_bulk.load_hot(config, source, files, part, **kwargs)
            wall = time.time() - t0
            server, client = _cpu_seconds(args.server_pid) - server0, _own_cpu() - client0
            part.commit()
    report = {
        "code": str(Path(mysql_bulk.__file__).resolve().parent.parent),
        "files": [f.name for _, f in files], "bytes": result.bytes, "lines": result.lines,
        "rows": result.rows, "rejects": result.rejects, "runs": getattr(result, "runs", None),
        "streams": getattr(mysql_bulk, "STREAMS", None), "wall_s": round(wall, 2),
        "mb_per_s": round(result.bytes / wall / 1e6, 2),
        "phases": {name: round(t1 - t0, 2) for name, t0, t1 in result.phases},
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "client_cpu_s": round(client, 2),
        "server_cpu_s": round(server, 2) if args.server_pid else None,
    }
    if args.json:
        print(json.dumps(report))
    else:
        for key, value in report.items():
            print(f"{key:>13}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
