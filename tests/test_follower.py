"""The follower on the real stack (docs/FRESHNESS.md, "Capture: `debl follow`"): the source's
writes captured as changes (inserts, updates, a key moved, hides, deletes, a transaction of
many rows, hostile bytes), batches of many transactions, a follower killed -9 under writes and
started again, the source and the catalog stopped and started under it, and the errors a user
meets: a changed
table, a position the source's log no longer holds, a second follower, nothing to follow.

Each test follows a table of its own in the source database (``source_db.table``) into a
catalog of its own, from a dump whose position a load recorded. The test of a purged position
purges the source's whole log up to its current file: it comes last.
"""

from __future__ import annotations

import getpass
import json
import os
import random
import signal
import subprocess
import threading
import time

import pytest
from click.testing import CliRunner

from debl.catalog import METADATA, Catalog, engine_for
from debl.cli import main
from debl.format.link import Link
from debl.namespace import Namespace
from debl.position import parse_gtid
from debl.stack.source_db import SourceDB
from debl.stack.stack import stack_start, stack_stop
from debl.store import source_db
from harness import procs
from harness.follow_kills import (SourceWriter, check_capture, dump_rows, head_seq,
                                  source_sql)
from loaders.follower import Follower
from loaders.source_dump import dump_source

pytestmark = pytest.mark.stack

HOSTILE = [b"\x00", b"\xff\xfe", b"\\", b"'", b'"', b"\\'\"\x00\xff end \\"]
CATCH_UP_S = 120.0  # a follower in another process reaches the head within this, or it hung


def _admin(config, sql: str) -> str:
    """*sql* as the source server's administrator (its socket, the system's user); its
    output, tab-separated without column names."""
    return subprocess.run(["mariadb", "--no-defaults", f"--socket={SourceDB(config).socket_path}",
                           "-u", getpass.getuser(), "-N", "-e", sql], check=True,
                          capture_output=True, text=True).stdout


class Dataset:
    """A table of the source, dumped, and a catalog whose load recorded the dump's position."""

    def __init__(self, stack_config, name: str, tmp_path, rows: int = 20):
        self.config = stack_config.replace(source_db_table=name,
                                           mysql_database=f"debl_{name}")
        source_sql(self.config, f"DROP TABLE IF EXISTS `{name}`")
        source_sql(self.config, source_db.table_ddl(name))
        for i in range(rows):
            source_sql(self.config, f"INSERT INTO `{name}` VALUES (%s, %s, 5, 1, %s, %s, 0)",
                 (i + 1, i + 100, b"dumped", 1000 + i))
        self.dump_dir = tmp_path / f"dump-{name}"
        self.position = dump_source(self.config, self.dump_dir, files=2).position
        METADATA.drop_all(engine_for(self.config))
        with Catalog(self.config) as catalog:
            catalog.loads.begin_load("L1", "debl", str(self.dump_dir), 1 << 20, {},
                                     Namespace(f"{name}_links", name, f"/debl-{name}"),
                                     position=self.position)
        self.table = name

    def write(self, sql: str, args=()) -> int:
        """*sql* in a transaction of its own; its GTID's sequence number."""
        conn = source_db.connect(self.config)
        try:
            with conn.cursor() as cur:
                cur.execute(sql, args)
                cur.execute("SELECT @@last_gtid")
                return parse_gtid(cur.fetchone()[0])[2]  # type: ignore[index]  # a variable: one row
        finally:
            conn.close()

    def follow(self, **settings) -> "Follower":
        return Follower(self.config.replace(**settings))

    def changes(self, after: int | None = None):
        with Catalog(self.config) as catalog:
            return catalog.changes.since(self.position.source,
                                         self.position.seq if after is None else after,
                                         limit=1_000_000)[0]

    def follower(self):
        with Catalog(self.config) as catalog:
            return catalog.changes.follower(self.position.source)

    def status(self) -> dict:
        result = CliRunner().invoke(main, ["status", "--json"], obj=self.config)
        assert result.exit_code == 0, result.output
        return json.loads(result.output)


@pytest.fixture
def dataset(stack_config, tmp_path, request):
    name = request.node.originalname[5:13].replace("_", "")
    return Dataset(stack_config, f"follow{name}", tmp_path)


def _link(id1, id2, data=b"x", visibility=1, t=5000, version=1) -> Link:
    return Link(id1, 5, id2, visibility, data, t, version)


def test_every_write_becomes_its_change_in_log_order(dataset):
    d, t = dataset, dataset.table
    expected = []  # (seq, row_no, key, link or None)
    for k, data in enumerate(HOSTILE):
        link = _link(50 + k, 1, data, t=7000 + k)
        seq = d.write(f"INSERT INTO `{t}` VALUES (%s, %s, 5, 1, %s, %s, 1)",
                      (link.id1, link.id2, data, link.time))
        expected.append((seq, 0, link.key, link))
    seq = d.write(f"UPDATE `{t}` SET data = %s, version = 9 WHERE id1 = 1", (b"\x00new\xff",))
    expected.append((seq, 0, (1, 5, 100), _link(1, 100, b"\x00new\xff", t=1000, version=9)))
    seq = d.write(f"UPDATE `{t}` SET id2 = 777 WHERE id1 = 2")  # the key moves
    expected += [(seq, 0, (2, 5, 101), None), (seq, 1, (2, 5, 777), _link(2, 777, b"dumped",
                                                                          t=1001, version=0))]
    seq = d.write(f"UPDATE `{t}` SET visibility = 0 WHERE id1 = 3")  # LinkBench's delete_link
    expected.append((seq, 0, (3, 5, 102), _link(3, 102, b"dumped", 0, 1002, 0)))
    seq = d.write(f"DELETE FROM `{t}` WHERE id1 = 4")  # an expunge
    expected.append((seq, 0, (4, 5, 103), None))
    many = [_link(900 + i, i, bytes([i % 8 + 1]) * i, t=i) for i in range(40)]
    seq = d.write(f"INSERT INTO `{t}` VALUES " + ", ".join(["(%s, %s, 5, %s, %s, %s, %s)"] * 40),
                  [v for x in many for v in (x.id1, x.id2, x.visibility, x.data, x.time,
                                             x.version)])
    expected += [(seq, i, x.key, x) for i, x in enumerate(many)]
    seq = d.write(f"DELETE FROM `{t}` WHERE id1 >= 900 AND id1 < 905")  # several rows at once
    expected += [(seq, i, many[i].key, None) for i in range(5)]
    with d.follow() as follower:
        follower.serve(until_caught_up=True)
    got = [(c.seq, c.row_no, c.key, c.link) for c in d.changes()]
    assert got == expected
    state = d.follower()
    # The source server is shared with other workers' tests: its head may have moved on.
    assert state.seq >= expected[-1][0] and state.state == "stopped" and state.error is None
    assert state.changes == len(expected)


def test_a_burst_of_small_transactions_lands_in_few_catalog_transactions(dataset):
    d, t = dataset, dataset.table
    before = head_seq(d.config)
    conn = source_db.connect(d.config)
    try:
        with conn.cursor() as cur:
            cur.execute("CREATE TABLE IF NOT EXISTS other_table (n INT PRIMARY KEY)")
            cur.execute("DELETE FROM other_table")
            for i in range(1000):  # 1000 transactions of one row, 300 of another table
                cur.execute(f"INSERT INTO `{t}` VALUES (%s, 1, 5, 1, 'b', 1, 1)", (10_000 + i,))
                if i % 10 < 3:
                    cur.execute("INSERT INTO other_table VALUES (%s)", (i,))
            cur.execute("INSERT INTO other_table VALUES (5000)")  # after the burst: no change
    finally:
        conn.close()
    head = head_seq(d.config)
    # The whole burst is waiting when the follower starts: batches are cut by size alone.
    with d.follow(fresh_capture_batch=100, fresh_capture_wait=600.0) as follower:
        result = follower.serve(until_caught_up=True)
    # Other workers' tests write to the same source server: its head may move on meanwhile.
    assert result.seq >= head and result.transactions >= head - before
    assert result.changes == 1000
    changes = d.changes(before)
    assert [c.id1 for c in changes] == list(range(10_000, 11_000))
    assert len({c.seq for c in changes}) == 1000 and d.follower().seq >= head
    # 1000 transactions with a change, 300 without, in 10 catalog transactions (a batch's
    # changes share its capture instant), and those after the last change in one more, written
    # as soon as it reaches the head, not fresh.capture_wait (set far past the run) later.
    assert len({c.captured_ts for c in changes}) == 10
    assert result.batches == 11


def _follow_process(config, log) -> procs.Running:
    return procs.start(["follow"], config.child_env(), log)


def _wait_for(what, deadline_s: float = CATCH_UP_S):
    """Poll *what* until it is true; its last value (a hang guard, not a timed assertion)."""
    deadline = time.monotonic() + deadline_s
    while not (found := what()) and time.monotonic() < deadline:
        time.sleep(0.1)
    return found


def test_a_follower_killed_under_writes_resumes_with_nothing_lost_or_doubled(dataset, tmp_path):
    d = dataset
    keys = sorted(dump_rows(d.dump_dir))
    writer = SourceWriter(d.config, keys, seed=3, rate=300.0).start()
    acks = []
    try:
        running = _follow_process(d.config, tmp_path / "follow-1.log")
        # Killed once it has written some batches, at a moment the seed chooses after that.
        assert _wait_for(lambda: (f := d.follower()) is not None and f.changes > 50), \
            running.output()
        time.sleep(random.Random(7).uniform(0.0, 1.0))
        os.kill(running.pid, signal.SIGKILL)
        assert running.wait(30).returncode == -signal.SIGKILL
        killed_at = d.follower().seq
        time.sleep(1.0)  # writes go on with no follower
        again = _follow_process(d.config, tmp_path / "follow-2.log")
        time.sleep(2.0)
    finally:
        acks = writer.stop()
    assert not writer.errors and len(acks) > 300
    head = head_seq(d.config)
    assert _wait_for(lambda: d.follower().seq >= head), again.output()
    os.kill(again.pid, signal.SIGTERM)
    outcome = again.wait(60)
    assert outcome.ok and "stopped at GTID" in outcome.output, outcome.output
    assert killed_at < acks[-1].seq  # the kill left writes to capture
    found = check_capture(d.config, dump_rows(d.dump_dir), d.position.seq, acks)
    assert (found.lost, found.doubled, found.problems) == (0, 0, []), found.examples
    assert d.follower().state == "stopped"


class _Serving:
    """A follower serving in a thread of this process, what it says kept in ``said``."""

    def __init__(self, d: Dataset):
        self.stop = threading.Event()
        self.errors: list[BaseException] = []
        self.said: list[str] = []
        self.thread = threading.Thread(target=self._run, args=(d,), daemon=True)
        self.thread.start()

    def _run(self, d: Dataset) -> None:
        try:
            with Follower(d.config, report=self.said.append) as follower:
                follower.serve(should_stop=self.stop.is_set)
        except Exception as exc:  # noqa: BLE001 -- the test reports it
            self.errors.append(exc)

    def end(self) -> None:
        self.stop.set()
        self.thread.join(60)
        assert not self.errors and not self.thread.is_alive()


def _inserts(d: Dataset, first_id1: int, n: int = 20) -> list[int]:
    """*n* rows written one a transaction, id1 from *first_id1*; their sequence numbers."""
    return [d.write(f"INSERT INTO `{d.table}` VALUES (%s, 1, 5, 1, 'a', 1, 1)", (first_id1 + i,))
            for i in range(n)]


@pytest.mark.exclusive  # it stops a service of the shared stack
@pytest.mark.parametrize("service", ["source-db", "mariadb"])
def test_a_service_stopped_and_started_under_the_follower_loses_nothing(dataset, service):
    """The source (its log) or DeBL's MariaDB (the change log) goes away while the source
    takes writes: the follower retries, says so, and once it is back captures every write
    once (a batch whose commit failed is read again from the source)."""
    d = dataset
    serving = _Serving(d)
    written = _inserts(d, 20_000)
    assert _wait_for(lambda: d.follower().seq >= written[-1])
    try:
        stack_stop(d.config, service)
        if service == "source-db":
            down = _wait_for(lambda: (f := d.follower()).error is not None and f)
            assert down.state == "catching-up" and "source database" in down.error, down
            assert "retrying" in down.error and "nothing is lost" in down.error
            assert "source database" in d.status()["followers"][0]["error"]
        else:  # the catalog is where it would say so: it says so on stderr
            written += _inserts(d, 20_100)
            assert _wait_for(lambda: any("retrying" in line for line in serving.said))
    finally:
        stack_start(d.config, service)
    written += _inserts(d, 20_200)
    assert _wait_for(lambda: d.follower().seq >= written[-1])
    serving.end()
    ids = [c.id1 for c in d.changes()]
    assert ids == [20_000 + i for i in range(20)] + (
        [] if service == "source-db" else [20_100 + i for i in range(20)]) + \
        [20_200 + i for i in range(20)]
    assert d.follower().error is None


def test_a_follower_that_cannot_read_the_log_gives_up_when_asked_to_catch_up(dataset):
    """The source answers (its head is read) but refuses the replication user: retried, and
    with --until-caught-up given up after service_timeout with the cause named."""
    dataset.write(f"INSERT INTO `{dataset.table}` VALUES (33000, 1, 5, 1, 'a', 1, 1)")
    config = dataset.config.replace(source_db_replication_password="wrong",
                                    service_timeout=3.0)
    result = CliRunner().invoke(main, ["follow", "--until-caught-up"], obj=config)
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert "refused the follower's replication user 'debl_repl': wrong password" in \
        result.output and "DEBL_SOURCE_DB_REPLICATION_PASSWORD" in result.output
    state = dataset.follower()
    assert state.state == "stopped" and "wrong password" in state.error


def test_a_changed_table_stops_the_follower_before_its_rows_are_read(dataset):
    d, t = dataset, dataset.table
    first = d.write(f"INSERT INTO `{t}` VALUES (30000, 1, 5, 1, 'before', 1, 1)")
    source_sql(d.config, f"ALTER TABLE `{t}` ADD COLUMN extra INT NOT NULL DEFAULT 7")
    d.write(f"INSERT INTO `{t}` VALUES (30001, 1, 5, 1, 'after', 1, 1, 8)")
    result = CliRunner().invoke(main, ["follow", "--until-caught-up"], obj=d.config)
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert f"the source's table `linkbench`.`{t}` changed at GTID" in result.output
    assert "extra LONG" in result.output and "take a new dump" in result.output
    assert [(c.id1, c.link.data) for c in d.changes()] == [(30000, b"before")]
    state = d.follower()
    assert state.state == "failed" and "changed at GTID" in state.error
    assert first <= state.seq < head_seq(d.config)
    shown = CliRunner().invoke(main, ["status"], obj=d.config).output
    assert "failed" in shown and "error: the source's table" in shown


def test_an_xa_transaction_on_the_table_is_refused_not_dropped(dataset):
    """An XA transaction's rows are logged with its prepare, its commit later as a statement:
    the follower stops at it with a message rather than lose its rows."""
    d, t = dataset, dataset.table
    first = d.write(f"INSERT INTO `{t}` VALUES (35000, 1, 5, 1, 'plain', 1, 1)")
    conn = source_db.connect(d.config)
    try:
        with conn.cursor() as cur:
            for sql in ("XA START 'x1'", f"INSERT INTO `{t}` VALUES (35001, 1, 5, 1, 'xa', 1, 1)",
                        "XA END 'x1'", "XA PREPARE 'x1'", "XA COMMIT 'x1'"):
                cur.execute(sql)
    finally:
        conn.close()
    result = CliRunner().invoke(main, ["follow", "--until-caught-up"], obj=d.config)
    assert result.exit_code == 1 and "an XA transaction?" in result.output, result.output
    assert [c.id1 for c in d.changes()] == [35000]
    assert first <= d.follower().seq < head_seq(d.config)  # stopped before the XA
    assert d.follower().state == "failed"


def test_a_second_follower_says_who_holds_the_dataset(dataset):
    with dataset.follow():
        result = CliRunner().invoke(main, ["follow"], obj=dataset.config)
    assert result.exit_code == 1 and "another `debl follow` is running on this dataset" in \
        result.output and f"pid {os.getpid()}" in result.output, result.output


def test_with_no_load_carrying_a_position_there_is_nothing_to_follow(dataset):
    with Catalog(dataset.config) as catalog:
        assert catalog.loads.mark_dropping("L1", None)  # its stores go: not kept
    result = CliRunner().invoke(main, ["follow"], obj=dataset.config)
    assert result.exit_code == 1 and "nothing to follow" in result.output, result.output


@pytest.mark.exclusive  # every other follower of the shared source would lose its position
def test_a_position_purged_from_the_source_log_is_a_clear_error(dataset):
    """Last: it purges the source's log up to its current file."""
    d, t = dataset, dataset.table
    d.write(f"INSERT INTO `{t}` VALUES (40000, 1, 5, 1, 'lost', 1, 1)")
    _admin(d.config, "FLUSH BINARY LOGS")
    current = _admin(d.config, "SHOW MASTER STATUS").split("\t")[0]

    def purged() -> bool:  # the server keeps a file until its binlog checkpoint has passed
        _admin(d.config, f"PURGE BINARY LOGS TO '{current}'")
        return _admin(d.config, "SHOW BINARY LOGS").split("\t")[0] == current
    assert _wait_for(purged)
    result = CliRunner().invoke(main, ["follow", "--until-caught-up"], obj=d.config)
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert f"after GTID {d.position.gtid}" in result.output
    assert "lost for good" in result.output and "debl source dump DIR" in result.output
    assert d.changes() == []
    follower, = d.status()["followers"]
    assert follower["state"] == "failed" and "no longer holds that position" in follower["error"]
    assert follower["seq"] == d.position.seq
    # What to do: a new dump, loaded; the follower goes on from it (the older load is kept,
    # for a rollback, but its changes are lost for good).
    d.write(f"INSERT INTO `{t}` VALUES (40001, 1, 5, 1, 'in the dump', 1, 1)")
    again = dump_source(d.config, d.dump_dir.with_name("dump-again"), files=1).position
    with Catalog(d.config) as catalog:
        catalog.loads.begin_load("L2", "debl", "again", 1 << 20, {},
                                 Namespace("again_links", "again", "/debl-again"),
                                 position=again)
    d.write(f"INSERT INTO `{t}` VALUES (40002, 1, 5, 1, 'after', 1, 1)")
    result = CliRunner().invoke(main, ["follow", "--until-caught-up"], obj=d.config)
    assert result.exit_code == 0, result.output
    assert f"the follower goes on from its position, GTID {again.gtid}" in result.output
    assert [c.id1 for c in d.changes(again.seq)] == [40002]
    state = d.follower()
    assert state.kept_from == again.seq and state.seq == head_seq(d.config)
