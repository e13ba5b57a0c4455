"""A coordinator's demand per bucket, and when it is published to ``debl_demand``.

The demand of a bucket not loaded yet counts every query of this coordinator that needed it:
one for each query waiting on it now, and, for each query that stopped waiting without the
bucket (answered by the raw route, or past its deadline), a weight that starts at one and halves
every ``HALF_LIFE_S`` seconds (``decayed``), so recent demand weighs most. With the raw route
off this is the paper's demand (the queries waiting) plus the tail of those that timed out; with
it on, queries hardly wait, and the decayed weights are what steer gen_HF. Published rounded to
whole queries (the table's column is an integer).

gen_HF reads ``catalog.serving.demand()``: the sum over coordinators of rows updated within its
``max_age`` (60 s by default). Hence the publication policy:

- publish when the counts changed, but at most once per ``min_interval`` (the poll interval):
  a burst of queries buffering on one bucket costs one write, not one per query;
- republish unchanged, non-empty counts every ``heartbeat`` seconds, or gen_HF would see a
  steady demand go stale and drop it;
- on close, publish nothing (delete the rows): a coordinator that is gone waits for nothing.
  A killed coordinator cannot: its rows age out after ``max_age``.

The policy is plain arithmetic over times so that it can be tested without a clock; the
coordinator's poller thread does the writing.
"""

from __future__ import annotations

import os
import secrets
import socket

HEARTBEAT_S = 10.0
# A query's weight in its bucket's demand halves every HALF_LIFE_S once it stopped waiting: long
# against a gen_HF run (a few seconds for two buckets, docs/ONLINE.md), so that a run's choice
# rests on tens of seconds of queries, short against a conversion of every bucket (minutes).
HALF_LIFE_S = 30.0


def decayed(weight: float, age_s: float) -> float:
    """*weight* after *age_s* seconds of halving every HALF_LIFE_S."""
    return weight * 0.5 ** (max(age_s, 0.0) / HALF_LIFE_S)


def new_coordinator_id() -> str:
    """host-pid-random, at most 64 characters (the width of ``debl_demand.coordinator``)."""
    host = socket.gethostname().split(".")[0][:40] or "host"
    return f"{host}-{os.getpid()}-{secrets.token_hex(3)}"


class DemandPolicy:
    """Decides, from the current counts and the clock, whether to publish now."""

    def __init__(self, min_interval: float, heartbeat: float = HEARTBEAT_S) -> None:
        self.min_interval = min_interval
        self.heartbeat = heartbeat
        self.published: dict[int, int] = {}
        self.last = float("-inf")

    def next_due(self, waiting: dict[int, int], now: float) -> float | None:
        """The earliest time at which *waiting* should be published (<= now: at once), or None
        when nothing needs publishing."""
        if waiting != self.published:
            return self.last + self.min_interval
        if waiting:
            return self.last + self.heartbeat
        return None

    def due(self, waiting: dict[int, int], now: float) -> bool:
        at = self.next_due(waiting, now)
        return at is not None and at <= now

    def done(self, waiting: dict[int, int], now: float) -> None:
        """Record that *waiting* was published at *now*."""
        self.published = dict(waiting)
        self.last = now
