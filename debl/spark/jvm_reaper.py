"""Ends the Spark driver JVM, and what spark-submit started for it, when its Python process dies
before the JVM could notice.

pyspark's JVM ends when its stdin closes, but it starts watching stdin only once its gateway
runs. A ``debl`` process killed during the JVM's start-up (seconds, many more on a busy
machine) left spark-submit, its launcher JVM and the driver JVM running on their own until that
moment, or for ever if the start-up hangs (docs/RELIABILITY.md, "Kill campaign", has both).

How: ``reaped_on_parent_death()`` marks every process started inside it with
``_DEBL_SPARK_OWNER=<token>`` in its environment, which spark-submit, the launcher, the JVM and
the JVM's Python workers all inherit. The first time, it starts this file as a small watcher
process (``python -I``: it imports nothing of DeBL's, only the standard library and
``psutil``, a few tens of milliseconds). The watcher polls
its parent's pid; once the parent is gone, for whatever reason, it SIGKILLs every process whose
environment carries the token until none is left, then ends.

Pitfalls:

- ``PR_SET_PDEATHSIG`` cannot do this: pyspark passes its own ``preexec_fn`` to spark-submit,
  and the signal follows the death of the parent *thread*, not the process.
- The watcher polls the parent pid rather than waiting for a pipe to close: a forked child of
  the driver would inherit the pipe's write end and keep it open.
- A normal exit of the driver also ends its JVM this way, which is what pyspark does on stdin
  EOF anyway.
- The mark lives in ``os.environ`` only while the block runs: a child started by another thread
  in that moment carries it too, and ends with this process.
- Linux only (a process's environment, read through ``psutil``); elsewhere nothing is marked
  or watched.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import sys
import time

import psutil

OWNER_VAR = "_DEBL_SPARK_OWNER"  # not DEBL_*: the config refuses an unknown DEBL_ variable
POLL_S = 0.2  # how often the watcher looks for its parent
SWEEP_S = 30.0  # a sweep gives up after this long (a process that cannot be killed)

_watcher: tuple[int, str] | None = None  # (pid, token) of this process's watcher


def _watcher_token() -> str | None:
    """The token of this process's running watcher, starting one if there is none."""
    global _watcher
    if not sys.platform.startswith("linux"):
        return None
    if _watcher is not None:
        pid, token = _watcher
        try:
            if os.waitpid(pid, os.WNOHANG) == (0, 0):
                return token
        except ChildProcessError:
            pass
    token = f"{os.getpid()}-{secrets.token_hex(6)}"
    devnull = [(os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_RDWR, 0) for fd in (0, 1, 2)]
    pid = os.posix_spawn(sys.executable, [sys.executable, "-I", __file__, str(os.getpid()),
                                          token],
                         {k: v for k, v in os.environ.items() if k != OWNER_VAR},
                         file_actions=devnull)
    _watcher = (pid, token)
    return token


@contextlib.contextmanager
def reaped_on_parent_death():
    """Within the block, every process started carries this process's mark: when this process
    dies, its watcher kills them all."""
    token = _watcher_token()
    if token is None:
        yield
        return
    before = os.environ.get(OWNER_VAR)
    os.environ[OWNER_VAR] = token
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(OWNER_VAR, None)
        else:
            os.environ[OWNER_VAR] = before


def marked(token: str) -> list[int]:
    """Pids of the running processes whose environment carries *token* (this one excluded)."""
    # A process that ended meanwhile is left out; one not ours has no environ (None).
    return [p.pid for p in psutil.process_iter(["environ"])
            if p.pid != os.getpid() and (p.info["environ"] or {}).get(OWNER_VAR) == token]


def sweep(token: str) -> None:
    """SIGKILL every process marked with *token*, again until none is left: a process may fork
    (spark-submit's scripts do) between one look and the next."""
    deadline = time.monotonic() + SWEEP_S
    while time.monotonic() < deadline:
        pids = marked(token)
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)


def watch(parent: int, token: str) -> None:
    """The watcher's life: wait for *parent* to go, then sweep. It ignores the terminal's
    SIGINT and SIGHUP (a Ctrl-C reaches the whole process group; the driver decides)."""
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    while os.getppid() == parent:
        time.sleep(POLL_S)
    sweep(token)


if __name__ == "__main__":
    watch(int(sys.argv[1]), sys.argv[2])
