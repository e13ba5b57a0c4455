"""The offline phase end to end on the real stack: hot rows in MySQL, the bucket index, rejects,
the copy/dist_ch pipeline, resume after a kill, and an HTTP source."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from debl.bench.source_server import make_server
from debl.format.bucket_map import BucketMap
from debl.catalog import Catalog
from debl.format.link import Link
from debl.mysql import connect
from loaders.load import LoadOptions, reject_path, run_load
from loaders.rejects import read_rejects
from loaders.source import LocalSource
from loaders.split import split_files
from tests.dataset import all_rows, expected_buckets, make_dataset, reference_store

pytestmark = pytest.mark.stack

HOT_BYTES = 600_000
OPTIONS = LoadOptions(hot_bytes=HOT_BYTES, chunk_size=64 * 1024, bucket_width=2000)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    directory = tmp_path_factory.mktemp("links")
    summary = make_dataset(directory)
    split = split_files(LocalSource(directory).list(), hot_bytes=HOT_BYTES)
    assert split.hot and split.cold
    return directory, summary, {f.name for f in split.hot}, {f.name for f in split.cold}


def snapshot(config) -> dict:
    """What the current load leaves behind: bucket index, job rows, MySQL rows."""
    with Catalog(config) as catalog:
        load = catalog.loads.current()
        assert load is not None
        buckets = {b.b_index: (b.k_lo, b.k_hi, b.rows, b.checksum, b.c_lo, b.c_hi)
                   for b in catalog.index.buckets(load.load_id)}
        jobs = catalog.jobs.job_states(load.load_id)
    assert load.hot_in_mysql  # the load ended with MySQL holding its hot keys
    conn = connect(config)
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT id1, link_type, id2, visibility, data, time, version "
                        f"FROM {load.namespace.link_table}")
            mysql_rows = {Link(*row) for row in cur.fetchall()}
    finally:
        conn.close()
    return {"buckets": buckets, "jobs": jobs, "mysql": mysql_rows}


@pytest.fixture(scope="module")
def loaded(stack_config, spark, dataset):
    """The data set loaded from an HTTP source capped at 0.25 MB/s: the copy is the slow
    stage, as over the paper's 100 Mbit/s wire with a large input."""
    directory, _, _, _ = dataset
    server = make_server(directory, port=0, rate_mb_s=0.25)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        summary = run_load(stack_config, url, OPTIONS)
    finally:
        server.shutdown()
        server.server_close()
    return summary, snapshot(stack_config)


def test_mysql_holds_exactly_the_merged_hot_rows(dataset, loaded):
    directory, _, hot, _ = dataset
    summary, state = loaded
    expected = all_rows(reference_store(directory, hot, only="hot"))
    assert state["mysql"] == expected
    assert summary.hot_rows == len(expected)


def test_bucket_index_matches_buckets_computed_from_the_cold_files(dataset, loaded):
    directory, _, _, cold = dataset
    summary, state = loaded
    assert state["buckets"] == expected_buckets(directory, cold,
                                                BucketMap.fixed(OPTIONS.bucket_width))
    assert set(state["jobs"].values()) == {"pending"}
    assert summary.cold_rows == sum(b[2] for b in state["buckets"].values())


def test_rejects_are_exactly_the_bad_lines(stack_config, dataset, loaded):
    _, generated, _, _ = dataset
    summary, _ = loaded
    rejected = {(file, line_no) for file, line_no, _, _ in
                read_rejects(reject_path(stack_config, summary.load_id))}
    assert rejected == {(b.file, b.line_no) for b in generated.bad_lines}
    assert summary.rejects == len(generated.bad_lines)


def test_copy_and_dist_ch_overlap(stack_config, loaded):
    summary, _ = loaded
    assert summary.chunks >= 4
    with Catalog(stack_config) as catalog:
        phases = catalog.phases.phases(summary.load_id)
    copy = {p.item: (p.started, p.ended) for p in phases if p.phase == "copy"}
    dist = {p.item: (p.started, p.ended) for p in phases if p.phase == "dist_ch"}
    assert set(copy) == set(dist) and len(dist) == summary.chunks
    # The copy hands chunks over through a queue of two: it cannot copy chunk 3 before dist_ch
    # has taken chunk 0, so bucketing starts before the last copy ends, however fast either is.
    first_dist = min(started for started, _ in dist.values())
    last_copy = max(ended for _, ended in copy.values())
    assert first_dist < last_copy, "dist_ch waited for the whole copy: no pipeline"


def test_killed_load_resumes_to_the_same_state(stack_config, dataset, loaded, tmp_path):
    directory, _, _, _ = dataset
    _, uninterrupted = loaded
    env = {**os.environ, "DEBL_STATE_DIR": str(stack_config.state_dir)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "debl", "load", str(directory), "--hot-bytes", str(HOT_BYTES),
         "--chunk-size", str(OPTIONS.chunk_size), "--bucket-width", str(OPTIONS.bucket_width),
         "--json"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        load_id = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with Catalog(stack_config) as catalog:
                load = catalog.loads.load()
                if load and load.state == "running" and load.load_id != loaded[0].load_id:
                    load_id = load.load_id
                    done = [c for c in catalog.index.chunks(load_id) if c.state == "bucketed"]
                    if len(done) >= 2:
                        break
            time.sleep(0.1)
        assert load_id, "the load did not start"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    with Catalog(stack_config) as catalog:
        bucketed_before = [c.chunk_no for c in catalog.index.chunks(load_id)
                           if c.state == "bucketed"]
        assert catalog.loads.load(load_id).state == "running"  # killed, never up
    resumed = run_load(stack_config, str(directory), OPTIONS, resume=load_id)
    assert resumed.load_id == load_id
    assert snapshot(stack_config) == uninterrupted
    with Catalog(stack_config) as catalog:
        phases = catalog.phases.phases(load_id)
    # A chunk bucketed before the kill was not bucketed again.
    for chunk_no in bucketed_before:
        runs = [p for p in phases if p.phase == "dist_ch" and p.item == f"{chunk_no:05d}"]
        assert len(runs) == 1 and runs[0].ended is not None
    rejected = read_rejects(reject_path(stack_config, load_id))
    assert len(rejected) == len(set((f, n) for f, n, _, _ in rejected)) == resumed.rejects


def test_local_source_loads_the_same(stack_config, dataset, loaded):
    directory, _, _, _ = dataset
    _, from_http = loaded
    run_load(stack_config, str(directory), OPTIONS)
    assert snapshot(stack_config) == from_http


def test_max_bad_fails_the_load_with_a_clear_message(stack_config, dataset):
    from debl.errors import BadInputError

    directory, generated, _, _ = dataset
    with Catalog(stack_config) as catalog:
        current = catalog.loads.current()
    with pytest.raises(BadInputError, match="bad lines"):
        run_load(stack_config, str(directory),
                 LoadOptions(hot_bytes=HOT_BYTES, chunk_size=64 * 1024, bucket_width=2000,
                             max_bad=2))
    with Catalog(stack_config) as catalog:
        assert catalog.loads.load().state == "failed"
        assert catalog.loads.current() == current  # the current day serves on


def test_missing_source_is_a_clear_error(stack_config, tmp_path):
    from debl.errors import SourceError

    with pytest.raises(SourceError, match="not a directory"):
        run_load(stack_config, str(tmp_path / "nope"), OPTIONS)
