"""The split-point sample on the smallest inputs: any number of empty files, one
line, lines none of which is valid, and a ``bucket_target_bytes`` far above the input (a
tiny cold input with a large target once divided by zero). Every such input gets a bucket map
that covers every id, from the real sampler over a local directory. And the sample's speed-ups
change nothing: its fast path weighs lines exactly as ``parse_line`` does, and over HTTP (a
request per file, several ranges each) it draws the local sample's map. Unit tests; the last
against a real ``debl source serve`` on loopback."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from debl.format.bucket_map import MAX_ID, BucketMap
from debl.config import Config
from debl.format.link import ParseError, parse_line
from loaders.http_client import MAX_RANGES
from loaders.sampling import Read, plan_reads, sample_bucket_map, split_points, weighted_ids
from loaders.source import LocalSource
from tests.hostile_lines import every_line

GOOD = b"%d\t123456789\t2\t1\tdata\t1700000000\t1\n"


def sample(directory: Path, target: int, covers: bool = True) -> BucketMap:
    config = Config(loading_bucket_target_bytes=target,
                    loading_bucket_target_covers_heaviest=covers)
    source = LocalSource(directory)
    return sample_bucket_map(config, source, source.list())


@pytest.mark.parametrize("target", [1, 4096, 1 << 30, 1 << 40, MAX_ID])
@pytest.mark.parametrize("covers", [True, False])
def test_one_line_is_one_bucket_whatever_the_target(tmp_path, target, covers):
    (tmp_path / "one.tsv").write_bytes(GOOD % 5)
    assert sample(tmp_path, target, covers) == BucketMap.from_splits([])


@pytest.mark.parametrize("target", [1 << 40, MAX_ID])
def test_a_tiny_input_with_a_huge_target_is_one_bucket(tmp_path, target):
    (tmp_path / "a.tsv").write_bytes(b"".join(GOOD % i for i in range(1, 50)))
    assert sample(tmp_path, target).count == 1


def test_empty_files_and_no_file_are_one_bucket(tmp_path):
    assert sample(tmp_path, 4096) == BucketMap.from_splits([])
    for k in range(3):
        (tmp_path / f"empty-{k}.tsv").write_bytes(b"")
    assert sample(tmp_path, 4096) == BucketMap.from_splits([])


def test_no_valid_line_in_the_sample_is_one_bucket(tmp_path):
    (tmp_path / "bad.tsv").write_bytes(b"not a link\n" * 3 + b"-1\t1\t1\t1\tx\t1\t1")
    assert sample(tmp_path, 1 << 40) == BucketMap.from_splits([])


def test_split_points_of_a_weight_far_below_the_target():
    assert split_points([(7, 40.0)], 1 << 62) == []
    assert split_points([(7, 40.0), (9, 1e-3)], MAX_ID, covers_heaviest=False) == []
    assert split_points([], 1) == []


lines = st.one_of(st.integers(0, MAX_ID).map(lambda i: GOOD % i),
                  st.sampled_from([b"bad\n", b"\n", b"1\t2\n", b"-1\t1\t1\t1\tx\t1\t1\n"]))


@settings(max_examples=60, deadline=None)
@given(files=st.lists(st.lists(lines, max_size=4), max_size=3),
       last_newline=st.booleans(), target=st.integers(1, MAX_ID), covers=st.booleans())
def test_any_tiny_input_gets_a_map_of_every_id(files, last_newline, target, covers):
    directory = Path(tempfile.mkdtemp())
    try:
        for k, content in enumerate(files):
            data = b"".join(content)
            path = directory / f"f{k}.tsv"
            path.write_bytes(data if last_newline else data.rstrip(b"\n"))
            os.utime(path, (k + 1, k + 1))
        bucket_map = sample(directory, target, covers)
        assert bucket_map.bucket_of(0) == 0
        assert bucket_map.range_of(bucket_map.count - 1)[1] == MAX_ID
        ids = {int(l.split(b"\t")[0]) for content in files for l in content if l.count(b"\t") == 6
               and not l.startswith(b"-")}
        assert bucket_map.count <= max(1, len(ids))  # splits only at ids the sample saw
    finally:
        shutil.rmtree(directory)


def _reference(block: bytes, read: Read) -> list[tuple[int, float]]:
    """weighted_ids by parse_line, line by line: what the fast path must give."""
    if read.offset > 0:
        block = block[block.find(b"\n") + 1:] if b"\n" in block else b""
    if not read.at_eof:
        block = block[:block.rfind(b"\n") + 1]
    found = []
    for one in block.splitlines(keepends=True):
        try:
            found.append((parse_line(one).id1, len(one)))
        except ParseError:
            pass
    total = sum(n for _, n in found)
    return [(id1, read.stands_for * n / total) for id1, n in found]


good_line = st.builds(lambda i, zeros, data: b"0" * zeros + GOOD.replace(b"data", data) % i,
                      st.integers(0, MAX_ID), st.integers(0, 3),
                      st.binary(max_size=20).filter(lambda d: not set(d) & set(b"\t\n\r%")))
any_line = st.one_of(good_line, good_line.map(lambda l: l[:-1] + b"\r\n"),
                     st.sampled_from([l + b"\n" for l in every_line()[:40] if len(l) < 500]))


@settings(max_examples=200, deadline=None)
@given(lines=st.lists(any_line, max_size=8), offset=st.integers(0, 3), at_eof=st.booleans(),
       cut=st.integers(0, 5))
def test_the_fast_path_weighs_exactly_as_parse_line(lines, offset, at_eof, cut):
    block = b"".join(lines)
    block = block[:len(block) - cut] if at_eof else block
    read = Read("f", offset, len(block), 1000.0, at_eof)
    assert weighted_ids(block, read) == _reference(block, read)


def test_the_sample_over_http_is_the_local_one_in_a_request_per_file(tmp_path):
    """The same reads, the same map; over HTTP a file's reads are one request (or one per
    128), answered multipart by `debl source serve`."""
    import threading
    from dataclasses import replace

    from debl.bench.source_server import make_server
    from loaders.source import HttpSource

    class Counted(HttpSource):
        requests = 0

        def _get(self, *args, **kwargs):
            Counted.requests += 1
            return super()._get(*args, **kwargs)

    for k in range(3):
        (tmp_path / f"f{k}.tsv").write_bytes(b"".join(GOOD % (k * 100_000 + i)
                                                      for i in range(10_000)))
        os.utime(tmp_path / f"f{k}.tsv", (k + 1, k + 1))
    config = Config(loading_bucket_target_bytes=64 << 10, loading_sample_reads_per_bucket=32,
                    loading_sample_bytes=256)
    server = make_server(tmp_path, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        http = Counted(f"http://127.0.0.1:{server.server_address[1]}")
        local = LocalSource(tmp_path)
        files = local.list()
        reads = plan_reads(files, 64 << 10, 32, 256)
        assert len(reads) > 3 * MAX_RANGES  # more than one request per file
        # Without their manifests (the server serves some): the files are sampled.
        sampled = [replace(f, manifest=None) for f in http.list()]
        assert sample_bucket_map(config, http, sampled) == sample_bucket_map(config, local, files)
        assert Counted.requests == 1 + sum(-(-sum(r.name == f.name for r in reads) // MAX_RANGES)
                                           for f in files)
    finally:
        server.shutdown()
        server.server_close()
