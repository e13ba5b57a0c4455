"""The ``LinkStore`` interface: what every store of links offers, LinkBench-style.

Every implementation (in-memory reference, MySQL, HBase) passes one conformance suite
(tests/test_store_conformance.py). Within one store a key ``(id1, link_type, id2)`` holds one row:
the winner of the merge rule (debl.format.link) among every row written for it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from typing import Self

from debl.format.link import DEFAULT_LIMIT, MAX_TIME, Link, Origin


class LinkStore(ABC):
    """A store of links. Use it with ``with``: leaving the block closes its connections."""

    @abstractmethod
    def get_link_list(self, id1: int, link_type: int, min_time: int = 0,
                      max_time: int = MAX_TIME, offset: int = 0,
                      limit: int = DEFAULT_LIMIT) -> list[Link]:
        """Visible links of (id1, link_type) with min_time <= time <= max_time, newest first
        (ties: id2 descending), after the merge rule, then offset and limit."""

    @abstractmethod
    def count_link(self, id1: int, link_type: int) -> int:
        """LinkBench's count_link: the number of visible links of (id1, link_type) after the
        merge rule (what get_link_list would list without a window or limit). Counted from the
        rows: DeBL keeps no count table (docs/STORES.md, "count_link and multiget_link")."""

    @abstractmethod
    def multiget_link(self, id1: int, link_type: int, id2s: Iterable[int]) -> list[Link]:
        """LinkBench's multiget_link: the row of each of *id2s* that (id1, link_type) has,
        hidden ones included (as LinkBench's ``multigetLinks``), after the merge rule, in id2
        order; an id2 asked twice is answered once. At most ``debl.format.link.MAX_MULTIGET``
        id2s."""

    @abstractmethod
    def scan_newest_first(self, id1: int, link_type: int, min_time: int = 0) -> Iterator[Link]:
        """Every row of (id1, link_type) with time >= min_time, hidden ones included, time
        descending (ties: id2 descending). The coordinator merges these across stores."""

    @abstractmethod
    def write_links(self, links: Iterable[tuple[Link, Origin]]) -> int:
        """Write rows, applying the merge rule; returns the count of rows given.

        Within the batch the full rule applies, origins included. Against rows already stored
        only (time, version) can be compared: on a tie the row written now wins, as a later file
        would. The simple write path: bulk loads have their own entry points."""

    @abstractmethod
    def count(self) -> int:
        """The number of rows (keys) the store holds, hidden ones included."""

    @abstractmethod
    def reset(self) -> None:
        """Empty the store (create its table if missing)."""

    def close(self) -> None:  # noqa: B027 -- a store without connections has none to release
        """Release connections. Idempotent."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
