"""The fault campaign (docs/RELIABILITY.md, "Kill campaign" and "Services dying mid-phase"):
its process handling (pure), one service stopped and started on the real stack, and a CI-sized
campaign whose every trial must be clean.

The campaign test's size is a parameter, in environment variables outside ``DEBL_*`` (the
config refuses an unknown ``DEBL_`` name): ``FAULTS_TRIALS`` trials (default 3) of each target
in ``FAULTS_TARGETS`` (default ``load,gen-hf,coordinator``; ``kills``, ``outages`` and ``all``
stand for groups, as in ``scripts/faults.py``). On the 2-core machine a trial of a
load or gen_HF costs a Spark start and a rerun, 30-60 s on a quiet machine: the default is
CI's short campaign; ``--trials 20`` of every target is the full one
(``python scripts/faults.py``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from harness import procs


# --------------------------------------------------------------------------- processes


def _spawn_tree() -> subprocess.Popen:
    """A parent (sh, in a session of its own) with a child that ignores its parent's death."""
    return subprocess.Popen(["sh", "-c", "sleep 60 & sleep 60"], start_new_session=True)


def test_tree_lists_the_descendants_and_survivors_finds_the_orphan():
    parent = _spawn_tree()
    try:
        deadline = time.monotonic() + 10
        tree = procs.tree(parent.pid)
        while len(tree) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
            tree = procs.tree(parent.pid)
        assert tree[0].pid == parent.pid
        assert len(tree) == 3 and all("sleep 60" in p.cmdline for p in tree[1:])
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        left = procs.survivors(tree, grace=0.5)
        assert {p.pid for p in left} == {p.pid for p in tree[1:]}  # the children outlive it
        procs.kill(left)
        assert procs.survivors(left, grace=5.0) == []
    finally:
        os.killpg(parent.pid, signal.SIGKILL)
        parent.wait()


def test_a_reused_pid_is_not_the_same_process():
    me = procs.tree(os.getpid())[0]
    assert me.alive()
    assert not procs.Proc(me.pid, me.ppid, me.start + 1, me.cmdline).alive()


def test_a_kill_moment_at_the_commands_very_end_counts_as_missed(tmp_path):
    """The command ended between the campaign's last look and the kill: no kill, no crash of
    the trial (a bench trial broke with an IndexError on the empty process tree)."""
    from harness.kills import _kill_at
    from harness.trial import MISSED, Trial

    class EndingNow(procs.Running):
        def done(self) -> bool:
            return False  # the last look before the kill still saw it running

    ended = subprocess.Popen(["true"])
    time.sleep(0.5)  # a zombie now: no longer in the process table as running
    trial = Trial("bench", "kill -9 debl bench", 0, 1)
    try:
        assert _kill_at(None, EndingNow(["x"], ended, tmp_path / "log"), trial, 0.0, "main",
                        lambda: ["a point"]) is None
        assert trial.landed == [MISSED]
    finally:
        ended.wait()


def test_clear_failure_wants_a_message_and_no_traceback():
    def outcome(text: str, hung: bool = False) -> procs.Outcome:
        return procs.Outcome(["load"], None if hung else 1, 1.0, text, hung)

    assert procs.clear_failure(outcome("Error: MySQL at 127.0.0.1:3316 is not reachable"))
    assert not procs.clear_failure(outcome("Traceback (most recent call last):\n  ...\n"
                                           "Error: x"))
    assert not procs.clear_failure(outcome("Killed"))
    assert not procs.clear_failure(outcome("Error: x", hung=True))


def test_commands_get_the_config_through_the_environment_never_argv(tmp_path):
    from debl.config import Config

    config = Config(mysql_password="s3cret", mysql_database="debl_x", state_dir=tmp_path)
    env = config.child_env(DEBL_COORDINATOR_RAW_AFTER="off")
    assert env["DEBL_MYSQL_DATABASE"] == "debl_x" and env["DEBL_COORDINATOR_RAW_AFTER"] == "off"
    assert env["DEBL_MYSQL_PASSWORD"] == "s3cret"
    running = procs.start(["stack", "--help"], env, tmp_path / "help.log")
    outcome = running.wait(120)
    assert outcome.ok and "s3cret" not in " ".join(running.proc.args)


# --------------------------------------------------------------------------- the real stack


@pytest.mark.exclusive
@pytest.mark.stack
def test_stack_stop_and_start_one_daemon(stack_config):
    """Thrift killed alone: the rest keeps running, status says so, start brings it back."""
    from debl.stack.stack import stack_start, stack_status, stack_stop

    assert stack_stop(stack_config, "thrift", crash=True)
    health = {h.service: h for h in stack_status(stack_config)}
    assert health["MariaDB"].healthy and health["HDFS"].healthy
    assert not health["HBase"].healthy and health["HBase"].pids[1] is None
    started = stack_start(stack_config, "thrift")
    assert not started.already_up
    assert all(h.healthy for h in stack_status(stack_config))


@pytest.mark.stack
def test_stack_stop_names_what_it_knows():
    from debl.config import Config
    from debl.errors import ConfigError
    from debl.stack.stack import stack_stop

    with pytest.raises(ConfigError, match="choose one of mariadb, source-db, hdfs, hbase, "
                                          "namenode, datanode, hbase-master, thrift"):
        stack_stop(Config(), "zookeeper")


def _campaign_targets() -> list:
    """The campaign CI runs, a test per target (``FAULTS_TARGETS``, comma-separated names or
    groups, widens it: docs/RELIABILITY.md, "Kill campaign"): each on a worker of its own in a
    parallel run, a service outage alone (``exclusive``)."""
    from harness.early_kills import EARLY_KILLS
    from harness.follow_kills import FOLLOW_KILLS
    from harness.fresh_kills import FRESH_KILLS
    from harness.kills import KILLS
    from harness.outages import OUTAGES
    from harness.shrinking import SHRINKING

    registry = {**KILLS, **EARLY_KILLS, **FOLLOW_KILLS, **FRESH_KILLS, **OUTAGES,
                **SHRINKING}
    groups = {"kills": [*KILLS, *EARLY_KILLS, *FOLLOW_KILLS, *FRESH_KILLS],
              "outages": list(OUTAGES),
              "source": list(SHRINKING), "all": list(registry)}
    wanted = os.environ.get("FAULTS_TARGETS", "load,gen-hf,coordinator")
    names = [n for t in wanted.split(",") for n in groups.get(t.strip(), [t.strip()])]
    return [pytest.param(registry[n], id=n, marks=[
        pytest.mark.long, pytest.mark.xdist_group(f"campaign-{n}"),
        *([pytest.mark.exclusive] if n in OUTAGES else [])]) for n in names]


@pytest.mark.stack
@pytest.mark.parametrize("target", _campaign_targets())
def test_ci_campaign_every_trial_is_clean(stack_config, tmp_path, target):
    from harness.runner import run_campaign
    from harness.table import markdown

    trials = int(os.environ.get("FAULTS_TRIALS", "3"))
    result, rows = run_campaign(stack_config, tmp_path / "campaign", [target], trials, seed=1,
                                report=lambda text: print(text, file=sys.stderr), answers=100)
    print(markdown(rows, 1, trials))
    assert len(result.trials) == trials
    for trial in result.trials:
        assert trial.clean, (trial.target, trial.landed, trial.problems, trial.examples)


@pytest.mark.long
@pytest.mark.xdist_group("campaign-early-lie")
@pytest.mark.stack
def test_a_load_killed_as_a_chunk_breaks_a_claim_resumes_with_early_answers_stopped(
        stack_config, tmp_path):
    """in the kill campaign (target ``early-lie``): a load answering early
    from a lying manifest, killed the moment it records the chunk that breaks the claim, then
    resumed as the docs say: the claim is on record, early answers stay stopped, and the client
    asking throughout gets none from the resume on; nothing lost or doubled."""
    from debl.faultpoints import POINTS
    from harness.early_kills import EARLY_KILLS
    from harness.runner import run_campaign

    result, _ = run_campaign(stack_config, tmp_path / "campaign", [EARLY_KILLS["early-lie"]], 1,
                             seed=1, report=lambda text: print(text, file=sys.stderr),
                             answers=100)
    (trial,) = result.trials
    assert trial.landed == [POINTS["false-claim"]], trial.problems
    assert trial.clean, (trial.problems, trial.examples)


@pytest.mark.long
@pytest.mark.xdist_group("campaign-follow")
@pytest.mark.stack
def test_a_follower_killed_under_writes_resumes_with_every_write_captured_once(stack_config,
                                                                              tmp_path):
    """The campaign's ``follow`` target, one trial (docs/RELIABILITY.md, "Kill campaign"):
    ``debl follow`` killed -9 while a writer writes to the source, started again; every
    acknowledged write is in the change log once, and the dump with the log applied is the
    source's table."""
    from harness.follow_kills import FOLLOW_KILLS
    from harness.runner import run_campaign
    from harness.trial import MISSED

    result, _ = run_campaign(stack_config, tmp_path / "campaign", [FOLLOW_KILLS["follow"]], 1,
                             seed=1, report=lambda text: print(text, file=sys.stderr))
    trial, = result.trials
    assert trial.landed != [MISSED] and trial.answers > 0, (trial.landed, trial.problems)
    assert trial.clean, (trial.landed, trial.problems, trial.examples)


@pytest.mark.long
@pytest.mark.xdist_group("campaign-fresh-coordinator")
@pytest.mark.stack
def test_a_coordinator_killed_under_writes_leaves_every_answer_fresh(stack_config, tmp_path):
    """The campaign's ``fresh-coordinator`` target, one trial (docs/RELIABILITY.md, "Kill
    campaign"): a worker of a query client whose reads wait on fresh ranges killed -9 while
    another client writes to the source; the client fails clearly, a new one reads; every
    answer of all of them keeps the contract, and the load with the changes is the source."""
    from harness.fresh_kills import FRESH_KILLS
    from harness.runner import run_campaign
    from harness.trial import MISSED

    result, _ = run_campaign(stack_config, tmp_path / "campaign",
                             [FRESH_KILLS["fresh-coordinator"]], 1, seed=1,
                             report=lambda text: print(text, file=sys.stderr))
    trial, = result.trials
    assert trial.landed != [MISSED] and trial.answers > 0, (trial.landed, trial.problems)
    assert trial.clean, (trial.landed, trial.problems, trial.examples)


@pytest.mark.long
@pytest.mark.xdist_group("campaign-load-shrink")
@pytest.mark.stack
def test_a_file_shrinking_mid_load_fails_the_load_clearly_and_its_resume_verifies(
        stack_config, tmp_path):
    """The campaign's trial point "a file shrinking mid-load", one trial: a cold
    file truncated mid-line while the load copies it, a day current. The load fails with a
    message naming the file, is recorded failed, the day stays current; restored, the file's
    load resumes to its uptime, `debl verify` agrees, nothing lost or doubled, answers exact."""
    from harness.runner import run_campaign
    from harness.shrinking import SHRINKING
    from harness.trial import MISSED

    result, _ = run_campaign(stack_config, tmp_path / "campaign", list(SHRINKING.values()), 1,
                             seed=1, report=lambda text: print(text, file=sys.stderr),
                             answers=50)
    trial, = result.trials
    assert trial.landed != [MISSED] and "mid-line" in trial.landed[0], trial.landed
    failed, resumed = trial.steps[:2]
    assert failed.returncode not in (0, None) and failed.clear, failed
    assert resumed.returncode == 0 and trial.verify_ok, (resumed, trial.verify_failures)
    assert trial.clean, (trial.landed, trial.problems, trial.examples)


# --------------------------------------------------------------------------- hung services

# A call to a hung service must end with an error, not wait: HANG_S is far above the timeout
# it is given (2 s), so only a call that waits without bound (3600 s before service_timeout)
# runs into it; no latency is asserted.
HANG_S = 60.0


def _frozen(daemon) -> "contextlib.AbstractContextManager":
    """SIGSTOP a stack daemon for the block (a server that takes calls and never answers)."""
    @contextlib.contextmanager
    def frozen():
        pid = daemon.pid()
        assert pid, f"{daemon.name} is not running"
        os.kill(pid, signal.SIGSTOP)
        try:
            # The stop is asynchronous: each thread stops when it next runs, which on a busy
            # machine can come after the call under test reached the server (a CI run saw a
            # "frozen" MariaDB answer). Wait until every thread is stopped.
            deadline = time.monotonic() + 10
            while not _all_stopped(pid):
                assert time.monotonic() < deadline, f"{daemon.name} did not stop"
                time.sleep(0.01)
            yield
        finally:
            os.kill(pid, signal.SIGCONT)
    return frozen()


def _all_stopped(pid: int) -> bool:
    """Every thread of *pid* is stopped (on Linux, psutil reads a thread by its id too)."""
    states = []
    for thread in psutil.Process(pid).threads():
        try:
            states.append(psutil.Process(thread.id).status())
        except psutil.NoSuchProcess:
            continue  # a thread that ended
    return all(state in (psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP) for state in states)


def _within(seconds: float, call):
    """Run *call* in a thread; its exception (or result), or AssertionError if it is still
    running after *seconds*."""
    import concurrent.futures

    pool = concurrent.futures.ThreadPoolExecutor(1)
    future = pool.submit(call)
    try:
        return future.exception(timeout=seconds) or future.result()
    except concurrent.futures.TimeoutError:
        raise AssertionError(f"still waiting after {seconds:.0f} s: a hang") from None
    finally:
        pool.shutdown(wait=False)


@pytest.mark.exclusive
@pytest.mark.stack
@pytest.mark.parametrize("service", ["mysql", "mysql-reader", "thrift", "hdfs"])
def test_a_hung_service_fails_within_service_timeout_naming_it(stack_config, service):
    from debl.errors import ServiceError
    from debl.stack.hbase import HBase
    from debl.stack.hdfs import HDFS
    from debl.stack.mariadb import MariaDB

    config = stack_config.replace(service_timeout=2.0)
    if service.startswith("mysql"):
        from debl.store.mysql import MySQLStore

        store = MySQLStore(config, table="faults_hung")
        store.create_table()
        store.count() if service == "mysql" else store.get_link_list(1, 123456789)  # connected
        call = store.count if service == "mysql" else lambda: store.get_link_list(1, 123456789)
        daemon, words = MariaDB(config).daemons[0], "MySQL at"
    elif service == "thrift":
        from debl.store.hbase import HBaseStore

        store = HBaseStore(config)
        store.table_exists()  # connected
        call, daemon, words = store.table_exists, HBase(config).daemons[1], "HBase Thrift at"
    else:
        from debl.hdfs import HdfsClient

        store = None
        call = lambda: HdfsClient(config).status("/")  # noqa: E731
        daemon, words = HDFS(config).daemons[0], "HDFS at"
    try:
        with _frozen(daemon):
            error = _within(HANG_S, call)
    finally:
        if store is not None:
            store.close()
    assert isinstance(error, ServiceError), error
    assert words in str(error) and "debl stack status" in str(error)


_KILLED_BENCH = """
import sys, time
from pathlib import Path
sys.path.insert(0, {root!r})
from debl.bench.gen_hf_process import GenHFProcess
from debl.config import load_config
gen_hf = GenHFProcess(load_config(), "demand", Path({log!r}))
gen_hf.start()
print(gen_hf.proc.pid, flush=True)
time.sleep(600)
"""


@pytest.mark.stack
def test_a_killed_bench_leaves_no_gen_hf_running(stack_config, tmp_path):
    """The bench's gen-hf subprocess (and its Spark JVM) ends once the bench is killed with
    kill -9; before, it ran on (holding the dataset's gen_HF lock) waiting for a load."""
    from pathlib import Path

    import pymysql

    root = str(Path(__file__).resolve().parents[1])
    config = stack_config.replace(mysql_database="debl_faults_orphan",
                                  coordinator_poll_interval=0.2)
    conn = pymysql.connect(host=config.mysql.host, port=config.mysql.port,
                           user=config.mysql.user, password=config.mysql_secret)
    with conn, conn.cursor() as cur:  # no load: gen-hf waits for one, run after run
        cur.execute(f"DROP DATABASE IF EXISTS `{config.mysql.database}`")
    env = config.child_env()
    bench = subprocess.Popen([sys.executable, "-c", _KILLED_BENCH.format(
        root=root, log=str(tmp_path / "gen-hf.log"))], env=env, stdout=subprocess.PIPE,
        start_new_session=True)
    try:
        gen_hf = int(bench.stdout.readline())
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and procs.spark_driver(procs.tree(gen_hf)) is None:
            time.sleep(0.2)
        tree = procs.tree(gen_hf)
        assert procs.spark_driver(tree) is not None, "gen-hf never started its JVM"
        os.kill(bench.pid, signal.SIGKILL)
        bench.wait()
        left = procs.survivors(tree, grace=30.0)
        procs.kill(left)
        assert left == [], [p.describe() for p in left]
    finally:
        if bench.poll() is None:
            os.killpg(bench.pid, signal.SIGKILL)
            bench.wait()


class _Proxy:
    """A TCP proxy to a server, on a loopback port of its own; ``close`` drops every
    connection and refuses new ones, as a server that died would."""

    def __init__(self, host: str, port: int) -> None:
        import socket
        import threading

        self.upstream = (host, port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.sockets: list = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        import socket
        import threading

        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            self.sockets += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(a, b) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass

    def close(self) -> None:
        import socket

        try:  # wakes the accepting thread (a plain close would leave it accepting)
            self.listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.listener.close()
        for s in self.sockets:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()


@pytest.mark.stack
def test_a_named_lock_released_after_its_server_died_logs_no_traceback(stack_config, caplog):
    """A load or gen_HF whose MariaDB died releases its lock on the way out: that must not log
    SQLAlchemy's failed reset of the dead session with a traceback (users of `debl load` and
    `debl gen-hf` took it for a crash, before the command's own clear message)."""
    import logging

    from debl.catalog import named_lock

    proxy = _Proxy(stack_config.mysql.host, stack_config.mysql.port)
    lock = named_lock(stack_config.replace(mysql_port=proxy.port), "debl_faults_test_lock")
    assert lock is not None and lock.held()
    proxy.close()
    with caplog.at_level(logging.DEBUG):
        lock.release()
    traced = [r for r in caplog.records if r.exc_info and r.levelno >= logging.WARNING]
    assert not traced, [r.getMessage() for r in traced]
    assert not lock.held()


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_command_prints_the_notes_of_its_error():
    import click

    from debl.commands.common import friendly_errors
    from debl.errors import ServiceError

    @friendly_errors
    def command():
        exc = ServiceError("HDFS at 127.0.0.1:1 did not answer")
        exc.add_note("continue it: debl load SRC --resume L1")
        raise exc

    with pytest.raises(click.ClickException) as err:
        command()
    assert err.value.message == ("HDFS at 127.0.0.1:1 did not answer\n"
                                 "continue it: debl load SRC --resume L1")


def test_a_library_error_debl_did_not_word_is_a_message_naming_its_service():
    """A server-side failure DeBL did not foresee (MariaDB lost an internal temporary table
    under a hot path's merge) reaches the user as a message, never a traceback; inside the hot
    path it is a ServiceError (which a load records, with how to resume)."""
    import click
    import pymysql

    from debl.commands.common import friendly_errors
    from debl.config import Config
    from debl.errors import ServiceError
    from debl.mysql import mysql_errors

    lost = pymysql.err.InternalError(6, "Error on delete of '/tmp/#sql-temptable-646-68-1.MAI'")

    @friendly_errors
    def command(exc):
        raise exc

    with pytest.raises(click.ClickException) as err:
        command(lost)
    assert err.value.message.startswith("MySQL failed: InternalError: ")
    assert "--resume" in err.value.message
    with pytest.raises(ValueError):  # DeBL's own bug: the traceback is what to report
        command(ValueError("a bug"))
    with pytest.raises(ServiceError, match=r"#sql-temptable.*\(during the hot path\)"):
        with mysql_errors(Config(), "the hot path"):
            raise lost


@pytest.mark.stack
def test_a_load_stopped_by_a_service_is_failed_and_says_how_to_resume(stack_config, tmp_path):
    """HDFS unreachable right after the load is recorded: the load is marked failed (it was
    left `running`) and the error tells the exact command that continues it."""
    import pymysql

    from debl.catalog import Catalog
    from debl.errors import ServiceError
    from debl.workload.generator import generate
    from debl.workload.spec import GenerateSpec
    from loaders.load import LoadOptions, run_load

    config = stack_config.replace(mysql_database="debl_faults_resume",
                                  hdfs_uri=f"hdfs://127.0.0.1:{_closed_port()}")
    conn = pymysql.connect(host=config.mysql.host, port=config.mysql.port,
                           user=config.mysql.user, password=config.mysql_secret)
    with conn, conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{config.mysql.database}`")
    generate(tmp_path, GenerateSpec(max_id=201, files=2, days=2, max_degree=5))
    with pytest.raises(ServiceError, match=r"HDFS at 127.0.0.1:\d+ did not answer") as err:
        run_load(config, str(tmp_path), LoadOptions(bucket_width=100))
    with Catalog(config) as catalog:
        load = catalog.loads.load()
    assert load.state == "failed"
    assert getattr(err.value, "__notes__", []) == [
        f"load {load.load_id} stopped there; once that is fixed (`debl stack up` for a service "
        f"of the stack), continue it: debl load {tmp_path} --resume {load.load_id}"]


@pytest.mark.stack
def test_the_jvm_hbase_client_gives_up_on_a_dead_zookeeper_within_service_timeout(
        stack_config, spark):
    """gen_HF's table creation and bulk load go through the HBase client in the Spark JVM:
    with HBase's ZooKeeper gone they failed only after ZooKeeper's 90 s session timeout per
    attempt, minutes in all (the outage campaign saw gen-hf waiting for over five)."""
    from debl.errors import ServiceError
    from loaders.hbase_bulk import create_table

    config = stack_config.replace(hbase_zookeeper_port=_closed_port(), service_timeout=2.0)
    error = _within(HANG_S, lambda: create_table(spark, config, [], table="faults_nowhere"))
    assert isinstance(error, ServiceError), error
    assert "HBase table creation failed" in str(error) and "debl stack status" in str(error)


@pytest.mark.exclusive
@pytest.mark.stack
def test_stack_up_after_a_datanode_died_gives_an_hbase_that_takes_writes(stack_config):
    """The DataNode killed under a running HBase, then `debl stack up`: HBase must take writes
    again. It answered reads (so `stack up` found it up) with a write-ahead log whose only
    DataNode had gone, and its region server aborted at the next write."""
    from debl.format.link import Link, Origin
    from debl.stack.stack import stack_status, stack_stop, stack_up
    from debl.store.hbase import HBaseStore

    with HBaseStore(stack_config, table="faults_wal") as hbase:
        hbase.reset()
        hbase.write_links([(Link(1, 123456789, 2, 1, b"a", 10, 0), Origin(0, 0, 1))])
    stack_stop(stack_config, "datanode", crash=True)
    stack_up(stack_config)
    with HBaseStore(stack_config, table="faults_wal") as hbase:
        for i in range(3, 50):  # enough appends to the WAL to reach a broken pipeline
            error = _within(HANG_S, lambda i=i: hbase.write_links(
                [(Link(1, 123456789, i, 1, b"b", 11, 0), Origin(0, 0, i))]))
            assert error == 1, error
        assert len(hbase.get_link_list(1, 123456789)) == 48
        hbase.drop_table()
    assert all(h.healthy for h in stack_status(stack_config))


@pytest.mark.parametrize("target, problem", [("load-jvm", False), ("gen-hf-jvm", True)])
def test_a_load_may_not_need_its_killed_jvm_a_gen_hf_run_always_does(monkeypatch, target,
                                                                      problem):
    """A small load buckets its chunks in its own process: killed in its JVM after the last
    chunk that needed it, it succeeds, rightly (the kill campaign counted that as a problem);
    gen_HF writes its HFiles in its JVM, so a gen_HF that succeeds without it is wrong."""
    import random
    from types import SimpleNamespace

    from harness import kills
    from harness.trial import Trial

    class Ran:
        pid = 1

        def wait(self, timeout):
            return procs.Outcome(["debl"], 0, 1.0, "", False)

    monkeypatch.setattr(kills, "_kill_at", lambda *args: [])
    monkeypatch.setattr(kills, "_orphans", lambda *args: None)
    trial = Trial(target, "kill -9", 0, 1)
    kills.KILLS[target].strike(SimpleNamespace(start=lambda argv, name: Ran()), trial,
                               random.Random(1), kills.Window(10.0, (0.0, 10.0)), ["x"],
                               lambda: [])
    assert bool(trial.problems) is problem
    assert ("the JVM was not needed after it" in trial.landed) is not problem
