"""The coordinator's view of the current load, read from the catalog in one transaction
(``catalog.serving.serving_state``; docs/DESIGN.md section 6).

A ``Dataset`` is what the current load offers to queries: its bucket map, one ``BucketState``
per cold bucket (``(b_index, k_range, j_stat, q_list)`` plus the real id1 span of its cold
rows), and where its hot rows are read: from the hot files' buckets in HDFS (``hot_buckets``)
until MySQL has taken the hot keys over, from MySQL (within the hot range, for keys the load's
key filter may hold) after (docs/COORDINATOR.md, "Hot keys").

Cold coverage: an id1 needs its cold bucket only if a cold row can have it, that is if it lies in
its bucket's cold span ``[c_lo, c_hi]``; every other id1 (no bucket with rows, or outside the
span: in a range dump, every id of the hot files) is answered from the hot rows alone, at once.
The same holds for the hot buckets and their spans.

Pitfalls:

- ``j_stat`` values are written by the poller and read by query threads: both hold the
  coordinator's lock. ``q_list`` is kept as the count of buffered queries (the waiters
  themselves block on the coordinator's condition variable); with the decayed weight of the
  queries that needed the bucket and stopped waiting (``recent``), it is the bucket's demand
  (coordinator.demand).
- A bucket without a job status row counts as ``pending`` (as ``catalog.index.buckets`` reports it).
- MySQL's table is read only once MySQL has taken the hot keys over: before that it is being
  loaded, and the hot rows come from the hot buckets. A load without hot files never reads it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from debl.catalog import Bucket, EarlyState, JobState, LoadRecord, LoadState, ServingState
from debl.keys.key_filter import KeyFilter
from debl.keys.keyspace import KeySet
from coordinator.demand import decayed
from coordinator.early import EarlyView


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

    @staticmethod
    def of(b: Bucket) -> "BucketState":
        return BucketState(b.b_index, b.k_lo, b.k_hi, b.state, b.c_lo, b.c_hi, rows=b.rows)

    @property
    def loaded(self) -> bool:
        return self.j_stat == JobState.LOADED

    def stopped_waiting(self, now: float) -> None:
        """A query that needed this bucket stopped waiting without it (raw answer, deadline)."""
        self.recent = decayed(self.recent, now - self.recent_at) + 1.0
        self.recent_at = now

    def demand(self, now: float) -> int:
        """Queries waiting now plus the decayed weight of those that stopped, rounded."""
        return round(self.waiting + decayed(self.recent, now - self.recent_at))


@dataclass(frozen=True)
class HotBucket:
    """The hot files' rows in one hot bucket (a load's one, ``debl.format.bucket_map.HOT_MAP``),
    read raw until MySQL takes the hot keys over; their id1s lie in ``[c_lo, c_hi]``."""

    b_index: int
    rows: int
    c_lo: int
    c_hi: int


@dataclass
class Dataset:
    """The routing state of the current load."""

    load: LoadRecord
    buckets: dict[int, BucketState] = field(default_factory=dict)
    hot_buckets: dict[int, HotBucket] = field(default_factory=dict)
    hot_keys: KeyFilter | None = None
    asked: Counter = field(default_factory=Counter)  # queries per cold bucket, for debl_asks
    early: EarlyView | None = None  # the load is not up: it answers its answerable keys

    @staticmethod
    def of(state: ServingState) -> "Dataset":
        return Dataset(state.load, {b.b_index: BucketState.of(b) for b in state.buckets},
                       {b.b_index: HotBucket(b.b_index, b.rows, b.c_lo, b.c_hi)
                        for b in state.hot_buckets}, state.hot_keys)

    @staticmethod
    def of_early(state: EarlyState) -> "Dataset":
        """The routing state of a load before its uptime (coordinator.early)."""
        dataset = Dataset(state.load, early=EarlyView(
            state.gen, KeySet.from_json(state.answerable or []), ids=state.ids))
        dataset.refresh(state)
        return dataset

    def refresh(self, state: EarlyState) -> bool:
        """A newer poll of a load before its uptime: its buckets so far (a bucket keeps its
        waiters) and answerable keys (lock held). True when waiters must look again."""
        self.load = state.load
        for b in state.buckets:
            old = self.buckets.get(b.b_index)
            if old is None:
                self.buckets[b.b_index] = BucketState.of(b)
            else:
                old.rows, old.c_lo, old.c_hi = b.rows, b.c_lo, b.c_hi
        self.hot_buckets = {b.b_index: HotBucket(b.b_index, b.rows, b.c_lo, b.c_hi)
                            for b in state.hot_buckets}
        assert self.early is not None  # only a load before its uptime is refreshed
        return self.early.take(state.state, state.gen, state.answerable)

    def took_over(self, state: ServingState) -> None:
        """MySQL has taken the hot keys over: read them there from now on (lock held). The
        cold buckets' states (and their waiters) stay as they are."""
        self.load, self.hot_buckets, self.hot_keys = state.load, {}, state.hot_keys

    def bucket_of(self, id1: int) -> BucketState | None:
        """The cold bucket that may hold cold rows of id1, or None when no cold row can have
        id1 (no bucket with rows there, or id1 outside its rows' span)."""
        bucket_map = self.load.bucket_map
        if bucket_map is None:
            return None
        bucket = self.buckets.get(bucket_map.bucket_of(id1))
        if bucket is None or not bucket.c_lo <= id1 <= bucket.c_hi:
            return None
        return bucket

    def bucket_for_demand(self, id1: int) -> BucketState | None:
        """The bucket of id1 in the map, whatever its rows so far: what a query waiting before
        the load's uptime counts as demand on (gen_HF converts it first at the uptime)."""
        bucket_map = self.load.bucket_map
        return None if bucket_map is None else self.buckets.get(bucket_map.bucket_of(id1))

    def hot_bucket_of(self, id1: int) -> HotBucket | None:
        """The hot bucket that may hold hot rows of id1 while they are read raw (None: no hot
        row can have id1, or MySQL has them): the one whose rows' span holds id1. Found by
        span, not by a map: a load writes one hot bucket (``debl.format.bucket_map.HOT_MAP``), loads
        before it one per cold bucket, and either way the spans do not overlap."""
        for bucket in self.hot_buckets.values():
            if bucket.c_lo <= id1 <= bucket.c_hi:
                return bucket
        return None

    def may_be_hot(self, id1: int, link_type: int) -> bool:
        """Whether MySQL may hold rows of (id1, link_type) of this load: False before MySQL
        has taken the hot keys over, and after it where it holds none."""
        load = self.load
        return (load.hot_in_mysql and load.hot_rows > 0 and load.hot_k_lo is not None
                and load.hot_k_hi is not None and load.hot_k_lo <= id1 <= load.hot_k_hi
                and (self.hot_keys is None or self.hot_keys.may_hold(id1, link_type)))

    def apply_states(self, states: dict[int, str]) -> list[int]:
        """Take new job states; returns the buckets whose waiters must wake: those that became
        ``loaded`` or ``failed``."""
        woken = []
        for b, bucket in self.buckets.items():
            new = states.get(b, JobState.PENDING)
            if new != bucket.j_stat:
                if new in (JobState.LOADED, JobState.FAILED):
                    woken.append(b)
                bucket.j_stat = new
        return woken

    def views(self) -> list["BucketView"]:
        """Every cold bucket's state, copied (lock held)."""
        return [BucketView(s.b_index, s.k_lo, s.k_hi, s.j_stat, s.waiting, s.c_lo, s.c_hi)
                for _, s in sorted(self.buckets.items())]

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

        The union of the hot range (or the hot buckets' spans) and the cold buckets' spans,
        all exact bounds of real ids."""
        load = self.load
        if self.early is not None and self.early.ids is not None:  # what the manifests claim
            return self.early.ids[0], self.early.ids[1] + 1
        spans = [(s.c_lo, s.c_hi) for s in self.buckets.values()]
        spans += [(h.c_lo, h.c_hi) for h in self.hot_buckets.values()]
        if load.hot_rows and load.hot_k_lo is not None and load.hot_k_hi is not None:
            spans.append((load.hot_k_lo, load.hot_k_hi))
        if not spans:
            return None
        return min(lo for lo, _ in spans), max(hi for _, hi in spans) + 1


@dataclass(frozen=True)
class BucketView:
    """A copy of one bucket's state (``waiting``: this coordinator's buffered queries;
    ``[c_lo, c_hi]``: the id1 span of its cold rows)."""

    b_index: int
    k_lo: int
    k_hi: int
    j_stat: str
    waiting: int
    c_lo: int
    c_hi: int


def load_failure(newest: LoadRecord | None) -> str | None:
    """The error of a query while no load is up and the newest one failed (None otherwise)."""
    if newest is None or newest.state != LoadState.FAILED:
        return None
    reason = (newest.error or "no error recorded").strip().splitlines()[0][:200]
    return (f"the latest load {newest.load_id} failed ({reason}) and no load is up to answer "
            f"from: resume it (`debl load SOURCE --resume {newest.load_id}`) or run a new load")


def describe_newest(newest: LoadRecord | None) -> str:
    return "no load has been run" if newest is None else \
        f"load {newest.load_id} is {newest.state}"
