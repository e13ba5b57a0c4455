"""CPU seconds a Spark standalone master of the stack takes to start, with the stack's quick JVM
flags (C1 only, serial GC: ``debl.stack.spark_cluster``) and without them, alternated.

    python scripts/spark_master_cpu.py [--runs 3] [--port 7491] [--webui-port 8491]

Each run starts a master exactly as ``debl stack up`` does (``SparkCluster.daemon_argv`` and
``daemon_env``, in a temporary home), waits until its ``/json`` page says ALIVE and reads the CPU
time of its process (``psutil``: user + system, its own and that of its reaped
children: ``spark-class`` runs the launcher JVM as a child, then becomes the master JVM), then
stops it. Pick ports no stack uses. docs/RUNTIME.md quotes the figures. Linux only.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import psutil

from debl.config import Config
from debl.stack.spark_cluster import SparkCluster

QUICK_VARIABLES = ("SPARK_DAEMON_JAVA_OPTS", "SPARK_LAUNCHER_OPTS")


def _alive(webui_port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{webui_port}/json/", timeout=1) as r:
            return json.load(r).get("status") == "ALIVE"
    except OSError:
        return False


def _cpu_s(pid: int) -> float:
    t = psutil.Process(pid).cpu_times()  # its own and its reaped children's
    return t.user + t.system + t.children_user + t.children_system


def start_once(cluster: SparkCluster, quick: bool, timeout: float = 120.0) -> tuple[float, float]:
    """(CPU seconds, wall seconds) until the master says ALIVE."""
    c = cluster.config
    env = cluster.daemon_env()
    if not quick:
        for name in QUICK_VARIABLES:
            env.pop(name)
    argv = cluster.daemon_argv("org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                               "--port", str(c.spark.master_port),
                               "--webui-port", str(c.spark.master_webui_port))
    proc = subprocess.Popen(argv, env=env, cwd=cluster.home, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    t0 = time.monotonic()
    try:
        while not _alive(c.spark.master_webui_port):
            if proc.poll() is not None or time.monotonic() - t0 > timeout:
                raise SystemExit(f"the master did not start (see {cluster.home / 'logs'})")
            time.sleep(0.1)
        return _cpu_s(proc.pid), time.monotonic() - t0
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="runs of each, alternated")
    parser.add_argument("--port", type=int, default=7491)
    parser.add_argument("--webui-port", type=int, default=8491)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="spark-master-cpu-") as home:
        cluster = SparkCluster(Config(state_dir=Path(home), spark_master_port=args.port,
                                      spark_master_webui_port=args.webui_port))
        cluster.conf_dir.mkdir(parents=True)
        (cluster.conf_dir / "spark-defaults.conf").write_text("")
        for _ in range(args.runs):
            for quick in (True, False):
                cpu, wall = start_once(cluster, quick)
                print(f"{'quick' if quick else 'default'} JVM flags: {cpu:.1f} s CPU, "
                      f"ALIVE after {wall:.1f} s", flush=True)


if __name__ == "__main__":
    main()
