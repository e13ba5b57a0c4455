"""Which day was current when (docs/RELIABILITY.md, "Day operations"): a thread that reads the
catalog's current load every ``EVERY_S`` and keeps its history, each entry from the instant the
catalog recorded for the switch (``debl_loads.switched``, written by ``make_current`` and
``rollback`` in the switch's own transaction), not from when the thread saw it.

Pitfalls:

- A coordinator moves to a new current load at its next poll (docs/LOADING.md, "Days"): an
  answer routed just after a switch may still come from the day before. ``was_current`` takes a
  *slack* for that; how late answers came is a figure of its own (``lateness``).
- While MySQL is down nothing can switch (the switch is a MySQL transaction): the thread's
  failing reads leave the history as it is.
"""

from __future__ import annotations

import threading
from bisect import bisect_right

from debl.catalog import Catalog
from debl.config import Config
from debl.errors import DeblError

EVERY_S = 0.05


class CurrentWatcher:
    """The history of the current load, as (since, load id) in time order; ``start``,
    ``stop``."""

    def __init__(self, config: Config, every: float = EVERY_S):
        self.config, self.every = config, every
        self.history: list[tuple[float, str]] = []
        self.failed_reads = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="dayops-current")

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30.0)

    def _run(self) -> None:
        catalog = None
        while not self._stop.wait(self.every):
            try:
                catalog = catalog or Catalog(self.config)
                load = catalog.loads.current()
            except DeblError:  # MySQL restarting: nothing can switch meanwhile
                self.failed_reads += 1
                continue
            self.note(None if load is None else (load.switched or 0.0),
                      None if load is None else load.load_id)

    def note(self, since: float | None, load_id: str | None) -> None:
        """Record what a read saw (also what tests feed it)."""
        if load_id is None or since is None:
            return
        if not self.history or self.history[-1] != (since, load_id):
            self.history.append((since, load_id))
            self.history.sort()

    def current_at(self, t: float) -> str | None:
        i = bisect_right([since for since, _ in self.history], t) - 1
        return self.history[i][1] if i >= 0 else None

    def intervals(self, load_id: str) -> list[tuple[float, float]]:
        """When *load_id* was current: [since, until) pairs (until: the next switch, or
        infinity)."""
        out = []
        for i, (since, current) in enumerate(self.history):
            if current == load_id:
                until = self.history[i + 1][0] if i + 1 < len(self.history) else float("inf")
                out.append((since, until))
        return out

    def lateness(self, load_id: str, t0: float, t1: float) -> float | None:
        """How long before *t0* *load_id* stopped being current, for a query asked at *t0* and
        answered at *t1*: 0.0 if it was current at some instant in [t0, t1], None if it never
        was current before *t1*."""
        best = None
        for since, until in self.intervals(load_id):
            if since > t1:
                continue
            late = max(0.0, t0 - until)
            best = late if best is None else min(best, late)
        return best


def longest_gap(times: list[float], excluded: list[tuple[float, float]]
                ) -> tuple[float, float]:
    """The longest stretch with no instant of *times* (sorted) once the *excluded* intervals
    are cut out of it: a stretch that starts in an outage counts from the outage's end. Returns
    (its length, its start), (0.0, 0.0) if there is none."""
    best = (0.0, 0.0)
    cuts = sorted(excluded)
    for a, b in zip(times, times[1:]):
        if b - a <= best[0]:
            continue
        start = a
        for lo, hi in cuts:
            if hi <= start or lo >= b:
                continue
            if lo - start > best[0]:
                best = (lo - start, start)
            start = max(start, hi)
        if b - start > best[0]:
            best = (b - start, start)
    return best
