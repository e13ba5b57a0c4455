"""A coordinator's view of a load that answers before its uptime (docs/COORDINATOR.md,
"Answers before uptime"; docs/LOADING.md, "Answers before the copy ends").

While no day is current and the newest load answers early, the coordinator serves that load:
a key whose every piece is bucketed (its answerable keys, ``debl.keys.keyspace.KeySet``, published
by the load after each chunk) is answered at once from the load's bucket files by the raw route's
reader, hot and cold, merged by the one rule, exactly; any other key waits, and its waiting is
demand: per bucket (what gen_HF will convert first at uptime) and per key (what the copy fetches
first). At the load's uptime the coordinator takes the load as it takes any current load.

The view keeps, besides the answerable keys, the keys its queries wait for; the coordinator's
lock guards it. The early answers given are counted per id1 apart (``EarlyAnswerTally``) and
added to the catalog's counts (``debl_early_answers``) at the poller's next turn, within 0.1 s,
or before a one-shot command shows its answer (``Coordinator.record_early_answers``): a claim
of the load's manifests found false later counts those given in the id1s it affects, whatever
the life of the process that gave them (a coordinator that kept its own count published it
only if it lived to see the claim).
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field

from debl.catalog import EarlyAnswering
from debl.keys.keyspace import KeySet


@dataclass
class EarlyView:
    """What a coordinator knows of a load before its uptime (see the module)."""

    gen: int
    answerable: KeySet
    ids: tuple[int, int] | None = None  # the id1s the load's manifests claim (None: any)
    on: bool = True  # False once a claim was found false: no more early answers
    waiting: Counter = field(default_factory=Counter)  # id1 -> queries waiting for it now

    def answers(self, id1: int) -> bool:
        """Whether a query for *id1* is answered now."""
        return self.on and id1 in self.answerable

    def take(self, state: str, gen: int, answerable: list | None) -> bool:
        """A newer poll's state of the load; True when more keys may be answerable (waiters
        must look again)."""
        self.on = self.on and state == EarlyAnswering.ON
        if answerable is None or gen == self.gen:
            return False
        self.gen, self.answerable = gen, KeySet.from_json(answerable)
        return True

    def wait(self, id1: int, before: "EarlyView | None") -> None:
        """A query waits for *id1* in this view (no longer in *before*, an older view's)."""
        if before is not None:
            before.unwait(id1)
        self.waiting[id1] += 1

    def unwait(self, id1: int) -> None:
        """A query stops waiting for *id1*."""
        self.waiting[id1] -= 1
        if self.waiting[id1] <= 0:
            del self.waiting[id1]


class EarlyAnswerTally:
    """The early answers a coordinator gave that the catalog does not count yet, per (load
    id, id1). Thread-safe: client threads ``count``, the poller (or a one-shot command) ``take``
    them to add to the catalog's counts, and ``give_back`` what it could not add. Holds only
    what is not added yet: a few entries between two polls."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._new: Counter = Counter()

    def count(self, load_id: str, id1: int) -> None:
        with self._lock:
            self._new[(load_id, id1)] += 1

    def take(self) -> dict[tuple[str, int], int]:
        """The answers counted since the last take, forgotten here."""
        with self._lock:
            taken, self._new = dict(self._new), Counter()
        return taken

    def give_back(self, taken: dict[tuple[str, int], int]) -> None:
        """Answers taken that the catalog did not add: counted again for the next take."""
        with self._lock:
            self._new.update(taken)
