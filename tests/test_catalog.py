"""The catalog on the real MariaDB, in a database of its own (``debl_catalogtest``): the schema
version check, the bucket index arithmetic, job states, demand, phases, chunks, named locks, and
one Catalog shared by threads.

The loads, gen_HF and coordinator tests use the catalog through the pipeline; these tests pin
what the catalog itself promises, including what those never meet (an older or newer catalog, a
bucket emptied by a re-run, a checksum sum past 2^64, a connection killed under the pool)."""

from __future__ import annotations

import multiprocessing
import threading
import time

import pytest
from click.testing import CliRunner

from debl.format.bucket_map import MAX_ID, BucketMap
from debl.catalog import (METADATA, SCHEMA_VERSION, BucketChunk, Catalog, ChunkState, FalseClaim,
                          LoadFile, engine_for)
from debl.catalog.schema import RETIRED_TABLES
from debl.cli import main
from debl.errors import CatalogVersionError, GenHFLockHeld, LoadStateError, ServiceError
from debl.keys.key_filter import KeyFilterBuilder
from debl.format.link import CHECKSUM_MOD
from debl.mysql import connect
from debl.namespace import Namespace
from loaders.chunker import Chunk, Segment

pytestmark = pytest.mark.stack

LT = 123456789


def _begin(catalog: Catalog, load_id: str, params: dict | None = None, approach="debl",
           chunk_size: int = 1, hot: bool = False) -> None:
    """Record a load in its own namespace (as loaders.load does)."""
    catalog.loads.begin_load(load_id, approach, "src", chunk_size, params or {},
                             Namespace.of(catalog.config, load_id), hot=hot)

# debl_loads as DeBL wrote it before the schema was versioned (its DDL, verbatim).
_UNVERSIONED_LOADS = """CREATE TABLE debl_loads (
    load_id VARCHAR(40) PRIMARY KEY, approach VARCHAR(32) NOT NULL,
    source VARCHAR(1024) NOT NULL, state VARCHAR(16) NOT NULL,
    bucket_width BIGINT NULL, chunk_size BIGINT NOT NULL, params TEXT NOT NULL,
    started DOUBLE NOT NULL, uptime DOUBLE NULL, ended DOUBLE NULL,
    hot_k_lo BIGINT NULL, hot_k_hi BIGINT NULL, hot_rows BIGINT NOT NULL DEFAULT 0,
    summary TEXT NULL, error TEXT NULL) DEFAULT CHARSET=utf8mb4"""


@pytest.fixture
def config(stack_config):
    """A database of the test's own, with no DeBL table in it."""
    config = stack_config.replace(mysql_database="debl_catalogtest")
    _sql(config, "DROP TABLE IF EXISTS debl_loads")  # an unversioned one has no metadata twin
    METADATA.drop_all(engine_for(config))
    for name in RETIRED_TABLES:  # an older version's, left by an older DeBL's run of the tests
        _sql(config, f"DROP TABLE IF EXISTS {name}")
    return config


def _sql(config, statement: str, args=None) -> list[tuple]:
    """Raw SQL from outside DeBL, to set up states the catalog must cope with."""
    conn = connect(config)
    try:
        with conn.cursor() as cur:
            cur.execute(statement, args)
            return list(cur.fetchall())
    finally:
        conn.close()


def _tables(config) -> set[str]:
    return {name for (name,) in _sql(config, "SHOW TABLES LIKE 'debl\\_%%'")}


# ---------------------------------------------------------------------------- the schema


def test_a_fresh_database_gets_every_table_and_the_version(config):
    with Catalog(config) as catalog:
        assert catalog.loads.load() is None
    assert _tables(config) == set(METADATA.tables)
    assert _sql(config, "SELECT version FROM debl_schema") == [(SCHEMA_VERSION,)]
    Catalog(config)  # a second look finds it as it should be, and adds no version row
    assert _sql(config, "SELECT version FROM debl_schema") == [(SCHEMA_VERSION,)]


def test_a_missing_table_of_this_version_is_created_again(config):
    Catalog(config)
    _sql(config, "DROP TABLE debl_demand")
    with Catalog(config) as catalog:
        assert catalog.serving.demand("L1") == {}
    assert _tables(config) == set(METADATA.tables)


def test_a_catalog_from_before_versioning_is_refused_with_what_to_do(config):
    _sql(config, _UNVERSIONED_LOADS)
    with pytest.raises(CatalogVersionError) as err:
        Catalog(config)
    text = str(err.value)
    assert "'debl_catalogtest'" in text and "older DeBL" in text
    assert f"schema version 0; this DeBL reads version {SCHEMA_VERSION}" in text
    assert "run `debl load` anew" in text and "drop the database" in text
    assert _tables(config) == {"debl_loads"}  # refused, not touched


def test_the_command_line_says_it_without_a_traceback(config):
    _sql(config, _UNVERSIONED_LOADS)
    result = CliRunner().invoke(main, ["status"], obj=config)
    assert result.exit_code == 1
    assert "older DeBL" in result.output and "Traceback" not in result.output
    assert not isinstance(result.exception, CatalogVersionError)  # a click error, handled


def test_a_new_load_replaces_an_older_catalog(config):
    _sql(config, _UNVERSIONED_LOADS)
    _sql(config, "INSERT INTO debl_loads (load_id, approach, source, state, chunk_size, params, "
                 "started) VALUES ('old', 'debl', 'x', 'up', 1, '{}', 1)")
    with Catalog(config, replace_older=True) as catalog:
        assert catalog.loads.load() is None  # the old catalog's loads are gone with it
        _begin(catalog, "L1", {"hot_bytes": None})
        assert catalog.loads.load().params == {"hot_bytes": None}
    assert _sql(config, "SELECT version FROM debl_schema") == [(SCHEMA_VERSION,)]


def test_a_newer_catalog_is_refused_and_never_replaced(config):
    _begin(Catalog(config), "L1")
    _sql(config, "UPDATE debl_schema SET version = %s", (SCHEMA_VERSION + 1,))
    for replace_older in (False, True):
        with pytest.raises(CatalogVersionError, match="newer DeBL .schema version "
                                                      f"{SCHEMA_VERSION + 1}"):
            Catalog(config, replace_older=replace_older)
    assert _sql(config, "SELECT load_id FROM debl_loads") == [("L1",)]


def _create_at_once(config, barrier, replace_older: bool, results) -> None:
    """A process's first command on the catalog, started with the others at the barrier."""
    barrier.wait(30)
    try:
        Catalog(config, replace_older=replace_older)
        results.put("ok")
    except Exception as exc:  # noqa: BLE001 -- reported to the test, which names it
        results.put(f"{type(exc).__name__}: {exc}")


def test_commands_started_together_on_a_new_database_all_create_the_catalog(config):
    """`debl status` twice, `debl links` and a first `debl load` started
    together against a new database: each creates the catalog, none meets a table another
    has just made (or a catalog half made taken for an older one), and the version is
    recorded once. Processes, as the commands are, five rounds."""
    fresh = config.replace(mysql_database="debl_catalograce")
    context = multiprocessing.get_context("fork")
    for round_no in range(5):
        _sql(config, "DROP DATABASE IF EXISTS debl_catalograce")
        engine_for(fresh).dispose()  # its pooled sessions were in the dropped database
        barrier, results = context.Barrier(6), context.Queue()
        procs = [context.Process(target=_create_at_once,
                                 args=(fresh, barrier, i == 0 and round_no % 2 == 0, results))
                 for i in range(6)]
        for proc in procs:
            proc.start()
        outcomes = [results.get(timeout=120) for _ in procs]
        for proc in procs:
            proc.join(30)
        assert outcomes == ["ok"] * len(procs), f"round {round_no}: {outcomes}"
        assert _tables(fresh) == set(METADATA.tables)
        assert _sql(fresh, "SELECT version FROM debl_schema") == [(SCHEMA_VERSION,)]
    _sql(config, "DROP DATABASE debl_catalograce")


# ---------------------------------------------------------------------------- loads and files


def test_loads_files_and_counts(config):
    with Catalog(config) as catalog:
        _begin(catalog, "L1", {"max_bad": 3})
        time.sleep(0.01)
        _begin(catalog, "L2", approach="debl-cold")
        assert catalog.loads.load("L2").namespace == Namespace.of(config, "L2")
        catalog.loads.update_load("L2", state="up", hot_rows=7,
                                  summary={"load_id": "L2", "phases": {"copy": 1.5}})
        assert catalog.loads.load().bucket_map is None  # not decided yet
        catalog.loads.set_bucket_map("L2", BucketMap.from_splits([10, MAX_ID]))
        latest = catalog.loads.load()
        assert (latest.load_id, latest.state, latest.bucket_map, latest.hot_rows) == \
            ("L2", "up", BucketMap.from_splits([10, MAX_ID]), 7)
        assert latest.summary == {"load_id": "L2", "phases": {"copy": 1.5}}
        assert catalog.loads.load("L1").params == {"max_bad": 3}
        assert catalog.loads.load("L1").hot_rows == 0
        assert catalog.loads.load("nope") is None
        with pytest.raises(ValueError, match="cannot set approach"):
            catalog.loads.update_load("L2", approach="fileCopy")

        files = [LoadFile(0, "a.tsv", 10, 1.5, False), LoadFile(1, "b.tsv", 20, 2.5, True)]
        catalog.files.add_files("L2", files)
        assert catalog.files.files("L2") == files
        catalog.files.set_file_counts("L2", "hot", {1: (5, 1)})
        catalog.files.set_file_counts("L2", "chunk-00000", {0: (9, 0), 1: (2, 0)})
        catalog.files.set_file_counts("L2", "chunk-00000", {0: (8, 1)})  # a re-run replaces it
        assert [(c.file_seq, c.part, c.rows, c.rejects)
                for c in catalog.files.file_counts("L2")] == \
            [(0, "chunk-00000", 8, 1), (1, "hot", 5, 1)]


def test_phases(config):
    with Catalog(config) as catalog:
        _begin(catalog, "L1")
        catalog.phases.phase_start("L1", "copy", "00000")
        catalog.phases.phase_start("L1", "copy", "00001")
        assert not catalog.phases.phase_ended("L1", "copy")
        catalog.phases.phase_end("L1", "copy", "00000", bytes=100, rows=4)
        catalog.phases.drop_phase("L1", "copy", "00001")
        catalog.phases.record_phase("L1", "mysql_load", "all", 10.0, 12.5, 300, 9)
        catalog.phases.record_phase("L1", "mysql_load", "all", 11.0, 13.0, 301, 10)  # replaced
        phases = {(p.phase, p.item): p for p in catalog.phases.phases("L1")}
        assert set(phases) == {("copy", "00000"), ("mysql_load", "all")}
        copy = phases["copy", "00000"]
        assert copy.ended >= copy.started and (copy.bytes, copy.rows) == (100, 4)
        assert phases["mysql_load", "all"].started == 11.0
        assert (phases["mysql_load", "all"].ended, phases["mysql_load", "all"].rows) == (13.0, 10)
        assert catalog.phases.phase_ended("L1", "copy")
        assert not catalog.phases.phase_ended("L1", "hot")
        catalog.phases.phase_start("L1", "copy", "00000")  # restarted: its end is gone
        assert not catalog.phases.phase_ended("L1", "copy")


def test_chunks_round_trip_through_the_chunker(config):
    """Names included that MySQL's utf8mb4 cannot hold as such (a byte the OS gave as a
    surrogate): the layout is JSON text, escaped."""
    chunk = Chunk(3, "/chunks/chunk-00003", 1234,
                  (Segment(0, "a\tb.tsv", 100, 900, 5, 20, 0),
                   Segment(1, "b-\udcff-not-utf-8.tsv", 0, 434, 1, 9, 20)),
                  ((0, 0), (600, 14)), hot=True)
    with Catalog(config) as catalog:
        _begin(catalog, "L1")
        catalog.index.chunk_copied("L1", chunk.record("copied"), 10.0, 12.0, chunk.lines)
        catalog.index.chunk_bucketed("L1", chunk.record("bucketed"), BucketMap.fixed(100), [], "/b",
                                     "chunk-00003", {0: (20, 0), 1: (9, 0)}, 13.0, 14.5)
        (record,) = catalog.index.chunks("L1")
        phases = {(p.phase, p.item): (p.started, p.ended) for p in catalog.phases.phases("L1")}
    assert record.state == "bucketed"
    assert Chunk.of(record) == chunk
    assert phases == {("copy", "00003"): (10.0, 12.0), ("dist_ch", "00003"): (13.0, 14.5)}


def test_a_chunk_is_bucketed_with_all_it_records_or_not_at_all(config):
    """One transaction per chunk step: a chunk_bucketed that fails (here a count of a file the
    load has no row of) leaves neither its bucket rows nor the chunk marked bucketed."""
    chunk = Chunk(0, "/c/chunk-00000", 10, (Segment(0, "a", 0, 10, 1, 1, 0),))
    with Catalog(config) as catalog:
        _begin(catalog, "L1")
        catalog.index.chunk_copied("L1", chunk.record("copied"), 1.0, 2.0, 1)
        with pytest.raises(ServiceError):
            catalog.index.chunk_bucketed("L1", chunk.record("bucketed"), BucketMap.fixed(100),
                                         [_part(0, 0, 1, 1)], "/b", "chunk-00000", {None: (1, 0)},
                                         3.0, 4.0)
        assert catalog.index.buckets("L1") == [] and catalog.jobs.job_states("L1") == {}
        assert [c.state for c in catalog.index.chunks("L1")] == ["copied"]


# ---------------------------------------------------------------------------- the bucket index


def _part(b: int, chunk_no: int, rows: int, checksum: int) -> BucketChunk:
    """Its rows' id1 span: b*100 + chunk_no .. b*100 + 50 + chunk_no."""
    return BucketChunk(b, chunk_no, rows, rows * 10, checksum, f"/b/{b}/c{chunk_no}",
                       b * 100 + chunk_no, b * 100 + 50 + chunk_no)


def _bucketed(catalog: Catalog, load_id: str, chunk_no: int, bucket_map: BucketMap,
              parts: list[BucketChunk], hot: bool = False) -> None:
    chunk = Chunk(chunk_no, f"/c/chunk-{chunk_no:05d}", 10, (), hot=hot)
    catalog.index.chunk_bucketed(load_id, chunk.record(ChunkState.BUCKETED), bucket_map, parts,
                                 "/h" if hot else "/b", f"chunk-{chunk_no:05d}", {}, 1.0, 2.0)


def test_the_bucket_index_is_the_sum_of_its_chunks(config):
    big = CHECKSUM_MOD - 5  # two of them sum past 2^64: the index keeps the sum mod 2^64
    with Catalog(config) as catalog:
        _begin(catalog, "L1")
        by_100 = BucketMap.fixed(100)
        _bucketed(catalog, "L1", 0, by_100, [_part(0, 0, 3, big), _part(2, 0, 1, 7)])
        _bucketed(catalog, "L1", 1, by_100, [_part(0, 1, 2, big), _part(5, 1, 4, 1)])
        buckets = {b.b_index: b for b in catalog.index.buckets("L1")}
        assert set(buckets) == {0, 2, 5}
        b0 = buckets[0]
        assert (b0.k_lo, b0.k_hi, b0.rows, b0.bytes, b0.location, b0.state) == \
            (0, 99, 5, 50, "/b/0", "pending")
        assert b0.checksum == (2 * big) % CHECKSUM_MOD
        assert (b0.c_lo, b0.c_hi) == (0, 51)  # the span over both chunks
        assert (buckets[5].k_lo, buckets[5].k_hi) == (500, 599)
        assert catalog.index.bucket_paths(0, "L1") == ["/b/0/c0", "/b/0/c1"]

        # dist_ch of chunk 0 again, now without bucket 2: exactly chunk 0's share is replaced.
        _bucketed(catalog, "L1", 0, by_100, [_part(0, 0, 1, 11)])
        buckets = {b.b_index: b for b in catalog.index.buckets("L1")}
        assert set(buckets) == {0, 5}
        assert (buckets[0].rows, buckets[0].checksum) == (3, (big + 11) % CHECKSUM_MOD)
        assert (buckets[0].c_lo, buckets[0].c_hi) == (0, 51)
        assert catalog.jobs.job_states("L1") == {0: "pending", 2: "pending", 5: "pending"}

        # A hot chunk's buckets are the load's hot buckets: no job, not in the cold index.
        _bucketed(catalog, "L1", 2, by_100, [_part(5, 2, 7, 3)], hot=True)
        assert [(b.b_index, b.rows, b.state, b.hot)
                for b in catalog.index.buckets("L1", hot=True)] == [(5, 7, "hot", True)]
        assert catalog.index.buckets("L1")[-1].rows == 4
        assert catalog.index.bucket_paths(5, "L1", True) == ["/b/5/c2"]

        _begin(catalog, "L2")  # the next day's load: beside, never over, the first one
        _bucketed(catalog, "L2", 0, by_100, [_part(0, 0, 9, 9)])
        assert [b.rows for b in catalog.index.buckets("L2")] == [9]
        assert [b.rows for b in catalog.index.buckets("L1")] == [3, 4]


def test_job_states(config):
    with Catalog(config) as catalog:
        _begin(catalog, "L1")
        _bucketed(catalog, "L1", 0, BucketMap.fixed(10), [_part(b, 0, 1, 1) for b in range(3)])
        t0 = time.time()
        catalog.jobs.set_job_state("L1", [0, 1], "running", "R1")
        catalog.jobs.set_job_state("L1", [1], "failed", "R1", error="HBase down")
        catalog.jobs.set_job_state("L1", [1], "running", "R2")
        catalog.jobs.set_job_state("L1", [], "loaded")  # nothing to do
        assert catalog.jobs.finish_run("L1", "R1", {0: (5, 2, CHECKSUM_MOD - 1)}) == [0]
        with pytest.raises(ValueError, match="unknown job state 'done'"):
            catalog.jobs.set_job_state("L1", [2], "done")
        jobs = {j.b_index: j for j in catalog.jobs.jobs("L1")}
    assert catalog.jobs.job_states("L1") == {0: "loaded", 1: "running", 2: "pending"}
    j0, j1, j2 = jobs[0], jobs[1], jobs[2]
    assert (j0.run_id, j0.attempts, j0.rows_loaded, j0.superseded, j0.checksum_loaded) == \
        ("R1", 1, 5, 2, CHECKSUM_MOD - 1)
    assert t0 <= j0.started <= j0.ended
    assert (j1.run_id, j1.attempts, j1.error) == ("R2", 2, None)
    assert (j2.state, j2.attempts, j2.started, j2.ended) == ("pending", 0, None, None)
    assert [b.state for b in catalog.index.buckets("L1")] == ["loaded", "running", "pending"]


def test_demand_sums_recent_coordinators(config):
    with Catalog(config) as catalog:
        catalog.serving.publish_demand("L1", "c1", {1: 2, 2: 1, 3: 0})
        catalog.serving.publish_demand("L1", "c2", {1: 5})
        assert catalog.serving.demand("L1") == {1: 7, 2: 1}
        catalog.serving.publish_demand("L1", "c1", {2: 4})  # replaces c1's rows
        assert catalog.serving.demand("L1") == {1: 5, 2: 4}
        rows = catalog.serving.published_demand("L1")
        assert [(r.coordinator, r.b_index, r.waiting) for r in rows] == [("c1", 2, 4),
                                                                         ("c2", 1, 5)]
        time.sleep(0.3)
        catalog.serving.publish_demand("L1", "c2", {1: 5})
        assert catalog.serving.demand("L1", max_age=0.2) == {1: 5}  # c1 has not published lately
        recent = catalog.serving.published_demand("L1", max_age=0.2)
        assert {r.coordinator for r in recent} == {"c2"}
        catalog.serving.publish_demand("L2", "c2", {3: 1})  # c2 serves the next day now
        assert catalog.serving.demand("L1") == {2: 4} and catalog.serving.demand("L2") == {3: 1}
        catalog.serving.publish_demand("L2", "c2", {})
        assert catalog.serving.demand("L2", max_age=0.2) == {}


def test_asks_and_answers_are_kept_per_load(config):
    with Catalog(config) as catalog:
        catalog.serving.publish_asks("L1", "c1", {0: 3, 4: 1})
        catalog.serving.publish_asks("L1", "c2", {0: 2})
        catalog.serving.publish_asks("L1", "c1", {0: 5, 4: 1})  # cumulative: replaces c1's counts
        catalog.serving.publish_answers("L1", "c1", {"raw": 4, "immediate": 2})
        catalog.serving.publish_answers("L2", "c1", {"raw": 1})
        assert catalog.serving.asks("L1") == {0: 7, 4: 1} and catalog.serving.asks("L2") == {}
        assert catalog.serving.answers("L1") == ({"raw": 4, "immediate": 2}, 1)
        assert catalog.serving.answers("L2") == ({"raw": 1}, 1)


def test_early_answers_add_up_per_id1_and_count_in_the_ids_of_each_claim(config):
    """Each process adds the early answers it gave per id1, whenever it gave them: a claim
    found later counts those in its id1s, by every process, one load apart from another."""
    with Catalog(config) as catalog:
        catalog.early.add_early_answers({("L1", 5): 2, ("L1", 150): 1, ("L1", 300): 4,
                                         ("L2", 150): 7})
        catalog.early.add_early_answers({("L1", 150): 3})  # another process, the same id1
        assert catalog.early.claim_answers("L1") == {}  # no claim found false: none counts
        for lo, hi in ((100, 199), (0, 400), (500, 600)):
            catalog.early.record_false_claim("L1", FalseClaim(-1, 0, "span", 0, "", lo, hi))
        assert catalog.early.claim_answers("L1") == {0: 4, 1: 10}


# ---------------------------------------------------------------------------- connections


def test_one_catalog_serves_many_threads(config):
    catalog = Catalog(config)
    _begin(catalog, "L1")
    errors: list[str] = []

    def client(n: int) -> None:
        try:
            for i in range(20):
                catalog.serving.publish_demand("L1", f"c{n}", {n: i + 1})
                catalog.phases.phase_start("L1", "copy", f"{n}-{i}")
                assert catalog.loads.load().load_id == "L1"
        except Exception as exc:  # noqa: BLE001 -- reported below
            errors.append(f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=client, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    assert catalog.serving.demand("L1") == {n: 20 for n in range(8)}
    assert len(catalog.phases.phases("L1")) == 8 * 20


def test_a_killed_connection_is_replaced_by_the_pool(config):
    catalog = Catalog(config)
    engine_for(config).dispose()  # now the pool holds one connection after one call
    assert catalog.loads.load() is None
    with engine_for(config).connect() as conn:  # that connection, to kill it
        victim = conn.connection.dbapi_connection.thread_id()
    _sql(config, "KILL %s", (victim,))
    assert catalog.loads.load() is None  # pre-ping noticed, a new connection answered


def test_a_server_error_is_a_service_error(config):
    catalog = Catalog(config)
    _sql(config, "DROP TABLE debl_jobs")
    with pytest.raises(ServiceError, match="debl_jobs' doesn't exist"):
        catalog.jobs.jobs("L1")


def test_named_locks_and_gen_hf_refused_while_one_holds_it(config):
    from debl.bench.baselines import open_gen_hf
    from loaders.gen_hf import LOCK, GenHF

    catalog = Catalog(config)
    name = f"{LOCK}.{config.mysql.database}"
    held = catalog.named_lock(name)
    assert held is not None
    try:
        assert catalog.named_lock(name) is None
        with pytest.raises(GenHFLockHeld, match="another gen_HF is running on this dataset"):
            GenHF(config)
        waits: list[str] = []
        t0 = time.monotonic()
        with pytest.raises(GenHFLockHeld):
            open_gen_hf(config, "demand", waits.append, wait_s=0.0)
        assert waits == [] and time.monotonic() - t0 < 5.0
    finally:
        held.release()
    again = catalog.named_lock(name)
    assert again is not None
    again.release()


def test_unreachable_mysql_is_a_service_error(stack_config):
    with pytest.raises(ServiceError, match="is not reachable"):
        Catalog(stack_config.replace(mysql_port=1, mysql_database="debl_catalogtest_nowhere"))


# ---------------------------------------------------------------------------- defects


def test_a_run_of_one_load_never_marks_another_loads_buckets(config):
    """gen_HF's run R1 converts buckets of L1; the next day's L2 records buckets with the same
    numbers meanwhile; R1 ends. Its marks touch L1's buckets only."""
    by_10 = BucketMap.fixed(10)
    with Catalog(config) as catalog:
        _begin(catalog, "L1")
        _bucketed(catalog, "L1", 0, by_10, [_part(b, 0, 1, 1) for b in range(3)])
        assert catalog.jobs.set_job_state("L1", [0, 1], "running", "R1") == [0, 1]
        _begin(catalog, "L2")  # the new load, while R1 converts
        _bucketed(catalog, "L2", 0, by_10, [_part(b, 0, 2, 2) for b in range(3)])
        assert catalog.jobs.finish_run("L1", "R1", {0: (1, 0, 1), 1: (1, 0, 1)}) == [0, 1]
        assert catalog.jobs.job_states("L2") == {0: "pending", 1: "pending", 2: "pending"}
        assert catalog.jobs.finish_run("L2", "R1", {2: (1, 0, 1)}) == []  # R1 holds none of L2's
        assert catalog.jobs.set_job_state("L2", [0, 2], "running", "R3") == [0, 2]
        assert catalog.jobs.finish_run("L2", "R3", {0: (2, 0, 2), 2: (1, 1, 2)}) == [0, 2]
        jobs = {j.b_index: j for j in catalog.jobs.jobs("L2")}
    assert catalog.jobs.job_states("L2") == {0: "loaded", 1: "pending", 2: "loaded"}
    assert catalog.jobs.job_states("L1") == {0: "loaded", 1: "loaded", 2: "pending"}
    assert (jobs[2].rows_loaded, jobs[2].superseded, jobs[2].checksum_loaded) == (1, 1, 2)


def test_a_coordinator_reads_the_current_load_and_its_buckets_in_one_transaction(config):
    """The load and its buckets were read apart, and the buckets of whatever load: a load
    beginning between the two reads sent every query to MySQL alone for a poll interval.
    Now the next day loads beside the current one, and serving_state pairs a load with its
    own buckets only."""
    by_10 = BucketMap.fixed(10)
    with Catalog(config) as catalog:
        assert catalog.serving.serving_state() is None
        assert catalog.serving.poll() == (None, None, {})
        _begin(catalog, "L1", hot=True)
        catalog.loads.set_bucket_map("L1", by_10)
        _bucketed(catalog, "L1", 0, by_10, [_part(0, 0, 1, 1), _part(1, 0, 1, 1)])
        _bucketed(catalog, "L1", 1, by_10, [_part(2, 1, 4, 1)], hot=True)
        assert catalog.serving.serving_state() is None  # not up: nothing to serve yet
        catalog.loads.make_current("L1", time.time())
        _begin(catalog, "L2")  # the next day, beside it
        catalog.loads.set_bucket_map("L2", by_10)
        _bucketed(catalog, "L2", 0, by_10, [_part(b, 0, 9, 9) for b in range(5)])
        state = catalog.serving.serving_state()
        assert state.load.load_id == "L1" and state.load.state == "up"
        assert [b.b_index for b in state.buckets] == [0, 1]
        assert [b.b_index for b in state.hot_buckets] == [2] and state.hot_keys is None
        current, newest, states = catalog.serving.poll()
        assert (current.load_id, newest.load_id, states) == ("L1", "L2", {0: "pending",
                                                                           1: "pending"})
        builder = KeyFilterBuilder()
        builder.add([5], [LT])
        catalog.phases.phase_start("L1", "hot", "all")
        catalog.loads.take_over_hot("L1", 10, 4, 5, 9, None, builder.build())
        state = catalog.serving.serving_state()  # MySQL has the hot keys: no hot bucket is read
        assert state.load.hot_in_mysql and state.hot_buckets == [] and \
            state.hot_keys.may_hold(5, LT)
        catalog.loads.make_current("L2", time.time())
        state = catalog.serving.serving_state()
        assert state.load.load_id == "L2" and len(state.buckets) == 5
        assert catalog.loads.previous() == "L1"


def test_rollback_serves_the_previous_day_again_while_its_stores_exist(config):
    with Catalog(config) as catalog:
        with pytest.raises(LoadStateError, match="no previous load"):
            catalog.loads.rollback()
        for load_id in ("L1", "L2"):
            _begin(catalog, load_id)
            catalog.loads.make_current(load_id, time.time())
        assert catalog.loads.rollback() == ("L2", "L1")
        assert catalog.loads.current().load_id == "L1" and catalog.loads.previous() == "L2"
        assert catalog.loads.rollback() == ("L1", "L2")  # and forth again
        with pytest.raises(LoadStateError, match="L2 is the current load"):
            catalog.loads.forget_dataset("L2")
        catalog.loads.forget_dataset("L1")
        assert catalog.loads.load("L1").dropped is not None and catalog.loads.previous() is None
        with pytest.raises(LoadStateError, match="no previous load|dropped by cleanup"):
            catalog.loads.rollback()


def test_a_load_marked_dropping_is_never_current_or_previous_again(config):
    """Defect: cleanup marks a load dropping before its first store goes, in one
    transaction with a last look at the current load: never a load a switch made current or
    previous since cleanup read the days; once marked, rollback and make_current refuse it and
    it is no previous day; marking it again (a cleanup finishing a killed one's drop) is
    allowed."""
    with Catalog(config) as catalog:
        for load_id in ("L1", "L2"):
            _begin(catalog, load_id)
            catalog.loads.make_current(load_id, time.time())
        seen = catalog.loads.current()
        catalog.loads.rollback()  # L1 current again, after cleanup read the days
        assert not catalog.loads.mark_dropping("L1", seen)
        assert not catalog.loads.mark_dropping("L2", seen)
        catalog.loads.rollback()
        assert not catalog.loads.mark_dropping("L2", catalog.loads.current())  # the current
        assert catalog.loads.mark_dropping("L1", catalog.loads.current())
        assert catalog.loads.mark_dropping("L1", None)  # already marked: its drop is finished
        assert catalog.loads.previous() is None and catalog.loads.days()[2] is None
        assert [d.load_id for d in catalog.loads.being_dropped()] == ["L1"]
        with pytest.raises(LoadStateError, match="L1 can no longer be served: a cleanup began "
                                                 "dropping its stores .* `debl cleanup` "
                                                 "finishes the drop"):
            catalog.loads.rollback()
        with pytest.raises(LoadStateError, match="L1 cannot become current"):
            catalog.loads.make_current("L1", time.time())
        assert catalog.loads.current().load_id == "L2"
        catalog.loads.forget_dataset("L1")
        assert catalog.loads.being_dropped() == [] and not catalog.loads.mark_dropping("L1", None)


def test_a_dropped_or_superseded_load_never_becomes_current(config):
    """Defect: make_current checked neither: a load that lost its lock while a newer one
    ran (and cleanup dropped its stores) became current at its uptime, its tables gone."""
    with Catalog(config) as catalog:
        _begin(catalog, "L1")
        _begin(catalog, "L2")  # began after L1: L1 is superseded
        with pytest.raises(LoadStateError, match="L1 cannot become current: load L2 started "
                                                 "after it"):
            catalog.loads.make_current("L1", time.time())
        assert catalog.loads.current() is None and catalog.loads.load("L1").state == "running"
        catalog.loads.make_current("L2", time.time())
        _begin(catalog, "L3")
        catalog.loads.forget_dataset("L3")  # cleanup dropped it (a failed load, say)
        with pytest.raises(LoadStateError, match="L3 cannot become current: its stores were "
                                                 "dropped"):
            catalog.loads.make_current("L3", time.time())
        assert catalog.loads.current().load_id == "L2"
        assert catalog.loads.load("L3").state == "running"
        with pytest.raises(LoadStateError, match="no load L9"):
            catalog.loads.make_current("L9", time.time())


def test_the_hot_take_over_is_one_transaction_with_its_key_range(config):
    with Catalog(config) as catalog:
        _begin(catalog, "L1", hot=True)
        catalog.files.add_files("L1", [LoadFile(0, "a", 1, 1.0, True)])
        catalog.phases.phase_start("L1", "hot", "all")
        with pytest.raises(ServiceError):  # a count of a file the load does not have a row
            catalog.loads.take_over_hot("L1", 10, 4, 5, 9, {0: (4, 0), None: (1, 1)})
        assert not catalog.phases.phase_ended("L1", "hot")  # nothing of it happened
        load = catalog.loads.load("L1")
        assert (load.hot_rows, load.hot_state, load.hot_in_mysql) == (0, "loading", False)
        catalog.loads.take_over_hot("L1", 10, 4, 5, 9, {0: (4, 1)})
        load = catalog.loads.load("L1")
        assert catalog.phases.phase_ended("L1", "hot") and load.hot_in_mysql
        assert (load.hot_k_lo, load.hot_k_hi, load.hot_rows) == (5, 9, 4)
        assert load.taken_over >= load.started
        assert [(c.file_seq, c.part, c.rows, c.rejects)
                for c in catalog.files.file_counts("L1")] == [(0, "hot", 4, 1)]
        assert catalog.loads.hot_keys("L1") is None  # taken over without a filter: every key may be


def test_the_hot_key_filter_is_kept_with_its_load_and_dropped_with_its_stores(config):
    builder = KeyFilterBuilder()
    builder.add([5, 7, 9], [LT, LT, LT + 1])
    with Catalog(config) as catalog:
        _begin(catalog, "L1", hot=True)
        catalog.phases.phase_start("L1", "hot", "all")
        catalog.loads.take_over_hot("L1", 10, 3, 5, 9, None, builder.build())
        kept = catalog.loads.hot_keys("L1")
        assert kept.bits == builder.build().bits
        assert kept.may_hold(7, LT) and kept.may_hold(9, LT + 1)
        _begin(catalog, "L2")  # its MySQL table is another one
        assert catalog.loads.hot_keys("L1").bits == kept.bits
        assert catalog.loads.hot_keys("L2") is None
        catalog.loads.forget_dataset("L1")
        assert catalog.loads.hot_keys("L1") is None


def test_coordinators_behind_a_load_are_the_live_ones_that_do_not_serve_it(config):
    with Catalog(config) as catalog:
        catalog.serving.heartbeat("c1", "L1", False, 0.1)
        catalog.serving.heartbeat("c2", None, False, 0.1)  # busy with an older load
        catalog.serving.heartbeat("c3", "L2", False, 0.1)
        catalog.serving.heartbeat("c4", "L2", True, 0.1)
        assert catalog.serving.coordinators_behind("L2") == ["c1", "c2"]
        assert catalog.serving.coordinators_behind("L2", hot_mysql=True) == ["c1", "c2", "c3"]
        assert catalog.serving.coordinators_serving() == {"c1": "L1", "c2": None, "c3": "L2",
                                                          "c4": "L2"}
        catalog.serving.forget_coordinator("c1")
        assert catalog.serving.coordinators_behind("L2") == ["c2"]
        _sql(config, "UPDATE debl_coordinators SET updated = updated - 3 WHERE coordinator='c2'")
        assert catalog.serving.coordinators_behind("L2") == []  # no heartbeat for 3 s: dead


def test_a_named_lock_knows_when_its_session_is_gone(config):
    catalog = Catalog(config)
    lock = catalog.named_lock("debl_test_lock")
    assert lock.held()
    (session,) = _sql(config, "SELECT ID FROM information_schema.PROCESSLIST WHERE ID IN "
                              "(SELECT IS_USED_LOCK('debl_test_lock'))")[0]
    _sql(config, f"KILL {session}")  # what wait_timeout or a restart does to an idle session
    assert not lock.held()
    lock.release()  # nothing to end, and no error (it raised PendingRollbackError)
    lock.release()
    again = catalog.named_lock("debl_test_lock")  # released with the session
    assert again is not None and again.held()
    again.release()
