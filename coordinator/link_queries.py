"""The coordinator's LinkBench reads, as a LinkStore offers them (``get_link_list``,
``count_link``, ``multiget_link``) and with the details of how each was answered (``query``,
``ask``): one routing for the three (docs/COORDINATOR.md, "The three reads"). ``LinkQueries``
is what ``coordinator.Coordinator`` answers with; it routes and fetches each operation
(``coordinator.operations``) in ``ask``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable

from debl.format.link import DEFAULT_LIMIT, MAX_TIME, Link
from coordinator.operations import CountLink, LinkList, MultigetLink, Operation
from coordinator.routes import Answer


class LinkQueries(ABC):
    """LinkStore-compatible reads over ``ask``. Every read takes the same keywords:
    *timeout* (seconds from the call) or *deadline* (epoch seconds, ``time.time()``), whichever
    comes first, bounds the wait for id1's bucket: past it, QueryTimeout, or with *partial* the
    hot rows alone (``Answer.complete`` False: use ``ask`` or ``query`` to see it)."""

    @abstractmethod
    def ask(self, operation: Operation, *, timeout: float | None = None,
            deadline: float | None = None, partial: bool = False) -> Answer:
        """Route *operation* and answer it, with the details."""

    def get_link_list(self, id1: int, link_type: int, min_time: int = 0,
                      max_time: int = MAX_TIME, offset: int = 0, limit: int = DEFAULT_LIMIT,
                      *, timeout: float | None = None, deadline: float | None = None,
                      partial: bool = False) -> list[Link]:
        """Visible links of (id1, link_type) in [min_time, max_time], newest first (ties: id2
        descending), after the merge rule across the load's stores, then offset and limit.

        Blocks while id1's bucket is not loaded (with the raw route on, at most
        ``config.coordinator.raw_after`` seconds)."""
        return self.query(id1, link_type, min_time, max_time, offset, limit, timeout=timeout,
                          deadline=deadline, partial=partial).links

    def query(self, id1: int, link_type: int, min_time: int = 0, max_time: int = MAX_TIME,
              offset: int = 0, limit: int = DEFAULT_LIMIT, *, timeout: float | None = None,
              deadline: float | None = None, partial: bool = False) -> Answer:
        """``get_link_list`` with the details: whether the answer is complete, how long it
        waited, which bucket, route and load answered."""
        return self.ask(LinkList(id1, link_type, min_time, max_time, offset, limit),
                        timeout=timeout, deadline=deadline, partial=partial)

    def count_link(self, id1: int, link_type: int, *, timeout: float | None = None,
                   deadline: float | None = None, partial: bool = False) -> int:
        """The number of visible links of (id1, link_type) after the merge rule across the
        load's stores (``Answer.count`` of ``ask(CountLink(...))``); routed and waiting as
        get_link_list."""
        count = self.ask(CountLink(id1, link_type), timeout=timeout, deadline=deadline,
                         partial=partial).count
        assert count is not None  # a count_link's answer carries its count
        return count

    def multiget_link(self, id1: int, link_type: int, id2s: Iterable[int], *,
                      timeout: float | None = None, deadline: float | None = None,
                      partial: bool = False) -> list[Link]:
        """The links (id1, link_type, id2) of *id2s* that exist after the merge rule across the
        load's stores, hidden ones included (as LinkBench's), in id2 order; routed and waiting
        as get_link_list."""
        return self.ask(MultigetLink(id1, link_type, tuple(id2s)), timeout=timeout,
                        deadline=deadline, partial=partial).links
