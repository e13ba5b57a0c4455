"""The open-loop send schedule: when each request of a client thread is meant to be sent.

With ``--rate R`` and T threads, each thread's requests arrive as a Poisson process of rate R/T
(exponential gaps, LinkBench's ``requestrate``), so the whole client offers R requests per second.
The schedule is fixed in advance: instant k is the sum of the first k gaps after the run's start,
whatever happens to the requests. A thread that falls behind (a slow answer, a stall) sends its
late requests at once, and their latency counts from the *intended* instant, not from the late
send: a stall of S seconds shows as about ``S * R/T`` slow requests, as a user arriving at those
instants would see it, instead of a single one (the "coordinated omission" of a client that waits
for each answer before it looks at the clock).

Deterministic: stream ``s`` of seed ``x`` gives the same instants every run, independent of the
request draws (``debl.workload.requests``), of the other threads and of the number of processes.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from debl.errors import ConfigError

_BATCH = 1024
_STREAM_TAG = 0xA221  # keeps these draws apart from the request draws of the same stream


class PoissonSchedule:
    """Intended send instants of one thread, in ns after the run's start, increasing.

    Iterate it: each ``next()`` is the next instant. Not thread-safe: one per thread."""

    def __init__(self, rate: float, seed: int, stream: int) -> None:
        if not rate > 0:
            raise ConfigError(f"a send rate must be positive, not {rate}")
        self.rate = rate
        self._mean_gap_ns = 1e9 / rate
        self._rng = np.random.default_rng([seed, stream, _STREAM_TAG])
        self._base = 0.0
        self._pending: Iterator[int] = iter(())

    def __iter__(self) -> "PoissonSchedule":
        return self

    def __next__(self) -> int:
        try:
            return next(self._pending)
        except StopIteration:
            # Sums in float64 ns: exact to the ns for runs of up to ~100 days.
            instants = self._base + np.cumsum(self._rng.exponential(self._mean_gap_ns, _BATCH))
            self._base = float(instants[-1])
            self._pending = iter(instants.astype(np.int64).tolist())
            return next(self._pending)
