"""The in-memory reference store: the merge rule and get_link_list as plain Python.

Slow and unbounded by design; it is the oracle the real stores are tested against, and what
``debl verify`` and the tests use to compute expected answers from raw files.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator

from debl.format.link import (DEFAULT_LIMIT, MAX_TIME, Link, Origin, check_ids, count_visible,
                        merge_batch, merge_rank, select_id2s, select_links)
from debl.store.base import LinkStore

_STORED = Origin(hot=0, file_seq=-1, position=-1)  # below every real origin: a write now wins


class MemoryStore(LinkStore):
    def __init__(self) -> None:
        # (id1, link_type) -> id2 -> (rank, link)
        self._lists: dict[tuple[int, int], dict[int, tuple[tuple, Link]]] = defaultdict(dict)

    def write_links(self, links: Iterable[tuple[Link, Origin]]) -> int:
        n, batch = merge_batch(links)
        for (id1, link_type, id2), link in batch.items():
            row = self._lists[(id1, link_type)]
            old = row.get(id2)
            if old is None or (link.time, link.version) >= (old[1].time, old[1].version):
                row[id2] = (merge_rank(link, _STORED), link)
        return n

    def get_link_list(self, id1: int, link_type: int, min_time: int = 0,
                      max_time: int = MAX_TIME, offset: int = 0,
                      limit: int = DEFAULT_LIMIT) -> list[Link]:
        winners = [link for _, link in self._lists.get((id1, link_type), {}).values()]
        return select_links(winners, min_time, max_time, offset, limit)

    def count_link(self, id1: int, link_type: int) -> int:
        check_ids(id1, link_type)
        return count_visible(link for _, link in self._lists.get((id1, link_type), {}).values())

    def multiget_link(self, id1: int, link_type: int, id2s: Iterable[int]) -> list[Link]:
        id2s = check_ids(id1, link_type, id2s)
        row = self._lists.get((id1, link_type), {})
        return select_id2s((row[id2][1] for id2 in set(id2s) if id2 in row), id2s)

    def scan_newest_first(self, id1: int, link_type: int, min_time: int = 0) -> Iterator[Link]:
        rows = [link for _, link in self._lists.get((id1, link_type), {}).values()
                if link.time >= min_time]
        rows.sort(key=lambda l: (l.time, l.id2), reverse=True)
        return iter(rows)

    def count(self) -> int:
        return sum(len(row) for row in self._lists.values())

    def reset(self) -> None:
        self._lists.clear()

    def keys(self) -> Iterator[tuple[int, int]]:
        """Every (id1, link_type) that holds at least one row."""
        return iter(list(self._lists))
