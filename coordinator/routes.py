"""How a query was answered: its route (by where its cold rows came from) and where its hot rows
came from, as ``Answer`` reports them and the statistics count them (docs/COORDINATOR.md,
"Routing")."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from debl.model import Link


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
    """One get_link_list through the coordinator.

    ``route``: where the cold rows came from (``Route``: ``mysql`` no cold row can have id1,
    ``merged`` HBase, ``raw`` the bucket's files, ``partial`` none: the deadline passed first,
    ``complete`` False). ``hot``: where the hot rows came from (``HotSide``). ``waited_s``: time
    blocked waiting for uptime or for the bucket (0.0 if answered at once). ``bucket``: the cold
    bucket of id1, None when no cold row can have id1. ``load_id``: the load that answered.
    """

    links: list[Link]
    complete: bool
    waited_s: float
    bucket: int | None
    route: Route
    load_id: str = ""
    hot: HotSide = HotSide.NONE

    @property
    def waited(self) -> bool:
        return self.waited_s > 0.0
