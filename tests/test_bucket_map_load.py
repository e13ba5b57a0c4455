"""Buckets cut for real ids, end to end on the real stack (docs/LOADING.md, "Bucket boundaries";
docs/COORDINATOR.md, "Cold coverage"):

- clustered sparse ids (1.., 10^6.., 2^40..) loaded over HTTP (the sample reads ranges) land in
  buckets of about equal bytes, cut at sampled split points recorded with the load; the bucket
  index equals the buckets computed from the raw files; ``debl status --buckets --json`` lists
  them; the HBase table is pre-split at their boundaries; after gen_HF every answer equals the
  in-memory reference, including id1 = 2^63-1;
- in a range dump (``--layout ranges``, with updates and hidden rows), ids of the hot files lie
  outside every bucket's cold span and are answered by MySQL at once, before any gen_HF run,
  while a cold id is answered by the raw route, or with the paper's buffering waits for its
  bucket, steers gen_HF to it by its demand and is released with the reference's answer;
- a killed load resumes with the map it recorded, not a new one.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from coordinator import Coordinator
from debl.bench.source_server import make_server
from debl.format.bucket_map import MAX_ID
from debl.catalog import Catalog
from debl.commands.status import status as status_command
from debl.format.link import Link
from debl.workload.generator import generate
from debl.workload.spec import GenerateSpec
from loaders.gen_hf import GenHF
from loaders.hbase_bulk import bucket_split_keys, split_keys
from loaders.load import LoadOptions, run_load
from loaders.sampling import sample_bucket_map
from loaders.source import LocalSource
from loaders.split import split_files
from tests.dataset import expected_buckets, raw_rows, reference_store

pytestmark = pytest.mark.stack

LT = 123456789
TARGET = 96 * 1024
CLUSTERED = GenerateSpec(max_id=12001, files=5, days=5, seed=21, ids="clusters", max_degree=40,
                         update_share=0.2, hidden_share=0.3, bad_lines=3)
T = 1_767_000_000_000
RANGES = GenerateSpec(max_id=9001, files=5, days=5, seed=31, max_degree=30, update_share=0.2,
                      hidden_share=0.3, layout="ranges")


def namespace(config, name: str):
    return replace(config, mysql_database=f"debl_{name}", mysql_link_table=f"{name}_links",
                   hbase_table=f"{name}_links", hdfs_root=f"/debl-{name}",
                   coordinator_poll_interval=0.2, gen_hf_run_buckets=4,
                   loading_bucket_target_bytes=TARGET, loading_sample_bytes=1024)


def append_keeping_mtime(path: Path, lines: list[Link]) -> None:
    st = path.stat()
    with open(path, "ab") as f:
        f.write(b"".join(link.to_line() for link in lines))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def clustered_dataset(directory: Path) -> Path:
    """CLUSTERED, plus id1 = 2^63-1: two keys in the oldest (cold) file, a newer version of one
    of them (hidden) and a third key in the newest (hot) file."""
    generate(directory, CLUSTERED, overwrite=True)
    files = sorted(directory.glob("links-*.tsv"))
    append_keeping_mtime(files[0], [Link(MAX_ID, LT, 5, 1, b"cold", T, 0),
                                    Link(MAX_ID, LT, 6, 1, b"cold", T, 0)])
    append_keeping_mtime(files[-1], [Link(MAX_ID, LT, 5, 0, b"hot", T + 1, 1),
                                     Link(MAX_ID, LT, 7, 1, b"hot", T + 2, 0)])
    return directory


def served(directory: Path):
    server = make_server(directory, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


@pytest.fixture(scope="module")
def clustered(stack_config, spark, tmp_path_factory):
    config = namespace(stack_config, "scaletest")
    directory = clustered_dataset(tmp_path_factory.mktemp("clustered"))
    hot_bytes = 300_000
    split = split_files(LocalSource(directory).list(), hot_bytes=hot_bytes)
    assert len(split.hot) == 1
    server, url = served(directory)
    try:
        summary = run_load(config, url, LoadOptions(hot_bytes=hot_bytes, chunk_size=128 * 1024))
    finally:
        server.shutdown()
        server.server_close()
    hot = {f.name for f in split.hot}
    cold = {f.name for f in split.cold}
    return config, directory, summary, hot, cold


def test_clustered_ids_land_in_even_buckets_at_recorded_split_points(clustered):
    config, directory, summary, _, cold = clustered
    with Catalog(config) as catalog:
        bucket_map = catalog.loads.load(summary.load_id).bucket_map
        buckets = catalog.index.buckets(summary.load_id)
    assert bucket_map is not None and not bucket_map.width
    assert summary.bucket_map == bucket_map.to_dict()
    assert {b.b_index: (b.k_lo, b.k_hi, b.rows, b.checksum, b.c_lo, b.c_hi) for b in buckets} \
        == expected_buckets(directory, cold, bucket_map)
    sizes = [b.bytes for b in buckets]
    assert len(sizes) >= 6
    assert max(sizes) / (sum(sizes) / len(sizes)) <= 1.5, sizes
    # Cut inside every cluster, not one bucket per cluster.
    starts = [b.k_lo for b in buckets]
    for lo, hi in ((1, 10**6), (10**6, 1 << 40), (1 << 40, MAX_ID)):
        assert sum(lo <= s < hi for s in starts) >= 2, starts
    assert buckets[-1].k_hi == MAX_ID and buckets[-1].c_hi == MAX_ID

    result = CliRunner().invoke(status_command, ["--buckets", "--json"], obj=config)
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["load"]["bucket_map"] == {"kind": "splits", "width": None,
                                            "buckets": bucket_map.count,
                                            "splits": list(bucket_map.splits)}
    listed = report["buckets"]["list"]
    assert [(e["b_index"], e["k_lo"], e["k_hi"], e["rows"], e["bytes"], e["state"])
            for e in listed] == [(b.b_index, b.k_lo, b.k_hi, b.rows, b.bytes, "pending")
                                 for b in buckets]


def test_converted_buckets_answer_as_the_reference_even_at_2_63_minus_1(clustered, spark):
    config, directory, summary, hot, _ = clustered
    with GenHF(config) as gen_hf:
        gen_hf.serve(until_complete=True)
    with Catalog(config) as catalog:
        load = catalog.loads.current()
        bucket_map = load.bucket_map
        assert set(catalog.jobs.job_states(load.load_id).values()) == {"loaded"}
        boundaries = bucket_split_keys(bucket_map,
                                       [b.b_index for b in catalog.index.buckets(load.load_id)])
    # pre-split at the bucket boundaries
    assert split_keys(spark, config, load.namespace.hbase_table) == boundaries

    reference = reference_store(directory, hot)
    keys = sorted(reference.keys())
    with Coordinator(config) as coordinator:
        for key in keys[::3] + [(MAX_ID, LT)]:
            assert coordinator.get_link_list(*key) == reference.get_link_list(*key), key
        top = coordinator.query(MAX_ID, LT)
    assert top.route == "merged" and top.bucket == bucket_map.bucket_of(MAX_ID)
    assert [(link.id2, link.data) for link in top.links] == [(7, b"hot"), (6, b"cold")]


@pytest.fixture(scope="module")
def range_dump(stack_config, spark, tmp_path_factory):
    """A table dump by key range (``debl generate --layout ranges``), with updates and hidden
    rows: each file a contiguous id1 range, the newest ids in the newest files, the two newest
    of which are hot."""
    config = namespace(stack_config, "scaleranges")
    directory = tmp_path_factory.mktemp("ranges")
    generate(directory, RANGES)
    listed = LocalSource(directory).list()
    hot_since = sorted(f.mtime for f in listed)[-2]
    summary = run_load(config, str(directory),
                       LoadOptions(hot_since=hot_since, chunk_size=64 * 1024))
    hot = {f.name for f in split_files(listed, hot_since=hot_since).hot}
    assert len(hot) == 2
    return config, directory, summary, hot, reference_store(directory, hot)


def test_hot_ids_outside_every_cold_span_are_answered_by_mysql_before_any_conversion(range_dump):
    config, directory, _, hot, reference = range_dump
    with Catalog(config) as catalog:
        load = catalog.loads.current()
        buckets = catalog.index.buckets(load.load_id)
        bucket_map = load.bucket_map
        runs = sum(state != "pending" for state in catalog.jobs.job_states(load.load_id).values())
    assert runs == 0 and len(buckets) >= 3  # nothing converted
    hot_ids = {link.id1 for _, name, _, link, _ in raw_rows(directory) if name in hot}
    assert max(b.c_hi for b in buckets) < min(hot_ids)
    hot_keys = [k for k in sorted(reference.keys()) if k[0] in hot_ids]
    hot_rows = [link for _, name, _, link, _ in raw_rows(directory) if name in hot]
    assert any(link.visibility == 0 for link in hot_rows), "the hot files hold no hidden row"
    assert len({link.key for link in hot_rows}) < len(hot_rows), "nor any update"
    # The ids are inside the last bucket's key range: only its cold span tells them apart.
    assert bucket_map.bucket_of(hot_keys[0][0]) == buckets[-1].b_index
    with Coordinator(config) as coordinator:
        for key in hot_keys[::3]:
            answer = coordinator.query(*key, timeout=5)
            assert (answer.route, answer.complete, answer.waited_s, answer.bucket) == \
                ("mysql", True, 0.0, None), key
            assert answer.links == reference.get_link_list(*key)
        cold_key = next(k for k in sorted(reference.keys()) if k[0] < min(hot_ids))
        # With the raw route (the default) a cold id1 is answered from the bucket's files...
        raw = coordinator.query(*cold_key, timeout=0.3, partial=True)
        assert (raw.route, raw.complete) == ("raw", True)
        assert raw.links == reference.get_link_list(*cold_key)
        assert raw.bucket == bucket_map.bucket_of(cold_key[0])
    # ... and waits for its bucket with the paper's buffering.
    with Coordinator(config.replace(coordinator_raw_after=None)) as coordinator:
        waiting = coordinator.query(*cold_key, timeout=0.3, partial=True)
        assert (waiting.route, waiting.complete) == ("partial", False)
        assert waiting.bucket == bucket_map.bucket_of(cold_key[0])


def test_a_buffered_cold_query_steers_gen_hf_and_is_released_with_the_reference_answer(
        range_dump):
    config, _, _, _, reference = range_dump
    config = config.replace(coordinator_raw_after=None)  # the paper's buffering
    with Catalog(config) as catalog:
        load = catalog.loads.current()
        buckets = catalog.index.buckets(load.load_id)
        bucket_map = load.bucket_map
    # The highest bucket with cold rows: demand, not bucket order, must bring it first.
    assert len(buckets) > config.gen_hf.run_buckets
    wanted = max(b.b_index for b in buckets if b.rows)
    cold_key = next(k for k in sorted(reference.keys(), reverse=True)
                    if bucket_map.bucket_of(k[0]) == wanted
                    and k[0] <= max(b.c_hi for b in buckets))
    answers = {}
    with Coordinator(config) as coordinator:
        asking = threading.Thread(
            target=lambda: answers.update(first=coordinator.query(*cold_key, timeout=120)))
        asking.start()
        with Catalog(config) as catalog:
            deadline = time.monotonic() + 10
            while catalog.serving.demand(load.load_id).get(wanted, 0) < 1:
                assert time.monotonic() < deadline, "the buffered query's demand never came"
                time.sleep(0.05)
        with GenHF(config) as gen_hf:
            first = gen_hf.run_once()
            assert wanted in first.buckets and first.demand[wanted] >= 1
            asking.join(60)
            gen_hf.serve(until_complete=True)
        answer = answers["first"]
        assert (answer.route, answer.complete, answer.bucket) == ("merged", True, wanted)
        assert answer.waited_s > 0
        assert answer.links == reference.get_link_list(*cold_key)
        for key in sorted(reference.keys())[::4]:  # every answer, hot and cold, once converted
            assert coordinator.get_link_list(*key) == reference.get_link_list(*key), key


def test_a_resumed_load_keeps_the_map_it_recorded(stack_config, spark, tmp_path):
    config = namespace(stack_config, "scaleresume")
    directory = clustered_dataset(tmp_path / "links")
    env = config.child_env()  # its namespace, TARGET and a sample of 1024 bytes
    Catalog(config, replace_older=True).close()  # a catalog this DeBL reads, for the polling
    proc = subprocess.Popen(
        [sys.executable, "-m", "debl", "load", str(directory), "--no-hot", "--chunk-size", "64KiB"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    load_id = recorded_map = None
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            with Catalog(config) as catalog:
                load = catalog.loads.load()
                if load and load.state == "running" and load.bucket_map:
                    if any(c.state == "bucketed" for c in catalog.index.chunks(load.load_id)):
                        load_id, recorded_map = load.load_id, load.bucket_map
                        break
            time.sleep(0.1)
        assert load_id, "the load never bucketed a chunk"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    # A new sample with another target would cut elsewhere: the resume must not take one.
    other = replace(config, loading_bucket_target_bytes=3 * TARGET)
    source = LocalSource(directory)
    assert sample_bucket_map(other, source, source.list()) != recorded_map

    summary = run_load(other, str(directory), LoadOptions(hot_bytes=None), resume=load_id)
    with Catalog(config) as catalog:
        assert catalog.loads.load(load_id).bucket_map == recorded_map
        buckets = {b.b_index: (b.k_lo, b.k_hi, b.rows, b.checksum, b.c_lo, b.c_hi)
                   for b in catalog.index.buckets(load_id)}
    assert summary.bucket_map == recorded_map.to_dict()
    cold = {f.name for f in source.list()}
    assert buckets == expected_buckets(directory, cold, recorded_map)

