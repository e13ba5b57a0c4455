"""Fresh answers on the real stack (docs/FRESHNESS.md, "The contract"): a dump of the source
database loaded by `debl load`, then writes to the source's table (add, update to an older
time, hide, delete, a key moved within its list and to another bucket's id1, a new list),
captured into the change log by the follower (`debl follow`'s ``Follower``, in a thread:
``tests.fresh_source.Following``), and every read
(get_link_list with and without a window, count_link, multiget_link) on every route (MySQL
alone, the raw route, HBase merged, partial, early before the uptime, `debl links`) equal to
the source's table at the answer's position, which lies between the head when the query
arrived and the head when it was answered; in serial mode the same; with mode off answers from
what was applied so far; on demand and in the background counted and shown by `debl status`;
a next day with its own position and a rollback, no key going back; a tolerance; no follower.

The reference is the source's table at a position (``SourceHistory.rows_at``: the table at the
dump with the writes up to it, itself checked against a SELECT of the table), in the in-memory
store for the reads' exact semantics.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass

import pytest
from click.testing import CliRunner

from coordinator import Coordinator, CountLink, LinkList, MultigetLink
from coordinator.routes import Route
from debl.bench.source_server import make_server
from debl.catalog import METADATA, Catalog, LoadRecord, engine_for
from debl.cli import main
from debl.errors import QueryTimeout, ServiceError
from debl.format.link import Link, Origin
from debl.store import source_db
from debl.store.memory import MemoryStore
from debl.workload.generator import generate
from debl.workload.spec import GenerateSpec
from loaders.cleanup import drop_every_load, rollback
from loaders.gen_hf import GenHF
from loaders.load import LoadOptions, LoadRun, run_load
from loaders.source import LocalSource
from loaders.source_dump import dump_source
from loaders.source_init import init_source
from tests.fresh_source import Following, SourceHistory

pytestmark = pytest.mark.stack

TABLE = "freshtest"
LT = 123456789
OPTIONS = LoadOptions(chunk_size=64 * 1024, bucket_width=300)


@pytest.fixture(scope="module")
def config(stack_config):
    return stack_config.replace(source_db_table=TABLE, mysql_database="debl_freshtest",
                                hbase_table="freshtest", hdfs_root="/debl-freshtest",
                                coordinator_poll_interval=0.2, coordinator_raw_after=0.0)


@dataclass
class World:
    config: object
    catalog: Catalog
    load: LoadRecord
    dump_dir: object


def _new_catalog(config) -> None:
    """The catalog of *config* empty (its loads' stores dropped; no change log, no follower)."""
    Catalog(config, replace_older=True).close()
    drop_every_load(config)
    METADATA.drop_all(engine_for(config))
    Catalog(config).close()


def _load(config, out) -> str:
    files = LocalSource(out).list()
    options = LoadOptions(**{**vars(OPTIONS), "hot_bytes": sum(f.size for f in files[-2:])})
    summary = run_load(config, str(out), options)
    assert summary.hot_files >= 1 and summary.cold_files >= 1 and summary.rejects == 0
    return summary.load_id


@pytest.fixture(scope="module")
def world(config, spark, tmp_path_factory):
    """The source's table filled, dumped and the dump loaded (hot files in MySQL, no bucket
    converted yet); no follower."""
    directory = tmp_path_factory.mktemp("fresh-src")
    generate(directory, GenerateSpec(max_id=2001, files=4, days=4, seed=11, max_degree=30,
                                     update_share=0.3, hidden_share=0.2, layout="days"))
    init_source(config, str(directory), replace=True)
    out = tmp_path_factory.mktemp("fresh-dump")
    dump = dump_source(config, out, files=4, layout="days")
    _new_catalog(config)
    load_id = _load(config, out)
    catalog = Catalog(config)
    load = catalog.loads.load(load_id)
    assert load.position == dump.position
    try:
        yield World(config, catalog, load, out)
    finally:
        catalog.close()
        drop_every_load(config)


@pytest.fixture(scope="module")
def history(world):
    """The source's writes from the dump on, captured by a follower that runs from here to the
    module's end."""
    history = SourceHistory(world.config, world.load.position)
    try:
        with Following(world.config):
            yield history
    finally:
        history.close()


def _source_sql(config, sql: str) -> None:
    conn = source_db.connect(config)
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
    finally:
        conn.close()


def _store(rows) -> MemoryStore:
    store = MemoryStore()
    store.write_links((link, Origin(0, 0, 0)) for link in rows)
    return store


def _reads(history: SourceHistory, key: tuple[int, int]) -> list:
    """The reads asked of a key: its list whole and in a window, its count, some id2s (changed
    ones, present ones and one that is not there)."""
    rows = sorted((l for l in history.rows.values() if (l.id1, l.link_type) == key),
                  key=lambda l: l.time)
    middle = rows[len(rows) // 2].time if rows else 0
    id2s = tuple(sorted({l.id2 for l in rows[::2]} | {10**6}))
    return [LinkList(*key), LinkList(*key, middle, 2**62, 1, 3), CountLink(*key),
            MultigetLink(*key, id2s)]


def _ask(c: Coordinator, history: SourceHistory, op, seen: dict | None = None, *,
         tolerant: bool = False):
    """*op* through *c*, checked: the answer equals the source at its position, which lies
    between the heads before (unless *tolerant*: a tolerance relaxes it) and after; a key
    never goes back (*seen*: key -> the last position it was answered at)."""
    before = history.head()
    answer = c.ask(op, timeout=60)
    after = history.head()
    assert answer.position is not None and answer.position <= after, (op, answer.position)
    assert tolerant or before <= answer.position, (op, before, answer.position)
    key = (op.id1, op.link_type)
    expected = op.on(_store(l for l in history.rows_at(answer.position).values()
                            if (l.id1, l.link_type) == key))
    assert (answer.links if answer.count is None else answer.count) == expected, \
        (op, answer.route, answer.position)
    if seen is not None:
        assert answer.position >= seen.get(key, 0), (key, seen[key], answer.position)
        seen[key] = answer.position
    return answer


def _routes(c: Coordinator, history: SourceHistory) -> dict[tuple, list[tuple[int, int]]]:
    """The source's (id1, link_type)s by (route, hot side) of their answer now."""
    found: dict[tuple, list] = {}
    for key in sorted({(l.id1, l.link_type) for l in history.rows.values()}):
        a = c.query(*key, timeout=60)
        found.setdefault((str(a.route), str(a.hot)), []).append(key)
    return found


def _write_everything(history: SourceHistory, keys: list[tuple[int, int]], far_id1: int) -> set:
    """Each kind of write on each of *keys* (a list with at least four rows); the lists they
    touched (a moved key's new one, a new list at *far_id1*, past every loaded id1)."""
    touched = set(keys)
    t_new = max(l.time for l in history.rows.values()) + 1000
    for n, key in enumerate(keys):
        rows = sorted((l for l in history.rows.values() if (l.id1, l.link_type) == key),
                      key=lambda l: (l.time, l.id2), reverse=True)
        visible = [l for l in rows if l.visibility == 1]
        newest, second, third, fourth = visible[0], visible[1], visible[2], rows[-1]
        history.add(Link(*key, 10**5 + n, 1, b"added \x00\xff", t_new + n, 0))
        history.update(newest._replace(data=b"older now", time=1, version=0))  # down the list
        history.hide(second.key)
        history.delete(third.key)
        history.move(fourth.key, (key[0], key[1], 10**5 + 500 + n))
        moved = rows[-2].key
        to = (far_id1 + 1 + n, key[1], moved[2])
        history.move(moved, to)  # to another id1, in another key range
        touched.add(to[:2])
    history.add(Link(far_id1, LT, 7, 1, b"a new list", t_new, 0))
    touched.add((far_id1, LT))
    for key in touched:  # the bookkeeping is the source's table
        assert sorted(history.select(*key)) == sorted(l for l in history.rows.values()
                                                   if (l.id1, l.link_type) == key)
    return touched


def _write_some(history: SourceHistory, key: tuple[int, int]) -> None:
    """A link added to the list *key*, newer than any, and its newest visible one hidden."""
    rows = sorted((l for l in history.rows.values() if (l.id1, l.link_type) == key
                   and l.visibility == 1), key=lambda l: (l.time, l.id2), reverse=True)
    history.add(Link(*key, 10**5 + 777, 1, b"some", max(l.time for l in history.rows.values()) + 1,
                  0))
    if rows:
        history.hide(rows[0].key)


def _long_lists(history: SourceHistory, keys: list | None = None) -> list:
    """Of *keys* (default: every list of the source), in order, those with at least five
    visible links."""
    visible: dict = {}
    for l in history.rows.values():
        visible[(l.id1, l.link_type)] = visible.get((l.id1, l.link_type), 0) + l.visibility
    return [k for k in (sorted(visible) if keys is None else keys) if visible.get(k, 0) >= 5]


def _changed(history: SourceHistory) -> list:
    """The lists the writes since the dump changed."""
    return sorted({(l.id1, l.link_type)
                   for l in set(history.rows.values()) ^ set(history.at_dump.values())})


def _wait(what: str, done) -> None:
    deadline = time.monotonic() + 60
    while not done():
        assert time.monotonic() < deadline, f"{what}: not after 60 s"
        time.sleep(0.05)


# ---------------------------------------------------------------------------------- the tests


def test_without_a_follower_a_query_waits_and_says_to_start_debl_follow(world):
    """The head moved past the dump (another table's transaction) and nothing captures."""
    _source_sql(world.config, "CREATE TABLE IF NOT EXISTS fresh_other (x INT)")
    _source_sql(world.config, "INSERT INTO fresh_other VALUES (1)")
    with Coordinator(world.config) as c:
        with pytest.raises(QueryTimeout, match=r"no follower has captured source .* yet: start "
                                               r"`debl follow`"):
            c.get_link_list(5, LT, timeout=1.0)
        assert c.stats().answered == 0
    text = CliRunner().invoke(main, ["status"], obj=world.config).output
    assert "fresh      no follower has captured source" in text
    assert "1 queries timed out waiting for the change log" in text


def test_a_partial_answer_carries_the_changes_too(world, history):
    """With the raw route off a cold bucket not loaded yet is waited for; past the deadline
    the hot rows alone, with the key's changes in place as far as they were captured (a
    partial answer waits for nothing more)."""
    with Coordinator(world.config.replace(coordinator_raw_after=None)) as c:
        key = next(k for k in _long_lists(history)
                   if c.query(*k, timeout=0.0, partial=True).route is Route.PARTIAL)
        gone = c.query(*key, timeout=0.0, partial=True).links[0]
        added = Link(*key, 10**5 + 99, 1, b"partial", 2**40, 0)
        first = history.add(added)
        last = history.delete(gone.key)
        while (answer := c.query(*key, timeout=0.0, partial=True)).position < last:
            assert answer.position < first or added in answer.links
            assert gone in answer.links  # one position: not the delete without the add
        assert answer.route is Route.PARTIAL and not answer.complete
        assert added in answer.links and gone not in answer.links


def test_every_read_on_every_route_equals_the_source_at_its_position(world, history):
    """Before any conversion (the raw route with MySQL's hot rows; no store's rows for a list
    past every loaded id1) and after (HBase merged), in mode on and serial: every read of
    every touched list, and of lists untouched, equals the source at the answer's position,
    one between the heads before and after the query; `debl links` too."""
    config = world.config
    seen: dict = {}
    with Coordinator(config) as c:
        routes = _routes(c, history)
    raw = _long_lists(history, routes[("raw", "mysql")])
    touched = _write_everything(history, [raw[0], raw[len(raw) // 2], raw[-1]], far_id1=5000)
    asked = sorted(touched) + raw[1:40:8]
    for mode in ("on", "serial"):
        with Coordinator(config.replace(fresh_mode=mode)) as c:
            answered = {str(_ask(c, history, op, seen).route) for key in asked
                        for op in _reads(history, key)}
            assert answered == {"mysql", "raw"}, answered
    before = history.head()
    said = json.loads(CliRunner().invoke(main, ["links", "5000", str(LT), "--json"],
                                         obj=config).output)
    assert [l["data"] for l in said["links"]] == ["a new list"]
    assert before <= said["position"] <= history.head()
    with GenHF(config) as gen_hf:
        gen_hf.serve(until_complete=True)
    more = _write_everything(history, _long_lists(history, sorted(touched))[:2], far_id1=6000)
    with Coordinator(config) as c:
        cold = _routes(c, history)[("merged", "none")][::50]  # HBase alone: no hot row
        for key in cold:
            _write_some(history, key)
        answered = {(str(a.route), str(a.hot)) for key in sorted(touched | more) + cold
                    for a in (_ask(c, history, op, seen) for op in _reads(history, key))}
    assert {r for r, _ in answered} == {"mysql", "merged"}, answered
    assert ("merged", "none") in answered, answered


def test_a_query_after_a_write_sees_it_and_with_freshness_off_it_may_not(world, history):
    key = (_long_lists(history, _changed(history)) or _long_lists(history))[0]
    off = world.config.replace(fresh_mode="off", fresh_idle_refresh=600.0)
    with Coordinator(off) as c_off, Coordinator(world.config) as c_on:
        first = c_off.query(*key)  # the range's first query: the dump alone, and asked for
        assert first.position == world.load.position.seq
        assert first.links == _store(l for l in history.at_dump.values()
                                     if (l.id1, l.link_type) == key).get_link_list(*key)
        _wait("the range materialized", lambda: c_off.fresh.ranges(world.load.load_id))
        # Now past every write made here: the changes since the dump. (Not at the head: other
        # workers' tests move the shared source server's head, and mode off does not wait.)
        caught_up = _ask(c_off, history, LinkList(*key), tolerant=True)
        assert caught_up.position >= history.last_write
        newest = c_on.query(*key).links[0]
        seq = history.update(newest._replace(data=b"just written", version=newest.version + 1))
        on = _ask(c_on, history, LinkList(*key))
        assert on.position >= seq and on.links[0].data == b"just written"
        stale = c_off.query(*key)  # nothing applied it yet: the list before, whole
        assert stale.position < seq and stale.links[0] == newest
        assert stale.links == _store(l for l in history.rows_at(stale.position).values()
                                     if (l.id1, l.link_type) == key).get_link_list(*key)


def test_ranges_refresh_on_demand_and_in_the_background_and_debl_status_shows_them(world, history):
    """A range asked after a write is refreshed for the query (one process, refreshing idle
    ranges only after a minute); a range not asked is refreshed in the background (another,
    after 0.2 s idle); `debl status` sums what both published."""
    a, b = _long_lists(history)[0], _long_lists(history)[-1]
    load_id = world.load.load_id
    demand = world.config.replace(fresh_idle_refresh=60.0)
    background = world.config.replace(fresh_idle_refresh=0.2)
    with Coordinator(demand) as on_demand, Coordinator(background) as behind:
        on_demand.query(*a)  # materialized: read from the change log
        behind.query(*b)
        ra, rb = (world.load.bucket_map.bucket_of(k[0]) for k in (a, b))
        written = 0
        for key in (a, b):
            newest = on_demand.query(*key).links[0]
            written = history.update(newest._replace(data=b"counted", version=newest.version + 1))
        before = on_demand.fresh.ranges(load_id)[ra]
        _ask(on_demand, history, LinkList(*a))
        after = on_demand.fresh.ranges(load_id)[ra]
        assert after.applied_on_demand == before.applied_on_demand + 1
        assert after.applied_background == 0
        _wait("range b refreshed in the background",
              lambda: behind.fresh.ranges(load_id)[rb].applied_background >= 1)
        assert behind.fresh.ranges(load_id)[rb].buffered == 0
        published = [c.fresh.published(load_id) for c in (on_demand, behind)]

    def status() -> dict:
        return json.loads(CliRunner().invoke(main, ["status", "--json"], obj=demand).output)

    def follower(s: dict) -> dict:
        return next(f for f in s["followers"] if f["source"] == history.source)

    # The source server is shared with the other workers' tests, whose writes move its head
    # too: the follower is caught up once it has read the head it last saw.
    _wait("the follower caught up", lambda: follower(status())["behind"] == 0)
    shown = status()
    fresh = shown["fresh"]
    assert fresh["source"] == history.source and fresh["followed"] and fresh["kept"]
    f = follower(shown)
    assert written <= f["seq"] <= history.head() and f["state"] == "following"
    assert f["lag_s"] is not None
    assert fresh["applied_on_demand"] >= sum(p["fresh_demand"] for p in published) >= 1
    assert fresh["applied_background"] >= published[1]["fresh_background"] >= 1
    assert not any(r.startswith("fresh_") for r in shown["answers"]["by_route"])
    text = CliRunner().invoke(main, ["status"], obj=demand).output
    assert f"fresh      kept fresh from source {history.source} (its follower above)" in text
    assert f"follower   source {history.source}: following, captured up to GTID" in text


def test_a_tolerance_shares_head_reads_and_never_goes_back(world, history):
    key = _long_lists(history)[3]
    seen: dict = {}
    with Coordinator(world.config.replace(fresh_tolerance=60.0)) as loose, \
            Coordinator(world.config) as strict:
        _ask(loose, history, LinkList(*key), seen)
        _ask(strict, history, LinkList(*key))
        reads = loose.fresh.head_reads, strict.fresh.head_reads
        newest = strict.query(*key).links[0]
        history.update(newest._replace(data=b"tolerated", version=newest.version + 1))
        for _ in range(3):  # each at its own position, maybe older than its arrival
            _ask(loose, history, LinkList(*key), seen, tolerant=True)
        assert loose.fresh.head_reads == reads[0]  # within 60 s of the first: no new read
        assert _ask(strict, history, LinkList(*key)).links[0].data == b"tolerated"
        assert strict.fresh.head_reads > reads[1] + 1


def test_a_new_day_has_its_own_position_and_a_rollback_goes_back_to_the_old(world, history,
                                                                           tmp_path):
    """A second dump (past the writes so far; id ranges this time) loaded as the next day:
    its answers start from its own position and carry what is written since, on MySQL's side
    alone too; after a rollback the old day answers with every change since its own dump.
    No key goes back across the switches."""
    config = world.config
    keys = (_long_lists(history, _changed(history)) or _long_lists(history))[:4]
    seen: dict = {}
    with Coordinator(config) as c:
        for key in keys:
            _ask(c, history, LinkList(*key), seen)
        dump = dump_source(config, tmp_path / "day2", files=4, layout="ranges")
        assert dump.position.seq > world.load.position.seq
        day2 = _load(config, tmp_path / "day2")
        _wait("the coordinator on the new day", lambda: c.load_id == day2)
        routes = _routes(c, history)
        alone = _long_lists(history, routes[("mysql", "mysql")])[:2]  # hot ids, no cold row
        cold = _long_lists(history, routes[("raw", "none")])[:2]
        _write_everything(history, alone + cold, far_id1=7000)
        for key in keys + alone + cold:
            for op in _reads(history, key):
                answer = _ask(c, history, op, seen)
                assert answer.load_id == day2
        assert rollback(config)[1] == world.load.load_id
        _wait("the coordinator back on the old day", lambda: c.load_id == world.load.load_id)
        for key in keys + alone + cold:
            for op in _reads(history, key):
                assert _ask(c, history, op, seen).load_id == world.load.load_id


def test_a_source_database_that_is_not_the_dumps_source_is_refused(world, history):
    """Its head says nothing of the dump's positions: a clear error, and mode off answers."""
    other = world.config.replace(source_db_table="freshother")
    key = _long_lists(history)[0]
    with Coordinator(other) as c:
        with pytest.raises(ServiceError, match=rf"the load's dump is of source "
                                               rf"{world.load.position.source}, but the source "
                                               r"database at .* \(table 'freshother'\) is source "
                                               r"\(none: never initialised or dumped\).* set "
                                               r"fresh.mode=off"):
            c.query(*key)
    with Coordinator(other.replace(fresh_mode="off")) as c:
        assert c.query(*key).position == world.load.position.seq


def test_answers_before_the_uptime_carry_the_changes(world, history):
    """The dump served slowly over HTTP and loaded into a catalog of its own, with a follower
    of its own (started once the load has recorded the dump's position): every answer given
    before the uptime (route early) and after equals the source now."""
    config = world.config.replace(mysql_database="debl_freshearly", hbase_table="freshearly",
                                  hdfs_root="/debl-freshearly", loading_bucket_width=300)
    _new_catalog(config)
    head = history.head()
    total = sum(p.stat().st_size for p in world.dump_dir.iterdir())
    server = make_server(world.dump_dir, port=0, rate_mb_s=total / 8e6)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    changed = _changed(history)
    everything = sorted({(l.id1, l.link_type) for l in history.rows.values()})
    answers: list = []
    following = None
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        with LoadRun(config, url, LoadOptions(approach="debl-cold")) as run, \
                Coordinator(config) as c, Catalog(config) as catalog:
            up = threading.Event()

            def load() -> None:
                try:
                    run.wait_up()
                finally:
                    up.set()
            threading.Thread(target=load, daemon=True).start()
            for turn in range(100_000):
                if up.is_set():
                    break
                if following is None and (made := catalog.loads.load()) is not None \
                        and made.position is not None:
                    following = Following(config)  # the load recorded the dump's position
                pool = changed if turn % 2 else everything
                key = pool[(turn * 7919) % len(pool)]
                try:
                    answers.append((key, c.ask(LinkList(*key), timeout=0.5)))
                except QueryTimeout:
                    continue
            run.finish()
            assert following is not None
            answers += [(key, c.ask(LinkList(*key), timeout=60)) for key in changed]
    finally:
        if following is not None:
            following.close()
        server.shutdown()
        drop_every_load(config)
    early = [key for key, a in answers if a.route is Route.EARLY]
    assert set(early) & set(changed), "no changed list answered before the uptime"
    now = history.head()  # other workers' writes to the shared source server move it too
    for key, answer in answers:
        assert head <= answer.position <= now
        assert answer.links == _store(l for l in history.rows.values()
                                      if (l.id1, l.link_type) == key).get_link_list(*key), key
