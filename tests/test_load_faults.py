"""``debl load`` from a source that misbehaves, on the real stack: a transfer dropped
mid-file is resumed and loses nothing (the issue's silent corruption: a server that closes 4
bytes before its Content-Length); a server that always drops, a listing that lies about a size
and a file that changes while it is copied each fail the load with a clear message and leave
nothing visible; a resume refuses a source that changed since the listing, and never reads the
bucket files a chunk left before the failure. The stream-level behaviour without the stack:
tests/test_source_faults.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from coordinator import Coordinator
from debl.format.bucket_map import BucketMap
from debl.catalog import Catalog
from debl.errors import LoadStateError, ServiceError, SourceError
from loaders.gen_hf import GenHF
from debl.namespace import Namespace
from loaders.load import LoadOptions, run_load
from loaders.resume import drop_stale_files
from loaders.source import LocalSource
from loaders.verify import verify_load
from debl.hdfs import HdfsClient
from tests.dataset import make_dataset, reference_store
from tests.hostile_http import HostileSource, rewrite_later

pytestmark = pytest.mark.stack

LT = 123456789
COLD = LoadOptions(approach="debl-cold", bucket_width=500, chunk_size=16 * 1024)
HOT = LoadOptions(hot_bytes=1 << 30)


def issue_file(directory: Path) -> Path:
    """The issue's input: 2,000 links, the last (id1 2000) with version 99999, so that a
    transfer cut 4 bytes early leaves a valid line with version 99."""
    path = directory / "links.tsv"
    path.write_bytes(b"".join(b"%d\t%d\t%d\t1\tdata-%d\t%d\t%d\n"
                              % (i, LT, i + 7, i, 1_700_000_000 + i, 99999 if i == 2000 else 99)
                              for i in range(1, 2001)))
    return path


def answers(config, directory: Path, **coordinator) -> None:
    """Every (id1, link_type) of the files, asked through a coordinator, equals the reference
    store built from the files."""
    reference = reference_store(directory, set())
    with Coordinator(config, **coordinator) as c:
        for key in sorted(reference.keys()):
            assert c.get_link_list(*key, timeout=120) == reference.get_link_list(*key), key


def nothing_visible(config, load_id: str) -> None:
    """Nothing of the failed load *load_id* is served or converted: the current day (if any)
    goes on answering."""
    with Catalog(config) as catalog:
        newest = catalog.loads.load()
        assert newest is not None and newest.load_id == load_id
        assert newest.state == "failed"
        current = catalog.loads.current()
    with Coordinator(config) as c:
        if current is None:
            with pytest.raises(ServiceError, match=f"{load_id} failed"):
                c.get_link_list(2000, LT, timeout=30)
        else:
            assert c.query(2000, LT, timeout=30).load_id == current.load_id
    with GenHF(config) as gen_hf:
        gen_hf.run_once()  # converts nothing of a load that is not up
    with Catalog(config) as catalog:
        assert {j.state for j in catalog.jobs.jobs(load_id)} <= {"pending"}


def test_a_transfer_cut_four_bytes_short_is_resumed_and_answers_stay_exact(stack_config, spark,
                                                                           tmp_path):
    path = issue_file(tmp_path)
    with HostileSource(tmp_path) as server:
        server.drop("links.tsv", path.stat().st_size - 4)  # once
        summary = run_load(stack_config, server.url, COLD)
        assert f"bytes={path.stat().st_size - 4}-{path.stat().st_size - 1}" in \
            server.ranges["links.tsv"]
    assert (summary.cold_rows, summary.rejects) == (2000, 0)
    with GenHF(stack_config) as gen_hf:
        gen_hf.serve(until_complete=True)
    with Coordinator(stack_config) as c:
        (link,) = c.get_link_list(2000, LT)
    assert link.version == 99999  # the issue's answer was 99
    answers(stack_config, tmp_path)
    assert verify_load(stack_config, source=False).ok


def test_the_hot_path_resumes_a_cut_transfer_too(stack_config, spark, tmp_path):
    path = issue_file(tmp_path)
    with HostileSource(tmp_path) as server:
        server.drop("links.tsv", path.stat().st_size - 4, times=2)
        summary = run_load(stack_config, server.url, HOT)
    assert (summary.hot_rows, summary.rejects) == (2000, 0)
    answers(stack_config, tmp_path)


def test_a_server_that_always_drops_fails_the_load_and_nothing_is_visible(stack_config, spark,
                                                                          tmp_path):
    path = issue_file(tmp_path)
    cut = path.stat().st_size // 3
    with HostileSource(tmp_path) as server:
        server.drop("links.tsv", cut, times=None)
        with pytest.raises(SourceError, match=rf"reading 'links.tsv' failed at byte {cut} of "
                                              rf"{path.stat().st_size}.*resumes in a row"):
            run_load(stack_config.replace(source_retries=2), server.url, COLD)
    with Catalog(stack_config) as catalog:
        load_id = catalog.loads.load().load_id
        assert "failed at byte" in catalog.loads.load().error
    nothing_visible(stack_config, load_id)


@pytest.mark.parametrize("lie", [+100, -100])
def test_a_listing_that_lies_about_a_size_fails_the_load_clearly(stack_config, spark, tmp_path,
                                                                 lie):
    path = issue_file(tmp_path)
    size = path.stat().st_size
    with HostileSource(tmp_path) as server:
        server.lie("links.tsv", size + lie)
        with pytest.raises(SourceError, match=rf"'links.tsv': listed {size + lie} bytes.*now "
                                              rf"{size} bytes.*changed after it was listed"):
            run_load(stack_config, server.url, COLD)
    with Catalog(stack_config) as catalog:
        nothing_visible(stack_config, catalog.loads.load().load_id)


def test_a_file_that_changes_while_it_is_copied_fails_the_load_clearly(stack_config, spark,
                                                                        tmp_path):
    path = issue_file(tmp_path)
    with HostileSource(tmp_path) as server:
        server.mutate("links.tsv", path.stat().st_size // 2, rewrite_later)
        with pytest.raises(SourceError, match="'links.tsv': it changed while it was read"):
            run_load(stack_config, server.url, HOT)
    with Catalog(stack_config) as catalog:
        nothing_visible(stack_config, catalog.loads.load().load_id)


@pytest.fixture()
def failed_midway(stack_config, spark, tmp_path):
    """A cold load from HTTP that fails in its last file after some chunks were bucketed."""
    make_dataset(tmp_path, max_id=3001, files=4, bad_lines=0)
    last = LocalSource(tmp_path).list()[-1]
    server = HostileSource(tmp_path).__enter__()
    server.drop(last.name, last.size // 2, times=None)
    with pytest.raises(SourceError, match="failed at byte"):
        run_load(stack_config.replace(source_retries=1), server.url, COLD)
    with Catalog(stack_config) as catalog:
        load_id = catalog.loads.load().load_id
        bucketed = [c.chunk_no for c in catalog.index.chunks(load_id) if c.state == "bucketed"]
    assert bucketed, "no chunk was bucketed before the failure"
    server.drops.clear()  # the server is healthy again
    yield tmp_path, server, load_id, len(bucketed)
    server.__exit__()


def test_a_resume_refuses_a_source_changed_since_the_listing(stack_config, failed_midway):
    directory, server, load_id, _ = failed_midway
    first = LocalSource(directory).list()[0]
    st = (directory / first.name).stat()
    os.utime(directory / first.name, ns=(st.st_atime_ns, st.st_mtime_ns + 5 * 10**9))
    with pytest.raises(LoadStateError, match=rf"{load_id} cannot be resumed: its source changed "
                                             rf"since it was listed \('{first.name}' was "):
        run_load(stack_config, server.url, COLD, resume=load_id)
    os.utime(directory / first.name, ns=(st.st_atime_ns, st.st_mtime_ns))  # as listed again
    run_load(stack_config, server.url, COLD, resume=load_id)
    answers(stack_config, directory)


def test_a_resume_never_reads_bucket_files_left_by_chunks_it_redoes(stack_config, spark,
                                                                    failed_midway):
    directory, server, load_id, done = failed_midway
    fs = HdfsClient(stack_config)
    bucket_dir = Namespace.of(stack_config, load_id).bucket_dir
    # What a dist_ch killed in the chunk after the last bucketed one may leave: slice files of
    # that chunk (cut otherwise after the resume), here copies of a real bucket file.
    planted = []
    for b in range(BucketMap.fixed(COLD.bucket_width).bucket_of(3000) + 1):
        real = [s for s in fs.list(f"{bucket_dir}/{b}") if s.path.endswith(".0")] \
            if fs.status(f"{bucket_dir}/{b}") else []
        if real:
            stale = f"{bucket_dir}/{b}/chunk-{done:05d}.7"
            fs.write(stale, fs.read(real[0].path), overwrite=True)
            planted.append(stale)
    assert planted
    run_load(stack_config, server.url, COLD, resume=load_id)
    assert [p for p in planted if fs.status(p) is not None] == []
    report = verify_load(stack_config, source=False)
    assert report.ok, report.failures
    with GenHF(stack_config) as gen_hf:  # raises if a bucket's files disagree with its index
        gen_hf.serve(until_complete=True)
    answers(stack_config, directory, default_timeout=120)


def test_a_load_killed_after_a_file_without_final_newline_is_resumed(stack_config, spark,
                                                                     tmp_path):
    """The copier ends a file's last line with the newline it lacks, so the chunk that holds
    the file's end records one byte more than the file has; the resume must start at the next
    file, not at that byte (it once asked the source for the byte past the end and refused the
    file as changed, so the load could never be resumed)."""
    first = tmp_path / "a.tsv"
    first.write_bytes(b"".join(b"%d\t%d\t%d\t1\td\t%d\t1\n" % (i, LT, i, 1_700_000_000 + i)
                               for i in range(1, 400)).rstrip(b"\n"))
    second = tmp_path / "b.tsv"
    second.write_bytes(b"".join(b"%d\t%d\t%d\t1\td\t%d\t1\n" % (i, LT, i + 1, 1_700_000_001 + i)
                                for i in range(300, 700)))
    os.utime(first, (1_700_000_000, 1_700_000_000))  # a is the older: listed, copied first
    os.utime(second, (1_700_100_000, 1_700_100_000))
    # Chunk 0 ends at a's end: its last line is cut at the newline the copier adds.
    options = LoadOptions(approach="debl-cold", bucket_width=500,
                          chunk_size=first.stat().st_size - 5)
    with HostileSource(tmp_path) as server:
        server.drop("b.tsv", 100, times=None)
        with pytest.raises(SourceError, match="failed at byte"):
            run_load(stack_config.replace(source_retries=1), server.url, options)
        with Catalog(stack_config) as catalog:
            load_id = catalog.loads.load().load_id
            chunks = catalog.index.chunks(load_id)
        assert [(c.chunk_no, c.state, c.bytes) for c in chunks[:1]] == \
            [(0, "bucketed", first.stat().st_size + 1)]
        server.drops.clear()
        summary = run_load(stack_config, server.url, options, resume=load_id)
    assert summary.cold_rows == 399 + 400
    answers(stack_config, tmp_path, default_timeout=120)


def test_a_resume_drops_the_stale_bucket_files_of_chunks_past_99999(stack_config):
    """Chunk numbers have five digits or more; only five were read back, so a resume past chunk
    99,999 kept (and later read) the stale bucket files of the chunks it redoes. Only the
    chunks recorded as bucketed keep their files, whatever their numbers."""
    fs = HdfsClient(stack_config)
    root = f"{stack_config.hdfs.root}/test-stale-{os.getpid()}"
    names = ["chunk-99999.0", "chunk-100000.0", "chunk-100001.1", "chunk-1000000.0",
             "chunk-99999.0._COPYING_", "other.0"]
    for name in names:
        fs.write(f"{root}/3/{name}", b"x", overwrite=True)
    try:
        drop_stale_files(fs, f"{root}/chunks", [root], {99_999})
        left = sorted(s.path.rsplit("/", 1)[1] for s in fs.list(f"{root}/3"))
    finally:
        fs.delete(root, recursive=True)
    assert left == ["chunk-99999.0", "chunk-99999.0._COPYING_", "other.0"]
