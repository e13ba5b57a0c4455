"""A DeBL service during a bench: a ``debl`` command (``gen-hf``, ``follow``) as a subprocess
in the bench's namespace (``Config.child_env`` hands the config over as ``DEBL_*`` variables),
in a session of its own so that its stop reaches what it started (a Spark JVM).

Pitfall: a subprocess that exits with an error (a crash, or the lock of the namespace still held
by an earlier one) is restarted a few times, 5 s apart; its log is kept.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from debl.config import Config

_RESTARTS = 5
_STOP_GRACE_S = 30.0


class ServiceProcess:
    """``debl <args>`` as a subprocess in *config*'s namespace, its output in *log*. Restarted
    (5 s later, a few times) if it exits with an error. ``wait`` returns its record; ``stop``
    ends it (SIGINT, then SIGKILL of its process group)."""

    name = "service"

    def __init__(self, config: Config, args: list[str], log: Path,
                 report=lambda text: None):
        self.config, self.args, self.log, self.report = config, args, log, report
        self.proc: subprocess.Popen | None = None
        self.restarts = 0
        self.started = 0.0
        self._stop = threading.Event()
        self._done = threading.Event()
        self._watch: threading.Thread | None = None
        self.returncode: int | None = None

    def _spawn(self) -> None:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "debl", *self.args], env=self.config.child_env(),
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True)

    def start(self) -> None:
        self.started = time.time()
        self._spawn()
        self._watch = threading.Thread(target=self._watcher, name=f"{self.name}-watch",
                                       daemon=True)
        self._watch.start()

    def _watcher(self) -> None:
        while not self._stop.is_set():
            code = self.proc.poll() if self.proc is not None else None
            if code is None:
                self._stop.wait(0.5)
                continue
            self.returncode = code
            if code == 0 or self.restarts >= _RESTARTS:
                break
            self.restarts += 1
            self.report(f"debl {self.args[0]} exited with {code} (see {self.log}); restarting")
            if self._stop.wait(5.0):
                break
            self._spawn()
        self._done.set()

    def wait(self, timeout: float) -> dict:
        finished = self._done.wait(timeout)
        return {"started_at": self.started,
                "exit_code": self.returncode if finished else None,
                "completed": finished and self.returncode == 0, "restarts": self.restarts,
                "seconds": time.time() - self.started, "log": str(self.log)}

    def stop(self) -> None:
        self._stop.set()
        proc = self.proc
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGINT)
                proc.wait(_STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            except ProcessLookupError:
                pass
        if self._watch is not None:
            self._watch.join()
