"""The three reads a routed query can be (docs/COORDINATOR.md, "The three reads"): LinkBench's
``get_link_list`` (``LinkList``), ``count_link`` (``CountLink``) and ``multiget_link``
(``MultigetLink``). Each is routed as get_link_list is (by its id1 and link_type) and answered
by ``coordinator.sources.fetch`` on the sources its route names: pushed down whole to a single
store (``on``), or from the winners of the one merge of the hot and cold sides
(``coordinator.merge.answer``, then ``of_winners``), so that the three share one routing, one
merge and one rule.

Pitfall: count_link and multiget_link read a key's whole list on every side they merge
(hidden rows included: a newer hidden row on one side hides the other's), where get_link_list
stops at ``offset + limit`` visible winners; a heavy id1 costs them its list.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from debl.format.link import (DEFAULT_LIMIT, MAX_TIME, Link, check_ids, check_query, count_visible,
                        select_id2s)
from coordinator.merge import select_merged


@dataclass(frozen=True)
class LinkList:
    """get_link_list: visible links in [min_time, max_time], newest first, offset and limit."""

    id1: int
    link_type: int
    min_time: int = 0
    max_time: int = MAX_TIME
    offset: int = 0
    limit: int = DEFAULT_LIMIT
    name = "get_link_list"

    def __post_init__(self) -> None:
        check_query(self.id1, self.link_type, self.min_time, self.max_time, self.offset,
                    self.limit)

    @property
    def scan_from(self) -> int:
        """The oldest time a side must give (``scan_newest_first``'s *min_time*): a row older
        than min_time can never beat one inside the window."""
        return self.min_time

    @property
    def needs_no_rows(self) -> bool:
        return self.limit == 0 or self.min_time > self.max_time

    def on(self, store: Any) -> list[Link]:
        return store.get_link_list(self.id1, self.link_type, self.min_time, self.max_time,
                                   self.offset, self.limit)

    def of_winners(self, winners: Iterable[Link]) -> list[Link]:
        return select_merged(winners, self.min_time, self.max_time, self.offset, self.limit)


@dataclass(frozen=True)
class CountLink:
    """count_link: the number of visible links of (id1, link_type) after the merge rule."""

    id1: int
    link_type: int
    name = "count_link"
    scan_from = 0
    needs_no_rows = False

    def __post_init__(self) -> None:
        check_ids(self.id1, self.link_type)

    def on(self, store: Any) -> int:
        return store.count_link(self.id1, self.link_type)

    def of_winners(self, winners: Iterable[Link]) -> int:
        return count_visible(winners)


@dataclass(frozen=True)
class MultigetLink:
    """multiget_link: the rows of the asked id2s after the merge rule, hidden ones included, in
    id2 order."""

    id1: int
    link_type: int
    id2s: tuple[int, ...]
    name = "multiget_link"
    scan_from = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "id2s", check_ids(self.id1, self.link_type, self.id2s))

    @property
    def needs_no_rows(self) -> bool:
        return not self.id2s

    def on(self, store: Any) -> list[Link]:
        return store.multiget_link(self.id1, self.link_type, self.id2s)

    def of_winners(self, winners: Iterable[Link]) -> list[Link]:
        return select_id2s(winners, self.id2s)


Operation = LinkList | CountLink | MultigetLink
