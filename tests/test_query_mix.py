"""``debl query --mix linkbench`` on the real stack: LinkBench's link reads through DeBL's
coordinator on a loaded data set, and its link writes to a scratch source table on the stack's
MariaDB in LinkBench's layout (the source database of docs/FRESHNESS.md is a MariaDB of its own,
with a binary log; the GTIDs are tested on one in tests/test_linkbench_writes.py). Every
operation is reported, the writes land in the source and nowhere else.
"""

from __future__ import annotations

import csv
import json
from dataclasses import replace

import pytest
from click.testing import CliRunner

from debl.catalog import Catalog
from debl.commands.query import query as query_command
from debl.format.link import Origin
from debl.store.linkbench_writes import SourceLinks
from debl.store.mysql import MySQLStore
from debl.workload.mix import READ_OPS, WRITE_OPS
from debl.workload.write_log import COLUMNS, read_writes
from loaders.load import LoadOptions, run_load
from tests.dataset import check_writes_landed, make_dataset, reference_store

pytestmark = pytest.mark.stack

MAX_ID = 3001
SOURCE = "mix_source"


@pytest.fixture(scope="module")
def loaded(stack_config, spark, tmp_path_factory):
    """A small data set loaded (up, nothing converted: the raw route answers at once), and the
    scratch source table holding the same links: (config, the source's URL)."""
    config = replace(stack_config, mysql_database="debl_mixtest", hbase_table="mix_links",
                     hdfs_root="/debl-mixtest", coordinator_raw_after=0.0)
    directory = tmp_path_factory.mktemp("mix")
    make_dataset(directory, max_id=MAX_ID, files=4, seed=21)
    newest = max(p.stat().st_mtime for p in directory.glob("links-*.tsv"))
    run_load(config, str(directory), LoadOptions(hot_since=newest, bucket_width=1000))
    with MySQLStore(config, table=SOURCE) as source:
        source.reset()
        reference = reference_store(directory, set())
        source.write_links((link, Origin(0, 0, 0)) for key in reference.keys()
                           for link in reference.scan_newest_first(*key))
    # The writes' source: the scratch table, named by the source_db settings as a user would.
    config = config.replace(source_db_host=config.mysql.host, source_db_port=config.mysql.port,
                            source_db_user=config.mysql.user,
                            source_db_password=config.mysql_secret,
                            source_db_database=config.mysql.database, source_db_table=SOURCE)
    return config, config.source_db_url(with_password=True)


def test_query_sends_linkbenchs_mix_through_debl_and_writes_to_the_source(loaded, tmp_path):
    config, url = loaded
    with Catalog(config) as catalog:
        load = catalog.loads.current()
    with MySQLStore(config, table=load.namespace.link_table) as hot:
        hot_rows = hot.count()
    log = tmp_path / "writes.csv"
    args = ["--mix", "linkbench", "--requests", "800", "--threads", "2", "--processes", "2",
            "--write-rate", "40", "--writers", "1", "--max-id", str(MAX_ID)]
    out = CliRunner().invoke(query_command, [*args, "--json", "--write-log", str(log)],
                             obj=config)
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    assert doc["completed"] == 800 and doc["errors"] == 0
    assert set(doc["operations"]) == set(READ_OPS + WRITE_OPS)
    assert sum(doc["operations"][op]["count"] for op in READ_OPS) == 800
    assert doc["operations"]["get_link_list"]["count"] > doc["operations"]["count_link"]["count"]
    assert doc["coordinator"]["raw"] > 0  # DeBL answered them, from the bucket files
    writes = doc["writes"]
    assert writes["completed"] > 0 and writes["errors"] == 0 and writes["rate"] == 40
    with log.open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == writes["completed"] and tuple(rows[0]) == COLUMNS
    records = read_writes(log)
    assert [(r.op, r.id1, r.gtid) for r in records] == [
        (r["op"], int(r["id1"]), r["gtid"] or None) for r in rows]
    assert {r.op for r in records} <= set(WRITE_OPS)
    assert all((r.row is None) == (r.op == "delete_link") for r in records)
    with SourceLinks(url, SOURCE).session() as session:
        assert check_writes_landed(session, records) > 0
    with MySQLStore(config, table=load.namespace.link_table) as hot:
        assert hot.count() == hot_rows  # DeBL's stores took no write
    # As a user reads it: a line per operation, LinkBench's names, and the writes' rate held.
    out = CliRunner().invoke(query_command, [*args, "--processes", "1"], obj=config)
    assert out.exit_code == 0, out.output
    for name in ("GET_LINKS_LIST", "COUNT_LINK", "MULTIGET_LINK", "ADD_LINK", "UPDATE_LINK",
                 "DELETE_LINK"):
        assert f"{name} count = " in out.stdout
    assert "writes (linkbench): " in out.stdout and "/s of 40/s asked, by 1 writer;" in out.stdout


def test_query_refuses_writes_without_their_rate(loaded):
    config, url = loaded
    out = CliRunner().invoke(query_command, ["--mix", "linkbench", "--max-id", str(MAX_ID)],
                             obj=config)
    assert out.exit_code == 1 and "give their rate, --write-rate" in out.output
    assert "Traceback" not in out.output and config.mysql_secret not in out.output
