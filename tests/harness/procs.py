"""The processes of a fault campaign: run a ``debl`` command, find its process tree (the Spark
JVM, py4j, pyspark's Python workers, the query client's worker processes), ``kill -9`` one of
them, and tell which processes outlived the kill (orphans).

Pitfalls:

- Every command runs in a session of its own, so that a kill of the whole tree never reaches
  the campaign itself or the stack (whose daemons have their own sessions too).
- A pid alone is not a process: the tree is recorded as (pid, start time) just before a kill,
  so a pid the system reuses later is never taken for a survivor.
- The tree is read through ``psutil``, parent links at the moment of the snapshot: a process
  started after it is not in it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil


# What identifies the Spark driver JVM that pyspark starts (through spark-submit).
SPARK_MAIN = "org.apache.spark.deploy.SparkSubmit"


# The directory that holds the `harness` package (tests/), for its own processes.
HARNESS_PARENT = str(Path(__file__).resolve().parents[1])

@dataclass(frozen=True)
class Proc:
    """One process as ``psutil`` shows it: pid, parent, start time (seconds since the epoch,
    which with the pid identifies it), and its command line (arguments joined by spaces)."""

    pid: int
    ppid: int
    start: float
    cmdline: str

    def alive(self) -> bool:
        """Still running (not a zombie), and still the same process."""
        found = _read(self.pid)
        return found is not None and found.start == self.start

    def describe(self) -> str:
        """A short name for reports: what kind of process it is."""
        cmd = self.cmdline
        if SPARK_MAIN in cmd:
            return f"Spark driver JVM (pid {self.pid})"
        if "pyspark.daemon" in cmd or "pyspark/daemon" in cmd:
            return f"pyspark Python worker (pid {self.pid})"
        if "forkserver" in cmd:
            return f"multiprocessing worker or forkserver (pid {self.pid})"
        if " -m debl " in f" {cmd} " or "/debl " in cmd:
            return f"debl {' '.join(cmd.split(' -m debl ')[-1].split()[:2])} (pid {self.pid})"
        return f"{cmd[:80]} (pid {self.pid})"


_FIELDS = ["ppid", "create_time", "cmdline", "status"]


def _proc(p: psutil.Process, info: dict) -> Proc | None:
    """*info* (``psutil``'s fields of *p*) as a Proc; None for a process that has ended (a
    zombie or dead one), or whose fields could not be read."""
    if info["status"] in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD) or None in info.values():
        return None
    return Proc(p.pid, info["ppid"], info["create_time"], " ".join(info["cmdline"]).strip())


def _read(pid: int) -> Proc | None:
    try:
        p = psutil.Process(pid)
        return _proc(p, p.as_dict(_FIELDS))
    except psutil.NoSuchProcess:
        return None


def processes() -> dict[int, Proc]:
    """Every process running now."""
    found = {}
    for p in psutil.process_iter(_FIELDS):
        proc = _proc(p, p.info)
        if proc is not None:
            found[proc.pid] = proc
    return found


def tree(root: int, table: dict[int, Proc] | None = None) -> list[Proc]:
    """*root* and every descendant, parents first."""
    table = processes() if table is None else table
    children: dict[int, list[Proc]] = {}
    for p in table.values():
        children.setdefault(p.ppid, []).append(p)
    out = [table[root]] if root in table else []
    i = 0
    while i < len(out):
        out += sorted(children.get(out[i].pid, []), key=lambda p: p.pid)
        i += 1
    return out


def spark_driver(procs: list[Proc]) -> Proc | None:
    """The Spark driver JVM among *procs* (the first, if several)."""
    return next((p for p in procs if SPARK_MAIN in p.cmdline), None)


def survivors(procs: list[Proc], grace: float) -> list[Proc]:
    """Those of *procs* still running after up to *grace* seconds (polled): the orphans of a
    killed run. A JVM whose Python parent died notices it within a second or two (its stdin
    closes); *grace* leaves room for that on a busy machine."""
    deadline = time.monotonic() + grace
    left = [p for p in procs if p.alive()]
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = [p for p in left if p.alive()]
    return left


def kill(procs: list[Proc]) -> None:
    """SIGKILL each of *procs* that is still the same process."""
    for p in procs:
        if p.alive():
            try:
                os.kill(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@dataclass
class Outcome:
    """How a command ended: exit code (None: we killed it at its time limit), seconds, output
    (stdout and stderr together), and whether it hung (ran into its time limit)."""

    argv: list[str]
    returncode: int | None
    seconds: float
    output: str
    hung: bool = False

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def command(self) -> str:
        return "debl " + " ".join(self.argv)


@dataclass
class Running:
    """A ``debl`` command started with ``start``: its Popen, log file and start instant."""

    argv: list[str]
    proc: subprocess.Popen
    log: Path
    started: float = field(default_factory=time.monotonic)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def tree(self) -> list[Proc]:
        return tree(self.proc.pid)

    def done(self) -> bool:
        return self.proc.poll() is not None

    def wait(self, timeout: float) -> Outcome:
        """Wait up to *timeout* seconds; past it the whole tree is killed and the outcome says
        it hung. Always reaps the process."""
        hung = False
        try:
            self.proc.wait(timeout=max(timeout, 0.0))
        except subprocess.TimeoutExpired:
            hung = True
            kill(self.tree())
            self.proc.wait()
        return Outcome(self.argv, None if hung else self.proc.returncode, self.elapsed(),
                       self.output(), hung)

    def output(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except FileNotFoundError:
            return ""


def start(argv: list[str], env: dict[str, str], log: Path, cwd: Path | None = None,
          module: str = "debl") -> Running:
    """Start ``debl ARGV`` (this Python, ``-m debl``; or ``-m MODULE ARGV``) in a session of
    its own, stdout and stderr to *log*."""
    log.parent.mkdir(parents=True, exist_ok=True)
    if module.startswith("harness"):  # the harness lives beside the tests, not in the package
        env = {**env, "PYTHONPATH": os.pathsep.join(
            p for p in (HARNESS_PARENT, env.get("PYTHONPATH")) if p)}
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", module, *argv], env=env, stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=cwd,
                                start_new_session=True)
    return Running(argv, proc, log)


def run(argv: list[str], env: dict[str, str], log: Path, timeout: float,
        cwd: Path | None = None) -> Outcome:
    """``start`` and ``wait``."""
    return start(argv, env, log, cwd).wait(timeout)


def clear_failure(outcome: Outcome) -> bool:
    """Whether a failed command told its user what happened the way DeBL promises: a message
    (click's ``Error: ...``), no Python traceback, and it did not hang."""
    text = outcome.output
    return (not outcome.hung and "Traceback (most recent call last)" not in text
            and any(line.startswith("Error: ") for line in text.splitlines()))
