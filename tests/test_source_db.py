"""The source database on the real stack (docs/RUNTIME.md, "The source database"): the stack
starts it with its binary log; `debl source db url` reaches it through SQLAlchemy; `debl source
db init` fills its table from either layout by the merge rule and records the position, and
refuses a table with rows; `debl source dump` writes the table, bytes exact, from one snapshot
whose position is exactly the writes it holds while a client writes on; and the dump loaded by
`debl load` answers like the table, with the position in the catalog and `debl status`.

The tests use a table of their own (``srcdbtest``), not the configured one.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from coordinator import Coordinator
from debl.catalog import Catalog
from debl.cli import main
from debl.errors import SourceError
from debl.format.link import Link, Origin, parse_line
from debl.position import parse_gtid
from debl.stack.stack import stack_status
from debl.store import source_db
from debl.store.memory import MemoryStore
from debl.workload.generator import generate
from debl.workload.spec import GenerateSpec
from harness.follow_kills import source_sql
from loaders.cleanup import drop_every_load
from loaders.listing import listing_position
from loaders.load import LoadOptions, run_load
from loaders.source import LocalSource
from loaders.source_dump import dump_source
from loaders.source_init import init_source
from tests.dataset import all_rows, reference_store

pytestmark = pytest.mark.stack

TABLE = "srcdbtest"
LT = 123456789
T_NEW = 1_800_000_000_000
HOSTILE_TYPE = 7  # a link type of their own: their lists hold them alone
HOSTILE = [b"\x00", b"\xff\xfe", b"\\", b"'", b'"', b"\\'\"\x00\xff\x01 end \\"]


def _spec(layout: str) -> GenerateSpec:
    return GenerateSpec(max_id=2001, files=4, days=4, seed=9, bad_lines=5, max_degree=30,
                        update_share=0.3, hidden_share=0.3, layout=layout)


@pytest.fixture(scope="module")
def config(stack_config):
    return stack_config.replace(source_db_table=TABLE)


def _table(config) -> set[Link]:
    return {Link(*row) for row in source_sql(
        config, f"SELECT id1, link_type, id2, visibility, data, time, version FROM `{TABLE}`")}


def _head(config) -> str:
    return source_sql(config, "SELECT @@gtid_binlog_pos")[0][0]


def _dumped(directory) -> set[Link]:
    """Every line of a dump's files, parsed (each must parse, and be there once)."""
    lines = [parse_line(line) for f in sorted(directory.glob("links-*.tsv"))
             for line in f.read_bytes().splitlines(keepends=True)]
    assert len(lines) == len(set(lines))
    return set(lines)


def test_the_stack_runs_the_source_database_with_its_binary_log(stack_config):
    health = {h.service: h for h in stack_status(stack_config)}["Source DB"]
    assert health.healthy and health.address == f"127.0.0.1:{stack_config.source_db.port}"
    assert "binary log ROW/FULL/FULL" in health.detail
    assert stack_config.source_db_password_file.stat().st_mode & 0o077 == 0
    assert stack_config.source_db_replication_password_file.stat().st_mode & 0o077 == 0
    settings = source_sql(stack_config, "SELECT @@server_id, @@gtid_domain_id, "
                                    "@@binlog_expire_logs_seconds, @@bind_address")[0]
    assert settings == (stack_config.source_db.server_id, 0, stack_config.source_db.log_expire,
                        "127.0.0.1")
    out = CliRunner().invoke(main, ["stack", "status"], obj=stack_config).output
    assert "Source DB" in out


def test_the_url_connects_a_sqlalchemy_engine_and_keeps_the_password_out(stack_config):
    runner = CliRunner()
    result = runner.invoke(main, ["source", "db", "url"], obj=stack_config)
    secret = stack_config.source_db_secret
    assert result.exit_code == 0 and result.stdout == stack_config.source_db.url + "\n"
    assert secret not in result.stdout + result.stderr
    assert str(stack_config.source_db_password_file) in result.stderr
    whole = runner.invoke(main, ["source", "db", "url", "--with-password"],
                          obj=stack_config).stdout.strip()
    for engine in (sa.create_engine(whole),
                   sa.create_engine(stack_config.source_db.url,
                                    connect_args={"password": secret})):
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT DATABASE()")).scalar() == \
                stack_config.source_db.database
        engine.dispose()


def test_the_table_refuses_rows_no_line_can_hold(config, datasets):
    _fill(config, datasets, "ranges")
    for values, check in (((1, LT, 1, 1, b"a\tb", 1, 0), "data_has_no_tab_lf_cr"),
                          ((1, LT, 1, 2, b"ab", 1, 0), "visibility_is_0_or_1"),
                          ((2**64 - 1, LT, 1, 1, b"ab", 1, 0), "numbers_fit_63_bits")):
        with pytest.raises(Exception, match=check):
            source_sql(config, f"INSERT INTO `{TABLE}` VALUES (%s, %s, %s, %s, %s, %s, %s)",
                   (values[0], values[2], values[1], *values[3:]))


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
    """A generated data set of a layout, made once: (directory, its summary)."""
    made: dict = {}

    def of(layout: str):
        if layout not in made:
            directory = tmp_path_factory.mktemp(f"src-{layout}")
            made[layout] = directory, generate(directory, _spec(layout))
        return made[layout]
    return of


def _fill(config, datasets, layout: str):
    """The table filled anew from the data set of *layout*: (directory, generated, init)."""
    directory, generated = datasets(layout)
    return directory, generated, init_source(config, str(directory), replace=True)


@pytest.mark.parametrize("layout", ["days", "ranges"])
def test_init_fills_the_table_by_the_merge_rule_and_records_the_position(config, layout,
                                                                         datasets, tmp_path):
    directory, generated, s = _fill(config, datasets, layout)
    expected = all_rows(reference_store(directory, hot_names=set()))
    assert _table(config) == expected and s.rows == len(expected)
    assert s.rejects == generated.spec.bad_lines == len(generated.bad_lines)
    assert s.files == 4 and s.lines == generated.lines - generated.spec.bad_lines
    create = source_sql(config, f"SHOW CREATE TABLE `{TABLE}`")[0][1]
    for part in ("PRIMARY KEY (`link_type`,`id1`,`id2`)", "KEY `id1_type` (`id1`,`link_type`,"
                 "`visibility`,`time`,`id2`,`version`,`data`)", "CONSTRAINT `data_has_no_tab"):
        assert part in create
    conn = source_db.connect(config)
    try:
        with conn.cursor() as cur:
            state = source_db.init_state(cur, TABLE)
    finally:
        conn.close()
    assert (state.gtid, state.source_id, state.rows, state.rejects, state.files) == \
        (s.gtid, s.source_id, s.rows, s.rejects, 4)
    # nothing but the init's own record was written since the position
    assert parse_gtid(_head(config))[2] - parse_gtid(s.gtid)[2] in (1, 2)
    for dump_layout in ("ranges", "days"):
        out = tmp_path / dump_layout
        d = dump_source(config, out, files=3, layout=dump_layout)
        assert _dumped(out) == expected and d.rows == len(expected)
        assert d.position.gtid == _head(config)  # no write since the snapshot
        assert d.position.source == s.source_id
        listed = LocalSource(out).list()
        assert listing_position(listed) == d.position
        assert all(f.manifest is not None and f.manifest.sorted for f in listed)
        if dump_layout == "ranges":  # contiguous id1 ranges, in file order
            spans = [(f.id1_lo, f.id1_hi) for f in d.files if f.rows]
            assert all(a[1] < b[0] for a, b in zip(spans, spans[1:]))


def test_init_refuses_a_table_with_rows(config, datasets):
    directory, _, _ = _fill(config, datasets, "days")
    before = _table(config)
    with pytest.raises(SourceError, match="holds rows: an init fills an empty table only"):
        init_source(config, str(directory))
    assert _table(config) == before
    result = CliRunner().invoke(main, ["source", "db", "init", str(directory)], obj=config)
    assert result.exit_code == 1 and "give --replace" in result.output


def test_a_dump_holds_exactly_the_writes_up_to_its_position(config, datasets, tmp_path):
    """A client writes on (inserts, updates, deletes, each a transaction whose GTID it reads
    back) while the dump runs: the dump is the table before the writes with exactly the writes
    whose GTID is at or before the dump's position applied."""
    _fill(config, datasets, "days")
    before = {link.key: link for link in _table(config)}
    victims = sorted(before)[:: max(1, len(before) // 3000)]
    done: list[tuple[int, str, tuple, Link | None]] = []  # (seq, op, key, row after)
    started, stop = threading.Event(), threading.Event()

    def write() -> None:
        conn = source_db.connect(config)
        try:
            with conn.cursor() as cur:
                for i, key in enumerate(victims):
                    old = before[key]
                    if i % 3 == 0:
                        row = Link(10**9 + i, LT, i, 1, b"new %d \x00\xff" % i, T_NEW + i, 0)
                        cur.execute(f"INSERT INTO `{TABLE}` (id1, link_type, id2, visibility, "
                                    "data, time, version) VALUES (%s, %s, %s, %s, %s, %s, %s)",
                                    row)
                        op, key = "insert", row.key
                    elif i % 3 == 1:
                        row = old._replace(data=b"updated %d" % i, version=old.version + 1)
                        cur.execute(f"UPDATE `{TABLE}` SET data = %s, version = %s WHERE id1 = %s "
                                    "AND link_type = %s AND id2 = %s",
                                    (row.data, row.version, *key))
                        op = "update"
                    else:
                        row = None
                        cur.execute(f"DELETE FROM `{TABLE}` WHERE id1 = %s AND link_type = %s "
                                    "AND id2 = %s", key)
                        op = "delete"
                    cur.execute("SELECT @@last_gtid")
                    gtid = cur.fetchone()[0]  # type: ignore[index]  # a variable: one row
                    done.append((parse_gtid(gtid)[2], op, key, row))
                    if i == 300:
                        started.set()
                    if stop.is_set() and len(done) > stop_at[0] + 100:
                        return
        finally:
            started.set()
            conn.close()

    stop_at = [0]
    writer = threading.Thread(target=write)
    writer.start()
    try:
        started.wait(60)
        summary = dump_source(config, tmp_path / "dump", files=4, layout="days")
        stop_at[0] = len(done)
        stop.set()
    finally:
        writer.join()
    position = parse_gtid(summary.position.gtid)[2]
    seqs = [seq for seq, *_ in done]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert min(seqs) <= position < max(seqs), "the dump did not run while the client wrote"
    expected = dict(before)
    for seq, _op, key, row in done:
        if seq > position:
            break
        if row is None:
            del expected[key]
        else:
            expected[key] = row
    assert _dumped(tmp_path / "dump") == set(expected.values())


@dataclass
class Loaded:
    config: object
    load_id: str
    dump: object
    reference: MemoryStore


@pytest.fixture(scope="module")
def loaded(config, datasets, spark, tmp_path_factory):
    """A days-layout dump of the table (with hostile bytes written to it) loaded by `debl
    load` in a dataset of its own, hot files and cold ones."""
    _fill(config, datasets, "days")
    (oldest, newest), = source_sql(config, f"SELECT MIN(time), MAX(time) FROM `{TABLE}`")
    for id1, t in ((7, oldest), (8, newest)):  # in the oldest file (cold), the newest (hot)
        for k, data in enumerate(HOSTILE):
            source_sql(config, f"INSERT INTO `{TABLE}` VALUES (%s, %s, %s, 1, %s, %s, 0)",
                   (id1, k, HOSTILE_TYPE, data, t))
    table = _table(config)
    out = tmp_path_factory.mktemp("dump")
    dump = dump_source(config, out, files=4, layout="days")
    load_config = config.replace(mysql_database="debl_srcdbtest", hbase_table="srcdbtest",
                                 hdfs_root="/debl-srcdbtest", coordinator_poll_interval=0.2,
                                 coordinator_raw_after=0.0)
    Catalog(load_config, replace_older=True).close()
    drop_every_load(load_config)
    files = LocalSource(out).list()
    hot_bytes = sum(f.size for f in files[-2:])
    summary = run_load(load_config, str(out),
                       LoadOptions(hot_bytes=hot_bytes, chunk_size=64 * 1024, bucket_width=300))
    assert summary.hot_files >= 1 and summary.cold_files >= 1 and summary.rejects == 0
    reference = MemoryStore()
    reference.write_links((link, Origin(0, 0, 0)) for link in table)
    try:
        yield Loaded(load_config, summary.load_id, dump, reference)
    finally:
        drop_every_load(load_config)


def test_the_dump_loaded_answers_like_the_source_table(loaded):
    keys = sorted(loaded.reference.keys())
    routes = set()
    with Coordinator(loaded.config) as c:
        for key in keys:
            for kw in ({}, {"offset": 1, "limit": 3}):
                answer = c.query(*key, **kw)
                assert answer.links == loaded.reference.get_link_list(*key, **kw), (key, kw)
                routes.add(answer.hot)
        for id1 in (7, 8):  # the bytes came back exact from the cold files and the hot ones
            assert sorted(link.data for link in c.query(id1, HOSTILE_TYPE).links) == \
                sorted(HOSTILE)
    assert "mysql" in routes  # hot rows from MySQL (the run_load ended with it holding them)


def test_the_catalog_and_the_status_record_the_dump_position(loaded):
    with Catalog(loaded.config) as catalog:
        assert catalog.loads.load(loaded.load_id).position == loaded.dump.position
    result = CliRunner().invoke(main, ["status", "--json"], obj=loaded.config)
    assert json.loads(result.output)["load"]["position"] == loaded.dump.position.to_json()
    text = CliRunner().invoke(main, ["status"], obj=loaded.config).output
    assert f"GTID {loaded.dump.position.gtid} of source {loaded.dump.position.source}" in text
