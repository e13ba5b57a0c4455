"""The cross-store merge: one get_link_list answer from a load's hot rows (MySQL, or the hot
files' buckets before MySQL has them) and its cold rows (HBase, or the bucket's files before
gen_HF has converted it). Every source offers one thing, ``scan_newest_first`` (the
``NewestFirst`` protocol: MySQLStore, HBaseStore, and a bucket's raw files through
``RawFiles``), and ``answer`` merges any hot source with any cold one by the one rule.

Each store already holds one row per key, the winner of the merge rule among its own input. The
answer for a key is the winner of those two rows under the same rule (debl.model.merge_rank):
greatest ``time``, then greatest ``version``, then the hot row over the cold one. Since the rank
is a total order, the winner of the per-store winners is the winner of all input rows: exactly
what the in-memory reference computes from the raw files.

Merge first, then filter (debl.model.select_links). Filtering each store before merging would be
wrong in two ways:

- hidden rows: a newer hidden row (a delete) in one store must hide an older visible row in the
  other, so both scans include hidden rows;
- the time window: a winner newer than ``max_time`` suppresses the key's older row inside the
  window, so the scans are not bounded by ``max_time`` (only by ``min_time``: a row older than
  ``min_time`` can never beat one at or after it, and would be filtered out if it won).

Both scans come newest first (time, then id2, descending), so the merge streams: a key's first
appearance in the merged order carries its greatest time, and the two rows of one key with equal
time are adjacent. The merge stops as soon as ``offset + limit`` visible winners inside the window
are known, so a heavy id1 costs one page per store, not its whole list.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from typing import Protocol

from debl.model import Link, Origin, merge_rank, select_links

# Only the hot/cold flag decides between two stores' rows of one key; file and line order are
# already settled inside each store.
HOT = Origin(hot=1, file_seq=0, line_no=0)
COLD = Origin(hot=0, file_seq=0, line_no=0)


class NewestFirst(Protocol):
    """A source of one side's rows: the winner of each key among its own input, hidden ones
    included, time descending (ties: id2 descending), from *min_time* on."""

    def scan_newest_first(self, id1: int, link_type: int, min_time: int = 0) -> Iterator[Link]:
        ...


def answer(hot: NewestFirst | None, cold: NewestFirst | None, id1: int, link_type: int,
           min_time: int, max_time: int, offset: int, limit: int) -> list[Link]:
    """get_link_list's answer from a hot and a cold source (either may be None: no row of
    that side can have id1), merged key by key, then filtered."""
    if limit == 0 or min_time > max_time:
        return []
    sides = [s.scan_newest_first(id1, link_type, min_time) for s in (hot, cold) if s is not None]
    if not sides:
        return []
    winners = merge_newest_first(*sides) if len(sides) == 2 else sides[0]
    return select_merged(winners, min_time, max_time, offset, limit)


def merge_newest_first(hot: Iterable[Link], cold: Iterable[Link]) -> Iterator[Link]:
    """The winner of every key, newest first (ties: id2 descending), hidden rows included.

    *hot* and *cold* are ``scan_newest_first`` iterators of one (id1, link_type): each holds a
    key at most once and comes in (time, id2) descending order.
    """
    tagged = heapq.merge(((l, HOT) for l in hot), ((l, COLD) for l in cold),
                         key=lambda item: (item[0].time, item[0].id2), reverse=True)
    seen: set[int] = set()
    pending: tuple[Link, Origin] | None = None
    for link, origin in tagged:
        if pending is not None:
            if (link.time, link.id2) == (pending[0].time, pending[0].id2):
                # The same key in both stores at one time: version, then hot over cold.
                if merge_rank(link, origin) > merge_rank(*pending):
                    pending = (link, origin)
                continue
            seen.add(pending[0].id2)
            yield pending[0]
            pending = None
        if link.id2 in seen:
            continue  # this key already won at a greater time
        pending = (link, origin)
    if pending is not None:
        yield pending[0]


def select_merged(winners: Iterable[Link], min_time: int, max_time: int, offset: int,
                  limit: int) -> list[Link]:
    """get_link_list's answer from merged winners in newest-first order: reads *winners* only
    until ``offset + limit`` of them are visible and inside [min_time, max_time], then filters
    with debl.model.select_links, the one filter every store uses."""
    if limit == 0 or min_time > max_time:
        return []
    want = offset + limit
    taken: list[Link] = []
    hits = 0
    for link in winners:
        if link.time < min_time:
            break  # newest first: nothing later is in the window
        taken.append(link)
        if link.visibility == 1 and link.time <= max_time:
            hits += 1
            if hits >= want:
                break
    return select_links(taken, min_time, max_time, offset, limit)
