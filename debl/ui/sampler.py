"""The status the page shows, read once per *interval* by one thread however many pages poll.

Each read is ``read_status`` (what ``debl status --json --buckets`` prints); the answer counts
of each read go into the history of answers per second (``debl.ui.history``), and while the
load answers before its uptime, its bytes fetched on demand and keys waiting into a second one.
A read that fails (MySQL stopped, unreachable, refusing the account) keeps the last status and
records the error, worded by the catalog (``ServiceError``: which MySQL, and what to do), with
the time it started failing; the next tick tries again, so the page recovers by itself when
MySQL is back.

Pitfalls: a MySQL that accepts connections but does not answer (frozen) holds the read for up to
``STATUS_TIMEOUT_S``: the sampler's own config lowers ``service_timeout`` to it, so that the page
says so within seconds rather than after a load's one minute. While a read hangs, the page shows
the snapshot's age. Opening a ``Catalog`` on a database without DeBL's tables creates them (as
``debl status`` does): the page never writes anything else.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from debl.catalog import Catalog
from debl.config import Config
from debl.errors import DeblError
from debl.status import read_status
from debl.ui.history import AnswerHistory

log = logging.getLogger(__name__)

STATUS_TIMEOUT_S = 5.0
TOP_DEMAND = 10


@dataclass(frozen=True)
class Snapshot:
    """What the sampler knows now. ``status`` is the last status read (None: none yet), read
    at ``status_at``; ``error`` the last read's failure (None: it succeeded), failing since
    ``error_since``; ``version`` grows with every read, failed or not. ``early_history``: the
    bytes fetched on demand (a rate) and the keys waiting (``levels``) while the load shown
    answers before its uptime (None: it does not)."""

    status: dict | None
    status_at: float | None
    error: str | None
    error_since: float | None
    history: dict
    version: int
    early_history: dict | None = None


class StatusSampler:
    """Reads the status every *interval* seconds in a thread until ``stop``."""

    def __init__(self, config: Config, interval: float = 1.0, window_s: float = 600.0):
        self.config = config.replace(service_timeout=min(config.service_timeout,
                                                         STATUS_TIMEOUT_S))
        self.interval = interval
        self._history = AnswerHistory(window_s)
        self._early_history = AnswerHistory(window_s)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._catalog: Catalog | None = None
        self._snapshot = Snapshot(None, None, None, None, self._history.series(), 0)
        self._thread = threading.Thread(target=self._run, name="debl-ui-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def snapshot(self) -> Snapshot:
        with self._lock:
            return self._snapshot

    def sample(self) -> None:
        """Read the status once and record it, or the error."""
        try:
            if self._catalog is None:
                self._catalog = Catalog(self.config)
            status = read_status(self._catalog, top=TOP_DEMAND, every_bucket=True)
        except Exception as exc:
            self._catalog = None  # opened again, schema check and all, at the next read
            self._failed(exc)
            return
        load_id = status["load"]["load_id"] if status["load"] else None
        early = status["load"].get("early") if status["load"] else None
        with self._lock:
            self._history.add(status["now"], load_id, status["answers"]["by_route"])
            if early is not None:
                self._early_history.add(status["now"], load_id,
                                        {"demand_bytes": early["demand_bytes"]},
                                        {"keys_waiting": early["keys_waiting"]})
            self._snapshot = Snapshot(status, status["now"], None, None, self._history.series(),
                                      self._snapshot.version + 1,
                                      None if early is None else self._early_history.series())

    def _failed(self, exc: Exception) -> None:
        error = _worded(exc)
        with self._lock:
            self._history.gap()
            self._early_history.gap()
            old = self._snapshot
            if old.error is None:  # once per outage; a DeblError's words say it all
                log.warning("debl ui: reading the status failed: %s", error,
                            exc_info=None if isinstance(exc, DeblError) else exc)
            self._snapshot = Snapshot(old.status, old.status_at, error,
                                      old.error_since if old.error else time.time(),
                                      self._history.series(), old.version + 1,
                                      None if old.early_history is None
                                      else self._early_history.series())

    def _run(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            self.sample()
            next_at = max(next_at + self.interval, time.monotonic())
            self._stop.wait(next_at - time.monotonic())


def _worded(exc: Exception) -> str:
    """A DeblError says what happened and what to do; anything else is named by its type, in
    one line (the page never shows a traceback)."""
    if isinstance(exc, DeblError):
        return str(exc)
    first = str(exc).splitlines()[0] if str(exc) else ""
    return f"reading the status failed: {type(exc).__name__}: {first}"
