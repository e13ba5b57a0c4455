"""Bounded waits on a library that has none: the threads that run hdfs-native's calls for an
``HdfsClient`` (``CallThreads``).

hdfs-native has no timeout of its own for a server that accepts a connection and then does not
answer (a NameNode or DataNode that hangs holds the call for ever). So every call runs on one of
the client's threads, and the caller waits at most *timeout* seconds for it: then HdfsTimeout,
and the thread stays stuck until the server answers (the threads are daemons: a stuck one never
holds the process's exit).

Pitfalls:

- Threads start as calls need them, up to *threads*, and end after ``IDLE_S`` without a call:
  a client made for one call costs one thread for a while, closed or not; more calls at once
  than threads wait their turn, and their wait counts.
- ``close`` waits for the calls in flight (at most *timeout*): a daemon thread still inside the
  native client when the interpreter shuts down is ended by a forced unwind through the Rust
  frames, which aborts the whole process (``FATAL: exception not rethrown``, exit 134) after it
  has done its work (docs/COORDINATOR.md, "Threads"). Only a call stuck past the timeout is
  left to that.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from debl.errors import ServiceError
from debl.hdfs.errors import HdfsTimeout

IDLE_S = 10.0  # a thread without a call this long ends (another starts with the next call)


class _Call:
    """One call handed to a thread; ``wait`` says whether it ended in time."""

    __slots__ = ("fn", "args", "done", "result", "error")

    def __init__(self, fn: Callable, args: tuple) -> None:
        self.fn, self.args = fn, args
        self.done = threading.Lock()
        self.done.acquire()  # released by the thread that ran the call: cheaper than a Future
        self.result: Any = None
        self.error: BaseException | None = None

    def wait(self, timeout: float) -> bool:
        return self.done.acquire(timeout=timeout)


class CallThreads:
    """At most *threads* threads that run calls for the HDFS at *server* (its address, for the
    messages), each call waited for at most *timeout* seconds."""

    def __init__(self, server: str, timeout: float, threads: int) -> None:
        self.server, self.timeout, self.size = server, timeout, threads
        self._calls: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()  # guards the four below
        self._waiting = 0  # calls queued and not yet taken by a thread
        self._busy = 0  # threads running a call
        self._closed = False

    def run(self, calls: Sequence[tuple[Callable, tuple]], what: str) -> list:
        """Each ``fn(*args)`` on the threads; their results in order. The first error of a
        call is raised once every call has ended; HdfsTimeout (naming *what*) once the timeout
        has passed first."""
        return self.start(calls, what)()

    def start(self, calls: Sequence[tuple[Callable, tuple]], what: str) -> Callable[[], list]:
        """``run`` in two steps: the calls started, and a function that waits for them (at
        most the timeout from now) and gives what ``run`` gives."""
        pending = [_Call(fn, args) for fn, args in calls]
        self._start(len(pending))
        for call in pending:
            self._calls.put(call)
        deadline = time.monotonic() + self.timeout

        def results() -> list:
            for call in pending:
                if not call.wait(max(deadline - time.monotonic(), 0.0)):
                    raise HdfsTimeout(f"HDFS at {self.server} did not answer within "
                                      f"{self.timeout:g} s ({what}); is the stack up "
                                      "(`debl stack status`)?")
                call.done.release()  # a second wait finds it done at once
            for call in pending:
                if call.error is not None:
                    raise call.error
            return [call.result for call in pending]
        return results

    def close(self) -> None:
        """Stop the threads once the calls queued before are done, and wait for them (at most
        *timeout* in all; see the module's pitfalls). Idempotent."""
        with self._lock:
            threads = [] if self._closed else list(self._threads)
            self._closed = True
        for _ in threads:
            self._calls.put(None)
        deadline = time.monotonic() + self.timeout
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join(max(deadline - time.monotonic(), 0.0))

    def _start(self, calls: int) -> None:
        """Enough threads for *calls* more calls, up to the limit."""
        with self._lock:
            if self._closed:
                raise ServiceError(f"the client of HDFS at {self.server} is closed")
            self._waiting += calls
            while len(self._threads) < min(self.size, self._busy + self._waiting):
                thread = threading.Thread(target=self._serve, daemon=True,
                                          name=f"debl-hdfs-{len(self._threads)}")
                self._threads.append(thread)
                thread.start()

    def _serve(self) -> None:
        while True:
            try:
                call = self._calls.get(timeout=IDLE_S)
            except queue.Empty:
                with self._lock:
                    if not self._waiting:  # else a call is on its way to the queue: take it
                        self._threads.remove(threading.current_thread())
                        return
                continue
            if call is None:
                return
            with self._lock:
                self._waiting -= 1
                self._busy += 1
            try:
                call.result = call.fn(*call.args)
            except BaseException as exc:  # noqa: BLE001 -- handed to the caller, who raises it
                call.error = exc
            with self._lock:
                self._busy -= 1
            call.done.release()
