"""The split-point sample on the smallest inputs (issue 24): any number of empty files, one
line, lines none of which is valid, and a ``bucket_target_bytes`` far above the input (a
tiny cold input with a large target once divided by zero). Every such input gets a bucket map
that covers every id, from the real sampler over a local directory. Pure unit tests."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from debl.buckets import MAX_ID, BucketMap
from debl.config import Config
from loaders.sampling import sample_bucket_map, split_points
from loaders.source import LocalSource

GOOD = b"%d\t123456789\t2\t1\tdata\t1700000000\t1\n"


def sample(directory: Path, target: int, covers: bool = True) -> BucketMap:
    config = Config(bucket_target_bytes=target, bucket_target_covers_heaviest=covers)
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
        assert bucket_map.bucket_of(0) == 0 and bucket_map.range_of(bucket_map.count - 1)[1] == MAX_ID
        ids = {int(l.split(b"\t")[0]) for content in files for l in content if l.count(b"\t") == 6
               and not l.startswith(b"-")}
        assert bucket_map.count <= max(1, len(ids))  # splits only at ids the sample saw
    finally:
        shutil.rmtree(directory)
