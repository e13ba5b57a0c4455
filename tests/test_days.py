"""The next day's dump without downtime, on the real stack: each load in its own
namespace, one switch at the new day's uptime, the previous day's stores gone after cleanup,
failures that keep the current day, rollback, a gen_HF run of yesterday that cannot write into
today, and the demand carried over (docs/LOADING.md, "Days").

Two days of the same graph: day 2 is a later generation (another seed: other links, updates and
deletions of the same ids), so an answer of the wrong day, or a mix of days, differs from both
days' references.

The tests run in file order and go on from the loads the ones before them left (each load costs
tens of seconds: the days are not loaded again for every test); each says what it starts from."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import threading
import time

import pytest
from click.testing import CliRunner

from coordinator import Coordinator
from debl.catalog import Catalog
from debl.commands.days import rollback as rollback_command
from debl.commands.status import status as status_command
from debl.errors import LoadStateError
from debl.hdfs import HdfsClient
from debl.store.hbase import HBaseStore
from debl.store.mysql import MySQLStore
from loaders import gen_hf as gen_hf_module
from loaders.cleanup import cleanup, drop_every_load, rollback
from loaders.gen_hf import GenHF
from loaders import cleanup as cleanup_module
from loaders import hot_phase
from loaders.load import LoadOptions, LoadRun, run_load
from tests.dataset import make_dataset, reference_store

pytestmark = pytest.mark.stack

OPTIONS = LoadOptions(hot_bytes=700_000, chunk_size=128 * 1024, bucket_width=2500)


@pytest.fixture(scope="module")
def days(stack_config, tmp_path_factory):
    """Two days' inputs and their references, in a database of the module's own; every load
    dropped before and after."""
    config = stack_config.replace(mysql_database="debl_daystest", coordinator_poll_interval=0.2,
                                  loading_keep_previous_load=0.0,
                                  loading_coordinator_ack_timeout=20.0)
    refs = {}
    for day, seed in ((1, 21), (2, 22)):
        directory = tmp_path_factory.mktemp(f"day{day}")
        make_dataset(directory, max_id=10001, files=5, seed=seed, bad_lines=0)
        hot = {f.name for f in sorted(directory.iterdir(), key=lambda p: p.stat().st_mtime)[-1:]}
        refs[day] = (directory, reference_store(directory, hot))
    Catalog(config, replace_older=True).close()
    drop_every_load(config)
    yield config, refs
    drop_every_load(config)


def _day_of(config, refs) -> dict[str, int]:
    with Catalog(config) as catalog:
        return {load.load_id: day for day in refs for load in catalog.loads.loads()
                if load.source == str(refs[day][0])}


def _store_exists(config, load) -> dict[str, bool]:
    ns = load.namespace
    with MySQLStore(config, ns.link_table) as mysql, HBaseStore(config, ns.hbase_table) as hbase:
        return {"mysql": mysql.table_exists(), "hbase": hbase.table_exists(),
                "hdfs": HdfsClient(config).status(ns.hdfs_dir) is not None}


def test_clients_asking_across_the_next_days_load_get_each_days_exact_answer(days, spark):
    config, refs = days
    day1 = run_load(config, str(refs[1][0]), OPTIONS)
    keys = sorted(set(refs[1][1].keys()) | set(refs[2][1].keys()))
    answered: list[tuple[float, str]] = []
    wrong: list = []
    stop = threading.Event()
    with Coordinator(config) as c:
        def ask(seed: int) -> None:
            rng = random.Random(seed)
            while not stop.is_set():
                key = rng.choice(keys)
                answer = c.query(*key, timeout=120)
                day = 1 if answer.load_id == day1.load_id else 2
                if answer.links != refs[day][1].get_link_list(*key):
                    wrong.append((key, day, answer.route))
                answered.append((time.monotonic(), answer.load_id))

        askers = [threading.Thread(target=ask, args=(n,)) for n in range(4)]
        for t in askers:
            t.start()
        try:
            day2 = run_load(config, str(refs[2][0]), OPTIONS)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not any(
                    load_id == day2.load_id for _, load_id in answered[-50:]):
                time.sleep(0.1)
        finally:
            stop.set()
            for t in askers:
                t.join(120)
    assert wrong == []
    served = [load_id for _, load_id in answered]
    assert day1.load_id in served and day2.load_id in served
    # One switch: once day 2 answered, day 1 answered no more (queries routed before the
    # switch may finish just after it: a poll interval's worth).
    first_day2 = next(t for t, load_id in answered if load_id == day2.load_id)
    assert all(t < first_day2 + 1.0 for t, load_id in answered if load_id == day1.load_id)
    times = sorted(t for t, _ in answered)
    assert max(b - a for a, b in zip(times, times[1:])) < 1.0  # never a stretch without answer
    # Cleanup (keep_previous_load 0): day 1's stores are gone, day 2's remain.
    with Catalog(config) as catalog:
        gone, kept = catalog.loads.load(day1.load_id), catalog.loads.load(day2.load_id)
    assert gone.dropped is not None and kept.dropped is None
    assert _store_exists(config, gone) == {"mysql": False, "hbase": False, "hdfs": False}
    assert _store_exists(config, kept)["mysql"] and _store_exists(config, kept)["hdfs"]


def test_a_next_day_killed_at_a_random_moment_leaves_today_answering_then_resumes(days, spark):
    config, refs = days
    with Catalog(config) as catalog:
        today = catalog.loads.current()
    assert today is not None and _day_of(config, refs)[today.load_id] == 2
    proc = subprocess.Popen([sys.executable, "-m", "debl", "load", str(refs[1][0]),
                             "--hot-bytes", str(OPTIONS.hot_bytes), "--chunk-size", "128KiB",
                             "--bucket-width", str(OPTIONS.bucket_width)],
                            env=config.child_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        new = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and new is None:
            with Catalog(config) as catalog:
                newest = catalog.loads.load()
            if newest.load_id != today.load_id:
                new = newest.load_id
            time.sleep(0.05)
        assert new, "the new day's load never began"
        time.sleep(random.Random(7).uniform(0.2, 3.0))  # somewhere in its copy or bucketing
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    with Catalog(config) as catalog:
        assert catalog.loads.current().load_id == today.load_id
        assert catalog.loads.load(new).state == "running"  # killed, never up
    reference = refs[2][1]
    with Coordinator(config) as c:
        for key in sorted(reference.keys())[::40]:
            answer = c.query(*key, timeout=120)
            assert answer.load_id == today.load_id
            assert answer.links == reference.get_link_list(*key), key
    resumed = run_load(config, str(refs[1][0]), OPTIONS, resume=new)
    assert resumed.load_id == new
    with Coordinator(config) as c:
        for key in sorted(refs[1][1].keys())[::40]:
            answer = c.query(*key, timeout=120)
            assert answer.load_id == new and answer.links == refs[1][1].get_link_list(*key)


def test_resuming_a_superseded_load_is_refused_naming_the_newer_one(days):
    config, refs = days
    with Catalog(config) as catalog:
        loads = catalog.loads.loads()
    newest, older = loads[0], loads[1]
    with pytest.raises(LoadStateError, match=rf"{older.load_id} cannot be resumed: load "
                                             rf"{newest.load_id} started after it"):
        run_load(config, str(refs[2][0]), OPTIONS, resume=older.load_id)


def test_rollback_serves_the_previous_day_while_its_stores_exist(days):
    config, refs = days
    kept = config.replace(loading_keep_previous_load=3600.0)
    previous = run_load(kept, str(refs[1][0]), OPTIONS).load_id
    day_a = run_load(kept, str(refs[2][0]), OPTIONS)
    with Catalog(config) as catalog:
        assert catalog.loads.previous() == previous
    with Coordinator(config) as c:
        assert c.query(1, 7, timeout=60).load_id == day_a.load_id
        assert rollback(config) == (day_a.load_id, previous)
        deadline = time.monotonic() + 10
        while c.load_id != previous and time.monotonic() < deadline:
            time.sleep(0.05)
        assert c.load_id == previous
        day = _day_of(config, refs)[previous]
        for key in sorted(refs[day][1].keys())[::60]:
            assert c.query(*key, timeout=60).links == refs[day][1].get_link_list(*key)
        # The command says it, and `debl status` shows both days.
        out = CliRunner().invoke(rollback_command, [], obj=config)
        assert out.exit_code == 0, out.output
        assert f"load {day_a.load_id} is current again" in out.output
        status = json.loads(CliRunner().invoke(status_command, ["--json"], obj=config).output)
        assert status["load"]["load_id"] == day_a.load_id
        assert status["previous"]["load_id"] == previous
        assert rollback(config) == (day_a.load_id, previous)
        assert rollback(config) == (previous, day_a.load_id)  # and forth again
    # Past keep_previous_load, cleanup drops the previous day: no rollback any more.
    assert cleanup(config, wait=True) == [previous]
    with pytest.raises(LoadStateError, match="no previous load|dropped by cleanup"):
        rollback(config)


def test_rollback_never_makes_current_a_day_cleanup_is_dropping(days, monkeypatch):
    """Defect: cleanup picked the loads to drop, dropped their stores (slow), and only then
    marked them dropped; a rollback in between made current the day whose tables were going
    away (every coordinator moved to it and failed), and marking it dropped then raised
    LoadStateError. Rollback and cleanup exclude each other: the rollback waits for the drop
    and refuses, naming the cause; the current day stays. Starts from: any current load.
    Leaves: day 2 current, day 1 dropped."""
    config, refs = days
    kept = config.replace(loading_keep_previous_load=3600.0)
    previous = run_load(kept, str(refs[1][0]), OPTIONS).load_id
    current = run_load(kept, str(refs[2][0]), OPTIONS).load_id
    held, go = threading.Event(), threading.Event()
    real = cleanup_module.drop_stores

    def slow_drop(config, load):
        held.set()
        assert go.wait(300)
        return real(config, load)

    monkeypatch.setattr(cleanup_module, "drop_stores", slow_drop)
    outcome: dict = {}

    def run(name, call):
        try:
            outcome[name] = call()
        except Exception as exc:  # noqa: BLE001 -- the test looks at it
            outcome[name] = exc

    cleaning = threading.Thread(target=run, args=("cleanup", lambda: cleanup(config)))
    cleaning.start()
    assert held.wait(300), "cleanup never dropped the previous day"
    rolling = threading.Thread(target=run, args=("rollback", lambda: rollback(config)))
    rolling.start()
    rolling.join(2)  # a rollback that does not wait for the drop is done by now
    go.set()
    cleaning.join(300)
    rolling.join(300)
    assert outcome["cleanup"] == [previous]
    assert isinstance(outcome["rollback"], LoadStateError), outcome["rollback"]
    assert "dropped by cleanup" in str(outcome["rollback"])
    with Catalog(config) as catalog:
        assert catalog.loads.current().load_id == current
        assert catalog.loads.load(previous).dropped is not None
    out = CliRunner().invoke(rollback_command, [], obj=config)
    assert out.exit_code == 1 and "dropped by cleanup" in out.output
    assert "Traceback" not in out.output


def test_a_cleanup_killed_mid_drop_leaves_a_day_rollback_refuses_and_the_next_drops(days):
    """Defect: cleanup dropped a day's stores, then marked it dropped; killed in between,
    its days lock died with its session and the day was not marked at all, so `debl rollback`
    made current a day whose stores were gone (every coordinator moved to it and failed). The
    day is marked dropping before its first store goes: the rollback refuses it, naming why and
    what to do; `debl status` shows it being dropped; the next cleanup finishes the drop.
    Starts from: any current load. Leaves: day 1 current, the day before dropped."""
    config, refs = days
    with Catalog(config) as catalog:
        previous = catalog.loads.current()
    current = run_load(config.replace(loading_keep_previous_load=3600.0), str(refs[1][0]),
                       OPTIONS).load_id
    killed = subprocess.run([sys.executable, "-m", "debl", "cleanup"], capture_output=True,
                            env=config.replace(fault_point="cleanup-dropped").child_env(),
                            text=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    assert _store_exists(config, previous) == {"mysql": False, "hbase": False, "hdfs": False}
    with pytest.raises(LoadStateError, match=rf"previous load {previous.load_id} can no longer "
                                             "be served: a cleanup began dropping its stores"):
        rollback(config)
    out = CliRunner().invoke(rollback_command, [], obj=config)
    assert out.exit_code == 1 and "Traceback" not in out.output, out.output
    assert "`debl cleanup` finishes the drop" in out.output and "debl load" in out.output
    with Catalog(config) as catalog:
        assert catalog.loads.current().load_id == current
        assert catalog.loads.previous() is None
    status = CliRunner().invoke(status_command, [], obj=config)
    assert f"dropping   load {previous.load_id}" in status.output, status.output
    assert cleanup(config) == [previous.load_id]
    with Catalog(config) as catalog:
        assert catalog.loads.load(previous.load_id).dropped is not None
        assert catalog.loads.being_dropped() == []
    with pytest.raises(LoadStateError, match="dropped by cleanup"):
        rollback(config)


def _held_hot_path(monkeypatch) -> threading.Event:
    """MySQL's hot path of the loads from now on waits until the returned event is set."""
    gate = threading.Event()
    real = hot_phase.load_hot

    def held(*args, **kwargs):
        assert gate.wait(300)
        return real(*args, **kwargs)

    monkeypatch.setattr(hot_phase, "load_hot", held)
    return gate


def _until(condition, seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)
    return condition()


def test_the_raw_reader_forgets_buckets_nobody_reads_any_more(days, monkeypatch):
    """Defect: a coordinator's raw reader kept the hot buckets after MySQL's take-over
    (their directory deleted) and the buckets of a day it left, and polled the NameNode for
    each of them every poll for the rest of the day. The raw route is off here, so no bucket is
    opened ahead and only the hot rows of partial answers (gen_HF does not run) open the hot
    buckets. Starts from: any current load. Leaves: day 1 current, day 2 dropped."""
    config, refs = days
    gate = _held_hot_path(monkeypatch)
    # the loads' own cleanup keeps the days; after the rollback, day 2's hot files stay
    kept = config.replace(loading_keep_previous_load=3600.0, loading_coordinator_ack_timeout=2.0)
    previous = None  # day 1's load, once day 2 is loading
    with Coordinator(config.replace(coordinator_raw_after=None)) as c:
        def hot_opened(load_id: str) -> list:
            return [b for b in c._raw.opened_buckets() if b.load_id == load_id and b.hot]

        for day in (1, 2):
            with LoadRun(kept, str(refs[day][0]), OPTIONS) as run:
                up = run.wait_up()
                assert _until(lambda: c.load_id == up.load_id)  # noqa: B023 -- called at once, in this iteration
                for key in sorted(refs[day][1].keys())[::40]:  # every range: the hot ones too
                    assert c.query(*key, timeout=0, partial=True).load_id == up.load_id
                assert hot_opened(up.load_id), "no query read the hot buckets"
                if day == 2:  # yesterday again: today's hot buckets are nobody's any more
                    assert rollback(config)[1] == previous
                    assert _until(lambda: c.load_id == previous)  # noqa: B023 -- called at once, in this iteration
                    assert _until(lambda: not c._raw.opened_buckets()), c._raw.opened_buckets()
                gate.set()
                run.finish()  # MySQL takes the hot keys over
            if day == 1:
                gone = _until(lambda: not hot_opened(up.load_id))  # noqa: B023 -- called at once, in this iteration
                assert gone, c._raw.opened_buckets()
                previous = up.load_id
                gate.clear()
    assert cleanup(config, wait=True) == [up.load_id]


def test_a_run_of_yesterday_never_writes_into_today(days, spark, monkeypatch):
    """gen_HF converts a bucket of the current day; the next day becomes current and the old
    day's stores are dropped while the run writes its HFiles. Its bulk load must neither
    re-create the old day's table nor touch the new day's."""
    config, refs = days
    with Catalog(config) as catalog:
        yesterday = catalog.loads.current()
    held, go = threading.Event(), threading.Event()
    real = gen_hf_module.bulk_load

    def slow_bulk_load(*args, **kwargs):
        held.set()
        assert go.wait(300)
        return real(*args, **kwargs)

    monkeypatch.setattr(gen_hf_module, "bulk_load", slow_bulk_load)
    result: dict = {}
    with GenHF(config.replace(gen_hf_run_buckets=1)) as service:
        run = threading.Thread(target=lambda: result.update(run=service.run_once()))
        run.start()
        assert held.wait(300), "the run never reached its bulk load"
        today = run_load(config, str(refs[1][0]), OPTIONS)  # current now; yesterday dropped
        with Catalog(config) as catalog:
            assert catalog.loads.load(yesterday.load_id).dropped is not None
        go.set()
        run.join(300)
    assert result["run"] is None  # the run ended: its load is not current, its stores dropped
    assert _store_exists(config, yesterday)["hbase"] is False  # never re-created
    with Catalog(config) as catalog:
        assert {j.state for j in catalog.jobs.jobs(today.load_id)} == {"pending"}
    with Catalog(config) as catalog:
        ns = catalog.loads.load(today.load_id).namespace
    with HBaseStore(config, ns.hbase_table) as hbase:
        assert not hbase.table_exists() or hbase.count() == 0


def test_the_new_days_first_runs_follow_yesterdays_queries(days, spark):
    """At the new day's uptime nobody has asked for its buckets: gen_HF starts with the key
    ranges that yesterday's queries asked most, which bucket order would convert last."""
    config, refs = days
    with Catalog(config) as catalog:
        yesterday = catalog.loads.current()
        buckets = catalog.index.buckets(yesterday.load_id)
    last = max(buckets, key=lambda b: b.b_index)
    keys = [k for k in sorted(refs[1][1].keys()) if last.c_lo <= k[0] <= last.c_hi][:30]
    with Coordinator(config.replace(coordinator_raw_after=0.0)) as c:
        for key in keys:
            c.query(*key, timeout=60)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        with Catalog(config) as catalog:
            if catalog.serving.asks(yesterday.load_id).get(last.b_index, 0) >= len(keys):
                break
        time.sleep(0.1)
    day2 = run_load(config.replace(loading_keep_previous_load=3600.0), str(refs[2][0]), OPTIONS)
    with GenHF(config.replace(gen_hf_run_buckets=1)) as service:
        first = service.run_once()
    with Catalog(config) as catalog:
        new_buckets = catalog.index.buckets(day2.load_id)
    assert first.buckets == (max(b.b_index for b in new_buckets
                                 if b.c_lo <= keys[0][0] <= b.c_hi),)
