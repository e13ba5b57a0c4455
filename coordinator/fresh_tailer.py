"""The threads of a fresh view (docs/FRESHNESS.md, "Where changes wait and how they are
applied"): the **tailer**, which reads the change log past the position it has reached and
hands each read to the view (which puts every change into the buffer of its key range), and the
**refresher**, which applies buffers in the background.

The tailer reads every ``fresh.tail_interval`` while a query waits for it, ten times less often
otherwise, and at once again after a full read (a backlog); a query that needs a position it has
not reached wakes it. Its reads run while queries refresh their ranges (pipelined); in serial
mode the process's one lock makes each read and delivery one maintenance step among the
refreshes.

The refresher runs every ``fresh.idle_refresh`` and when a buffer passes
``fresh.buffer_threshold`` (the tailer wakes it): what it does is the view's (``FreshView.
background``).

Pitfall: a failing read (MySQL restarting) is logged, kept in ``error`` and retried every
``RETRY_S``; queries waiting for the tailer meanwhile reach their deadline with the error in
their message. A change log that no longer holds the load's changes (``ChangesForgotten``) is
for good: the tailer stops, and every query waiting for it, or coming later, fails at once
with that error.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager

from debl.catalog import Change
from debl.errors import ChangesForgotten

log = logging.getLogger("debl.coordinator")

IDLE_FACTOR = 10  # reads this many times less often with no query waiting
RETRY_S = 1.0  # after a failed read
READ_LIMIT = 10_000  # changes per read (whole transactions: ChangesCatalog.since)
_JOIN_S = 10.0


class _Loop:
    """A daemon thread that runs ``step`` until stopped, sleeping what it returns (seconds;
    0: at once again) or until woken."""

    def __init__(self, name: str):
        self._wake = threading.Event()
        self._stopped = False
        self.error: str | None = None
        self._thread = threading.Thread(target=self._run, daemon=True, name=name)

    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        self._stopped = True
        self._wake.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(_JOIN_S)

    def step(self) -> float:
        raise NotImplementedError

    def _run(self) -> None:
        while not self._stopped:
            try:
                pause = self.step()
                self.error = None
            except Exception as exc:  # noqa: BLE001 -- never let the thread die
                self.error = f"{type(exc).__name__}: {exc}"
                log.warning("%s failed (retrying in %.0f s): %s", self._thread.name, RETRY_S,
                            self.error)
                pause = RETRY_S
            if pause > 0 and not self._stopped:
                self._wake.wait(pause)
                self._wake.clear()


class Tailer(_Loop):
    """Reads ``read(after, limit) -> (changes, upto)`` (``ChangesCatalog.since`` of a source) from
    *start* on and hands each read to ``deliver(changes, upto)`` under ``cond``, then moves
    ``position`` (every change up to it delivered). *serial*: the process's lock of serial
    mode, or a no-op context."""

    def __init__(self, read: Callable[[int, int], tuple[list[Change], int]], start: int,
                 deliver: Callable[[list[Change], int], None], interval: float,
                 serial: AbstractContextManager, name: str):
        super().__init__(name)
        self._read, self._deliver, self._serial = read, deliver, serial
        self.interval = interval
        self.position = start
        self.cond = threading.Condition()  # guards position; held while delivering
        self._waiting = 0
        self._last_read = float("-inf")
        self.fatal: ChangesForgotten | None = None  # the read that stopped it for good

    def wait_for(self, target: int, end: float | None) -> bool:
        """Block until ``position >= target``; False if the monotonic *end* passed first;
        ChangesForgotten if the tailer stopped for good."""
        with self.cond:
            if self.position >= target:
                return True
            self._waiting += 1
            self.wake()
            try:
                while self.position < target:
                    if self.fatal is not None:
                        raise ChangesForgotten(str(self.fatal))
                    remaining = None if end is None else end - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        return False
                    self.cond.wait(remaining)
                return True
            finally:
                self._waiting -= 1

    def step(self) -> float:
        now = time.monotonic()
        due = self._last_read + (self.interval if self._waiting else
                                 self.interval * IDLE_FACTOR)
        if now < due:
            return due - now
        self._last_read = now
        with self._serial:
            try:
                changes, upto = self._read(self.position, READ_LIMIT)
            except ChangesForgotten as exc:
                log.warning("%s stopped: %s", self._thread.name, exc)
                with self.cond:
                    self.fatal = exc
                    self.cond.notify_all()
                self.stop()
                return 0.0
            with self.cond:
                if changes or upto > self.position:
                    self._deliver(changes, upto)
                    self.position = max(self.position, upto)
                    self.cond.notify_all()
        if len(changes) >= READ_LIMIT // 2:  # cut short of a whole transaction: a backlog
            self._last_read = float("-inf")  # read on at once
            return 0.0
        return self.interval if self._waiting else self.interval * IDLE_FACTOR


class Refresher(_Loop):
    """Calls *background* every *interval* seconds and when woken."""

    def __init__(self, background: Callable[[], None], interval: float, name: str):
        super().__init__(name)
        self._background, self.interval = background, interval

    def step(self) -> float:
        self._background()
        return self.interval
