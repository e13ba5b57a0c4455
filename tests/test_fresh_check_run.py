"""The checker on the real stack (docs/FRESHNESS.md, "The checker"), as a user runs it: the
source database filled from `debl generate`'s files (`debl source db init`), dumped (`debl
source dump`) and loaded; LinkBench's update-heavy mix through DeBL's coordinator with its writes
to the source (`debl query --write-log --answer-log`); then

- `debl verify --against-source` with nothing captured: the load's rows alone against the
  source, whose differences are exactly the keys the writes changed (a key new since the dump
  missing, a key of the dump different, nothing extra);
- `debl check-fresh`: every answer checked. DeBL without fresh answers answers at the dump's
  moment (answers kept fresh: docs/FRESHNESS.md): the answers on keys written before they
  were sent are older than their arrival, and nothing else is wrong;
- `debl follow` captures the writes: the change log is exactly the writes (the checker's
  history has no problem), and `debl verify --against-source` with the changes applied finds
  0 missing, 0 extra, 0 different;
- a new dump of the source, loaded with no write since: 0, 0, 0.

The pure logic is tested without services in tests/test_fresh_check.py.
"""

from __future__ import annotations

import json
import re
import threading

import pytest
from click.testing import CliRunner

from debl.catalog import METADATA, engine_for
from debl.cli import main
from debl.workload.fresh_check import OLDER
from debl.workload.fresh_history import dump_rows
from debl.workload.write_log import read_writes
from loaders.follower import Follower
from loaders.load import LoadOptions, run_load

pytestmark = pytest.mark.stack

MAX_ID = 3001
TABLE = "checkrun"


def _cli(config, *args: str, code: int = 0) -> str:
    result = CliRunner().invoke(main, list(args), obj=config)
    assert result.exit_code == code, result.output
    return result.stdout


def _config(stack_config, name: str):
    return stack_config.replace(source_db_table=TABLE, mysql_database=f"debl_{name}",
                                hbase_table=f"{name}_links", hdfs_root=f"/debl-{name}",
                                coordinator_raw_after=0.0,
                                # The client reads while no follower runs: answers at the dump's
                                # moment, which the checker must flag (with freshness on, each
                                # read would wait for a follower that is not there).
                                fresh_mode="off")


def _load(config, spark, directory) -> None:
    """The dump loaded as a user's `debl load` does, its newest file hot and in MySQL."""
    METADATA.drop_all(engine_for(config))  # a catalog of its own, from scratch
    newest = max(p.stat().st_mtime for p in directory.glob("links-*.tsv"))
    run_load(config, str(directory), LoadOptions(hot_since=newest, bucket_width=1000,
                                                 wait_for_hot=True))


def test_answers_checked_and_debl_verified_against_the_source(stack_config, spark, tmp_path):
    config = _config(stack_config, "checkrun")
    generated, dump = tmp_path / "generated", tmp_path / "dump"
    _cli(config, "generate", str(generated), "--max-id", str(MAX_ID), "--files", "4", "--days",
         "4", "--seed", "21", "--layout", "ranges", "--max-degree", "40")
    _cli(config, "source", "db", "init", str(generated), "--replace")
    _cli(config, "source", "dump", str(dump), "--files", "4")
    _load(config, spark, dump)

    writes_csv, answers = tmp_path / "writes.csv", tmp_path / "answers"
    run = json.loads(_cli(config, "query", "--target", "debl", "--mix", "update-heavy",
                          "--rate", "300", "--requests", "1500", "--threads", "4",
                          "--processes", "2", "--writers", "2", "--max-id", str(MAX_ID),
                          "--write-log", str(writes_csv), "--answer-log", str(answers),
                          "--json"))
    assert run["errors"] == 0 and run["writes"]["errors"] == 0, run
    writes = read_writes(writes_csv)
    changed = {(w.id1, w.link_type, w.id2) for w in writes if w.changed}
    assert len(changed) > 100 and all(w.gtid for w in writes if w.changed)
    dumped = {(id1, link_type, id2)
              for (id1, link_type), rows in dump_rows(dump, {k[0] for k in changed})[0].items()
              for id2 in rows}

    # Nothing captured: DeBL's rows are the dump's, every key written since differs.
    doc = json.loads(_cli(config, "verify", "--against-source", "--json", code=1))
    against = doc["against_source"]
    assert doc["ok"] is True  # the load itself is whole: its own checks agree
    assert against["follower"] is None and against["changes"] == 0
    assert (against["missing"], against["extra"], against["different"]) == (
        len(changed - dumped), 0, len(changed & dumped)), against
    assert "no follower has captured" in against["notes"][0]

    # The follower captures the writes; it runs while the checks read the change log.
    stop = threading.Event()
    with Follower(config) as follower:
        thread = threading.Thread(target=follower.serve, kwargs={"should_stop": stop.is_set})
        thread.start()
        try:
            text = _cli(config, "verify", "--against-source")  # waits for the follower
            check = json.loads(_cli(config, "check-fresh", "--dump", str(dump), "--writes",
                                    str(writes_csv), "--answers", str(answers), "--json",
                                    code=1))
        finally:
            stop.set()
            thread.join()
    assert check["history_problems"] == {}, check["history_problems"]
    assert check["checked"] == check["answers"] == run["completed"]
    # DeBL answers at the dump's moment: older than their arrival on the keys written, and
    # right everywhere else (a wrong row, a mix of positions or a client going back: none).
    assert set(check["violations"]) == {OLDER}, check["violations"]
    older = check["violations"][OLDER]
    assert 0 < older["count"] < check["checked"]
    written_id1s = {w.id1 for w in writes if w.changed}
    for example in older["examples"]:
        assert int(example.split("(")[1].split(",")[0]) in written_id1s, example
    applied = re.search(r"([\d,]+) changes applied up to position", text)
    assert applied and int(applied[1].replace(",", "")) == sum(bool(w.changed) for w in writes)
    assert "0 missing, 0 extra, 0 different" in text, text

    # A new dump with no write since: the load of it is the source.
    fresh = tmp_path / "dump2"
    config2 = _config(stack_config, "checkrun2")
    _cli(config2, "source", "dump", str(fresh), "--files", "3")
    _load(config2, spark, fresh)
    doc = json.loads(_cli(config2, "verify", "--against-source", "--json"))
    against = doc["against_source"]
    assert (against["missing"], against["extra"], against["different"]) == (0, 0, 0), against
    assert against["source_rows"] == against["debl_rows"] > 0
