"""The raw reader's block cache: a least-recently-used map under a budget of bytes
(docs/COORDINATOR.md, "The raw route")."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable


class BlockCache:
    """A least-recently-used map under a budget of bytes; each entry's cost is given when it is
    put. Thread-safe. An entry costlier than the whole budget is not kept; a smaller budget
    (``set_budget``) evicts at once."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._entries: OrderedDict[Hashable, tuple[object, int]] = OrderedDict()
        self._lock = threading.Lock()
        self.size = 0
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable) -> object | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return entry[0]

    def put(self, key: Hashable, value: object, cost: int) -> None:
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self.size -= old[1]
            if cost > self.budget:
                return
            self._entries[key] = (value, cost)
            self.size += cost
            self._evict()

    def set_budget(self, budget: int) -> None:
        with self._lock:
            self.budget = max(budget, 0)
            self._evict()

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.size = 0

    def _evict(self) -> None:
        while self.size > self.budget:
            _, (_, evicted) = self._entries.popitem(last=False)
            self.size -= evicted

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)
