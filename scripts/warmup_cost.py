"""What opening the raw route's buckets costs: a fresh coordinator on the current load, its
``wait_warm()`` timed, and the CPU the stack's NameNode and DataNode spent meanwhile
(docs/BENCHMARKS.md, "Opening the buckets").

    python scripts/warmup_cost.py [--runs 3]

Each run alternates the two ways of listing a bucket: ``listed`` (one NameNode call per
directory gives its files and their blocks: ``HdfsClient.list_located``, as DeBL ships) and
``per-file`` (a plain listing, then one ``getBlockLocations`` per file, as before), each in a
child process of its own so that neither finds the other's buckets opened. Load something first
(``debl load``) and run no gen_HF: its converted buckets are not opened. The stack's pid files
give the daemons; Linux only.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

import psutil

from debl.config import load_config

CHILD = """
import sys, time
import debl.hdfs.client as client
if sys.argv[1] == "per-file":
    client.HdfsClient.list_located = lambda self, directory: None
from coordinator import Coordinator
from debl.config import load_config
with Coordinator(load_config()) as coordinator:
    if not coordinator.wait_until_up(60):
        sys.exit("no load is up: run `debl load SOURCE` first")
    started = time.monotonic()
    warm = coordinator.wait_warm(300)
    print(time.monotonic() - started if warm else "timeout")
"""


def _cpu_s(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    hdfs_dir = load_config().state_dir / "hdfs"
    try:
        daemons = {name: int((hdfs_dir / f"{name}.pid").read_text())
                   for name in ("namenode", "datanode")}
        for pid in daemons.values():
            _cpu_s(pid)
    except (OSError, ValueError):
        sys.exit(f"no running HDFS found under {hdfs_dir}: start the stack (`debl stack up`)")
    print("way        opening s   NameNode CPU s   DataNode CPU s")
    for _ in range(args.runs):
        for way in ("per-file", "listed"):
            before = {name: _cpu_s(pid) for name, pid in daemons.items()}
            child = subprocess.run([sys.executable, "-c", CHILD, way], capture_output=True,
                                   text=True)
            if child.returncode != 0 or not child.stdout.split():
                last = (child.stderr.strip().splitlines() or ["no output"])[-1]
                sys.exit(f"the {way} coordinator failed: {last}")
            out = child.stdout.split()[-1]
            spent = {name: _cpu_s(pid) - before[name] for name, pid in daemons.items()}
            opening = out if out == "timeout" else f"{float(out):.2f}"
            print(f"{way:9s}  {opening:>9s}   {spent['namenode']:14.2f}   "
                  f"{spent['datanode']:14.2f}")
            time.sleep(1)


if __name__ == "__main__":
    main()
