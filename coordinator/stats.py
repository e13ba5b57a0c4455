"""Wait statistics of the queries one coordinator answered, for the benchmark's report.

Every answered query is counted once, by how it was answered:

- ``immediate``: answered without blocking;
- ``buffered``: blocked on a bucket that was not loaded yet, answered when it landed (its wait
  includes any wait for uptime before it);
- ``waited_uptime``: blocked only because the system was not up yet;
- ``partial``: passed its deadline and got the MySQL-only answer (it asked for it);
- ``timeouts``: passed its deadline and got QueryTimeout.

Wait times are kept for buffered queries only (the paper's "mean wait of buffered queries"), in a
compact array: 8 bytes a query, 4 MB for the 500,000 queries of a paper-sized run.
"""

from __future__ import annotations

import threading
from array import array
from dataclasses import asdict, dataclass

import numpy as np


@dataclass(frozen=True)
class CoordinatorStats:
    """A snapshot of the counters; ``*_wait_s`` cover buffered queries (0 when there were none)."""

    answered: int
    immediate: int
    buffered: int
    waited_uptime: int
    partial: int
    timeouts: int
    mean_wait_s: float
    p50_wait_s: float
    p95_wait_s: float
    max_wait_s: float

    @property
    def immediate_share(self) -> float:
        """The share of answered queries that did not wait at all."""
        return self.immediate / self.answered if self.answered else 0.0

    def to_dict(self) -> dict:
        return {**asdict(self), "immediate_share": self.immediate_share}


class WaitRecorder:
    """Thread-safe counters; ``record`` is called once per finished query."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self._counts = {"immediate": 0, "buffered": 0, "waited_uptime": 0, "partial": 0,
                            "timeouts": 0}
            self._waits = array("d")

    def record(self, outcome: str, waited_s: float) -> None:
        with self._lock:
            self._counts[outcome] += 1
            if outcome == "buffered":
                self._waits.append(waited_s)

    def snapshot(self) -> CoordinatorStats:
        with self._lock:
            counts = dict(self._counts)
            waits = np.frombuffer(self._waits.tobytes(), dtype=np.float64)
        answered = sum(n for k, n in counts.items() if k != "timeouts")
        if len(waits):
            mean, p50, p95, top = (float(waits.mean()), float(np.percentile(waits, 50)),
                                   float(np.percentile(waits, 95)), float(waits.max()))
        else:
            mean = p50 = p95 = top = 0.0
        return CoordinatorStats(answered=answered, mean_wait_s=mean, p50_wait_s=p50,
                                p95_wait_s=p95, max_wait_s=top, **counts)
