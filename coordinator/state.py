"""Per-bucket state as the coordinator sees it, read from the catalog (docs/DESIGN.md section 6).

A ``Dataset`` is what one load that is up offers to queries: its bucket map (``debl.buckets``),
the key range the MySQL (hot) table covers, and one ``BucketState`` per cold bucket:
``(b_index, k_range, j_stat, q_list)`` plus the real id1 span of the bucket's cold rows.
``read_dataset`` builds it from the catalog; ``LoadView`` is the part of the latest
``debl_loads`` row that decides whether the system is up at all.

Cold coverage: an id1 needs its bucket only if a cold row can have it, that is if it lies in its
bucket's cold span ``[c_lo, c_hi]``; every other id1 (no bucket with rows, or outside the span:
in a range dump, every id of the hot files) is answered by MySQL alone, at once, from the bucket
index alone (docs/COORDINATOR.md).

Pitfalls:

- Only the *latest* load counts. A new load clears the bucket and job tables as it starts, so
  while it runs the previous load's buckets no longer exist and the system is down again, even
  though an older load row still says ``up``.
- ``j_stat`` values are written by the poller and read by query threads: both hold the
  coordinator's lock. ``q_list`` is kept as the count of buffered queries (the waiters
  themselves block on the coordinator's condition variable); with the decayed weight of the
  queries that needed the bucket and stopped waiting (``recent``), it is the bucket's demand
  (coordinator.demand).
- A bucket without a job status row counts as ``pending`` (as ``Catalog.buckets`` reports it).
- The hot table is consulted only for id1 in ``[hot_k_lo, hot_k_hi]`` of *this* load: a load
  without hot files does not touch the MySQL link table, which may still hold an older dump.
  Within that range, only for keys the load's key filter may hold (``may_be_hot``; a load
  without a filter: every key of the range), so that a change log's queries, nine in ten of
  which find nothing in MySQL, skip that read (docs/COORDINATOR.md, "Hot keys").
"""

from __future__ import annotations

from dataclasses import dataclass, field

from debl.buckets import BucketMap
from debl.catalog import Catalog, LoadRecord
from debl.key_filter import KeyFilter
from coordinator.demand import decayed


@dataclass(frozen=True)
class LoadView:
    """The latest load, as far as routing cares."""

    load_id: str
    state: str  # running / up / failed
    bucket_map: BucketMap | None  # None: not decided yet (no cold file, or before the sample)
    hot_k_lo: int | None
    hot_k_hi: int | None
    hot_rows: int
    started: float
    uptime: float | None
    error: str | None

    @property
    def is_up(self) -> bool:
        """Queries are answered. A load that is up with no bucket map had no cold file."""
        return self.state == "up"

    @staticmethod
    def of(load: LoadRecord | None) -> "LoadView | None":
        if load is None:
            return None
        return LoadView(load.load_id, load.state, load.bucket_map, load.hot_k_lo,
                        load.hot_k_hi, load.hot_rows, load.started, load.uptime, load.error)


@dataclass
class BucketState:
    """One cold bucket: ``k_range`` is ``[k_lo, k_hi]`` (both inclusive, as in the index);
    its cold rows have id1s in ``[c_lo, c_hi]`` only."""

    b_index: int
    k_lo: int
    k_hi: int
    j_stat: str
    c_lo: int
    c_hi: int
    waiting: int = 0  # q_list: queries of this coordinator buffered on the bucket
    rows: int = 0  # cold rows, as the bucket index recorded them
    recent: float = 0.0  # decayed weight of queries that needed it and stopped waiting...
    recent_at: float = 0.0  # ...as of this time.monotonic()

    @property
    def loaded(self) -> bool:
        return self.j_stat == "loaded"

    def stopped_waiting(self, now: float) -> None:
        """A query that needed this bucket stopped waiting without it (raw answer, deadline)."""
        self.recent = decayed(self.recent, now - self.recent_at) + 1.0
        self.recent_at = now

    def demand(self, now: float) -> int:
        """Queries waiting now plus the decayed weight of those that stopped, rounded."""
        return round(self.waiting + decayed(self.recent, now - self.recent_at))


@dataclass
class Dataset:
    """The routing state of one load that is up."""

    load: LoadView
    buckets: dict[int, BucketState] = field(default_factory=dict)
    hot_keys: KeyFilter | None = None

    def bucket_of(self, id1: int) -> BucketState | None:
        """The cold bucket that may hold cold rows of id1, or None when no cold row can have
        id1 (no bucket with rows there, or id1 outside its rows' span): then MySQL alone
        answers."""
        if self.load.bucket_map is None:
            return None
        bucket = self.buckets.get(self.load.bucket_map.bucket_of(id1))
        if bucket is None or not bucket.c_lo <= id1 <= bucket.c_hi:
            return None
        return bucket

    def may_be_hot(self, id1: int, link_type: int) -> bool:
        """Whether the MySQL table of this load may hold rows of (id1, link_type): False
        only when it holds none."""
        load = self.load
        return (load.hot_rows > 0 and load.hot_k_lo is not None and load.hot_k_hi is not None
                and load.hot_k_lo <= id1 <= load.hot_k_hi
                and (self.hot_keys is None or self.hot_keys.may_hold(id1, link_type)))

    def apply_states(self, states: dict[int, str]) -> list[int]:
        """Take new job states; returns the buckets whose waiters must wake: those that became
        ``loaded`` or ``failed``."""
        woken = []
        for b, bucket in self.buckets.items():
            new = states.get(b, "pending")
            if new != bucket.j_stat:
                if new in ("loaded", "failed"):
                    woken.append(b)
                bucket.j_stat = new
        return woken

    def waiting(self) -> dict[int, int]:
        """Buffered queries per bucket not yet loaded."""
        return {b: s.waiting for b, s in self.buckets.items() if s.waiting and not s.loaded}

    def demand(self, now: float) -> dict[int, int]:
        """This coordinator's demand per bucket not yet loaded (BucketState.demand), at the
        ``time.monotonic()`` *now*; buckets without demand left out."""
        found = {}
        for b, s in self.buckets.items():
            if not s.loaded and (s.waiting or s.recent):
                n = s.demand(now)
                if n:
                    found[b] = n
        return found

    def id_range(self) -> tuple[int, int] | None:
        """(lowest id1, highest id1 + 1) of the data set, for a query client's default ids.

        The union of the hot range and the buckets' cold spans, both exact bounds of real ids.
        """
        load = self.load
        spans = [(s.c_lo, s.c_hi) for s in self.buckets.values()]
        if load.hot_rows and load.hot_k_lo is not None and load.hot_k_hi is not None:
            spans.append((load.hot_k_lo, load.hot_k_hi))
        if not spans:
            return None
        return min(lo for lo, _ in spans), max(hi for _, hi in spans) + 1


def read_load(catalog: Catalog) -> LoadView | None:
    """The latest load (None if there never was one)."""
    return LoadView.of(catalog.load())


def read_dataset(catalog: Catalog, load: LoadView) -> Dataset:
    """The bucket index, job states and hot key filter of *load*, which must be up."""
    buckets = {b.b_index: BucketState(b.b_index, b.k_lo, b.k_hi, b.state, b.c_lo, b.c_hi,
                                      rows=b.rows)
               for b in catalog.buckets()}
    return Dataset(load, buckets, catalog.hot_keys(load.load_id) if load.hot_rows else None)
