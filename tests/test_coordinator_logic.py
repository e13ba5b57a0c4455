"""The coordinator's waiting logic without services: the catalog is a fake that a test edits
(loads, buckets, job states, failures), the stores are in-memory. What the real stack cannot
show quickly: a new load replacing the served one under buffered queries, a failed load, close
while queries wait, a poller that survives catalog errors, deadlines before uptime.

The fake replaces only the MySQL reads; routing, buffering, release and demand publication are
the real code. tests/test_coordinator.py runs the same code on the real stack."""

from __future__ import annotations

import threading
import time

import pytest

import coordinator.coordinator as coordinator_module
import coordinator.load_stores as load_stores_module
from coordinator import Coordinator
from coordinator.raw import RawBucket
from coordinator.raw_warmup import RawWarmup
from debl.measure import request_cost
from debl.format.bucket_map import BucketMap
from debl.catalog import Bucket, EarlyState, LoadRecord, ServingState
from debl.config import Config
from debl.errors import BucketFileError, QueryTimeout, ServiceError
from debl.keys.key_filter import KeyFilterBuilder
from debl.format.link import Link, Origin
from debl.store.memory import MemoryStore

POLL = 0.05
LT = 1
BUFFERING = Config(coordinator_poll_interval=POLL,
                   coordinator_raw_after=None)  # the paper's coordinator


class FakeCatalog:
    """The catalog's serving role as the coordinator reads and publishes it
    (``catalog.serving``), from a shared mutable ``world``: its ``current`` load (a dict, or
    None), its ``newest`` (default: the current), the job states of the current load."""

    def __init__(self, world: dict) -> None:
        self.world = world
        self.serving = self  # the roles the coordinator's poller reads
        self.early = self
        self.index = None  # the raw reader's, a fake of its own (FakeRawReader)
        self.changes = None  # no load here has a dump's position: no fresh view reads it

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        pass

    def _maybe_fail(self) -> None:
        if self.world.get("fail", 0) > 0:
            self.world["fail"] -= 1
            raise ConnectionError("MySQL went away (fake)")

    def _current(self):
        return LoadRecord(**self.world["load"]) if self.world.get("load") else None

    def poll(self):
        self._maybe_fail()
        current = self._current()
        newest = self.world.get("newest")
        return (current, LoadRecord(**newest) if newest else current,
                dict(self.world["jobs"]) if current else {})

    def serving_state(self):
        self._maybe_fail()
        load = self._current()
        if load is None:
            return None
        bucket_map = load.bucket_map
        buckets = [Bucket(b, *bucket_map.range_of(b), 1, 1, 0, "", state, *bucket_map.range_of(b))
                   for b, state in sorted(self.world["jobs"].items())]
        return ServingState(load, buckets, [], self.world.get("hot_keys"))

    def publish_demand(self, load_id, coordinator, waiting):
        self.world.setdefault("published", []).append((coordinator, dict(waiting)))

    def publish_answers(self, load_id, coordinator, answered):
        self.world.setdefault("answers", {})[coordinator] = dict(answered)

    def publish_asks(self, load_id, coordinator, asked):
        self.world.setdefault("asks", {})[(load_id, coordinator)] = dict(asked)

    # -- before uptime: world["early"] = {"load": ..., "state": "on", "gen": n, "keys": [...]}

    def early_load(self):
        early = self.world.get("early")
        return None if early is None else (early["load"]["load_id"], early["state"])

    def early_state(self, load_id, known_gen=-1):
        early = self.world["early"]
        load = LoadRecord(**early["load"])
        buckets = [Bucket(b, *load.bucket_map.range_of(b), 1, 1, 0, "", "pending",
                          *load.bucket_map.range_of(b)) for b in (0, 1)]
        return EarlyState(load, early["state"], early["gen"],
                          None if early["gen"] == known_gen else early["keys"], buckets, [])

    def publish_key_demand(self, load_id, coordinator, waiting):
        self.world.setdefault("key_demand", []).append(dict(waiting))

    def false_claims(self, load_id):
        return self.world.get("claims", [])

    def add_early_answers(self, answered):
        self._maybe_fail()
        counts = self.world.setdefault("early_answers", {})
        for key, n in answered.items():
            counts[key] = counts.get(key, 0) + n

    def heartbeat(self, coordinator, load_id, hot_mysql, interval_s):
        self.world.setdefault("heartbeats", {})[coordinator] = load_id

    def forget_coordinator(self, coordinator):
        self.world.setdefault("heartbeats", {}).pop(coordinator, None)


class FakeRawReader:
    """The raw route's reader over the cold rows in memory (the real one: tests/test_raw.py)."""

    def __init__(self, cold: MemoryStore) -> None:
        self.cold = cold
        self.asked: list = []
        self.opened_ahead: list = []
        self.serving: list = []  # (load, its hot buckets too) as the coordinator said them

    def serve(self, load_id: str, hot: bool) -> None:
        self.serving.append((load_id, hot))

    def open_ahead(self, bucket) -> bool:
        self.opened_ahead.append(bucket)
        return True

    def scan_newest_first(self, buckets, id1, link_type, min_time=0):
        self.asked.extend(buckets)
        return self.cold.scan_newest_first(id1, link_type, min_time)

    def reads_locally(self, buckets) -> bool:
        return True  # rows in memory: an answer waits on no server, so it takes its turn

    def close(self) -> None:
        pass


def _load(load_id: str, state: str = "up", width: int = 100) -> dict:
    """A load whose hot keys MySQL has taken over (the hot buckets' route: test_raw.py)."""
    return {"load_id": load_id, "approach": "debl", "source": "test", "state": state,
            "bucket_map": BucketMap.fixed(width), "chunk_size": 1, "params": {},
            "started": time.time(), "uptime": None, "ended": None, "hot_k_lo": 0,
            "hot_k_hi": 999, "hot_rows": 1, "summary": None,
            "error": "disk full\nmore" if state == "failed" else None,
            "link_table": f"links_{load_id}", "hbase_table": f"links_{load_id}",
            "hdfs_dir": f"/debl/loads/{load_id}", "hot_state": "mysql"}


@pytest.fixture
def world(monkeypatch):
    world: dict = {"load": _load("L1"), "jobs": {0: "pending", 1: "loaded"}}
    hot, cold = MemoryStore(), MemoryStore()
    hot.write_links([(Link(5, LT, 1, 1, b"hot", 10, 0), Origin(1, 0, 1)),
                     (Link(150, LT, 1, 1, b"hot", 10, 0), Origin(1, 0, 2))])
    cold.write_links([(Link(5, LT, 2, 1, b"cold", 20, 0), Origin(0, 0, 1)),
                      (Link(150, LT, 1, 1, b"cold newer", 30, 0), Origin(0, 0, 2))])
    monkeypatch.setattr(coordinator_module, "Catalog", lambda config: FakeCatalog(world))
    world["hot"] = hot
    world["tables"] = []  # the tables the coordinator opened, in order
    monkeypatch.setattr(load_stores_module, "MySQLStore",
                        lambda config, table: world["tables"].append(table) or world["hot"])
    monkeypatch.setattr(load_stores_module, "HBaseStore",
                        lambda config, table: world["tables"].append(table) or cold)
    world["raw"] = FakeRawReader(cold)
    monkeypatch.setattr(coordinator_module, "RawReader", lambda config, index: world["raw"])
    return world


@pytest.fixture
def coord(world):
    with Coordinator(BUFFERING, "test-coordinator") as c:
        yield c


def _in_thread(fn):
    box: dict = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 -- handed to the test
            box["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, box


def _eventually(predicate, timeout=3.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


def test_routes_and_merges(coord):
    assert [l.data for l in coord.get_link_list(150, LT)] == [b"cold newer"]  # bucket 1 loaded
    assert coord.query(150, LT).route == "merged"
    assert coord.query(999, LT).route == "mysql"  # no bucket 9


class CountingStore(MemoryStore):
    """A MemoryStore that counts the reads asked of it."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def get_link_list(self, *args, **kwargs):
        self.reads += 1
        return super().get_link_list(*args, **kwargs)

    def scan_newest_first(self, *args, **kwargs):
        self.reads += 1
        return super().scan_newest_first(*args, **kwargs)


def test_mysql_is_read_only_for_keys_the_hot_key_filter_may_hold(world):
    keys = KeyFilterBuilder()
    keys.add([5, 150], [LT, LT])  # MySQL's keys (the fixture's hot rows)
    world["hot_keys"] = keys.build()
    world["hot"] = CountingStore()
    world["hot"].write_links([(Link(5, LT, 1, 1, b"hot", 10, 0), Origin(1, 0, 1)),
                              (Link(150, LT, 1, 1, b"hot", 10, 0), Origin(1, 0, 2))])
    with Coordinator(Config(coordinator_poll_interval=POLL, coordinator_raw_after=0.0),
                     "test-coordinator") as c:
        assert c.wait_until_up(5)
        assert c.query(150, LT).links[0].data == b"cold newer"  # loaded: merged
        assert c.query(5, LT).route == "raw"  # pending bucket: raw merged with MySQL
        assert world["hot"].reads == 2
        assert c.query(150, LT + 1).links == [] and c.query(7, LT).links == []
        assert world["hot"].reads == 2  # neither key is in the filter: MySQL not asked


def test_buffered_query_is_released_and_demand_published_then_cleared(world, coord):
    t, box = _in_thread(lambda: coord.query(5, LT, timeout=5))
    assert _eventually(lambda: coord.waiting() == {0: 1})
    assert _eventually(lambda: ("test-coordinator", {0: 1}) in world.get("published", []))
    world["jobs"][0] = "loaded"
    t.join(2)
    answer = box["value"]
    assert answer.route == "merged" and answer.waited_s > 0
    assert [l.data for l in answer.links] == [b"cold", b"hot"]
    assert _eventually(lambda: world["published"][-1] == ("test-coordinator", {}))


def _recorded(fn, *args, **kwargs):
    """``fn``'s answer and the request record it ran in (``debl.measure.request_cost``), as the
    query client wraps each request."""
    cost = request_cost.begin()
    try:
        return fn(*args, **kwargs), cost
    finally:
        request_cost.finish()


def test_a_querys_record_names_its_route_and_times_its_merge(coord):
    """Where an answer's time went (docs/BENCHMARKS.md, "The tail"): the route the answer
    names, the sides merged and the merge's time; the in-memory stores charge nothing."""
    answer, cost = _recorded(coord.query, 150, LT)
    assert (cost.route, cost.hot, cost.outcome) == (answer.route, answer.hot, "immediate")
    assert (cost.route, cost.hot) == ("merged", "mysql")
    assert cost.runs == 2 and cost.spent[request_cost.MERGE] > 0
    assert cost.spent[request_cost.MYSQL] == cost.spent[request_cost.HBASE] == 0.0
    answer, cost = _recorded(coord.query, 999, LT)  # no bucket: MySQL's one statement
    assert (cost.route, cost.hot, cost.runs) == ("mysql", "mysql", 0)
    assert cost.spent[request_cost.MERGE] == 0.0  # pushed down whole: nothing merged
    coord.query(150, LT)  # outside a record: nothing recorded, nothing fails
    assert request_cost.current() is None


def test_a_buffered_querys_record_holds_its_wait(world, coord):
    t, box = _in_thread(lambda: _recorded(coord.query, 5, LT, timeout=5))
    assert _eventually(lambda: coord.waiting() == {0: 1})
    world["jobs"][0] = "loaded"
    t.join(2)
    answer, cost = box["value"]
    assert (cost.route, cost.outcome) == ("merged", "buffered")
    assert cost.spent[request_cost.WAIT] >= answer.waited_s > 0


def test_a_new_load_replaces_the_served_one_only_at_its_uptime(world, coord):
    """The next day loads beside the current one, which keeps answering (buffered queries
    included) until the new one is up; then every query goes to the new load's stores."""
    t, box = _in_thread(lambda: coord.query(5, LT, timeout=5))
    assert _eventually(lambda: coord.waiting() == {0: 1})
    world["newest"] = _load("L2", state="running")  # a new day's load begins beside L1
    time.sleep(3 * POLL)
    assert coord.is_up and coord.load_id == "L1" and t.is_alive()
    assert coord.query(150, LT).load_id == "L1"  # L1 still answers
    world["jobs"] = {0: "loaded"}
    world["load"], world["newest"] = _load("L2"), None  # L2 is up: the current load
    t.join(2)
    assert box["value"].route == "merged" and box["value"].load_id == "L2"
    assert coord.load_id == "L2" and world["tables"][-1] == "links_L2"


def test_the_raw_reader_keeps_only_the_buckets_still_read(world, coord):
    """Defect: the coordinator tells its reader which buckets are still read: at a switch
    of day the new day's alone (its hot ones while MySQL has not taken them over), at MySQL's
    take-over its cold ones alone."""
    assert world["raw"].serving == [("L1", False)]  # MySQL holds L1's hot keys
    world["load"] = {**_load("L2"), "hot_state": "loading"}  # the next day is up
    assert _eventually(lambda: world["raw"].serving[-1:] == [("L2", True)])
    world["load"] = _load("L2")  # MySQL took L2's hot keys over
    assert _eventually(lambda: world["raw"].serving[-1:] == [("L2", False)])
    assert world["raw"].serving == [("L1", False), ("L2", True), ("L2", False)]


def test_a_failed_new_load_leaves_the_current_one_serving(world, coord):
    world["newest"] = _load("L2", state="failed")
    time.sleep(3 * POLL)
    assert coord.query(150, LT).load_id == "L1"


def test_a_failed_first_load_is_an_error_at_once_not_a_hang(world):
    world["load"], world["newest"] = None, _load("L1", state="failed")
    with Coordinator(BUFFERING) as c:
        with pytest.raises(ServiceError, match="L1 failed \\(disk full\\).*--resume L1"):
            c.get_link_list(5, LT)


def test_before_uptime_queries_wait_and_deadlines_hold(world, monkeypatch):
    world["load"] = None
    with Coordinator(BUFFERING) as c:
        assert not c.is_up
        with pytest.raises(QueryTimeout, match="not up yet \\(no load has been run\\)"):
            c.get_link_list(999, LT, timeout=0.1)
        with pytest.raises(QueryTimeout, match="not up"):  # no MySQL answer before uptime
            c.query(999, LT, timeout=0.1, partial=True)
        t, box = _in_thread(lambda: c.query(999, LT, timeout=5))
        time.sleep(3 * POLL)
        world["load"] = _load("L1")
        t.join(2)
        assert box["value"].route == "mysql" and box["value"].waited_s >= 3 * POLL
        assert c.wait_until_up(0)
        assert c.stats().waited_uptime == 1 and c.stats().timeouts == 2


def test_close_releases_waiting_queries_with_an_error_and_clears_demand(world):
    c = Coordinator(BUFFERING, "closing")
    t, box = _in_thread(lambda: c.query(5, LT))
    assert _eventually(lambda: c.waiting() == {0: 1})
    c.close()
    t.join(2)
    assert isinstance(box["error"], ServiceError) and "closed" in str(box["error"])
    assert world["published"][-1] == ("closing", {})
    c.close()  # idempotent


def test_the_poller_survives_catalog_errors(world, coord):
    world["fail"] = 3
    assert _eventually(lambda: coord.last_poll_error is not None)
    assert "went away" in coord.last_poll_error
    world["jobs"][0] = "loaded"
    assert _eventually(lambda: coord.last_poll_error is None and
                       coord.buckets()[0].j_stat == "loaded")
    assert coord.query(5, LT).route == "merged"


def test_argument_errors_are_raised_before_any_wait(coord):
    with pytest.raises(ValueError):
        coord.get_link_list(-1, LT)
    with pytest.raises(ValueError):
        coord.get_link_list(5, LT, limit=-1)
    assert coord.get_link_list(5, LT, limit=0, timeout=0.05, partial=True) == []


# ---------------------------------------------------------------------------- the raw route

def test_raw_route_answers_after_raw_after_and_still_counts_as_demand(world):
    with Coordinator(Config(coordinator_poll_interval=POLL, coordinator_raw_after=0.2), "raw") as c:
        started = time.monotonic()
        answer = c.query(5, LT, timeout=5)
        assert answer.route == "raw" and answer.complete and answer.bucket == 0
        assert 0.2 <= answer.waited_s <= time.monotonic() - started
        assert [l.data for l in answer.links] == [b"cold", b"hot"]  # merged with MySQL's rows
        assert [(b.load_id, b.b_index, b.rows) for b in world["raw"].asked] == [("L1", 0, 1)]
        # The raw answer is still demand for bucket 0: gen_HF should convert it.
        assert _eventually(lambda: ("raw", {0: 1}) in world.get("published", []))
        assert c.demand() == {0: 1} and c.waiting() == {}
        assert c.stats().raw == 1 and c.stats().raw_share == 1.0
        assert _eventually(lambda: world.get("answers", {}).get("raw", {}).get("raw") == 1)
        world["jobs"][0] = "loaded"  # converted: no demand left, HBase answers
        assert _eventually(lambda: world["published"][-1] == ("raw", {}))
        assert c.query(5, LT).route == "merged"


def test_raw_after_zero_answers_at_once_and_a_landing_bucket_comes_first(world):
    with Coordinator(Config(coordinator_poll_interval=POLL, coordinator_raw_after=0.0)) as c:
        answer = c.query(5, LT, timeout=0)
        assert answer.route == "raw" and answer.waited_s < 0.5
    with Coordinator(Config(coordinator_poll_interval=POLL, coordinator_raw_after=30.0)) as c:
        t, box = _in_thread(lambda: c.query(5, LT, timeout=10))
        assert _eventually(lambda: c.waiting() == {0: 1})
        world["jobs"][0] = "loaded"
        t.join(2)
        assert box["value"].route == "merged" and world["raw"].asked == [world["raw"].asked[0]]


def test_a_deadline_before_raw_after_still_times_out(world):
    with Coordinator(Config(coordinator_poll_interval=POLL, coordinator_raw_after=30.0)) as c:
        with pytest.raises(QueryTimeout, match="bucket 0"):
            c.query(5, LT, timeout=0.1)
        assert c.query(5, LT, timeout=0.1, partial=True).route == "partial"
        assert c.demand() == {0: 2}  # both needed bucket 0


# ---------------------------------------------------------------------------- defects

def test_a_failed_bucket_releases_its_waiters_with_a_clear_error(world, coord):
    t, box = _in_thread(lambda: coord.query(5, LT, timeout=30))
    assert _eventually(lambda: coord.waiting() == {0: 1})
    world["jobs"][0] = "failed"  # gen_HF gave up on it (a bucket too large to merge, say)
    t.join(5)
    assert not t.is_alive(), "a query on a failed bucket waited on"
    assert isinstance(box["error"], ServiceError)
    assert "gen_HF failed to load bucket 0" in str(box["error"])
    with pytest.raises(ServiceError, match="failed to load bucket 0"):  # and later ones at once
        coord.query(5, LT, timeout=30)


def test_a_failed_bucket_is_answered_by_the_raw_route_when_it_is_on(world):
    world["jobs"][0] = "failed"
    with Coordinator(Config(coordinator_poll_interval=POLL, coordinator_raw_after=30.0)) as c:
        answer = c.query(5, LT, timeout=30)
    assert answer.route == "raw" and [l.data for l in answer.links] == [b"cold", b"hot"]


def test_a_query_without_a_timeout_gets_the_configured_one_not_forever(world):
    with Coordinator(Config(coordinator_poll_interval=POLL, coordinator_raw_after=None,
                            coordinator_query_timeout=0.2)) as c:
        t, box = _in_thread(lambda: c.query(5, LT))
        t.join(10)
        assert not t.is_alive(), "a query without a timeout waited on"
        assert isinstance(box["error"], QueryTimeout)
    assert Config().coordinator.query_timeout > 0


class _BlockingStore:
    """The hot store, whose reads wait until the test lets them go."""

    def __init__(self, store: MemoryStore) -> None:
        self.store, self.go, self.reading = store, threading.Event(), threading.Event()

    def get_link_list(self, *args):
        self.reading.set()
        self.go.wait(10)
        return self.store.get_link_list(*args)

    def close(self) -> None:
        pass


def test_the_heartbeat_acknowledges_a_new_load_only_when_no_old_query_reads(world):
    blocking = _BlockingStore(world["hot"])
    world["hot"] = blocking
    with Coordinator(BUFFERING, "acking") as c:
        assert _eventually(lambda: world.get("heartbeats", {}).get("acking") == "L1")
        t, box = _in_thread(lambda: c.query(999, LT, timeout=5))  # MySQL alone; reads...
        assert blocking.reading.wait(5)
        world["load"] = _load("L2")  # the next day is up
        assert _eventually(lambda: c.load_id == "L2")
        polls = c._poller.polls
        assert _eventually(lambda: c._poller.polls >= polls + 2)
        assert world["heartbeats"]["acking"] is None  # an L1 query still reads L1's stores
        blocking.go.set()
        t.join(5)
        assert box["value"].route == "mysql" and box["value"].load_id == "L1"
        assert _eventually(lambda: world["heartbeats"]["acking"] == "L2")
    assert "acking" not in world["heartbeats"]  # close forgets it


def test_queries_asked_per_bucket_are_published_for_the_next_day(world):
    with Coordinator(Config(coordinator_poll_interval=POLL, coordinator_raw_after=0.0),
                     "asking") as c:
        for id1 in (5, 6, 150, 999):
            c.query(id1, LT)
    assert world["asks"][("L1", "asking")] == {0: 2, 1: 1}  # 999: no cold row can have it


def test_the_raw_routes_buckets_are_opened_ahead_of_their_first_query(world):
    """Bucket 0 is pending, bucket 1 loaded: only bucket 0 may be read raw. The paper's
    coordinator (raw route off) opens nothing."""
    with Coordinator(Config(coordinator_poll_interval=POLL, coordinator_raw_after=0.0)) as c:
        assert c.wait_warm(5)
        assert [(b.load_id, b.b_index, b.hot) for b in world["raw"].opened_ahead] == [
            ("L1", 0, False)]
    world["raw"].opened_ahead.clear()
    with Coordinator(BUFFERING) as c:
        assert c.wait_warm(5) and world["raw"].opened_ahead == []


class StepReader:
    """A reader whose ``open_ahead`` answers from *outcomes* in turn (an exception is raised)."""

    def __init__(self, outcomes: list) -> None:
        self.outcomes = outcomes
        self.opened: list[int] = []

    def open_ahead(self, bucket) -> bool:
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        if outcome:
            self.opened.append(bucket.b_index)
        return outcome


def test_the_warmup_skips_a_bucket_it_cannot_open_and_stops_at_its_budget():
    reader = StepReader([True, BucketFileError("bucket 1: its file x is gone"), True, False,
                         True])
    warmup = RawWarmup(reader, at_once=1)
    try:
        warmup.offer([RawBucket("L1", b, 10) for b in range(5)])
        assert warmup.wait(5)
        assert reader.opened == [0, 2]  # 1 failed (its query will say so), 3 over the budget
        assert reader.outcomes == [True]  # 4 never tried
    finally:
        warmup.close()


def test_the_warmup_ends_at_a_service_that_does_not_answer_and_is_done_for_wait():
    """HDFS down would fail every bucket after its timeout: the warm-up gives up at the first,
    so a client waiting for it is not held; the queries raise the error themselves."""
    reader = StepReader([True, ServiceError("HDFS at 127.0.0.1:9820 did not answer"), True])
    warmup = RawWarmup(reader, at_once=1)
    try:
        warmup.offer([RawBucket("L1", b, 10) for b in range(3)])
        assert warmup.wait(5)
        assert reader.opened == [0] and reader.outcomes == [True]
        warmup.offer([RawBucket("L1", 2, 10)])  # the thread lives on for the next load
        assert warmup.wait(5) and reader.opened == [0, 2]
    finally:
        warmup.close()


# ---------------------------------------------------------------- answers before uptime


def _early_world(world: dict, keys: list[int]) -> None:
    """No load up; load L2 answers before its uptime, the ids of *keys* answerable (a KeySet's
    JSON: flat pairs)."""
    world["load"] = None
    load = _load("L2", state="running")
    load["hot_state"] = "none"
    world["early"] = {"load": load, "state": "on", "gen": 1, "keys": keys}


def test_before_uptime_an_answerable_key_is_answered_early_and_another_waits_as_demand(world):
    _early_world(world, [0, 99])  # ids 0..99: bucket 0 whole
    with Coordinator(BUFFERING, "early-coordinator") as c:
        assert c.wait_until_up(2)  # it serves the early load
        answer = c.query(5, LT)
        assert answer.route == "early" and answer.load_id == "L2"
        assert [l.data for l in answer.links] == [b"cold"]  # the raw files, merged
        t, box = _in_thread(lambda: c.query(150, LT, timeout=5))
        # Its key is published as demand, for the copy to fetch first.
        assert _eventually(lambda: any(150 in d for d in world.get("key_demand", [])))
        assert t.is_alive()
        world["early"]["keys"] = [0, 199]
        world["early"]["gen"] = 2
        t.join(5)
        assert box["value"].route == "early" and box["value"].waited_s > 0
        assert [l.data for l in box["value"].links] == [b"cold newer"]
        assert _eventually(lambda: world["key_demand"][-1] == {})


def test_the_uptime_takes_over_the_queries_that_wait_before_it(world):
    _early_world(world, [])
    with Coordinator(BUFFERING.replace(coordinator_raw_after=0.0), "early-coordinator") as c:
        assert c.wait_until_up(2)
        t, box = _in_thread(lambda: c.query(150, LT, timeout=5))
        assert _eventually(lambda: any(150 in d for d in world.get("key_demand", [])))
        up = dict(world["early"]["load"], state="up", hot_state="mysql")
        world["early"] = None
        world["load"] = up
        world["jobs"] = {0: "pending", 1: "loaded"}
        t.join(5)
        assert box["value"].route == "merged" and box["value"].load_id == "L2"
        # Once the load is up no key waits for it: the coordinator withdraws its keys (a status
        # read right after the uptime shows none waiting).
        assert _eventually(lambda: world["key_demand"][-1] == {})


def test_a_false_claim_stops_early_answers_and_counts_those_given(world):
    """Every early answer is added to the catalog's counts per id1 (a claim found false counts
    those in its id1s there: tests/test_early_status.py), and a claim found false stops them."""
    _early_world(world, [0, 199])
    with Coordinator(BUFFERING, "early-coordinator") as c:
        assert c.wait_until_up(2)
        assert c.query(5, LT).route == "early"
        assert c.query(150, LT).route == "early"
        assert c.query(150, LT).route == "early"
        assert _eventually(lambda: world.get("early_answers") == {("L2", 5): 1,
                                                                  ("L2", 150): 2})
        world["early"]["state"] = "stopped"

        def waits() -> bool:
            try:
                c.query(5, LT, timeout=0.05)
            except QueryTimeout as exc:
                assert "not up yet" in str(exc)
                return True
            return False
        assert _eventually(waits)  # once its poll has seen the load stopped
    answered = world["early_answers"]
    assert answered[("L2", 150)] == 2 and set(answered) == {("L2", 5), ("L2", 150)}


def test_an_early_answer_is_counted_before_a_one_shot_command_shows_it(world):
    """`debl links` records its early answer before it prints it; a
    catalog that cannot take it now keeps it for the next try (and says so)."""
    _early_world(world, [0, 199])
    with Coordinator(BUFFERING.replace(coordinator_poll_interval=60.0), "one-shot") as c:
        assert c.wait_until_up(2)
        c._poller.stop()  # no turn of the poller's: only the command records the answer
        assert c.query(5, LT).route == "early"
        world["fail"] = 1
        with pytest.raises(ConnectionError):
            c.record_early_answers()
        assert "early_answers" not in world
        c.record_early_answers()
        assert world["early_answers"] == {("L2", 5): 1}
class SlowReader:
    """A reader whose ``open_ahead`` takes a while, counting the opens in flight at once."""

    def __init__(self, budget: int) -> None:
        self.budget, self.in_flight, self.most, self.calls = budget, 0, 0, 0
        self.opened: list = []
        self._lock = threading.Lock()

    def open_ahead(self, bucket) -> bool:
        with self._lock:
            self.calls += 1
            if len(self.opened) + self.in_flight >= self.budget:
                return False
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
        time.sleep(0.05)
        with self._lock:
            self.in_flight -= 1
            self.opened.append(bucket.b_index)
        return True


def test_the_warmup_opens_several_buckets_at_once_and_stops_starting_at_its_budget():
    reader = SlowReader(budget=1000)
    warmup = RawWarmup(reader, at_once=4)
    try:
        warmup.offer([RawBucket("L1", b, 10) for b in range(12)])
        assert warmup.wait(5)
        assert sorted(reader.opened) == list(range(12)) and reader.most == 4
        small = SlowReader(budget=5)
        warmup.reader = small
        warmup.offer([RawBucket("L1", b, 10) for b in range(40)])
        assert warmup.wait(5)
        # the five the budget allows; after the first refusal no bucket is started, so at most
        # the calls already under way when it came follow it (fewer than at_once)
        assert sorted(small.opened) == list(range(5)) and small.calls < 5 + 4
    finally:
        warmup.close()
