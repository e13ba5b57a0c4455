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
import threading
import time
from dataclasses import dataclass

import psutil

from debl.config import Config
from debl.measure import thread_cpu


BENCH = "this bench (load, source server, writers)"
GEN_HF = "gen_HF"
SPARK = "Spark (the load's jobs: dist_ch, a baseline's)"
CLIENT = "query client's workers (coordinators)"
KERNEL = "the kernel's threads (I/O, interrupts)"


def _roles(config: Config) -> list[tuple[str, str]]:
    """(a piece of a command line, its role), the first match wins; a Spark JVM started by
    gen-hf is gen_HF's (``CpuSample.take``)."""
    return [(str(config.state_dir / "source_db"), "source database"),
            (str(config.state_dir / "mariadb"), "MariaDB (catalog, hot keys)"),
            ("debl follow", "follower"),
            ("gen-hf", GEN_HF), ("SparkSubmit", SPARK),
            ("org.apache.hadoop.hbase", "HBase"), ("org.apache.hadoop.hdfs", "HDFS"),
            ("multiprocessing", CLIENT)]


@dataclass(frozen=True)
class CpuSample:
    """CPU seconds so far: per live process (pid, start time) with its role, the machine's
    busy seconds, and this process's by phase."""

    at: float
    busy_s: float
    processes: dict[tuple[int, float], tuple[str, float]]
    phases: dict[str, float]  # this process's CPU by phase (debl.measure.thread_cpu)

    @classmethod
    def take(cls, config: Config) -> "CpuSample":
        roles, me = _roles(config), os.getpid()
        mine = {me, *(p.pid for p in psutil.Process(me).children(recursive=True))}
        listed = [p.info for p in psutil.process_iter(["pid", "ppid", "cmdline", "cpu_times",
                                                       "create_time"])]
        commands = {info["pid"]: " ".join(info["cmdline"] or ()) for info in listed}
        found: dict[tuple[int, float], tuple[str, float]] = {}
        for info in listed:
            if info["cpu_times"] is None:  # gone, or not ours to read
                continue
            command = commands[info["pid"]]
            role = next((name for piece, name in roles if piece in command), None)
            if role is None:
                role = BENCH if info["pid"] in mine else KERNEL if not command else "other"
            elif "SparkSubmit" in command and "gen-hf" in commands.get(info["ppid"], ""):
                role = GEN_HF  # gen-hf's own Spark JVM
            times = info["cpu_times"]
            found[(info["pid"], info["create_time"])] = (role, times.user + times.system)
        times = psutil.cpu_times()
        busy = times.user + times.system + getattr(times, "nice", 0.0) + \
            getattr(times, "irq", 0.0) + getattr(times, "softirq", 0.0)
        return cls(time.monotonic(), busy, found, thread_cpu.totals())

    def since(self, earlier: "CpuSample") -> dict:
        """The CPU seconds by role from *earlier* to this sample, the machine's busy seconds
        and the seconds between the two (``cores`` many CPUs could give ``cores * seconds``);
        ``bench_by_phase``: the part of this process's (the bench's role) counted by phase."""
        by_role: dict[str, float] = {}
        for key, (role, used) in self.processes.items():
            before = earlier.processes.get(key, (role, 0.0))[1]
            by_role[role] = by_role.get(role, 0.0) + max(0.0, used - before)
        phases = {phase: round(used - earlier.phases.get(phase, 0.0), 1)
                  for phase, used in self.phases.items()}
        return {"seconds": round(self.at - earlier.at, 1), "cores": psutil.cpu_count(),
                "busy_s": round(self.busy_s - earlier.busy_s, 1),
                "by_role": {role: round(s, 1) for role, s in
                            sorted(by_role.items(), key=lambda item: -item[1])},
                "bench_by_phase": phases}


class CpuMeter:
    """``CpuSample``s that count the processes that ended between two of them too: a thread
    samples every *every* seconds and remembers each process's last CPU seen, so that a
    process which lived between two ``snapshot``s (a query client's workers, a gen-hf that
    stopped) counts all but its last *every* seconds. ``with CpuMeter(config) as meter``."""

    def __init__(self, config: Config, every: float = 1.0):
        self.config, self.every = config, every
        self._seen: dict[tuple[int, float], tuple[str, float]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-cpu-meter", daemon=True)

    def __enter__(self) -> "CpuMeter":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.snapshot()

    def snapshot(self) -> CpuSample:
        """A sample now, with every process seen since the meter started."""
        sample = CpuSample.take(self.config)
        with self._lock:
            for key, (role, used) in sample.processes.items():
                # a process's role is the one it was first seen with: one that is ending has
                # no command line any more, and would count as the kernel's
                first = self._seen.get(key)
                self._seen[key] = (role if first is None else first[0], used)
            return CpuSample(sample.at, sample.busy_s, dict(self._seen), sample.phases)


# The per-GB table's columns after the approach and its wall times: (title, roles summed);
# the bench's own process is split by phase (debl.measure.thread_cpu), its rest beside.
_COLUMNS = (("copy", (thread_cpu.COPY,)), ("bucketing in Python", (thread_cpu.BUCKETING,)),
            ("Spark", (SPARK,)), ("gen_HF", (GEN_HF,)), ("HBase", ("HBase",)),
            ("HDFS", ("HDFS",)), ("MariaDB", ("MariaDB (catalog, hot keys)",)),
            ("load process, the rest", ("the rest",)),
            ("source server", (thread_cpu.SOURCE_SERVER,)), ("query client", (CLIENT,)),
            ("kernel", (KERNEL,)), ("other", ("other",)))
PER_GB_HEADERS = ("approach", "up s", "done s", "machine busy",
                  *(title for title, _ in _COLUMNS))
PER_GB_NOTE = (
    "From each load's start to the end of its work (up s: its uptime; done s: every bucket in "
    "HBase and MySQL's take-over done, or its uptime). 'machine busy': every process's; the "
    "rest by role, the process that loads split into the copy, the bucketing in Python, the "
    "rate-capped source server it also runs and the rest (hdfs-native's threads, Spark's "
    "driver, the catalog); 'Spark': the load's jobs (dist_ch; a baseline's own job).")


def per_gb_rows(runs, input_bytes: int) -> list[tuple[str, ...]]:
    """Per approach run (``ApproachRun`` with ``cpu``): its wall seconds to uptime and to the
    end of its work, then CPU seconds per GB of input from the load's start to that end: the
    machine's, and by ``_COLUMNS``."""
    gb = input_bytes / 1e9
    rows = []
    for run in runs:
        if not run.cpu or gb <= 0:
            continue
        parts = (run.cpu["to_uptime"], run.cpu["after_uptime"])
        used: dict[str, float] = {}
        for part in parts:
            for role, s in part["by_role"].items():
                used[role] = used.get(role, 0.0) + s
            for phase, s in part.get("bench_by_phase", {}).items():
                used[phase] = used.get(phase, 0.0) + s
        counted = sum(used.get(p, 0.0) for p in (thread_cpu.COPY, thread_cpu.BUCKETING,
                                                 thread_cpu.SOURCE_SERVER))
        used["the rest"] = max(0.0, used.get(BENCH, 0.0) - counted)
        rows.append((run.approach, f"{parts[0]['seconds']:,.1f}",
                     f"{parts[0]['seconds'] + parts[1]['seconds']:,.1f}",
                     f"{sum(p['busy_s'] for p in parts) / gb:,.0f}",
                     *(f"{sum(used.get(r, 0.0) for r in roles) / gb:,.1f}"
                       for _, roles in _COLUMNS)))
    return rows
