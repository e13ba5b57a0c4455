"""The raw route on the real stack: bucket files as the reference writes them, answers from the
raw HDFS files equal to the in-memory reference (updates across chunks and files, hidden rows, a
heavy id1 over many chunks and blocks, time ranges, offset and limit), a dist_ch temporary file
never read, a vanished bucket file a clear error naming it, and raw answers equal to the answers
after gen_HF has converted every bucket.

The load lives in a namespace of its own (database, tables, HDFS root), as tests/test_online.py
does. Tests run in file order: the conversion comes last.
"""

from __future__ import annotations

import gc
import json
import os
import random
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import psutil
import pytest
from click.testing import CliRunner

from coordinator import Coordinator
from coordinator.raw import RawBucket, RawReader
from coordinator.raw_warmup import RawWarmup
from debl.format.bucket_file import data_lines, encode, is_bucket_file, parse_tail
from debl.catalog import Catalog
from debl.config import Config
from debl.commands.links import links as links_command
from debl.commands.status import status as status_command
from debl.errors import BucketFileError
from debl.hdfs import HdfsClient
from debl.hdfs.local_reads import CONNECTIONS
from debl.format.link import Link, Origin, ParseError, parse_line
from debl.store.memory import MemoryStore
from loaders.gen_hf import GenHF
from loaders.load import LoadOptions, run_load
from loaders.verify import verify_load
from tests.dataset import check_count_and_multiget, make_dataset, multiget_id2s

pytestmark = pytest.mark.stack

WIDTH = 3000
LT = 123456789
HEAVY = 4242  # bucket 1: thousands of links in three cold files, a few hot ones
T0 = 1_700_000_000_000
SAMPLE = 300


def _heavy_files(directory: Path) -> None:
    """Three cold files of the heavy id1, before the first, the second and the fourth generated
    file (so that chunks apart hold them), whose id2s overlap: updates across files and chunks,
    hidden rows, ties on time and version left to the file and line; and a hot file (newest)
    with a few rows of it."""
    mtimes = sorted(p.stat().st_mtime for p in directory.glob("links-*.tsv"))
    rnd = random.Random(4)
    for n, before in enumerate((0, 1, 3)):
        lines = [Link(HEAVY, LT, id2, int(rnd.random() > 0.2), b"heavy %d %d" % (n, id2) * 3,
                      T0 + rnd.randrange(50), rnd.randrange(3)).to_line()
                 for id2 in rnd.sample(range(4000), 2500)]
        path = directory / f"heavy-{n}.tsv"
        path.write_bytes(b"".join(lines))
        os.utime(path, (mtimes[before] - 60,) * 2)
    newest = mtimes[-1]
    hot = [Link(HEAVY, LT, id2, id2 % 2, b"hot", T0 + 25, 9).to_line()
           for id2 in range(0, 4000, 97)]
    path = directory / "heavy-hot.tsv"
    path.write_bytes(b"".join(hot))
    os.utime(path, (newest + 3600,) * 2)


def _reference(directory: Path, files: list[tuple[int, str, bool]]) -> MemoryStore:
    store = MemoryStore()
    rows = []
    for seq, name, hot in files:
        with open(directory / name, "rb") as f:
            for line_no, line in enumerate(f, 1):
                try:
                    rows.append((parse_line(line), Origin(int(hot), seq, line_no)))
                except ParseError:
                    continue
    store.write_links(rows)
    return store


@pytest.fixture(scope="module")
def raw(stack_config, spark, tmp_path_factory):
    """A load that is up, nothing in HBase: (config, reference, bucket files by bucket)."""
    config = replace(stack_config, mysql_database="debl_rawtest", mysql_link_table="raw_links",
                     hbase_table="raw_links", hdfs_root="/debl-rawtest",
                     coordinator_poll_interval=0.2, coordinator_raw_after=0.0,
                     coordinator_raw_cache_bytes=1 << 20)
    directory = tmp_path_factory.mktemp("raw")
    make_dataset(directory, max_id=12001, files=5, seed=13)
    _heavy_files(directory)
    newest_generated = max(p.stat().st_mtime for p in directory.glob("links-*.tsv"))
    summary = run_load(config, str(directory),
                       LoadOptions(hot_since=newest_generated, chunk_size=384 * 1024,
                                   bucket_width=WIDTH))
    assert summary.chunks >= 3 and summary.buckets >= 4 and summary.hot_rows
    with Catalog(config) as catalog:
        files = [(f.file_seq, f.name, f.hot) for f in catalog.files.files(summary.load_id)]
        prefixes = {b.b_index: catalog.index.bucket_paths(b.b_index, summary.load_id)
                    for b in catalog.index.buckets(summary.load_id)}
    assert {name for _, name, hot in files if name.startswith("heavy-") and not hot} == \
        {"heavy-0.tsv", "heavy-1.tsv", "heavy-2.tsv"}
    fs = HdfsClient(config)
    bucket_files = {}
    for b, paths in prefixes.items():
        directory_b = paths[0].rsplit("/", 1)[0]
        listing = [s.path for s in fs.list(directory_b)]
        bucket_files[b] = sorted(p for p in listing for prefix in paths
                                 if is_bucket_file(p.rsplit("/", 1)[1], prefix.rsplit("/", 1)[1]))
    return config, _reference(directory, files), bucket_files


def _keys(reference: MemoryStore) -> list[tuple[int, int]]:
    keys = sorted(reference.keys())
    return sorted(random.Random(7).sample(keys, min(SAMPLE, len(keys))) + [(HEAVY, LT)])


RAW_ANSWERS: dict = {}  # (key, kwargs) -> links: compared with the answers after conversion
RANGES: tuple[dict[str, int], ...] = ({}, {"min_time": T0 + 20}, {"max_time": T0 + 30},
          {"min_time": T0 + 10, "max_time": T0 + 12}, {"offset": 3, "limit": 5},
          {"offset": 2400, "limit": 10}, {"limit": 1},
          {"min_time": 1766900000000}, {"max_time": 1767000000000, "offset": 1, "limit": 3})


def test_bucket_files_are_exactly_what_the_reference_writer_writes(raw):
    """dist_ch on the JVM sorts and indexes as debl.format.bucket_file.encode does: a file's lines
    in input order (their origins ascending) encode to the file's very bytes."""
    config, _, bucket_files = raw
    fs = HdfsClient(config)
    most_blocks = 0
    for paths in bucket_files.values():
        for path in paths:
            content = fs.read(path)
            index = parse_tail(path, len(content), content)
            lines = [line + b"\n" for line in data_lines(content[:index.data_length])]
            in_input_order = sorted(lines, key=lambda l: [int(x) for x in l.rsplit(b"\t", 2)[1:]])
            assert content == encode(in_input_order), path
            most_blocks = max(most_blocks, index.entries - 1)
    assert most_blocks >= 2  # the heavy id1 spans blocks
    # ... and chunks: its rows are in files of several chunks.
    heavy_chunks = set()
    for path in bucket_files[HEAVY // WIDTH]:
        content = fs.read(path)
        index = parse_tail(path, len(content), content)
        if index.blocks(HEAVY, LT):
            heavy_chunks.add(path.rsplit("/", 1)[1].split(".")[0])
    assert len(heavy_chunks) >= 2


def test_raw_answers_equal_the_reference(raw):
    config, reference, bucket_files = raw
    with Coordinator(config) as c:
        for key in _keys(reference):
            answer = c.query(*key)
            assert answer.links == reference.get_link_list(*key), key
            # raw wherever a bucket's cold rows span id1; else MySQL alone (hot-only ids)
            assert answer.route == ("raw" if answer.bucket is not None else "mysql")
            assert answer.bucket is None or answer.bucket in bucket_files
            RAW_ANSWERS[(key, ())] = answer.links
        assert c.stats().raw >= SAMPLE // 2
        # count_link and multiget_link on the same route: the heavy id1 over many blocks too
        assert check_count_and_multiget(c, reference, (HEAVY, LT)) == {"raw"}
        for key in _keys(reference)[::10]:
            assert check_count_and_multiget(c, reference, key) <= {"raw", "mysql"}
        assert c.waiting() == {} and set(c.demand()) == set(bucket_files)  # raw answers: demand


def test_time_ranges_offsets_and_limits_on_the_heavy_id1_and_others(raw):
    config, reference, _ = raw
    keys = [(HEAVY, LT)] + _keys(reference)[::25]
    with Coordinator(config) as c:
        for key in keys:
            for kw in RANGES:
                got = c.get_link_list(*key, **kw)
                assert got == reference.get_link_list(*key, **kw), (key, kw)
                RAW_ANSWERS[(key, tuple(sorted(kw.items())))] = got
    heavy = reference.get_link_list(HEAVY, LT)
    assert len(heavy) > 3000 and any(l.data == b"hot" for l in heavy)


def test_keys_read_lazily_block_by_block_equal_the_reference(raw, monkeypatch):
    """A key over more blocks than EAGER_BLOCKS is read newest block first and merged lazily;
    here every key is (EAGER_BLOCKS 0): the heavy id1 over 1, 2, 4 ... blocks back per file."""
    import coordinator.raw as raw_module

    config, reference, _ = raw
    monkeypatch.setattr(raw_module, "EAGER_BLOCKS", 0)
    with Coordinator(config) as c:
        for key in [(HEAVY, LT)] + _keys(reference)[::10]:
            for kw in RANGES:
                assert c.get_link_list(*key, **kw) == reference.get_link_list(*key, **kw), \
                    (key, kw)


def test_links_and_status_commands_show_the_raw_route(raw):
    config, reference, _ = raw
    out = CliRunner().invoke(links_command, [str(HEAVY), str(LT), "--limit", "3"], obj=config)
    assert out.exit_code == 0, out.output
    assert "raw HDFS files of bucket 1" in out.output
    assert out.output.count("\n") == 2 + 3
    # Every coordinator so far published its counts (at the latest when it closed).
    with Catalog(config) as catalog:
        answered, coordinators = catalog.serving.answers(catalog.loads.current().load_id)
    assert answered["raw"] > SAMPLE // 2 and coordinators >= 3
    out = CliRunner().invoke(status_command, ["--json"], obj=config)
    assert json.loads(out.output)["answers"]["by_route"]["raw"] == answered["raw"]
    out = CliRunner().invoke(status_command, [], obj=config)
    assert f"{answered['raw']:,} raw (bucket not loaded)" in out.output
    # count_link and multiget_link, as a user asks them
    out = CliRunner().invoke(links_command, [str(HEAVY), str(LT), "--count"], obj=config)
    assert out.exit_code == 0, out.output
    assert (f"{reference.count_link(HEAVY, LT)} visible links (count_link) from the raw HDFS "
            "files of bucket 1") in out.output
    id2s = multiget_id2s(reference, (HEAVY, LT))
    asked = [word for id2 in id2s for word in ("--id2", str(id2))]
    out = CliRunner().invoke(links_command, [str(HEAVY), str(LT), *asked, "--json"], obj=config)
    assert out.exit_code == 0, out.output
    got = json.loads(out.output)
    assert got["route"] == "raw" and got["id2s"] == list(id2s)
    assert [(l["id2"], l["visibility"], l["time"], l["version"], l["data"].encode("latin-1"))
            for l in got["links"]] == [(l.id2, l.visibility, l.time, l.version, l.data)
                                       for l in reference.multiget_link(HEAVY, LT, id2s)]
    out = CliRunner().invoke(links_command, [str(HEAVY), str(LT), "--count", "--limit", "3"],
                             obj=config)
    assert out.exit_code == 2 and "ask three different questions" in out.output


RUNS = 40


def test_a_short_command_on_the_raw_route_exits_cleanly_every_time(raw):
    """Defect: `debl links` answered from the raw files, printed its answer and then
    aborted at exit (status 134, ``FATAL: exception not rethrown``) in 9 of 40 runs: a daemon
    thread still inside the HDFS client (hdfs-native) when the interpreter shut down (the
    warm-up opening buckets ahead, the listing thread). Every run, as a user runs it, with the
    default raw_cache_bytes (the warm-up opens every bucket ahead): the answer, and exit 0."""
    config, reference, _ = raw
    env = config.child_env(DEBL_COORDINATOR_RAW_AFTER="0",
                           DEBL_COORDINATOR_RAW_CACHE_BYTES=str(128 << 20))
    expected = [(l.id2, l.time, l.version) for l in reference.get_link_list(HEAVY, LT, limit=5)]
    failed = []
    for run in range(RUNS):
        out = subprocess.run([sys.executable, "-m", "debl", "links", str(HEAVY), str(LT),
                              "--limit", "5", "--json"], env=env, capture_output=True,
                             text=True, timeout=300)
        if out.returncode != 0:
            failed.append((run, out.returncode, out.stderr[-300:]))
            continue
        answer = json.loads(out.stdout)
        assert answer["route"] == "raw" and answer["complete"], answer
        assert [(l["id2"], l["time"], l["version"]) for l in answer["links"]] == expected
    assert failed == [], f"{len(failed)} of {RUNS} runs failed: {failed}"


def test_the_readers_memory_stays_within_its_budget(raw):
    """The opened buckets and the cached blocks together stay within raw_cache_bytes (here
    1 MiB, less than the blocks the sampled keys read), and a bucket whose files disagree with
    its rows is an error, never kept."""
    config, reference, _ = raw
    with Catalog(config) as catalog:
        load_id = catalog.loads.load().load_id
        buckets = {b.b_index: RawBucket(load_id, b.b_index, b.rows)
                   for b in catalog.index.buckets(load_id)}
        reader = RawReader(config, catalog.index)
        try:
            wrong = replace(buckets[1], rows=buckets[1].rows + 1)
            with pytest.raises(BucketFileError, match=r"the bucket index says"):
                reader.scan_newest_first([wrong], HEAVY, LT)
            assert reader.memory().buckets == 0
            read = 0
            for id1, link_type in _keys(reference):
                if id1 // WIDTH in buckets:
                    read += len(list(reader.scan_newest_first([buckets[id1 // WIDTH]], id1,
                                                              link_type)))
            memory = reader.memory()
            assert read > 1000 and memory.buckets == len(buckets) and memory.blocks > 0
            assert memory.bucket_bytes + memory.block_bytes <= config.coordinator.raw_cache_bytes
            assert reader.cache.misses > memory.blocks  # more blocks read than kept
        finally:
            reader.close()


def test_buckets_opened_ahead_answer_and_stop_at_half_the_budget(raw):
    """A coordinator opens its raw buckets before any query (its answers then equal the
    reference's); a reader opens ahead only while its opened buckets take under half of
    raw_cache_bytes."""
    config, reference, bucket_files = raw
    with Coordinator(config) as c:
        assert c.wait_warm(60)
        assert c._raw.memory().buckets == len(bucket_files)
        for key in _keys(reference)[:50]:
            assert c.get_link_list(*key) == reference.get_link_list(*key), key
    with Catalog(config) as catalog:
        load_id = catalog.loads.load().load_id
        buckets = [RawBucket(load_id, b.b_index, b.rows) for b in catalog.index.buckets(load_id)]
        one = RawReader(config, catalog.index)
        try:
            assert one.open_ahead(buckets[0])
            first = one.memory().bucket_bytes
            assert one.open_ahead(buckets[1])
            both = one.memory().bucket_bytes
        finally:
            one.close()
        # half the budget is more than bucket 0 and at most buckets 0 and 1, which both fit
        small = replace(config, coordinator_raw_cache_bytes=max(2 * (first + 1), both + 1))
        reader = RawReader(small, catalog.index)
        try:
            assert len(buckets) >= 3
            assert [reader.open_ahead(b) for b in buckets] == [True, True] + [False] * (
                len(buckets) - 2)
            assert reader.memory().buckets == 2
        finally:
            reader.close()


def test_a_dist_ch_temporary_file_is_never_read(raw):
    """A killed dist_ch's ``._COPYING_`` file, beside the real ones and holding a valid bucket
    file with other rows: neither the raw route, nor verify, reads it."""
    config, reference, bucket_files = raw
    fs = HdfsClient(config)
    victim = bucket_files[1][0]
    bogus = encode(Link(HEAVY, LT, 7, 1, b"BOGUS", 9 * T0, 99).to_line()[:-1] + b"\t0\t%d\n" % n
                   for n in range(1, 3000))
    fs.write(victim + "._COPYING_", bogus, overwrite=True)
    try:
        with Coordinator(config) as c:
            for key in [(HEAVY, LT)] + [k for k in _keys(reference) if k[0] // WIDTH == 1]:
                assert c.get_link_list(*key) == reference.get_link_list(*key), key
        report = verify_load(config, source=False)
        assert report.ok, report.failures
    finally:
        fs.delete(victim + "._COPYING_")


def _raises_once_swept(c: Coordinator, key: tuple[int, int], config: Config,
                       match: str) -> None:
    """Once the listing thread has found bucket 1 changed (within a few of its sweeps), a query
    of *key* raises the BucketFileError *match*. Until then a query answers from the bytes the
    file had when opened (and caches them), so the test waits for the sweep before it asks."""
    deadline = time.monotonic() + 20 * config.coordinator.poll_interval
    while not any(b.b_index == 1 and b.checked_at == float("-inf")
                  for b in c._raw._opened.values()):
        assert time.monotonic() < deadline, "the listing thread did not find the change"
        time.sleep(config.coordinator.poll_interval / 2)
    with pytest.raises(BucketFileError, match=match):
        c.get_link_list(*key)


def test_a_vanished_bucket_file_is_a_clear_error_naming_it(raw):
    config, reference, bucket_files = raw
    fs = HdfsClient(config)
    victim = bucket_files[1][-1]
    content = fs.read(victim)
    index = parse_tail(victim, len(content), content)
    first = parse_line(next(data_lines(content[:index.data_length])).rsplit(b"\t", 2)[0])
    key = (first.id1, first.link_type)
    prefix = victim.rsplit(".", 1)[0]
    with Coordinator(config) as c:
        # Opened before the file goes (its index is kept, its blocks are not read yet): a read
        # by block would still find the renamed file's bytes, so the reader's listing thread
        # lists the bucket again, and the next query names the file.
        assert c.get_link_list(key[0], 0) == []  # no such link type: no block read
        fs.rename(victim, victim + "-gone")
        try:
            _raises_once_swept(c, key, config, rf"bucket 1: its file {victim} is gone")
        finally:
            fs.rename(victim + "-gone", victim)
    fs.rename(victim, victim + "-gone")
    try:
        # Opened after: the listing misses the file, the chunk's rows are short.
        with Coordinator(config) as c:
            with pytest.raises(BucketFileError, match=rf"bucket 1: (the files {prefix}\.<slice> "
                                                      rf"hold \d+ rows, dist_ch wrote \d+|no file "
                                                      rf"{prefix}\.<slice> in HDFS)"):
                c.get_link_list(*key)
        out = CliRunner().invoke(links_command, [str(key[0]), str(key[1])], obj=config)
        assert out.exit_code == 1 and "Traceback" not in out.output
        assert f"{prefix}.<slice>" in out.output and "debl verify" in out.output
    finally:
        fs.rename(victim + "-gone", victim)
    with Coordinator(config) as c:  # back: right again
        assert c.get_link_list(*key) == reference.get_link_list(*key)


def test_the_listing_thread_checks_opened_buckets_while_no_query_comes(raw):
    """Queries seldom pay for a listing check: the reader's own thread keeps every opened
    bucket's check younger than two poll intervals."""
    config, _, bucket_files = raw
    with Coordinator(config) as c:
        assert c.wait_warm(60)
        with c._raw._lock:
            opened = list(c._raw._opened.values())
        assert len(opened) == len(bucket_files)
        before = [b.checked_at for b in opened]
        time.sleep(3 * config.coordinator.poll_interval)
        assert all(b.checked_at > t for b, t in zip(opened, before))


def test_a_bucket_file_rewritten_since_it_was_opened_is_a_clear_error_naming_it(raw):
    """A file written again at its path (new blocks, a new time) after the bucket was opened:
    the reader's blocks would be the old file's, so it names the file instead of answering."""
    config, reference, bucket_files = raw
    fs = HdfsClient(config)
    victim = bucket_files[1][0]
    content = fs.read(victim)
    index = parse_tail(victim, len(content), content)
    first = parse_line(next(data_lines(content[:index.data_length])).rsplit(b"\t", 2)[0])
    key = (first.id1, first.link_type)
    with Coordinator(config) as c:
        assert c.get_link_list(key[0], 0) == []  # opens bucket 1, reads no block
        fs.write(victim, content, overwrite=True)
        _raises_once_swept(c, key, config,
                           rf"bucket 1: its file {victim} changed in HDFS since it was opened")
    with Coordinator(config) as c:  # opened again: the same bytes, right again
        assert c.get_link_list(*key) == reference.get_link_list(*key)


def _sockets_to(*ports: int) -> int:
    """This process's TCP connections to any of *ports*."""
    return sum(bool(c.raddr) and c.raddr.port in ports
               for c in psutil.Process().net_connections(kind="tcp"))


def test_a_warm_up_of_many_offers_keeps_a_few_connections_and_closes_them(raw):
    """Defect: the local reads kept a NameNode connection (and one per DataNode) for every
    thread that ever opened a file, until the reader closed, and the warm-up starts threads of
    its own for every offer: 25 offers of 4 buckets left 79 sockets open. Now every thread
    shares a few connections per server, closed with the reader."""
    config, _, _ = raw
    namenode, datanode = int(config.hdfs.uri.rsplit(":", 1)[1]), config.hdfs.datanode_ipc_port
    gc.collect()  # the clients of earlier tests' readers, and their connections, gone
    before = _sockets_to(namenode, datanode)
    with Catalog(config) as catalog:
        load_id = catalog.loads.load().load_id
        buckets = [RawBucket(load_id, b.b_index, b.rows) for b in catalog.index.buckets(load_id)]
        reader = RawReader(config, catalog.index)
        warmup = RawWarmup(reader)
        try:
            for _ in range(25):
                reader.serve("another-load", hot=False)  # forgets them: each offer opens them
                reader.serve(load_id, hot=True)
                warmup.offer(buckets)
                assert warmup.wait(60)
                assert reader.memory().buckets == len(buckets)
            # a few to the NameNode and to the DataNode, and hdfs-native's to the NameNode
            assert 0 < _sockets_to(namenode, datanode) - before <= 2 * CONNECTIONS + 1
        finally:
            warmup.close(60)
            reader.close()
        assert _sockets_to(datanode) == 0
        del reader, warmup
        gc.collect()  # hdfs-native's connection goes with its client
        assert _sockets_to(namenode, datanode) == before


def test_raw_answers_equal_the_answers_after_conversion(raw):
    config, reference, _ = raw
    assert len(RAW_ANSWERS) > SAMPLE
    with GenHF(config) as gen_hf:
        gen_hf.serve(until_complete=True)
    with Coordinator(config) as c:
        assert {b.j_stat for b in c.buckets()} == {"loaded"}
        for (key, kw), links in RAW_ANSWERS.items():
            answer = c.query(*key, **dict(kw))
            assert answer.route in ("merged", "mysql")
            assert answer.links == links, (key, kw)
