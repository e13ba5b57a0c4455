"""Concurrency on the real stack, with real processes (and the defects found by
reading the code): two `debl load`s into one dataset, two `debl gen-hf`s, a load killed between
the end of its hot phase and the record of its key range, and a new load under a running
coordinator that is answering queries."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from coordinator import Coordinator
from debl.catalog import Catalog
from debl.errors import DeblError
from debl.mysql import connect
from loaders.gen_hf import LOCK as GEN_HF_LOCK
from loaders.load import LOAD_LOCK, LoadOptions, run_load
from tests.dataset import make_dataset, reference_store
from tests.hostile_http import HostileSource

pytestmark = [pytest.mark.stack, pytest.mark.long]  # long: scheduled first (tests/conftest.py)

LT = 7


def _debl(*args: str) -> list[str]:
    return [sys.executable, "-m", "debl", *args]


def _env(config) -> dict[str, str]:
    return {**os.environ, "DEBL_STATE_DIR": str(config.state_dir)}


def _sql(config, statement: str, args=None) -> list[tuple]:
    conn = connect(config)
    try:
        with conn.cursor() as cur:
            cur.execute(statement, args)
            return list(cur.fetchall())
    finally:
        conn.close()


def _until(predicate, what: str, timeout: float = 180.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"never happened: {what}")


def _lock_holder(config, name: str):
    return _sql(config, "SELECT IS_USED_LOCK(%s)", (f"{name}.{config.mysql.database}",))[0][0]


def _new_running_load(config, before: str | None):
    with Catalog(config) as catalog:
        load = catalog.loads.load()
    return load.load_id if load and load.state == "running" and load.load_id != before else None


def _latest(config):
    with Catalog(config) as catalog:
        return catalog.loads.load()


def hot_file(directory: Path, lines: int = 3000) -> Path:
    path = directory / "hot.tsv"
    path.write_bytes(b"".join(b"%d\t%d\t%d\t1\tdata-%d\t%d\t%d\n"
                              % (i, LT, i + 1, i, 1_700_000_000 + i, i)
                              for i in range(1, lines + 1)))
    return path


def test_a_second_load_into_the_same_dataset_is_refused_while_the_first_runs(stack_config,
                                                                             tmp_path):
    hot_file(tmp_path)
    before = (_latest(stack_config) or None) and _latest(stack_config).load_id
    with HostileSource(tmp_path) as server:
        gate = server.hold("hot.tsv")  # the first load's hot path waits for it
        first = subprocess.Popen(_debl("load", server.url, "--hot-bytes", "1GB", "--json"),
                                 env=_env(stack_config), stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE)
        try:
            load_id = _until(lambda: _new_running_load(stack_config, before), "the first load")
            assert _lock_holder(stack_config, LOAD_LOCK) is not None
            second = subprocess.run(_debl("load", str(tmp_path), "--hot-bytes", "1GB"),
                                    env=_env(stack_config), capture_output=True, text=True)
            assert second.returncode == 1
            assert "another `debl load` is running on this dataset" in second.stderr
            assert "Traceback" not in second.stderr
            assert _latest(stack_config).load_id == load_id  # the second recorded nothing
            gate.set()
            out, err = first.communicate(timeout=300)
        finally:
            if first.poll() is None:
                first.kill()
                first.wait()
    assert first.returncode == 0, err.decode()[-2000:]
    assert _latest(stack_config).load_id == load_id and _latest(stack_config).state == "up"
    assert _lock_holder(stack_config, LOAD_LOCK) is None  # released at the end


def test_a_load_that_lost_its_lock_stops_and_never_becomes_current(stack_config, tmp_path):
    """Defect: a load never checked its lock again. Its session gone (a MySQL restart; here
    a KILL of that session alone), a second `debl load` started, its end's cleanup dropped the
    first load's stores while it still ran, and the first then became current, tables gone.
    Now the first stops with a clear error before it would become current. The first is held
    after its chunk's dist_ch (tests/held_load.py) while the second runs."""
    source = tmp_path / "src"
    source.mkdir()
    hot_file(source)
    gate = tmp_path / "go"
    before = (_latest(stack_config) or None) and _latest(stack_config).load_id
    first = subprocess.Popen([sys.executable, "-m", "tests.held_load", "dist_ch-done", str(gate),
                              "load", str(source), "--hot-bytes", "1GB", "--json"],
                             env=_env(stack_config), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        load_id = _until(lambda: _new_running_load(stack_config, before), "the first load")
        holder = _until(lambda: _lock_holder(stack_config, LOAD_LOCK), "the first's lock")
        _until(lambda: _phase_ended(stack_config, load_id, "copy"), "the first's copy")
        _sql(stack_config, f"KILL {int(holder)}")  # its session gone: the lock with it
        second = subprocess.run(_debl("load", str(source), "--hot-bytes", "1GB"),
                                env=_env(stack_config), capture_output=True, text=True)
        assert second.returncode == 0, second.stderr[-2000:]
        gate.touch()
        out, err = first.communicate(timeout=600)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert first.returncode == 1, (out[-2000:], err[-2000:])
    assert f"load {load_id} lost its MySQL lock {LOAD_LOCK}." in err, err[-2000:]
    assert "Traceback" not in err
    with Catalog(stack_config) as catalog:
        current, mine = catalog.loads.current(), catalog.loads.load(load_id)
    assert current.load_id != load_id and current.started > mine.started  # the second's
    assert mine.state == "failed" and mine.uptime is None


def _phase_ended(config, load_id: str, phase: str) -> bool:
    with Catalog(config) as catalog:
        return catalog.phases.phase_ended(load_id, phase)


def test_two_gen_hf_at_once_never_convert_a_bucket_twice(stack_config, spark, tmp_path):
    make_dataset(tmp_path, max_id=2001, files=3, bad_lines=0)
    # Four buckets: enough for the second gen-hf to come while the first converts.
    run_load(stack_config, str(tmp_path), LoadOptions(approach="debl-cold", bucket_width=500))
    first = subprocess.Popen(_debl("gen-hf", "--until-complete"), env=_env(stack_config),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _until(lambda: _lock_holder(stack_config, GEN_HF_LOCK), "the first gen-hf's lock")
        second = subprocess.run(_debl("gen-hf", "--until-complete"), env=_env(stack_config),
                                capture_output=True, text=True)
        out, err = first.communicate(timeout=600)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert second.returncode == 1
    assert "another gen_HF is running on this dataset" in second.stderr
    assert "Traceback" not in second.stderr
    assert first.returncode == 0, err[-2000:]
    with Catalog(stack_config) as catalog:
        jobs = catalog.jobs.jobs(catalog.loads.current().load_id)
    assert jobs and {j.state for j in jobs} == {"loaded"}
    assert [j.attempts for j in jobs] == [1] * len(jobs)  # each converted once


def test_a_kill_between_the_hot_phase_end_and_its_key_range_loses_no_mysql_row(stack_config,
                                                                               tmp_path):
    """The hot path ends its phase and records hot_k_lo/hot_k_hi/hot_rows; the load is killed
    in between (held there by a lock on its debl_loads row); its resume must not skip the hot
    part with no key range recorded (the coordinator would never ask MySQL)."""
    hot_file(tmp_path)
    before = (_latest(stack_config) or None) and _latest(stack_config).load_id
    with HostileSource(tmp_path) as server:
        gate = server.hold("hot.tsv")
        proc = subprocess.Popen(_debl("load", server.url, "--hot-bytes", "1GB"),
                                env=_env(stack_config), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        blocker = connect(stack_config, autocommit=False)
        try:
            load_id = _until(lambda: _new_running_load(stack_config, before), "the load")
            with blocker.cursor() as cur:
                cur.execute("SELECT * FROM debl_loads WHERE load_id = %s FOR UPDATE", (load_id,))
            gate.set()
            # DeBL's own sessions are visible to its user without the PROCESS privilege; those
            # of this worker's database only (the other workers' loads record theirs too).
            _until(lambda: _sql(stack_config, "SELECT COUNT(*) FROM information_schema.PROCESSLIST"
                                              " WHERE COMMAND = 'Query' AND DB = DATABASE() AND "
                                              "INFO LIKE 'UPDATE debl_loads%%'")[0][0],
                   "the load waiting to record its hot key range")
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            blocker.rollback()
            blocker.close()
        summary = run_load(stack_config, server.url, LoadOptions(hot_bytes=1 << 30),
                           resume=load_id)
    assert summary.hot_rows == 3000
    load = _latest(stack_config)
    assert (load.state, load.hot_rows, load.hot_k_lo, load.hot_k_hi) == ("up", 3000, 1, 3000)
    reference = reference_store(tmp_path, {"hot.tsv"})
    with Coordinator(stack_config) as c:
        for key in sorted(reference.keys())[::50]:
            assert c.get_link_list(*key, timeout=60) == reference.get_link_list(*key)


def test_a_new_load_under_a_running_coordinator_never_gets_empty_answers(stack_config, spark,
                                                                        tmp_path):
    """A coordinator serves load L1 and answers queries all along while L2 (the same data)
    loads beside it: every answer it gives equals the reference, L1 answers until L2 is up and
    L2 after. Its poll interval is long (3 s), and L2's hot file is held by the source for a
    while: a load that touched L1's stores would have it answer empty lists."""
    hot = hot_file(tmp_path, 1500)  # ids 1..1500: no cold row can have them
    (tmp_path / "cold.tsv").write_bytes(b"".join(
        b"%d\t%d\t%d\t1\tcold-%d\t%d\t1\n" % (i, LT, i, i, 1_600_000_000 + i)
        for i in range(1501, 3001)))
    os.utime(tmp_path / "cold.tsv", (1, 1_600_000_000))  # older: the cold file
    options = LoadOptions(hot_bytes=hot.stat().st_size, bucket_width=500)
    reference = reference_store(tmp_path, {"hot.tsv"})
    keys = [k for k in sorted(reference.keys()) if k[0] <= 1500]
    wrong, errors, answered = [], [], []
    stop = threading.Event()
    with HostileSource(tmp_path) as server:
        first = run_load(stack_config, server.url, options)
        with Coordinator(stack_config.replace(coordinator_poll_interval=3.0)) as c:
            def ask() -> None:
                i = 0
                while not stop.is_set():
                    key = keys[i % len(keys)]
                    i += 1
                    try:
                        got = c.query(*key, timeout=120)
                    except DeblError as exc:  # a clear error is allowed; a wrong answer is not
                        errors.append(str(exc))
                        continue
                    if got.links != reference.get_link_list(*key):
                        wrong.append((key, got.route, len(got.links)))
                    answered.append((time.time(), got.load_id))

            asker = threading.Thread(target=ask, daemon=True)
            asker.start()
            _until(lambda: len(answered) > 20, "answers from the first load")
            gate = server.hold("hot.tsv")
            loading: dict = {}
            loader = threading.Thread(target=lambda: loading.update(
                summary=run_load(stack_config, server.url, options)), daemon=True)
            loader.start()
            second = _until(lambda: _new_running_load(stack_config, first.load_id),
                            "the second load")
            time.sleep(1.0)  # the second load held by its source
            assert c.load_id == first.load_id
            gate.set()
            loader.join(300)
            assert loading["summary"].load_id == second
            _until(lambda: c.load_id == second, "the coordinator serving the second load")
            _until(lambda: sum(1 for _, served in answered if served == second) > 20,
                   "answers from the second load")
            stop.set()
            asker.join(150)
    assert wrong == [] and errors == []
    with Catalog(stack_config) as catalog:
        started = catalog.loads.load(second).started
        uptime = catalog.loads.load(second).uptime
    # Queries were answered from the first load after the second one began, and from the
    # second from the coordinator's first poll after its uptime (3 s here, and slack).
    assert any(t >= started and served == first.load_id for t, served in answered)
    assert all(t < uptime + 3.0 + 2.0 for t, served in answered if served == first.load_id)


def _phase_started(config, load_id: str, phase: str) -> bool:
    with Catalog(config) as catalog:
        return any(p.phase == phase for p in catalog.phases.phases(load_id))
