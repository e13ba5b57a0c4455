"""The coordinator on the real stack: routing, buffering and release, deadlines, partial answers,
demand publication, many threads, restart, and random queries against the in-memory reference.

One module-scoped load in a database of its own (``debl_coordtest``), dropped at the end. The data
set is a generated one (updates, hidden rows, bad lines) plus two crafted files: a cold one and a
hot one whose rows conflict on purpose at one id1 (every case of the merge rule across stores), and
hot-only ids whose bucket has no cold row at all.

gen_HF is another component: a bucket is "loaded" here by writing its merged cold rows into the
real HBase table (HBaseStore.write_links) and setting its job state, as gen_HF does at the end
of a run. Buckets are used one per test, in file order:

    b0  many threads: released in the middle of the run
    b1  blocks, demand published, released within a poll interval
    b2  the crafted conflicts: timeout and partial answers first, then loaded
    b3  loaded for the random comparison (id1 2000, bucket 4, has no link)
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from click.testing import CliRunner

from coordinator import Coordinator
from coordinator.state import Dataset, HotBucket
from debl.format.bucket_map import BucketMap
from debl.catalog import Catalog, JobState, LoadRecord
from debl.commands.links import links as links_command
from debl.commands.status import status as status_command
from debl.config import Config
from debl.errors import QueryTimeout
from debl.format.link import MAX_TIME, Link, Origin, ParseError, parse_line
from debl.store.hbase import HBaseStore
from debl.store.memory import MemoryStore
from debl.workload.generator import generate
from debl.workload.spec import GenerateSpec
from loaders.cleanup import drop_every_load
from loaders.load import LoadOptions, LoadProgress, run_load

pytestmark = pytest.mark.stack

DATABASE = "debl_coordtest"
POLL = 0.2
WIDTH = 500
MAP = BucketMap.fixed(WIDTH)
LT = 123456789
SPEC = GenerateSpec(max_id=2001, files=4, days=4, seed=11, update_share=0.3, hidden_share=0.3,
                    bad_lines=6, max_degree=20)
CONFLICT_ID = 1234  # bucket 2
HOT_ONLY_IDS = range(5000, 5040)  # bucket 10: no cold row
T0 = 1_700_000_000_000
BIG = 10**9  # crafted id2 values, far from the generated ones (id1 + j)


# ---------------------------------------------------------------------------- the data set

def _line(id1, id2, vis, data, t, version, link_type=LT) -> bytes:
    return Link(id1, link_type, id2, vis, data, t, version).to_line()


def _craft(directory: Path) -> None:
    """The crafted cold file (older than every generated file) and hot file (newest)."""
    cold = [
        _line(CONFLICT_ID, BIG + 1, 1, b"c1", T0 + 100, 0),
        _line(CONFLICT_ID, BIG + 2, 0, b"c2 hidden", T0 + 200, 0),
        _line(CONFLICT_ID, BIG + 3, 1, b"c3 v2", T0 + 300, 2),
        _line(CONFLICT_ID, BIG + 4, 1, b"c4 tie", T0 + 400, 5),
        _line(CONFLICT_ID, BIG + 5, 1, b"c5 late", T0 + 900, 0),
        _line(CONFLICT_ID, BIG + 6, 1, b"c6 first", T0 + 600, 0),
        _line(CONFLICT_ID, BIG + 6, 1, b"c6 later line", T0 + 600, 0),
        b"not a link\n",
    ]
    hot = [
        _line(CONFLICT_ID, BIG + 1, 0, b"h1 hidden", T0 + 200, 0),
        _line(CONFLICT_ID, BIG + 2, 1, b"h2", T0 + 100, 0),
        _line(CONFLICT_ID, BIG + 3, 1, b"h3 v1", T0 + 300, 1),
        _line(CONFLICT_ID, BIG + 4, 1, b"h4 tie \\ \" ,", T0 + 400, 5),
        _line(CONFLICT_ID, BIG + 5, 1, b"h5 early", T0 + 500, 0),
    ]
    for k in range(7, 60):  # a long list, split between the stores, for offsets and limits
        (hot if k % 2 else cold).append(
            _line(CONFLICT_ID, BIG + k, int(k % 7 != 0), b"p%d" % k, T0 + 1000 + k // 3, k % 3))
    for id1 in HOT_ONLY_IDS:
        for j in range(id1 % 5):
            hot.append(_line(id1, id1 + j, 1, b"first", T0 + j, 0))
            hot.append(_line(id1, id1 + j, int(j % 3 != 0), b"update", T0 + 10 + j, 1))
    hot.append(b"5001\t123456789\t-1\t1\tbad\t1\t0\n")
    oldest = min(p.stat().st_mtime for p in directory.glob("links-*.tsv"))
    newest = max(p.stat().st_mtime for p in directory.glob("links-*.tsv"))
    for name, lines, mtime in (("crafted-cold.tsv", cold, oldest - 3600),
                               ("crafted-hot.tsv", hot, newest + 3600)):
        path = directory / name
        path.write_bytes(b"".join(lines))
        os.utime(path, (mtime, mtime))


def _files(config: Config, load_id: str) -> list[tuple[int, str, bool]]:
    with Catalog(config) as catalog:
        return [(f.file_seq, f.name, f.hot) for f in catalog.files.files(load_id)]


def _rows(directory: Path, files):
    """Every parseable line with its origin, as the load saw the files."""
    for seq, name, hot in files:
        with open(directory / name, "rb") as f:
            for line_no, line in enumerate(f, 1):
                try:
                    link = parse_line(line)
                except ParseError:
                    continue
                yield link, Origin(int(hot), seq, line_no)


# ---------------------------------------------------------------------------- the world

@dataclass
class World:
    config: Config
    coordinator: Coordinator
    reference: MemoryStore  # every line of every file: what a complete answer is
    hot_reference: MemoryStore  # the hot lines only: what MySQL alone answers
    cold_rows: dict[int, list[tuple[Link, Origin]]]
    keys: list[tuple[int, int]]
    load: LoadRecord
    early: dict = field(default_factory=dict)
    loaded_at: float = 0.0

    def land(self, *buckets: int) -> float:
        """Load buckets the way gen_HF ends a run: cold rows into the load's HBase table, then
        the job state. Returns the monotonic time just before the state was set: no query can
        be released earlier."""
        with HBaseStore(self.config, self.load.namespace.hbase_table) as hbase:
            for b in buckets:
                hbase.write_links(self.cold_rows[b])
        with Catalog(self.config) as catalog:
            before = time.monotonic()
            catalog.jobs.set_job_state(self.load.load_id, buckets, JobState.LOADED,
                                       run_id="test")
        return before

    def ids_in(self, b: int) -> list[tuple[int, int]]:
        return [(id1, lt) for id1, lt in self.keys if MAP.bucket_of(id1) == b]


class _StartCoordinatorEarly(LoadProgress):
    """Right after the load has begun (the system is down), build the coordinator and send a
    query: it must wait for uptime."""

    def __init__(self, config: Config, early: dict) -> None:
        self.config, self.early = config, early

    def start(self, hot_bytes: int, cold_bytes: int) -> None:
        c = Coordinator(self.config)
        self.early["coordinator"] = c
        self.early["up_at_start"] = c.is_up

        def ask() -> None:
            self.early["answer"] = c.query(HOT_ONLY_IDS[3], LT, timeout=120)
            self.early["answered_at"] = time.monotonic()

        self.early["thread"] = threading.Thread(target=ask, daemon=True)
        self.early["thread"].start()


@pytest.fixture(scope="module")
def world(stack_config, tmp_path_factory):
    # The paper's coordinator: buffering only (the raw route: tests/test_raw.py), and no answer
    # before uptime (tests/test_early_answers.py): a query asked early waits for the uptime.
    config = stack_config.replace(mysql_database=DATABASE, coordinator_poll_interval=POLL,
                                  coordinator_raw_after=None, loading_early_answers=False)
    Catalog(config, replace_older=True).close()
    drop_every_load(config)  # no load current: the early coordinator waits for uptime
    directory = tmp_path_factory.mktemp("coordinator") / "links"
    generate(directory, SPEC)
    _craft(directory)
    newest_generated = max(p.stat().st_mtime for p in directory.glob("links-*.tsv"))
    early: dict = {}
    summary = run_load(config, str(directory),
                       LoadOptions(hot_since=newest_generated, chunk_size=64 * 1024,
                                   bucket_width=WIDTH),
                       progress=_StartCoordinatorEarly(config, early))
    loaded_at = time.monotonic()
    early["thread"].join(30)
    with Catalog(config) as catalog:
        load = catalog.loads.load(summary.load_id)
    with HBaseStore(config, load.namespace.hbase_table) as hbase:  # gen_HF makes it pre-split
        hbase.reset()

    files = _files(config, summary.load_id)
    assert sum(hot for _, _, hot in files) == 2 and len(files) == 6
    reference, hot_reference = MemoryStore(), MemoryStore()
    all_rows = list(_rows(directory, files))
    reference.write_links(all_rows)
    hot_reference.write_links([r for r in all_rows if r[1].hot])
    cold_rows: dict[int, list] = defaultdict(list)
    for link, origin in all_rows:
        if not origin.hot:
            cold_rows[MAP.bucket_of(link.id1)].append((link, origin))
    assert sorted(cold_rows) == [0, 1, 2, 3]

    w = World(config, early["coordinator"], reference, hot_reference, dict(cold_rows),
              sorted(reference.keys()), load, early, loaded_at)
    try:
        yield w
    finally:
        w.coordinator.close()
        drop_every_load(config)


def _expected(w: World, id1: int, lt: int = LT, *args) -> list[Link]:
    return w.reference.get_link_list(id1, lt, *args)


def _my_demand(w: World, coordinator: Coordinator) -> dict[int, int]:
    with Catalog(w.config) as catalog:
        return {row.b_index: row.waiting for row in catalog.serving.published_demand(w.load.load_id)
                if row.coordinator == coordinator.coordinator_id}


def _eventually(predicate, timeout: float = 5.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


# ---------------------------------------------------------------------------- tests

def test_the_hot_bucket_of_an_id_is_the_one_whose_span_holds_it():
    """A load's hot rows are in one hot bucket (debl.format.bucket_map.HOT_MAP), a load's of older
    code in one per cold bucket: either way the hot bucket of id1 is the one whose rows' span holds
    it, and an id outside every span reads no hot file."""
    one = Dataset(load=None, hot_buckets={0: HotBucket(0, 9, 40, 700)})
    assert [one.hot_bucket_of(i) for i in (39, 40, 500, 700, 701)] == \
        [None, one.hot_buckets[0], one.hot_buckets[0], one.hot_buckets[0], None]
    per_cold = Dataset(load=None, hot_buckets={b: HotBucket(b, 3, 100 * b + 10, 100 * b + 50)
                                               for b in (2, 5)})
    assert [getattr(per_cold.hot_bucket_of(i), "b_index", None)
            for i in (210, 250, 251, 300, 505, 510)] == [2, 2, None, None, None, 5]


def test_a_query_before_uptime_waits_for_uptime(world):
    early = world.early
    assert early["up_at_start"] is False
    answer = early["answer"]
    assert answer.route == "mysql" and answer.complete
    # asked while the load ran, answered once it was up (a fast load can take under a second:
    # no fixed wait is asserted)
    assert early["answered_at"] - answer.waited_s < world.loaded_at
    assert early["answered_at"] - world.loaded_at < POLL + 1.0
    assert answer.links == _expected(world, HOT_ONLY_IDS[3])
    assert answer.links  # the crafted hot-only ids have rows


def test_the_state_is_read_from_the_catalog(world):
    c = world.coordinator
    assert c.is_up
    views = c.buckets()
    assert [v.b_index for v in views] == [0, 1, 2, 3]
    assert all(v.j_stat == "pending" and v.waiting == 0 for v in views)
    assert (views[1].k_lo, views[1].k_hi) == (500, 999)
    ids = [id1 for id1, _ in world.reference.keys()]  # hot range and cold spans: every id
    assert c.id_range() == (min(ids), HOT_ONLY_IDS[-1] + 1)


def test_ids_without_a_cold_bucket_are_answered_at_once_by_mysql(world):
    c = world.coordinator
    for id1 in HOT_ONLY_IDS:
        answer = c.query(id1, LT)
        assert (answer.route, answer.waited_s, answer.bucket) == ("mysql", 0.0, None)
        assert answer.links == _expected(world, id1)
        assert c.get_link_list(id1, LT, T0 + 11, T0 + 13) == _expected(world, id1, LT, T0 + 11,
                                                                      T0 + 13)
    assert c.get_link_list(10**6, LT) == []  # beyond every range


def test_mysql_is_asked_only_for_keys_the_hot_key_filter_may_hold(world):
    with Catalog(world.config) as catalog:
        dataset = Dataset.of(catalog.serving.serving_state())
        load = dataset.load
    assert dataset.hot_keys is not None
    hot = set(world.hot_reference.keys())
    # Hidden rows included: a hidden hot row must still hide its cold twin.
    assert all(dataset.may_be_hot(id1, lt) for id1, lt in hot)
    others = [(id1, lt) for id1, lt in world.keys if (id1, lt) not in hot
              and load.hot_k_lo <= id1 <= load.hot_k_hi]
    assert len(others) > 100  # the hot range alone would send all of them to MySQL
    spared = sum(not dataset.may_be_hot(id1, lt) for id1, lt in others)
    assert spared >= 0.95 * len(others)  # 10 bits per key: about 0.8% false positives
    # Hot keys that no cold row can have are MySQL's alone: still answered in full. (Keys of
    # pending buckets are left alone: asking them would add to those buckets' demand.)
    mysql_alone = [(id1, lt) for id1, lt in sorted(hot) if dataset.bucket_of(id1) is None]
    assert len(mysql_alone) >= 30
    for id1, lt in mysql_alone:
        answer = world.coordinator.query(id1, lt)
        assert answer.route == "mysql" and answer.links == _expected(world, id1, lt)


def test_a_pending_bucket_blocks_publishes_demand_and_is_released_when_loaded(world):
    c = world.coordinator
    ids = world.ids_in(1)[:3]
    results: dict = {}

    def ask(i, id1, lt):
        results[i] = (c.query(id1, lt, timeout=30), time.monotonic())

    threads = [threading.Thread(target=ask, args=(i, *k)) for i, k in enumerate(ids)]
    for t in threads:
        t.start()
    assert _eventually(lambda: c.waiting().get(1) == len(ids))
    time.sleep(2 * POLL)
    assert all(t.is_alive() for t in threads)  # still buffered
    assert _eventually(lambda: _my_demand(world, c) == {1: len(ids)}, 3 * POLL + 1)
    with Catalog(world.config) as catalog:
        assert catalog.serving.demand(world.load.load_id).get(1, 0) >= len(ids)

    landed = world.land(1)
    for t in threads:
        t.join(10)
    assert not any(t.is_alive() for t in threads)
    for i, (id1, lt) in enumerate(ids):
        answer, at = results[i]
        assert answer.route == "merged" and answer.complete and answer.bucket == 1
        assert answer.waited_s > 2 * POLL
        assert at >= landed, "released only after the bucket landed"
        assert answer.links == _expected(world, id1, lt)
    assert _eventually(lambda: _my_demand(world, c) == {}, 3 * POLL + 1)
    assert c.waiting() == {}
    # Loaded now: answered at once.
    id1, lt = ids[0]
    again = c.query(id1, lt)
    assert again.waited_s == 0.0 and again.links == _expected(world, id1, lt)


def test_past_the_deadline_a_query_times_out_clearly(world):
    c = world.coordinator
    t0 = time.monotonic()
    with pytest.raises(QueryTimeout, match=r"bucket 2 \(id1 1000\.\.1499\) is still 'pending'"):
        c.query(CONFLICT_ID, LT, timeout=0.3)
    assert 0.3 <= time.monotonic() - t0 < 0.3 + 1.0
    with pytest.raises(QueryTimeout, match="after waiting 0.[2-9]"):
        c.get_link_list(CONFLICT_ID, LT, deadline=time.time() + 0.25)
    assert _eventually(lambda: c.waiting() == {})  # the timed-out query left q_list


def test_partial_gives_the_mysql_answer_marked_incomplete(world):
    c = world.coordinator
    answer = c.query(CONFLICT_ID, LT, timeout=0.2, partial=True)
    assert (answer.route, answer.complete, answer.bucket) == ("partial", False, 2)
    assert answer.waited_s >= 0.2
    assert answer.links == world.hot_reference.get_link_list(CONFLICT_ID, LT)
    assert answer.links != _expected(world, CONFLICT_ID)  # the cold rows matter here


def test_links_command_partial_and_status_while_pending(world):
    runner = CliRunner()
    result = runner.invoke(links_command, [str(CONFLICT_ID), str(LT), "--partial", "--json"],
                           obj=world.config, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["complete"] is False and doc["route"] == "partial" and doc["bucket"] == 2
    got = [Link(CONFLICT_ID, LT, r["id2"], r["visibility"], r["data"].encode("latin-1"),
                r["time"], r["version"]) for r in doc["links"]]
    assert got == world.hot_reference.get_link_list(CONFLICT_ID, LT)

    result = runner.invoke(links_command, [str(CONFLICT_ID), str(LT), "--timeout", "0.1"],
                           obj=world.config)
    assert result.exit_code == 1 and "still 'pending'" in result.output

    result = runner.invoke(status_command, ["--json"], obj=world.config, catch_exceptions=False)
    s = json.loads(result.output)
    assert s["load"]["state"] == "up" and s["load"]["bucket_map"] == {
        "kind": "width", "width": WIDTH, "buckets": None}
    assert s["buckets"]["total"] == 4 and s["buckets"]["loaded"] == 1
    assert s["buckets"]["by_state"]["pending"] == 3
    assert s["full_availability"] is None
    text = runner.invoke(status_command, [], obj=world.config).output
    assert "1/4 loaded" in text and "uptime" in text


def test_the_crafted_conflicts_follow_the_merge_rule_across_stores(world):
    c = world.coordinator
    world.land(2)
    answer = c.query(CONFLICT_ID, LT, timeout=5)
    assert answer.route == "merged"
    assert answer.links == _expected(world, CONFLICT_ID)
    by_id2 = {l.id2: l for l in answer.links}
    assert BIG + 1 not in by_id2  # a newer hidden hot row hides the older visible cold one
    assert BIG + 2 not in by_id2  # a newer hidden cold row hides the older visible hot one
    assert by_id2[BIG + 3].data == b"c3 v2"  # equal time: the greater version
    assert by_id2[BIG + 4].data == b"h4 tie \\ \" ,"  # equal time and version: hot over cold
    assert by_id2[BIG + 5].data == b"c5 late"
    assert by_id2[BIG + 6].data == b"c6 later line"  # within the cold store: the later line
    # A winner after max_time suppresses the key's older row inside the window.
    window = c.get_link_list(CONFLICT_ID, LT, T0, T0 + 800)
    assert BIG + 5 not in {l.id2 for l in window}
    assert window == _expected(world, CONFLICT_ID, LT, T0, T0 + 800)
    for offset, limit in ((0, 5), (3, 7), (40, 10), (0, 0), (100, 5)):
        assert c.get_link_list(CONFLICT_ID, LT, 0, MAX_TIME, offset, limit) == \
            _expected(world, CONFLICT_ID, LT, 0, MAX_TIME, offset, limit)

    result = CliRunner().invoke(links_command, [str(CONFLICT_ID), str(LT), "--limit", "3"],
                                obj=world.config, catch_exceptions=False)
    assert (f"HBase (bucket 2) merged with the hot rows from MySQL; load {world.load.load_id}; "
            "answered at once") in result.output
    assert len(result.output.splitlines()) == 2 + 3


def test_many_threads_share_one_coordinator(world):
    c = world.coordinator
    rng = random.Random(3)
    work = ([(id1, LT) for id1 in HOT_ONLY_IDS] + world.ids_in(1) + world.ids_in(2)
            + world.ids_in(0))
    rng.shuffle(work)
    per_thread = [work[i::16] for i in range(16)]
    errors: list = []
    done = [0]
    lock = threading.Lock()

    def run(items):
        try:
            for id1, lt in items:
                got = c.get_link_list(id1, lt, timeout=30)
                if got != _expected(world, id1, lt):
                    errors.append((id1, lt))
                with lock:
                    done[0] += 1
        except Exception as exc:  # noqa: BLE001 -- reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(items,)) for items in per_thread]
    for t in threads:
        t.start()
    # Every thread runs into bucket 0 sooner or later and blocks there.
    assert _eventually(lambda: c.waiting().get(0, 0) > 0, 10)
    time.sleep(POLL)
    world.land(0)
    for t in threads:
        t.join(60)
    assert not errors
    assert done[0] == len(work)


def test_random_queries_equal_the_reference(world):
    c = world.coordinator
    world.land(3)
    assert _eventually(lambda: all(v.j_stat == "loaded" for v in c.buckets()))
    rng = random.Random(17)
    times = sorted({l.time for key in world.keys for l in world.reference.scan_newest_first(*key)})
    for _ in range(400):
        id1, lt = rng.choice(world.keys) if rng.random() < 0.9 else (rng.randrange(2100), LT)
        lo = rng.choice([0, 0, rng.choice(times)])
        hi = rng.choice([MAX_TIME, MAX_TIME, rng.choice(times), lo])
        offset = rng.choice([0, 0, rng.randrange(5)])
        limit = rng.choice([10000, rng.randrange(6)])
        assert c.get_link_list(id1, lt, lo, hi, offset, limit) == \
            _expected(world, id1, lt, lo, hi, offset, limit), (id1, lt, lo, hi, offset, limit)


def test_a_new_coordinator_rebuilds_the_same_state_from_mysql(world):
    old = world.coordinator
    with Coordinator(world.config) as fresh:
        assert fresh.coordinator_id != old.coordinator_id
        assert fresh.load_id == old.load_id
        assert [(v.b_index, v.k_lo, v.k_hi, v.j_stat) for v in fresh.buckets()] == \
            [(v.b_index, v.k_lo, v.k_hi, v.j_stat) for v in old.buckets()]
        for id1, lt in world.keys[::25]:
            answer = fresh.query(id1, lt)
            assert answer.waited_s == 0.0 and answer.links == _expected(world, id1, lt)

    result = CliRunner().invoke(status_command, ["--json"], obj=world.config)
    s = json.loads(result.output)
    assert s["buckets"]["loaded"] == 4 and s["full_availability"] is not None
    assert s["demand"]["total"] == 0 or _my_demand(world, old) == {}


def test_stats_count_immediate_and_buffered_queries(world):
    s = world.coordinator.stats()
    assert s.buffered >= 3 + 1  # the released queries of bucket 1, those of the thread test
    assert s.waited_uptime == 1
    assert s.partial == 1 and s.timeouts == 2
    assert s.immediate > 400
    assert 0 < s.mean_wait_s <= s.max_wait_s and s.p95_wait_s <= s.max_wait_s
    assert 0.5 < s.immediate_share < 1.0
    assert s.to_dict()["immediate_share"] == s.immediate_share
