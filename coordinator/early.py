"""A coordinator's view of a load that answers before its uptime (docs/COORDINATOR.md,
"Answers before uptime"; docs/LOADING.md, "Answers before the copy ends").

While no day is current and the newest load answers early, the coordinator serves that load:
a key whose every piece is bucketed (its answerable keys, ``debl.keyspace.KeySet``, published by
the load after each chunk) is answered at once from the load's bucket files by the raw route's
reader, hot and cold, merged by the one rule, exactly; any other key waits, and its waiting is
demand: per bucket (what gen_HF will convert first at uptime) and per key (what the copy fetches
first). At the load's uptime the coordinator takes the load as it takes any current load.

The view keeps, besides the answerable keys, the id1s it answered early (to count, when a claim
of the load's manifests is found false, the early answers given in the id1s it affects) and the
keys its queries wait for. The coordinator's lock guards all of it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from debl.catalog import FalseClaim
from debl.keyspace import KeySet


@dataclass
class EarlyView:
    """What a coordinator knows of a load before its uptime (see the module)."""

    gen: int
    answerable: KeySet
    ids: tuple[int, int] | None = None  # the id1s the load's manifests claim (None: any)
    on: bool = True  # False once a claim was found false: no more early answers
    waiting: Counter = field(default_factory=Counter)  # id1 -> queries waiting for it now
    answered: Counter = field(default_factory=Counter)  # id1 -> early answers given

    def answers(self, id1: int) -> bool:
        """Whether a query for *id1* is answered now."""
        return self.on and id1 in self.answerable

    def take(self, state: str, gen: int, answerable: list | None) -> bool:
        """A newer poll's state of the load; True when more keys may be answerable (waiters
        must look again)."""
        self.on = self.on and state == "on"
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

    def claim_answers(self, claims: list[FalseClaim]) -> dict[int, int]:
        """Early answers given for the id1s each false claim affects (by claim number)."""
        return {c.claim_no: sum(n for id1, n in self.answered.items()
                                if c.affected_lo <= id1 <= c.affected_hi) for c in claims}
