"""Where a bench's CPU went: the CPU seconds of every process on the machine between two
samples, summed by role (the source database, the catalog's MariaDB, the follower, gen_HF and
Spark, HBase, HDFS, the query client's workers, the bench's own process), beside the whole
machine's busy seconds, so that a report says what shared the cores (docs/FRESHNESS.md, "The
bench with writes").

Pitfalls: a process that started and ended between the two samples is not counted (the
machine's figure still has it); a role is known by the process's command line, so a process
this module does not know counts as ``other``.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import psutil

from debl.config import Config


def _roles(config: Config) -> list[tuple[str, str]]:
    """(a piece of a command line, its role), the first match wins."""
    return [(str(config.state_dir / "source_db"), "source database"),
            (str(config.state_dir / "mariadb"), "MariaDB (catalog, hot keys)"),
            ("debl follow", "follower"),
            ("gen-hf", "gen_HF"), ("SparkSubmit", "Spark (gen_HF, dist_ch)"),
            ("org.apache.hadoop.hbase", "HBase"), ("org.apache.hadoop.hdfs", "HDFS"),
            ("multiprocessing", "query client's workers (coordinators)")]


@dataclass(frozen=True)
class CpuSample:
    """CPU seconds so far: per live process (pid, start time) with its role, and the
    machine's busy seconds."""

    at: float
    busy_s: float
    processes: dict[tuple[int, float], tuple[str, float]]

    @classmethod
    def take(cls, config: Config) -> "CpuSample":
        roles, me = _roles(config), os.getpid()
        mine = {me, *(p.pid for p in psutil.Process(me).children(recursive=True))}
        found: dict[tuple[int, float], tuple[str, float]] = {}
        for p in psutil.process_iter(["cmdline", "cpu_times", "create_time"]):
            info = p.info
            if info["cpu_times"] is None:  # gone, or not ours to read
                continue
            command = " ".join(info["cmdline"] or ())
            role = next((name for piece, name in roles if piece in command), None)
            if role is None:
                role = "this bench (load, writers)" if p.pid in mine else "other"
            times = info["cpu_times"]
            found[(p.pid, info["create_time"])] = (role, times.user + times.system)
        times = psutil.cpu_times()
        busy = times.user + times.system + getattr(times, "nice", 0.0) + \
            getattr(times, "irq", 0.0) + getattr(times, "softirq", 0.0)
        return cls(time.monotonic(), busy, found)

    def since(self, earlier: "CpuSample") -> dict:
        """The CPU seconds by role from *earlier* to this sample, the machine's busy seconds
        and the seconds between the two (``cores`` many CPUs could give ``cores * seconds``)."""
        by_role: dict[str, float] = {}
        for key, (role, used) in self.processes.items():
            before = earlier.processes.get(key, (role, 0.0))[1]
            by_role[role] = by_role.get(role, 0.0) + max(0.0, used - before)
        return {"seconds": round(self.at - earlier.at, 1), "cores": psutil.cpu_count(),
                "busy_s": round(self.busy_s - earlier.busy_s, 1),
                "by_role": {role: round(s, 1) for role, s in
                            sorted(by_role.items(), key=lambda item: -item[1])}}
