"""The one merge of newest-first rows (``NewestFirstMerge``): across a bucket's files in the raw
reader, and across stores for one answer (get_link_list, count_link, multiget_link:
``coordinator.operations``) from a load's hot rows (MySQL, or the hot files' buckets before
MySQL has them) and its cold rows (HBase, or the bucket's files before
gen_HF has converted it). Every source offers one thing, ``scan_newest_first`` (the
``NewestFirst`` protocol: MySQLStore, HBaseStore, and a bucket's raw files through
``RawFiles``), and ``answer`` merges any hot source with any cold one by the one rule.

Each store already holds one row per key, the winner of the merge rule among its own input. The
answer for a key is the winner of those two rows under the same rule (debl.format.link.merge_rank):
greatest ``time``, then greatest ``version``, then the hot row over the cold one. Since the rank
is a total order, the winner of the per-store winners is the winner of all input rows: exactly
what the in-memory reference computes from the raw files.

Merge first, then filter (debl.format.link.select_links). Filtering each store before merging would
be wrong in two ways:

- hidden rows: a newer hidden row (a delete) in one store must hide an older visible row in the
  other, so both scans include hidden rows;
- the time window: a winner newer than ``max_time`` suppresses the key's older row inside the
  window, so the scans are not bounded by ``max_time`` (only by ``min_time``: a row older than
  ``min_time`` can never beat one at or after it, and would be filtered out if it won).

Both scans come newest first (time, then id2, descending), so the merge streams: it reads each
side in batches, and the rows newer than every unfinished side's oldest row so far are final (a
key's winner is its newest row). The merge stops as soon as ``offset + limit`` visible winners
inside the window are known, so a heavy id1 costs a page or so per store, not its whole list.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice
from typing import Any, Protocol

from debl.measure import request_cost
from debl.format.link import Link, Origin, merge_batch, select_links

# Only the hot/cold flag decides between two stores' rows of one key; file and line order are
# already settled inside each store.
HOT = Origin(hot=1, file_seq=0, position=0)
COLD = Origin(hot=0, file_seq=0, position=0)
_BATCH = 256  # rows a side gives the merge at a time (a page of a list is read lazily)


class NewestFirst(Protocol):
    """A source of one side's rows: the winner of each key among its own input, hidden ones
    included, time descending (ties: id2 descending), from *min_time* on."""

    def scan_newest_first(self, id1: int, link_type: int, min_time: int = 0) -> Iterator[Link]:
        ...


class Operation(Protocol):
    """What a read asks of the merge (``coordinator.operations``): the key's list, from
    ``scan_from`` on, and its answer from the list's winners (newest first, hidden included).
    Read-only (properties): the operations are frozen dataclasses."""

    @property
    def id1(self) -> int: ...

    @property
    def link_type(self) -> int: ...

    @property
    def scan_from(self) -> int: ...

    @property
    def needs_no_rows(self) -> bool:  # its answer is known without reading (a limit of 0, no id2)
        ...

    def of_winners(self, winners: Iterable[Link]) -> Any:
        ...


def answer(hot: NewestFirst | None, cold: NewestFirst | None, operation: Operation) -> Any:
    """The answer of *operation* (get_link_list, count_link or multiget_link:
    ``coordinator.operations``) from a hot and a cold source (either may be None: no row of
    that side can have id1), merged key by key, then given to the operation.

    The sources are read lazily inside: in the calling thread's request record
    (``debl.measure.request_cost``) each store charges its own reads, and ``merge`` gets what is
    left of the time in here (the rows parsed, merged and filtered)."""
    with request_cost.Timed(request_cost.MERGE):
        if operation.needs_no_rows:
            return operation.of_winners(())
        sides = [s.scan_newest_first(operation.id1, operation.link_type, operation.scan_from)
                 for s in (hot, cold) if s is not None]
        winners = (merge_newest_first(*sides) if len(sides) == 2 else
                   sides[0] if sides else iter(()))
        return operation.of_winners(winners)


def merge_newest_first(hot: Iterable[Link], cold: Iterable[Link]) -> Iterator[Link]:
    """The winner of every key, newest first (ties: id2 descending), hidden rows included.

    *hot* and *cold* are ``scan_newest_first`` iterators of one (id1, link_type): each holds a
    key at most once and comes in (time, id2) descending order. The same merge as the raw
    reader's across a bucket's files (``NewestFirstMerge``), the two sides tagged hot and cold.
    """
    sides = [(iter(hot), HOT), (iter(cold), COLD)]
    merge = NewestFirstMerge(len(sides))
    while wanted := merge.wanted():
        for i in wanted:
            stream, origin = sides[i]
            batch = [(link, origin) for link in islice(stream, _BATCH)]
            merge.add(i, batch, done=len(batch) < _BATCH)
        yield from merge.winners()
    yield from merge.winners()


class NewestFirstMerge:
    """One winner per key by the merge rule, newest first (ties: id2 descending), from the rows
    of one (id1, link_type) in several files (or stores), each read newest first in batches
    (every batch of a file no newer than the one before it).

    ``add`` a file's next batch; ``winners`` gives the winners no unread row can change, the rows
    newer than every unfinished file's oldest row so far (an unread row is no newer than that),
    merged at once by ``merge_batch`` and sorted: one pass per batch of rows, where a heap over
    per-file streams cost a few µs per row more. A key's winner is its newest row, so a key
    given once is never given again."""

    def __init__(self, files: int) -> None:
        request_cost.note_runs(files)
        self._oldest: list[int | None] = [None] * files  # per file: the oldest time added
        self._done = [False] * files
        self._pending: list[tuple[Link, Origin]] = []
        self._given: set[int] = set()

    def wanted(self) -> list[int]:
        """The files to read next: those not done whose oldest row so far is the newest among
        them (or that gave nothing yet): the others' further rows are older still, and can
        only be given after these."""
        open_files = [(t, i) for i, (t, done) in enumerate(zip(self._oldest, self._done))
                      if not done]
        if any(t is None for t, _ in open_files):
            return [i for t, i in open_files if t is None]
        newest = max((t for t, _ in open_files if t is not None), default=None)
        return [i for t, i in open_files if t == newest]

    def add(self, file: int, rows: list[tuple[Link, Origin]], done: bool) -> None:
        """The file's next batch; *done*: the file has no more rows to give."""
        if rows:
            oldest = min(row[0].time for row in rows)
            seen = self._oldest[file]
            self._oldest[file] = oldest if seen is None else min(seen, oldest)
            self._pending += rows
        self._done[file] = done

    def winners(self) -> list[Link]:
        """The winners now certain, newest first; after every file is done, all the rest."""
        open_files = [t for t, done in zip(self._oldest, self._done) if not done]
        if None in open_files:  # a file that gave nothing yet may hold anything
            return []
        bound = max((t for t in open_files if t is not None), default=-1)
        final = [row for row in self._pending if row[0].time > bound]
        if not final:
            return []
        self._pending = [row for row in self._pending if row[0].time <= bound]
        _, winners = merge_batch(row for row in final if row[0].id2 not in self._given)
        given = sorted(winners.values(), key=_newest_first, reverse=True)
        self._given.update(link.id2 for link in given)
        return given


def _newest_first(link: Link) -> tuple[int, int]:
    return link.time, link.id2


def select_merged(winners: Iterable[Link], min_time: int, max_time: int, offset: int,
                  limit: int) -> list[Link]:
    """get_link_list's answer from merged winners in newest-first order: reads *winners* only
    until ``offset + limit`` of them are visible and inside [min_time, max_time], then filters
    with debl.format.link.select_links, the one filter every store uses."""
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
