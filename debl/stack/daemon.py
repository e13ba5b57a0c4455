"""One background server process of the local stack: start, find, stop, and its log.

A daemon is described by a pid file and a log file under ``.debl/<service>/``. ``start`` detaches
the process into its own session (so it outlives the ``debl`` command and a Ctrl-C of it) and
writes its pid; ``running`` checks that the pid is alive *and* is the process we started (a pid
reused by the system after a reboot does not count); ``stop`` sends SIGTERM, waits, then SIGKILL.

Pitfall: the JVM daemons need several seconds to answer after their process exists; the health
checks of ``debl.stack.service`` decide when a service is up, not this module.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from debl.errors import StackError


LOG_ROTATE_BYTES = 64 << 20


@dataclass(frozen=True)
class Daemon:
    name: str  # a human name, e.g. "HDFS NameNode"
    home: Path  # .debl/<service>: pid and log live here

    @property
    def pid_file(self) -> Path:
        return self.home / f"{self._slug}.pid"

    @property
    def log_file(self) -> Path:
        return self.home / f"{self._slug}.log"

    @property
    def _slug(self) -> str:
        return self.name.lower().replace(" ", "-")

    def pid(self) -> int | None:
        """The pid of the running process, or None."""
        try:
            pid = int(self.pid_file.read_text().split()[0])
        except (FileNotFoundError, ValueError, IndexError):
            return None
        try:
            cmdline = " ".join(psutil.Process(pid).cmdline())
        except psutil.Error:
            return None
        # Every daemon's command line names its home: proof that the pid is ours, not reused.
        return pid if str(self.home.absolute()) in cmdline else None

    def exited(self) -> bool:
        """True if the process we started last is gone (used while it starts up, when its
        command line may not be readable yet)."""
        try:
            return not _alive(int(self.pid_file.read_text().split()[0]))
        except (FileNotFoundError, ValueError, IndexError):
            return True

    def start(self, argv: list[str], env: dict[str, str] | None = None,
              cwd: Path | None = None) -> int:
        """Start argv detached, stdout and stderr appended to the log; returns the pid.

        argv must mention ``home``'s absolute path (a config dir, a data dir): ``pid`` relies
        on it to recognise the process."""
        self.home.mkdir(parents=True, exist_ok=True)
        self._rotate_log()
        try:
            log = open(self.log_file, "ab")
        except OSError as exc:
            raise StackError(self.name, f"cannot write its log {self.log_file}: {exc}; check "
                             f"that {self.home} is writable by this user") from exc
        with log:
            log.write(f"\n==== {time.strftime('%Y-%m-%d %H:%M:%S')} starting {self.name}\n"
                      .encode())
            log.flush()
            try:
                proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, env=env, cwd=cwd,
                                        start_new_session=True)
            except OSError as exc:
                raise StackError(self.name, f"cannot run {argv[0]}: {exc}",
                                 str(self.log_file)) from exc
        self.pid_file.write_text(f"{proc.pid}\n")
        return proc.pid

    def _rotate_log(self) -> None:
        """A log past ``LOG_ROTATE_BYTES`` becomes ``<log>.1`` (the one before it dropped), so
        that a stack restarted now and then keeps at most about twice that per daemon; a
        running daemon's own loggers stay quiet enough not to need more (docs/RUNTIME.md,
        "Logs"). A log that cannot be rotated (none yet, or the directory not writable) is
        appended to as before: opening it then fails with a StackError that says why."""
        try:
            if self.log_file.stat().st_size > LOG_ROTATE_BYTES:
                self.log_file.replace(self.log_file.with_name(self.log_file.name + ".1"))
        except OSError:
            pass

    def stop(self, timeout: float = 60.0, crash: bool = False) -> bool:
        """SIGTERM, wait up to timeout, then SIGKILL (with *crash*: SIGKILL at once, as a crash
        would). Returns True if a process was stopped."""
        pid = self.pid()
        if pid is None:
            self.pid_file.unlink(missing_ok=True)
            return False
        os.kill(pid, signal.SIGKILL if crash else signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and _alive(pid):
            time.sleep(0.2)
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
            while _alive(pid):
                time.sleep(0.1)
        self.pid_file.unlink(missing_ok=True)
        return True

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log_file.read_text(errors="replace").splitlines()
        except FileNotFoundError:
            return ""
        return "\n".join(text[-lines:])

    def failure(self, message: str) -> StackError:
        """A StackError for this daemon, with its log path and last lines."""
        return StackError(self.name, message, str(self.log_file), self.log_tail())

    def rss_kib(self) -> int | None:
        """Resident memory of the process in KiB, or None if it is not running."""
        pid = self.pid()
        return None if pid is None else rss_kib(pid)


def rss_kib(pid: int) -> int | None:
    """Resident memory of process *pid* in KiB, or None if it is gone."""
    try:
        return psutil.Process(pid).memory_info().rss // 1024
    except psutil.Error:
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of ours is dead for our purposes.
    try:
        state = psutil.Process(pid).status()
    except psutil.NoSuchProcess:
        return False
    if state == psutil.STATUS_ZOMBIE:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        return False
    return True
