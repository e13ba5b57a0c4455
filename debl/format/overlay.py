"""The overlay rule: the source's changes since the dump applied to the dump's rows
(docs/FRESHNESS.md, "Changes"). Past the dump's position the log's order is the truth: a change
replaces its key's row (an insert or an update: the row after it), or removes it (a deletion,
``link`` None), whatever the rows' ``time`` and ``version``; the merge rule decides only among
the dump's own rows, before any change.

One rule for every reader of changes: ``debl verify --against-source`` (the load's rows with
the change log applied, against the source's table) and the checker of fresh answers (the
source at each position, from the dump and the writes) apply them here.

Pitfall: changes must come in position order (``seq``, then ``row_no``: the row's place in its
transaction); ``overlay`` refuses them otherwise, since a later change applied first would
leave the earlier one's row.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import Protocol

from debl.format.link import Link

Key = tuple[int, int, int]  # (id1, link_type, id2)


class RowChange(Protocol):
    """A committed row change as the overlay needs it (``debl.catalog.Change`` is one): its
    position, its key, and the row after it or None for a deletion (read-only: a frozen
    dataclass is one)."""

    @property
    def seq(self) -> int: ...
    @property
    def row_no(self) -> int: ...
    @property
    def id1(self) -> int: ...
    @property
    def link_type(self) -> int: ...
    @property
    def id2(self) -> int: ...
    @property
    def link(self) -> Link | None: ...


def apply_change(rows: dict, key: Hashable, link: Link | None) -> None:
    """One change applied to *rows* (by key, in place: the whole key, or the id2 where *rows*
    are one (id1, link_type)'s): the row after it, or none."""
    if link is None:
        rows.pop(key, None)
    else:
        rows[key] = link


def overlay(rows: Mapping[Key, Link], changes: Iterable[RowChange]) -> dict[Key, Link]:
    """*rows* (the dump's winners, by key) with *changes* applied in position order: a new dict
    (*rows* is not changed). ValueError if the changes are not in position order."""
    found = dict(rows)
    last = None
    for c in changes:
        at = (c.seq, c.row_no)
        if last is not None and at < last:
            raise ValueError(f"changes out of position order: {at} after {last}")
        last = at
        apply_change(found, (c.id1, c.link_type, c.id2), c.link)
    return found
