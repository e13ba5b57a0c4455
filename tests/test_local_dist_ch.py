"""dist_ch in the loading process (loaders.local_dist_ch) against dist_ch's JVM task: the same
chunk gives the same bucket files byte for byte, the same index rows and the same rejects, on the
hostile lines the loads are tested with, in two files of one chunk, LF and CRLF."""

from __future__ import annotations

import os

import pytest

from debl.format.bucket_file import parse_tail
from debl.format.bucket_map import BucketMap
from debl.format.link import REJECT_PREFIX, too_long
from debl.hdfs import HdfsClient
from loaders import dist_ch
from loaders.chunker import Chunk, Segment
from loaders.dist_ch import Reject
from loaders.local_dist_ch import bucket_locally
from tests.hostile_lines import LIMIT, U63, every_line

pytestmark = pytest.mark.stack

_EDGES = [b"%d\t123456789\t1\t1\tedge\t5\t0" % id1
          for id1 in (0, 5, 6, 999, 1000, 1005, (1 << 40) - 1, 1 << 40, U63 - 1)]


def _chunk(path: str) -> tuple[Chunk, bytes]:
    """Two files in one chunk: the hostile lines (LF and CRLF by turns) and the edges, the
    second starting at byte 40 of its file (a segment that does not start at its file's
    start, as a piece fetched on demand)."""
    lines = every_line() + _EDGES
    first = b"".join(line + (b"\r\n" if i % 2 else b"\n") for i, line in enumerate(lines))
    second = b"".join(line + b"\n" for line in _EDGES)
    segments = (Segment(2, "a.tsv", 0, len(first), 1, len(lines), 0),
                Segment(7, "b.tsv", 40, 40 + len(second), 3, len(_EDGES), len(lines)))
    return Chunk(12, path, len(first) + len(second), segments), first + second


@pytest.mark.parametrize("bucket_map", [BucketMap.fixed(1000),
                                        BucketMap.from_splits([6, 1005, 1 << 40, U63])],
                         ids=["width", "splits"])
def test_a_chunk_bucketed_here_equals_the_same_chunk_bucketed_by_the_jvm(stack_config, spark,
                                                                         bucket_map):
    config = stack_config.replace(loading_max_line_bytes=LIMIT)
    fs = HdfsClient(config)
    root = f"{config.hdfs.root}/test-local-dist_ch-{os.getpid()}"
    chunk, data = _chunk(f"{root}/chunks/chunk-00012")
    fs.write(chunk.path, data, overwrite=True)
    try:
        jvm = dist_ch.bucket_chunk(spark, config, chunk, bucket_map, f"{root}/jvm")
        local = bucket_locally(config, fs, chunk, bucket_map, f"{root}/local")
        here = bucket_locally(config, fs, chunk, bucket_map, f"{root}/given", data)
        assert [(p.b_index, p.rows, p.bytes, p.checksum, p.c_lo, p.c_hi) for p in jvm.parts] \
            == [(p.b_index, p.rows, p.bytes, p.checksum, p.c_lo, p.c_hi) for p in local.parts] \
            == [(p.b_index, p.rows, p.bytes, p.checksum, p.c_lo, p.c_hi) for p in here.parts]
        assert jvm.rejects == local.rejects == here.rejects
        assert any("max_line_bytes" in r.reason for r in local.rejects)
        assert any("max_line_bytes" not in r.reason for r in local.rejects)
        assert jvm.per_file == local.per_file == here.per_file
        for p in jvm.parts:
            a = fs.read(f"{p.path}.0")
            assert a == fs.read(f"{root}/local/{p.b_index}/chunk-00012.0")
            assert a == fs.read(f"{root}/given/{p.b_index}/chunk-00012.0")
            assert parse_tail(p.path, len(a), a).rows == p.rows
    finally:
        fs.delete(root, recursive=True)


def _good(n: int, at: int = 0) -> bytes:
    return b"".join(b"%d\t123456789\t%d\t1\tx\t5\t0\n" % (at + i, i) for i in range(n))


_LONG = b"y" * (2 * LIMIT)  # over the limit and over the JVM reader's hold: read past
_VALID = b"7\t123456789\t1\t1\tx\t5\t0"
_AT_LIMIT = b"0" * (LIMIT - len(_VALID)) + _VALID  # valid (leading zeros), exactly LIMIT bytes
_HEAD = _good(5) + _LONG + b"\n"
# Chunks as [(a segment's bytes, the lines its plan counts)] and the byte offsets of their slices
# after the first. Each ends in a last line without its newline, which a chunk copied by older
# DeBL versions left out of its segment's count when that line ended on the end of a copy
# block.
_LAYOUTS = {
    "the last line uncounted": ([(_good(10) + _LONG, 10)], []),
    "a chunk that is all one line": ([(_LONG, 0)], []),
    "exactly max_line_bytes": ([(_good(10) + _AT_LIMIT, 11)], []),
    "one byte over max_line_bytes": ([(_good(10) + _AT_LIMIT + b"0", 11)], []),
    "at a slice boundary": ([(_HEAD + _good(5, 50) + _LONG, 11)], [len(_HEAD)]),
    "at a segment boundary": ([(_HEAD, 6), (_good(5, 50) + _LONG, 5)], [len(_HEAD)]),
}


@pytest.mark.parametrize("layout", list(_LAYOUTS))
def test_a_last_line_without_its_newline_is_the_same_line_in_both_paths(stack_config, spark,
                                                                        layout):
    """Defect: a chunk whose last line has no newline and is not counted by its
    segment made dist_ch's JVM task walk past its last segment (ArrayIndexOutOfBounds); the
    Python path kept the line as one more line of the last segment. Both now give that line
    the same number, the same reject and the same counts, at a slice or segment boundary
    too, and a line of exactly max_line_bytes loads in both."""
    config = stack_config.replace(loading_max_line_bytes=LIMIT)
    fs = HdfsClient(config)
    root = f"{config.hdfs.root}/test-last-line-{os.getpid()}"
    parts, cuts = _LAYOUTS[layout]
    segments, at = [], 0
    for seq, (data, lines) in enumerate(parts):
        segments.append(Segment(seq, f"f{seq}.tsv", 0, len(data), 1, lines, at))
        at += lines
    data = b"".join(d for d, _ in parts)
    starts = ((0, 0),) + tuple((cut, data[:cut].count(b"\n")) for cut in cuts)
    chunk = Chunk(3, f"{root}/chunks/chunk-00003", len(data), tuple(segments), starts)
    fs.write(chunk.path, data, overwrite=True)
    try:
        jvm = dist_ch.bucket_chunk(spark, config, chunk, BucketMap.fixed(1000), f"{root}/jvm")
        local = bucket_locally(config, fs, chunk, BucketMap.fixed(1000), f"{root}/local")
        assert [(p.b_index, p.rows, p.bytes, p.checksum) for p in jvm.parts] \
            == [(p.b_index, p.rows, p.bytes, p.checksum) for p in local.parts]
        assert jvm.rejects == local.rejects and jvm.per_file == local.per_file
        last = parts[-1][0].rsplit(b"\n", 1)[-1]
        name, line_no = segments[-1].name, parts[-1][0].count(b"\n") + 1
        if len(last) > LIMIT:
            assert jvm.rejects[-1] == Reject(name, line_no, str(too_long(len(last), LIMIT)),
                                             last[:REJECT_PREFIX])
        else:
            assert jvm.rejects == [] and jvm.rows == line_no
    finally:
        fs.delete(root, recursive=True)
