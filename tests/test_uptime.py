"""Up when the last byte lands, on the real stack: the load is up once every chunk is
bucketed, the hot keys answered from the hot files' buckets until MySQL takes them over; a load
killed after its uptime but before the take-over resumes to it; a hot path that fails in MySQL
after uptime leaves the service answering exactly from the raw files and says what failed
(docs/LOADING.md, "Uptime without MySQL"). Queries across the take-over itself:
tests/test_routes_exact.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from coordinator import Coordinator
from debl.catalog import Catalog
from debl.errors import ServiceError
from debl.mysql import connect
from loaders import hot_phase
from loaders.cleanup import drop_every_load
from loaders.load import LoadOptions, LoadRun, run_load
from loaders.mysql_bulk import load_hot
from tests.dataset import make_dataset, reference_store

pytestmark = pytest.mark.stack


@pytest.fixture(scope="module")
def data(stack_config, tmp_path_factory):
    """An input with two hot files of five, in a database of its own."""
    config = stack_config.replace(mysql_database="debl_uptimetest", coordinator_poll_interval=0.2,
                                  loading_keep_previous_load=0.0)
    directory = tmp_path_factory.mktemp("uptime")
    make_dataset(directory, max_id=10001, files=5, seed=31, bad_lines=4)
    files = sorted(directory.iterdir(), key=lambda p: p.stat().st_mtime)
    hot = {p.name for p in files[-2:]}
    hot_bytes = sum(p.stat().st_size for p in files[-2:])
    Catalog(config, replace_older=True).close()
    drop_every_load(config)
    yield config, directory, LoadOptions(hot_bytes=hot_bytes, chunk_size=4 << 20,
                                         bucket_width=2500), reference_store(directory, hot)
    drop_every_load(config)


def _answers_exact(config, reference, step: int = 25) -> set[str]:
    """Every sampled key answered as the reference says; returns where the hot rows came
    from."""
    sides = set()
    with Coordinator(config) as c:
        for key in sorted(reference.keys())[::step]:
            answer = c.query(*key, timeout=120)
            assert answer.links == reference.get_link_list(*key), (key, answer.route)
            sides.add(answer.hot.value)
    return sides


def test_a_load_killed_after_uptime_before_mysql_took_over_resumes_to_the_take_over(data, spark,
                                                                                    tmp_path):
    """kill -9 of `debl load` while it is up and MySQL's hot path runs (held there by
    tests/held_hot_load.py until the kill), then --resume, then exact answers."""
    config, directory, options, reference = data
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.held_hot_load", str(tmp_path / "never"), "load",
         str(directory), "--hot-bytes", str(options.hot_bytes), "--chunk-size", "4MiB",
         "--bucket-width", str(options.bucket_width)],
        env=config.child_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        load = None
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            with Catalog(config) as catalog:
                current = catalog.loads.current()
            if current is not None and current.hot_state == "loading":
                load = current
                break
            time.sleep(0.02)
        assert load is not None, "the load was never up with MySQL still loading"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    with Catalog(config) as catalog:
        killed = catalog.loads.load(load.load_id)
    assert (killed.state, killed.hot_state) == ("up", "loading")
    # Up, and exact: the hot rows from the hot files' buckets.
    assert _answers_exact(config, reference) <= {"raw", "none"}
    summary = run_load(config, str(directory), options, resume=load.load_id)
    assert summary.load_id == load.load_id and summary.taken_over_s is not None
    with Catalog(config) as catalog:
        resumed = catalog.loads.load(load.load_id)
    assert resumed.hot_in_mysql and resumed.hot_rows > 0
    assert "mysql" in _answers_exact(config, reference)


def test_a_hot_path_failing_in_mysql_after_uptime_leaves_exact_raw_answers(data, spark):
    """The hot path is held until the load is up, then MySQL refuses its link table (a view
    holds the name): the load stays up and exact from the hot buckets, says what failed,
    and a resume hands the keys to MySQL."""
    config, directory, options, reference = data
    go = threading.Event()

    def held(*args, **kwargs):
        assert go.wait(300)
        return load_hot(*args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(hot_phase, "load_hot", held)
        with LoadRun(config, str(directory), options) as run:
            up = run.wait_up()
            with Catalog(config) as catalog:
                table = catalog.loads.load(up.load_id).namespace.link_table
            conn = connect(config)
            try:
                with conn.cursor() as cur:
                    cur.execute(f"CREATE VIEW `{table}` AS SELECT 1 AS x")
                go.set()
                with pytest.raises(ServiceError) as failed:
                    run.finish()
            finally:
                with conn.cursor() as cur:
                    cur.execute(f"DROP VIEW IF EXISTS `{table}`")
                conn.close()
    notes = "\n".join(getattr(failed.value, "__notes__", ()))
    assert f"--resume {up.load_id}" in notes and "hot files' buckets" in notes
    with Catalog(config) as catalog:
        load = catalog.loads.load(up.load_id)
    assert (load.state, load.hot_state) == ("up", "failed") and load.error
    assert _answers_exact(config, reference) <= {"raw", "none"}
    run_load(config, str(directory), options, resume=up.load_id)
    assert "mysql" in _answers_exact(config, reference)


def test_a_hot_set_without_a_byte_is_handed_to_mysql_all_the_same(data, spark, tmp_path):
    """The newest file is empty and hot (by its mtime): no hot chunk is cut from it. The hot
    path started only once the copy had handed hot chunks over, so it never started and the
    load stayed with its hot keys on their way to MySQL for good (``hot_state`` loading, no
    take-over). It starts at uptime as for any hot set: MySQL takes over no row, and the
    answers are exact (docs/LOADING.md, "How a load runs": the hot path's one start)."""
    config = data[0]
    directory = tmp_path / "input"
    make_dataset(directory, max_id=2001, files=2, seed=37, bad_lines=0)
    empty = directory / "empty.tsv"
    empty.write_bytes(b"")
    newest = max(p.stat().st_mtime for p in directory.iterdir()) + 10
    os.utime(empty, (newest, newest))
    summary = run_load(config, str(directory), LoadOptions(hot_since=newest, chunk_size=4 << 20,
                                                           bucket_width=500))
    assert (summary.hot_files, summary.hot_bytes) == (1, 0)
    assert summary.taken_over_s is not None
    with Catalog(config) as catalog:
        load = catalog.loads.load(summary.load_id)
    assert (load.state, load.hot_state, load.hot_rows) == ("up", "mysql", 0)
    assert _answers_exact(config, reference_store(directory, {empty.name}), step=10)
