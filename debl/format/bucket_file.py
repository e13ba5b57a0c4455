"""The bucket file: dist_ch's output for one (bucket, chunk slice), with its sparse index.

A bucket file is one HDFS file ``<bucket_dir>/<b>/chunk-NNNNN.<slice>`` in three parts:

- **data**: the slice's lines of the bucket, each the input line, TAB ``file_seq``, TAB the
  line's byte offset in its file, ``\\n`` (the origin: the merge rule's last tie-breakers; an
  offset, not a line number, so that a piece copied out of file order needs no count of the
  lines before it: docs/LOADING.md, "The manifest"), sorted by ``(id1, link_type, time)``,
  stably, so input order breaks ties;
- **index**: 32-byte entries, big-endian ``(id1, link_type, time, offset)``: one for the first
  line of each block, a block starting at the first line at or past ``BLOCK`` bytes from the
  previous block's start, then one for the last line with ``offset`` = the data's length;
- **filter**: a Bloom filter of the file's ``(id1, link_type)`` keys, ``BLOOM_BITS_PER_KEY`` bits
  per distinct key (at least 64), ``BLOOM_HASHES`` bits set per key (``bloom_positions``);
- **trailer**: 40 bytes, big-endian: the data's length, its rows, the index's entries, the
  filter's bytes, the CRC-32 of index and filter, the number of hashes, and ``MAGIC``.

So the lines of one ``(id1, link_type)`` are contiguous, and the index says which blocks can
hold them (``BucketIndex.blocks``); the filter says, for most keys that a file does not hold,
that no block can: a reader fetches only the blocks of files that may hold the key
(docs/ONLINE.md, "Bucket files"). Index and filter are a footer, not files beside the data, so
that one rename publishes them with the data: no reader ever pairs a data file with another
version's index, and a chunk costs no more HDFS files than before.

This module is the reference: dist_ch's JVM writer (``debl.jobs.BucketFile``) writes exactly
``encode``'s bytes for the same lines (tested), and every reader (gen_HF's task, ``debl
verify``, the raw route) takes only ``data_length`` bytes as lines.

Pitfalls:

- A file is a bucket file only if its name is ``<prefix>.<digits>`` (``is_bucket_file``):
  ``<prefix>.<n>._COPYING_`` is a killed dist_ch's temporary file, never data.
- Trust the index only through ``parse_tail``: it checks the magic, that the file's length is
  exactly data + index + trailer, and the index's CRC, and raises BucketFileError naming the
  file otherwise.
"""

from __future__ import annotations

import struct
import zlib
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property

from debl.errors import BucketFileError
from debl.format.link import MAX_ID, MAX_TIME, Link, Origin, parse_line

BLOCK = 64 << 10  # the index's granularity: a lookup reads about one block per file
# 10 bits and 7 hashes per key: 0.8% false positives, by the Bloom filter's formula
# (1 - e^(-7/10))^7. In a change log every bucket has a file
# per chunk slice, and most of them do not hold a given id1 (nor do any, for the many ids
# without links of the type asked): the filter spares those reads.
BLOOM_BITS_PER_KEY = 10
BLOOM_HASHES = 7
MAGIC = b"DEBLBKT1"
ENTRY = struct.Struct(">QQQQ")  # id1, link_type, time, byte offset
# data length, rows, index entries, filter bytes, CRC-32 of index and filter, hashes, MAGIC
TRAILER = struct.Struct(">QQIIII8s")
# A reader's first read from a file's end: the trailer, the index (32 bytes a block) and the
# filter (10 bits a distinct key: about 1% of a file of LinkBench's short lines) of a file up to
# about 5 MB fit in it; a larger file takes a second read.
TAIL_READ = 64 << 10
_M64 = (1 << 64) - 1


def _mix(x: int) -> int:
    """SplitMix64's finalizer on 64 bits (the JVM's long arithmetic, unsigned)."""
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _M64
    return x ^ (x >> 31)


def bloom_hash(id1: int, link_type: int) -> tuple[int, int]:
    """The two 32-bit hashes (h1, h2 odd) of a key whose positions are ``h1 + i * h2`` modulo
    the filter's bits (``debl.jobs.BucketFile.bloomHash`` computes the same): one per key, for
    every filter it is tested against."""
    h = _mix((id1 + _mix(link_type)) & _M64)
    return h & 0xFFFFFFFF, (h >> 32) | 1


def bloom_positions(id1: int, link_type: int, bits: int) -> list[int]:
    """The filter bits of a key, for a filter of *bits* bits: double hashing of one 64-bit
    hash."""
    h1, h2 = bloom_hash(id1, link_type)
    return [(h1 + i * h2) % bits for i in range(BLOOM_HASHES)]


def bloom_holds(bloom: bytes, id1: int, link_type: int) -> bool:
    """Whether the filter *bloom* (at least one byte) may hold (id1, link_type): False only
    for a key never added."""
    return all(bloom[i >> 3] >> (i & 7) & 1
               for i in bloom_positions(id1, link_type, len(bloom) * 8))


def bloom_filter(keys: Iterable[tuple[int, int]]) -> bytes:
    """The filter of distinct (id1, link_type) keys; bit i is bit ``i % 8`` of byte ``i // 8``."""
    keys = list(keys)
    size = max(8, -(-len(keys) * BLOOM_BITS_PER_KEY // 8))
    bloom = bytearray(size)
    for id1, link_type in keys:
        for i in bloom_positions(id1, link_type, size * 8):
            bloom[i >> 3] |= 1 << (i & 7)
    return bytes(bloom)


def sort_key(line: bytes) -> tuple[int, int, int]:
    """(id1, link_type, time) of a bucket line (with or without its newline)."""
    fields = line.split(b"\t", 6)
    # Leading zeros stripped: a valid number has any number of them, and int() refuses a
    # string of over 4300 digits (the numbers themselves have at most 19).
    return (int(fields[0].lstrip(b"0") or b"0"), int(fields[1].lstrip(b"0") or b"0"),
            int(fields[5].lstrip(b"0") or b"0"))


def encode(lines: Iterable[bytes], block: int = BLOCK) -> bytes:
    """The bucket file of *lines* (bucket lines in input order, each ending with ``\\n``):
    what dist_ch writes for them. *block* other than BLOCK only for tests of the index."""
    keyed = sorted(((sort_key(line), line) for line in lines), key=lambda kl: kl[0])
    data = bytearray()
    entries = bytearray()
    block_start = 0
    for i, (key, line) in enumerate(keyed):
        if i == 0 or len(data) >= block_start + block:
            block_start = len(data)
            entries += ENTRY.pack(*key, block_start)
        data += line
    if keyed:
        entries += ENTRY.pack(*keyed[-1][0], len(data))
    bloom = bloom_filter(dict.fromkeys(key[:2] for key, _ in keyed)) if keyed else b""
    return bytes(data + entries + bloom + TRAILER.pack(
        len(data), len(keyed), len(entries) // ENTRY.size, len(bloom),
        zlib.crc32(entries + bloom), BLOOM_HASHES, MAGIC))


def tail_needed(path: str, file_length: int, tail: bytes) -> int:
    """How many bytes from the file's end ``parse_tail`` needs, given at least its trailer."""
    if file_length < TRAILER.size or len(tail) < TRAILER.size:
        raise BucketFileError(f"{path}: {file_length} bytes, too short for a bucket file: "
                              "not written by this version of dist_ch; reload the input")
    *_, entries, bloom, _, _, magic = TRAILER.unpack_from(tail, len(tail) - TRAILER.size)
    if magic != MAGIC:
        raise BucketFileError(f"{path} has no bucket index (no {MAGIC.decode()} trailer): not "
                              "written by this version of dist_ch; reload the input")
    need = TRAILER.size + entries * ENTRY.size + bloom
    if need > file_length:
        raise _damaged(path, file_length, f"an index of {entries} entries")
    return need


def _damaged(path: str, file_length: int, what: str) -> BucketFileError:
    return BucketFileError(f"{path}: its bucket index does not match the file ({file_length} "
                           f"bytes, {what}): the file is damaged; run `debl verify`, then "
                           "reload the input")


def read_index(path: str, file_length: int,
               read_range: Callable[[int, int], bytes]) -> "BucketIndex":
    """The index of the bucket file *path*, *file_length* bytes long, through
    ``read_range(offset, length)``: one read of the file's last ``TAIL_READ`` bytes, a second
    one only for an index and filter longer than that."""
    n = min(file_length, TAIL_READ)
    tail = read_range(file_length - n, n)
    need = tail_needed(path, file_length, tail)
    if need > len(tail):
        tail = read_range(file_length - need, need)
    return parse_tail(path, file_length, tail)


@dataclass(frozen=True)
class BucketIndex:
    """A bucket file's trailer, index and filter. ``raw``: the index entries' bytes (32 bytes
    per 64 KiB block, and one more); ``bloom``: the filter (10 bits per distinct key)."""

    path: str
    length: int  # the whole file's
    data_length: int
    rows: int
    raw: bytes
    bloom: bytes = b""

    @property
    def entries(self) -> int:
        return len(self.raw) // ENTRY.size

    def entry(self, i: int) -> tuple[int, int, int, int]:
        return ENTRY.unpack_from(self.raw, i * ENTRY.size)

    @cached_property
    def keys(self) -> list[tuple[int, int, int]]:
        """Every entry's ``(id1, link_type, time)``, unpacked once: bisect runs in C on them."""
        return [entry[:3] for entry in ENTRY.iter_unpack(self.raw)]

    @cached_property
    def offsets(self) -> list[int]:
        """Every entry's offset: block i is ``[offsets[i], offsets[i + 1])``."""
        return [entry[3] for entry in ENTRY.iter_unpack(self.raw)]

    def blocks(self, id1: int, link_type: int, min_time: int = 0) -> range:
        """The blocks that can hold lines of (id1, link_type) with time at or after
        *min_time* (empty when none can); block i is ``[offset(i), offset(i + 1))``. Block i
        holds keys from entry i's to entry i+1's, both included: a key may continue into the
        next block. None at all when the filter says the file holds no line of the key."""
        if not self.entries or not self.may_hold(id1, link_type):
            return range(0)
        return self.key_blocks(id1, link_type, min_time)

    def key_blocks(self, id1: int, link_type: int, min_time: int = 0) -> range:
        """``blocks`` without the filter's test (for a caller that made it)."""
        keys, entries = self.keys, self.entries
        if entries < 2:  # an empty file (and bisect would read hi=-1 as "the whole list")
            return range(0)
        # First block: the first one whose successor's key is not below lo.
        first = bisect_left(keys, (id1, link_type, min_time), 1, entries) - 1
        # Past the last block: the first one whose own key is above hi.
        end = bisect_right(keys, (id1, link_type, MAX_TIME), 0, entries - 1)
        return range(first, max(first, end))

    def id1_span(self, k_lo: int, k_hi: int) -> tuple[int, int] | None:
        """[start, end) of the data's blocks that can hold lines with ``k_lo <= id1 <= k_hi``
        (lines outside it may share their blocks), or None when no block can."""
        keys, entries = self.keys, self.entries
        if entries < 2 or k_lo > k_hi:
            return None
        first = bisect_left(keys, (k_lo, 0, 0), 1, entries) - 1
        end = bisect_right(keys, (k_hi, MAX_ID, MAX_TIME), 0, entries - 1)
        return (self.offsets[first], self.offsets[end]) if first < end else None

    def may_hold(self, id1: int, link_type: int) -> bool:
        """False when the file surely holds no line of (id1, link_type) (its Bloom filter)."""
        return bloom_holds(self.bloom, id1, link_type)

    def offset(self, i: int) -> int:
        """Where block i starts (``offset(entries - 1)`` is the data's length)."""
        return self.offsets[i]

    def byte_range(self, id1: int, link_type: int, min_time: int = 0) -> tuple[int, int] | None:
        """[start, end) of ``blocks(...)``, or None when no block can hold such a line."""
        found = self.blocks(id1, link_type, min_time)
        return (self.offset(found.start), self.offset(found.stop)) if found else None


def parse_tail(path: str, file_length: int, tail: bytes) -> BucketIndex:
    """The index of a bucket file from its last ``tail_needed`` (or more) bytes; raises
    BucketFileError naming the file when they are not a valid index of a file that long."""
    need = tail_needed(path, file_length, tail)
    if len(tail) < need:
        raise ValueError(f"{path}: parse_tail needs the last {need} bytes, got {len(tail)}")
    data_length, rows, entries, bloom_bytes, crc, hashes, _ = TRAILER.unpack_from(
        tail, len(tail) - TRAILER.size)
    raw = bytes(tail[len(tail) - need:len(tail) - TRAILER.size - bloom_bytes])
    bloom = bytes(tail[len(tail) - TRAILER.size - bloom_bytes:len(tail) - TRAILER.size])
    if data_length + need != file_length or zlib.crc32(raw + bloom) != crc or (rows == 0) != (
            entries == 0) or entries == 1 or (rows > 0) != (bloom_bytes > 0) or (
            hashes != BLOOM_HASHES):
        raise _damaged(path, file_length, f"index for {data_length} data bytes and {rows} rows")
    return BucketIndex(path, file_length, data_length, rows, raw, bloom)


def data_lines(data: bytes) -> Iterator[bytes]:
    """The lines (without newline) of a bucket file's data part, or of whole blocks of it."""
    start = 0
    while start < len(data):
        end = data.index(b"\n", start)
        yield data[start:end]
        start = end + 1


def parse_row(line: bytes, hot: int = 0) -> tuple[Link, Origin]:
    """A bucket line (without newline) as its link and origin (cold, or *hot* = 1 for a line of
    a hot file's bucket), with the one line parser."""
    link_line, file_seq, position = line.rsplit(b"\t", 2)
    return parse_line(link_line), Origin(hot, int(file_seq), int(position))


def file_rows(path: str, content: bytes) -> Iterator[tuple[Link, Origin]]:
    """Every row of a whole bucket file in *content* (its data part, behind a valid index)."""
    index = parse_tail(path, len(content), content)
    for line in data_lines(content[:index.data_length]):
        yield parse_row(line)


def bucket_file_stem(name: str) -> str | None:
    """The stem of a bucket file's name, ``<stem>.<slice digits>`` (the stem is the chunk's
    name: dist_ch's ``debl.jobs.BucketFile.fileName``), or None for any other name, such as a
    ``._COPYING_`` temporary."""
    stem, dot, suffix = name.rpartition(".")
    return stem if dot and stem and suffix.isdigit() and suffix.isascii() else None


def is_bucket_file(name: str, stem: str) -> bool:
    """Whether a file name in a bucket directory is one of the files of the chunk whose path
    prefix ends with *stem*: ``<stem>.<slice digits>``, never a ``._COPYING_`` temporary."""
    return bucket_file_stem(name) == stem
