"""What the follower writes (docs/FRESHNESS.md, "Changes" and "Capture: `debl follow`"): the
changes of a committed transaction of the source, and the batch of transactions written to the
change log in one catalog transaction.

A transaction's row changes of the link table become changes in log order, numbered from 0
(``row_no``): an inserted or updated row is the row after it; a deleted row is a deletion of
its key; an update that changed a key column (id1, link_type, id2) is a deletion of the old key
and then the row of the new key (two changes). A transaction without rows of the table gives
no change but still moves the position.

A batch holds whole transactions only (the position is always a transaction's end), at most
``fresh.capture_batch`` changes unless one transaction alone has more. Once following, the
follower writes it as soon as nothing more is read ahead (a group commit: the transactions that
arrive while one batch is written make the next); at the latest, and while catching up,
``fresh.capture_wait`` seconds after its first transaction arrived: so a burst of source
transactions (with changes or without) is one catalog transaction, and a change waits at most
that long to be written.
"""

from __future__ import annotations

from debl.catalog import Change
from debl.store.source_binlog import Committed


def changes_of(tx: Committed, captured_ts: float) -> list[Change]:
    """The changes of *tx* (see the module), captured at *captured_ts*."""
    out: list[Change] = []
    for row in tx.rows:
        before, after = row.before, row.after
        if before is not None and (after is None or before.key != after.key):
            out.append(Change(tx.seq, len(out), before.id1, before.link_type, before.id2,
                              None, tx.commit_ts, captured_ts))
        if after is not None:
            out.append(Change(tx.seq, len(out), after.id1, after.link_type, after.id2, after,
                              tx.commit_ts, captured_ts))
    return out


def change_count(tx: Committed) -> int:
    """How many changes *tx* gives (``changes_of``), without making them."""
    return sum(1 + (r.before is not None and r.after is not None and r.before.key != r.after.key)
               for r in tx.rows)


class Batch:
    """Transactions waiting to be written together (see the module). *limit*: changes at most
    (``fresh.capture_batch``); *wait*: seconds from the first one to the write
    (``fresh.capture_wait``)."""

    def __init__(self, limit: int, wait: float):
        self.limit, self.wait = limit, wait
        self.transactions: list[Committed] = []
        self.changes = 0
        self.since: float | None = None  # when the first one arrived (time.monotonic())

    def __bool__(self) -> bool:
        return bool(self.transactions)

    def fits(self, tx: Committed) -> bool:
        """Whether *tx* may join without passing the limit (an empty batch takes any)."""
        return not self.transactions or self.changes + change_count(tx) <= self.limit

    def add(self, tx: Committed, now: float) -> None:
        if self.since is None:
            self.since = now
        self.transactions.append(tx)
        self.changes += change_count(tx)

    def due(self, now: float, nothing_ahead: bool = False, target: int | None = None) -> bool:
        """Whether it must be written now: full, waited for long enough, *nothing_ahead* (a
        group commit: nothing more is read ahead), or reaching the position *target*."""
        since = self.since  # set while it holds transactions
        return since is not None and (
            self.changes >= self.limit or now - since >= self.wait or nothing_ahead
            or (target is not None and self.last.seq >= target))

    def left(self, now: float) -> float:
        """Seconds until it is due (0: due)."""
        return 0.0 if self.since is None else max(0.0, self.since + self.wait - now)

    @property
    def last(self) -> Committed:
        return self.transactions[-1]

    @property
    def commit_ts(self) -> float | None:
        """The commit time of its last transaction with changes (None: none has any): the
        follower's last captured commit."""
        return next((tx.commit_ts for tx in reversed(self.transactions) if tx.rows), None)

    def take(self, captured_ts: float) -> list[Change]:
        """Its changes, captured at *captured_ts*, in position order; the batch is then
        empty."""
        out = [c for tx in self.transactions for c in changes_of(tx, captured_ts)]
        self.transactions, self.changes, self.since = [], 0, None
        return out
