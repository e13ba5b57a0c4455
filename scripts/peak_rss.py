"""Run a command and report the peak resident memory of it and of every process it starts.

    python scripts/peak_rss.py [--watch PID ...] -- COMMAND [ARG ...]

Every 0.2 s the script reads ``VmHWM`` (the kernel's own peak RSS of a process, which psutil
does not give) from ``/proc/<pid>/status`` for the command and all its descendants (a Spark JVM
started by py4j included), keeping the last value seen per process; ``--watch`` adds processes
that run anyway (the stack's MariaDB, NameNode, DataNode), whose growth during the command is
reported. Linux only. Prints one line per process: pid, peak RSS in MiB, command line; exits
with the command's status. docs/RELIABILITY.md uses it for the over-long line's memory figures.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import psutil


def _status_kib(pid: int, field: str) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def _tree(root: int) -> list[int]:
    try:
        return [root, *(p.pid for p in psutil.Process(root).children(recursive=True))]
    except psutil.NoSuchProcess:
        return [root]


def _cmdline(pid: int) -> str:
    try:
        return " ".join(psutil.Process(pid).cmdline())[:150]
    except psutil.Error:
        return "?"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--watch", type=int, nargs="*", default=[])
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given")
    watched = {pid: (_status_kib(pid, "VmRSS"), _cmdline(pid)) for pid in args.watch}
    proc = subprocess.Popen(command)
    peaks: dict[int, tuple[int, str]] = {}
    watch_peak = {pid: 0 for pid in watched}
    while proc.poll() is None:
        for pid in _tree(proc.pid):
            hwm = _status_kib(pid, "VmHWM")
            if hwm is not None:
                peaks[pid] = (max(hwm, peaks.get(pid, (0, ""))[0]), peaks.get(pid, (0, ""))[1]
                              or _cmdline(pid))
        for pid in watched:
            rss = _status_kib(pid, "VmRSS")
            if rss is not None:
                watch_peak[pid] = max(watch_peak[pid], rss)
        time.sleep(0.2)
    print(f"exit status {proc.returncode}", file=sys.stderr)
    for pid, (kib, cmd) in sorted(peaks.items(), key=lambda kv: -kv[1][0]):
        print(f"{pid:>8} peak RSS {kib / 1024:8.1f} MiB  {cmd}", file=sys.stderr)
    for pid, (before, cmd) in watched.items():
        print(f"{pid:>8} RSS {(before or 0) / 1024:8.1f} MiB before, peak "
              f"{watch_peak[pid] / 1024:8.1f} MiB during  {cmd}", file=sys.stderr)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
