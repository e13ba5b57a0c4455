"""How a query was answered: its route (by where its cold rows came from) and where its hot rows
came from, as ``Answer`` reports them and the statistics count them (docs/COORDINATOR.md,
"Routing"); and, while the coordinator decides, the query on its way (``PendingQuery``) and the
route decided (``RoutePlan``)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from enum import Enum

from debl.format.link import Link
from coordinator.early import EarlyView
from coordinator.load_stores import LoadStores
from coordinator.state import BucketState, Dataset, HotBucket


class Route(str, Enum):
    """Where a query's cold rows came from. A ``str``: compares and prints as its value."""

    MYSQL = "mysql"  # no cold row can have id1: the hot rows alone
    MERGED = "merged"  # the bucket is loaded: HBase, merged with the hot rows
    RAW = "raw"  # the bucket is not loaded: its files in HDFS, merged with the hot rows
    EARLY = "early"  # before uptime, every byte that can hold id1 here: the load's files
    PARTIAL = "partial"  # the deadline passed first: the hot rows alone, marked incomplete

    def __str__(self) -> str:
        return self.value


class HotSide(str, Enum):
    """Where a query's hot rows came from."""

    NONE = "none"  # no hot row can have these keys (no hot file, or not among its keys)
    MYSQL = "mysql"  # MySQL, which has taken the load's hot keys over
    RAW = "raw"  # the hot files' bucket in HDFS, before MySQL has them

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Answer:
    """One read through the coordinator: ``links`` the links of get_link_list or multiget_link,
    ``count`` count_link's number (None for the other two; ``links`` is then empty).

    ``route``: where the cold rows came from (``Route``: ``mysql`` no cold row can have id1,
    ``merged`` HBase, ``raw`` the bucket's files, ``partial`` none: the deadline passed first,
    ``complete`` False). ``hot``: where the hot rows came from (``HotSide``). ``waited_s``: time
    blocked waiting for uptime or for the bucket (0.0 if answered at once). ``bucket``: the cold
    bucket of id1, None when no cold row can have id1. ``load_id``: the load that answered.
    ``position``: a fresh answer's (docs/FRESHNESS.md, "The contract"), the sequence number of
    the source's log position it equals the source at; None when the load is not kept fresh.
    """

    links: list[Link]
    complete: bool
    waited_s: float
    bucket: int | None
    route: Route
    load_id: str = ""
    hot: HotSide = HotSide.NONE
    count: int | None = None
    position: int | None = None

    @property
    def waited(self) -> bool:
        return self.waited_s > 0.0


@dataclass(frozen=True)
class RoutePlan:
    """Where one query goes, decided under the lock: everything it reads is in here."""

    route: Route
    dataset: Dataset
    bucket: BucketState | None
    hot: HotSide
    hot_bucket: HotBucket | None
    outcome: str  # for the stats: immediate / buffered / waited_uptime / raw / partial
    waited_s: float
    stores: LoadStores  # the load's stores, found under the same lock


@dataclass
class PendingQuery:
    """One query on its way to a route, across the turns of the coordinator's routing (lock
    held): what it waited for so far, the bucket it counts on, when the raw route answers it."""

    id1: int
    link_type: int
    partial: bool
    started: float
    raw_after: float | None
    operation: str = "get_link_list"  # its name, for messages (coordinator.operations)
    waited_uptime: bool = False
    waited_bucket: bool = False
    registered: BucketState | None = None  # the bucket whose waiters count it
    raw_at: float | None = None  # when the raw route answers, once it needs a bucket
    waiting_in: EarlyView | None = None  # before uptime: the view whose waiting keys count it

    @property
    def asked(self) -> str:
        """What was asked, for messages: ``count_link(42, 123456789)``."""
        return f"{self.operation}({self.id1}, {self.link_type})"

    def waited(self, now: float) -> float:
        return now - self.started if (self.waited_uptime or self.waited_bucket) else 0.0

    def outcome(self) -> str:
        """How a query that goes to the stores now was served, for the stats."""
        return ("buffered" if self.waited_bucket else
                "waited_uptime" if self.waited_uptime else "immediate")

    def wait_s(self, now: float, remaining: float | None) -> float | None:
        """How long to wait for the next change: to the deadline or the raw route's moment."""
        raw_at = self.raw_at
        return (remaining if raw_at is None else raw_at - now if remaining is None else
                min(remaining, raw_at - now))


def end_of(started: float, timeout: float | None, deadline: float | None) -> float | None:
    """The monotonic instant past which a query asked at *started* gives up: *timeout*
    (seconds) or *deadline* (epoch seconds, ``time.time()``), whichever comes first (None:
    never)."""
    ends = []
    if timeout is not None:
        ends.append(started + max(timeout, 0.0))
    if deadline is not None:
        ends.append(started + max(deadline - time.time(), 0.0))
    return min(ends) if ends else None
