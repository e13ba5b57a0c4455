"""A load's key ranges as a fresh view keeps them (docs/FRESHNESS.md, "Where changes wait and
how they are applied"): per range of id1 (a bucket of the load's bucket map, whichever store
holds its rows now), the changes captured and not applied yet (its **buffer**), the last change
applied per key (its **overlay**: a row, or None for a deletion) and two positions: ``known``,
up to which every change of the range is in the buffer or the overlay, and ``applied``, up to
which every one is in the overlay.

Applying (a **refresh**) folds the buffer into the overlay in position order and moves
``applied`` to ``known``; it happens for a query (on demand) or in the background. A query
reads its key's overlay entries under the range's lock, at ``applied``: one position for the
whole answer (``Overlay``). ``applied`` never decreases, so a process never answers a key at a
position older than one it answered before ("no going back", docs/FRESHNESS.md, "The contract").

The overlay replaces by key whatever the row's time and version (past the dump's position the
log's order is the truth), so applying a change twice changes nothing: conversions, MySQL's
take-over and the load's other moves need nothing of it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass

from debl.catalog import Change
from debl.format.link import Link

ON_DEMAND, BACKGROUND = "on_demand", "background"


@dataclass(frozen=True)
class Overlay:
    """What a query's answer takes from the changes: per id2 of its (id1, link_type), the last
    change applied (the row, or None: deleted at the source), and the position of the whole
    answer (every change of the key up to it applied, none after)."""

    rows: dict[int, Link | None]
    position: int


@dataclass
class RangeCounts:
    """A range's counts: changes applied on demand (for a query, its first read included) and
    in the background, the refreshes of each kind that applied any, changes buffered now."""

    applied_on_demand: int = 0
    applied_background: int = 0
    refreshes_on_demand: int = 0
    refreshes_background: int = 0
    buffered: int = 0

    def add(self, other: "RangeCounts") -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


class KeyRange:
    """One key range ``[k_lo, k_hi]`` of id1 (bucket *b* of the load's map), materialized with
    *changes*, every change of the range past the dump's position up to *position*, applied
    by *how* (``ON_DEMAND``, ``BACKGROUND``). Thread-safe (its own lock); *serial*, the
    process's lock of serial mode (or a no-op context), is taken around every refresh, before
    the range's lock."""

    def __init__(self, b: int, k_lo: int, k_hi: int, changes: Iterable[Change], position: int,
                 how: str, serial: AbstractContextManager):
        self.b, self.k_lo, self.k_hi = b, k_lo, k_hi
        self._serial = serial
        self._lock = threading.Lock()
        self._overlay: dict[tuple[int, int], dict[int, Link | None]] = {}
        self._buffer: list[Change] = []
        self.known = self.applied = position
        self.counts = RangeCounts()
        self._apply(list(changes), how)
        self.refreshed_at = time.monotonic()

    def deliver(self, changes: list[Change], upto: int) -> int:
        """The tailer's changes of this range (position order) and the position it has read up
        to: those past ``known`` are buffered. The changes buffered now."""
        with self._lock:
            self._buffer.extend(c for c in changes if c.seq > self.known)
            self.known = max(self.known, upto)
            return len(self._buffer)

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    def idle_for(self, now: float) -> float:
        return now - self.refreshed_at

    def refresh(self, how: str) -> None:
        """Apply the buffer (``applied`` becomes ``known``)."""
        with self._serial, self._lock:
            self._refresh(how)

    def read(self, id1: int, link_type: int, refresh: bool) -> Overlay:
        """The overlay of (id1, link_type) at ``applied``, after a refresh on demand if
        *refresh*: one position for the answer (the lock held from the refresh to the copy)."""
        if refresh:
            with self._serial, self._lock:
                self._refresh(ON_DEMAND)
                return Overlay(dict(self._overlay.get((id1, link_type), ())), self.applied)
        with self._lock:
            return Overlay(dict(self._overlay.get((id1, link_type), ())), self.applied)

    def snapshot(self) -> RangeCounts:
        with self._lock:
            counts = RangeCounts(**vars(self.counts))
            counts.buffered = len(self._buffer)
            return counts

    def _refresh(self, how: str) -> None:
        """(lock held) The buffer folded into the overlay; ``applied`` = ``known``."""
        buffer, self._buffer = self._buffer, []
        self._apply(buffer, how)
        self.applied = self.known
        self.refreshed_at = time.monotonic()

    def _apply(self, changes: list[Change], how: str) -> None:
        overlay = self._overlay
        for c in changes:  # position order: the last change of a key wins
            rows = overlay.get((c.id1, c.link_type))
            if rows is None:
                rows = overlay[(c.id1, c.link_type)] = {}
            rows[c.id2] = c.link
        if not changes:
            return
        counts = self.counts
        if how == ON_DEMAND:
            counts.applied_on_demand += len(changes)
            counts.refreshes_on_demand += 1
        else:
            counts.applied_background += len(changes)
            counts.refreshes_background += 1
