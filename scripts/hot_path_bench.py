"""Time the hot path alone: ``loaders.mysql_bulk.load_hot`` on the newest files of a directory.

    python scripts/hot_path_bench.py DIR [--files 2] [--table hot_bench] [--run-bytes N]
                                         [--streams N] [--server-pid PID] [--json]

Loads the *files* newest files of DIR (oldest first, as ``debl load`` numbers them) into the
table *table* of the configured MySQL (``debl.toml`` / ``DEBL_*``) and prints the bytes, lines,
rows, each phase's seconds, MB/s over the whole call, the process's peak RSS (``ru_maxrss``: the
client only; the server's memory is its own) and the CPU seconds of the client (this process)
and, with ``--server-pid``, of the local server, in all and per phase (sampled every 0.1 s).
On a shared machine CPU seconds vary far less than wall time: a phase's CPU seconds say what it
costs, its wall time how much the others left it. docs/LOADING.md, "The hot path's cost",
quotes it.

It runs against any checkout: old code without the ``table`` parameter gets the table through
``mysql.link_table`` instead, so an A/B of two checkouts is ``PYTHONPATH=A python ...`` then
``PYTHONPATH=B python ...``, alternated.
"""

from __future__ import annotations

import argparse
import bisect
import inspect
import json
import os
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

from debl.config import load_config
from loaders import mysql_bulk
from loaders.rejects import RejectWriter
from loaders.source import LocalSource

SAMPLE_S = 0.1


class CpuSampler:
    """(time, client CPU s, server CPU s) every SAMPLE_S in a thread, for CPU seconds between
    two moments. The server's CPU is 0 without its pid."""

    def __init__(self, server_pid: int | None) -> None:
        self.server_pid = server_pid
        self.samples: list[tuple[float, float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def sample(self) -> tuple[float, float, float]:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        server = 0.0
        if self.server_pid:
            times = psutil.Process(self.server_pid).cpu_times()
            server = times.user + times.system
        return time.time(), usage.ru_utime + usage.ru_stime, server

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_S):
            self.samples.append(self.sample())

    def __enter__(self) -> "CpuSampler":
        self.samples.append(self.sample())
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.samples.append(self.sample())

    def between(self, t0: float, t1: float) -> tuple[float, float]:
        """(client, server) CPU seconds from the sample nearest *t0* to the one nearest *t1*."""
        times = [s[0] for s in self.samples]

        def at(t: float) -> tuple[float, float, float]:
            i = min(bisect.bisect_left(times, t), len(times) - 1)
            if i and abs(times[i - 1] - t) < abs(times[i] - t):
                i -= 1
            return self.samples[i]

        (_, c0, s0), (_, c1, s1) = at(t0), at(t1)
        return round(c1 - c0, 2), round(s1 - s0, 2)


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
    files = list(enumerate(source.list()))[-args.files:]
    kwargs = {"run_bytes": args.run_bytes} if args.run_bytes else {}
    if args.streams:
        mysql_bulk.STREAMS = args.streams
    if "table" in inspect.signature(mysql_bulk.load_hot).parameters:
        kwargs["table"] = args.table
    else:
        config = config.replace(mysql_link_table=args.table)
    with tempfile.TemporaryDirectory(prefix="hot-bench-") as tmp:
        with RejectWriter(Path(tmp)).open_part("hot") as part, CpuSampler(args.server_pid) as cpu:
            t0 = time.time()
            result = mysql_bulk.load_hot(config, source, files, part, **kwargs)
            wall = time.time() - t0
            part.commit()
    report = {
        "code": str(Path(mysql_bulk.__file__).resolve().parent.parent),
        "files": [f.name for _, f in files], "bytes": result.bytes, "lines": result.lines,
        "rows": result.rows, "rejects": result.rejects, "runs": getattr(result, "runs", None),
        "streams": getattr(mysql_bulk, "STREAMS", None), "wall_s": round(wall, 2),
        "mb_per_s": round(result.bytes / wall / 1e6, 2),
        "phases": {name: round(t1 - t0, 2) for name, t0, t1 in result.phases},
        "phase_cpu": {name: cpu.between(t0, t1) for name, t0, t1 in result.phases},
        "cpu": cpu.between(t0, t0 + wall),  # (client, server) CPU seconds
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "load_average": os.getloadavg()[0],
    }
    if args.json:
        print(json.dumps(report))
    else:
        for key, value in report.items():
            print(f"{key:>13}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
