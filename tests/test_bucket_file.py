"""The bucket file format (debl.format.bucket_file): sorted data, the sparse index and its lookup,
the trailer's checks, and which names are bucket files. Pure unit tests; that dist_ch's JVM writer
writes exactly ``encode``'s bytes is checked on the stack (tests/test_raw.py)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from debl.format import bucket_file
from debl.format.bucket_file import (BLOCK, BLOOM_BITS_PER_KEY, BLOOM_HASHES, ENTRY, TAIL_READ,
                              TRAILER, data_lines, encode, is_bucket_file, parse_row,
                              parse_tail, read_index, sort_key)
from debl.errors import BucketFileError
from debl.format.link import MAX_TIME, Link

U63 = (1 << 63) - 1


def _bucket_line(link: Link, file_seq: int, line_no: int) -> bytes:
    return link.to_line()[:-1] + b"\t%d\t%d\n" % (file_seq, line_no)


# Few distinct ids, types and times, so that keys repeat and straddle blocks.
small = st.sampled_from([0, 1, 2, 7, U63])
times = st.sampled_from([0, 1, 5, 6, MAX_TIME])
links = st.builds(Link, small, st.sampled_from([1, 2]), st.integers(0, 50), st.integers(0, 1),
                  st.binary(max_size=30).filter(lambda d: not set(d) & {9, 10, 13}), times,
                  st.integers(0, 3))


def _file(rows: list[Link], block: int = BLOCK) -> tuple[list[bytes], bytes]:
    lines = [_bucket_line(link, 0, n) for n, link in enumerate(rows, 1)]
    return lines, encode(lines, block)


def _index(content: bytes):
    return parse_tail("/b/chunk-00000.0", len(content), content)


@given(st.lists(links, max_size=60))
def test_encode_sorts_stably_and_the_trailer_describes_the_data(rows):
    lines, content = _file(rows)
    index = _index(content)
    assert index.rows == len(rows)
    data = content[:index.data_length]
    assert data == b"".join(sorted(lines, key=sort_key))  # sorted() is stable
    assert [parse_row(line) for line in data_lines(data)] == \
        [parse_row(line[:-1]) for line in sorted(lines, key=sort_key)]
    assert len(content) == \
        index.data_length + len(index.raw) + len(index.bloom) + TRAILER.size


@settings(max_examples=300)
@given(st.lists(links, max_size=80), st.sampled_from([1, 40, 200]), small,
       st.sampled_from([1, 2, 3]), times)
def test_byte_range_holds_every_line_of_the_key_and_few_others(rows, block, id1, link_type,
                                                               min_time):
    lines, content = _file(rows, block)
    index = _index(content)
    data = content[:index.data_length]
    wanted = [line for line in data_lines(data)
              if sort_key(line)[:2] == (id1, link_type) and sort_key(line)[2] >= min_time]
    found = index.byte_range(id1, link_type, min_time)
    if found is None:
        assert wanted == []
        return
    start, end = found
    starts = [index.entry(i)[3] for i in range(index.entries)]
    assert start in starts and end in starts  # whole blocks
    got = [line for line in data_lines(data[start:end])
           if sort_key(line)[:2] == (id1, link_type) and sort_key(line)[2] >= min_time]
    assert got == wanted
    # Only the blocks whose key span [entry i, entry i+1] meets the wanted keys.
    lo, hi = (id1, link_type, min_time), (id1, link_type, MAX_TIME)
    for i in range(starts.index(start), starts.index(end)):
        assert index.entry(i)[:3] <= hi and index.entry(i + 1)[:3] >= lo


@settings(max_examples=300)
@given(st.lists(links, max_size=80), st.sampled_from([1, 40, 200]), small, small)
def test_id1_span_holds_every_line_of_the_id1_range(rows, block, a, b):
    """``debl verify --against-source`` reads a range of id1s from a hot bucket's files: the
    span holds every line of it, in whole blocks."""
    k_lo, k_hi = min(a, b), max(a, b)
    lines, content = _file(rows, block)
    index = _index(content)
    data = content[:index.data_length]
    wanted = [line for line in data_lines(data) if k_lo <= sort_key(line)[0] <= k_hi]
    found = index.id1_span(k_lo, k_hi)
    if found is None:
        assert wanted == []
        return
    start, end = found
    starts = [index.entry(i)[3] for i in range(index.entries)]
    assert start in starts and end in starts
    assert [line for line in data_lines(data[start:end])
            if k_lo <= sort_key(line)[0] <= k_hi] == wanted
    assert index.id1_span(k_hi, k_lo) is None or k_lo == k_hi


def test_a_heavy_key_spans_many_blocks_and_a_neighbour_reads_one():
    rows = [Link(5, 1, j, 1, b"x" * 100, j, 0) for j in range(3000)]  # over 400 KB
    rows += [Link(4, 1, 1, 1, b"a", 1, 0), Link(6, 1, 1, 1, b"b", 1, 0)]
    random.Random(1).shuffle(rows)
    _, content = _file(rows)
    index = _index(content)
    assert index.entries > 6
    start, end = index.byte_range(5, 1)
    assert (start, end) == (0, index.data_length)
    start, end = index.byte_range(5, 1, min_time=2990)  # the newest few: the last block only
    assert end == index.data_length and end - start <= BLOCK + 200
    start, end = index.byte_range(4, 1)
    assert start == 0 and end <= BLOCK + 200
    assert index.byte_range(5, 2) is None or index.byte_range(5, 2)[1] - \
        index.byte_range(5, 2)[0] <= BLOCK + 200
    assert index.byte_range(3, 1) is None and index.byte_range(7, 1) is None


def test_read_index_reads_the_tail_then_a_long_index():
    rows = [Link(i, 1, i, 1, b"", i, 0) for i in range(3000)]
    _, content = _file(rows, block=1)  # an entry per line: an index over TAIL_READ
    reads: list[tuple[int, int]] = []
    index = read_index("/b/x.0", len(content), read_range_of(content, reads))
    assert len(index.raw) + TRAILER.size > TAIL_READ and len(reads) == 2
    assert index.rows == 3000
    _, small_file = _file(rows[:3])
    reads.clear()
    assert read_index("/b/x.0", len(small_file), read_range_of(small_file, reads)).rows == 3
    assert reads == [(0, len(small_file))]


def read_range_of(content: bytes, reads: list):
    """A read_range over bytes in memory that records its calls."""
    def read_range(offset, length):
        reads.append((offset, length))
        return content[offset:offset + length]
    return read_range


@pytest.mark.parametrize("damage, message", [
    (lambda c, d: c[:d], "has no bucket index"),                        # an older dist_ch's file
    (lambda c, d: b"x" + c, "does not match the file"),                  # length off
    (lambda c, d: c[:d] + bytes([c[d] ^ 1]) + c[d + 1:], "does not match the file"),  # CRC
    (lambda c, d: c[-TRAILER.size:], "does not match the file"),         # data gone
    (lambda c, d: b"", "too short"),
])
def test_a_damaged_index_is_refused_naming_the_file(damage, message):
    lines, content = _file([Link(1, 1, j, 1, b"d", j, 0) for j in range(10)])
    data_length = len(b"".join(lines))
    bad = damage(content, data_length)
    with pytest.raises(BucketFileError, match=rf"/b/chunk-00000\.0.*{message}"):
        parse_tail("/b/chunk-00000.0", len(bad), bad)


def test_index_and_filter_cost_32_bytes_per_block_and_10_bits_per_key():
    rows = [Link(i // 3, 1, i, 1, b"y" * 80, i, 0) for i in range(20000)]
    _, content = _file(rows)
    index = _index(content)
    assert 2 <= index.entries <= -(-index.data_length // BLOCK) + 1  # blocks, and the last line
    assert len(index.bloom) == -(-(20000 // 3 + 1) * BLOOM_BITS_PER_KEY // 8)
    assert len(content) - index.data_length == \
        ENTRY.size * index.entries + len(index.bloom) + TRAILER.size
    assert (len(content) - index.data_length) / index.data_length < 0.005


@settings(max_examples=50)
@given(st.sets(st.tuples(st.integers(0, U63), st.integers(0, U63)), max_size=300))
def test_the_filter_never_misses_a_key_and_rarely_lets_others_through(keys):
    lines = [Link(a, b, 1, 1, b"", 0, 0).to_line()[:-1] + b"\t0\t1\n" for a, b in keys]
    content = encode(lines)
    if not keys:
        assert _index(content).entries == 0
        return
    index = _index(content)
    assert all(index.may_hold(a, b) for a, b in keys)
    others = [(a + 1, b) for a, b in keys if (a + 1, b) not in keys]
    passed = sum(index.may_hold(a, b) and (a, b) not in keys for a, b in others)
    assert passed <= 3 + len(others) // 20  # about 1% false positives


def test_a_key_the_filter_excludes_reads_no_block():
    rows = [Link(i, 1, i, 1, b"x" * 100, i, 0) for i in range(0, 6000, 2)]  # even ids only
    _, content = _file(rows)
    index = _index(content)
    absent = [i for i in range(1, 6000, 2) if not index.may_hold(i, 1)]
    assert len(absent) > 2900  # almost every odd id is excluded...
    assert all(not index.blocks(i, 1) for i in absent)  # ...and reads nothing
    assert all(index.blocks(i, 1) for i in range(0, 6000, 2))


@pytest.mark.parametrize("name, ok", [
    ("chunk-00001.0", True), ("chunk-00001.12", True), ("chunk-00001.0._COPYING_", False),
    ("chunk-00001", False), ("chunk-00001.", False), ("chunk-000012.0", False),
    ("chunk-00001.x", False), ("chunk-00001.٣", False), ("chunk-00002.0", False),
])
def test_which_names_are_bucket_files(name, ok):
    assert is_bucket_file(name, "chunk-00001") is ok


def test_the_module_constants_match_the_jvm_writer():
    # debl.jobs.BucketFile hard-codes these; a change here must change it too.
    assert (BLOCK, bucket_file.MAGIC, ENTRY.size, TRAILER.size, BLOOM_BITS_PER_KEY,
            BLOOM_HASHES) == (65536, b"DEBLBKT1", 32, 40, 10, 7)
