"""The raw reader's pure parts (docs/COORDINATOR.md, "The raw route"): which files of a bucket
may hold a key (their Bloom filters, tested at once), the run of one key's lines in sorted blocks
(a binary search), and the newest-first merge of per-file row streams.

Pitfalls:

- Keys are matched by value, never by text: a bucket line keeps the input's bytes, and numbers
  may be written with leading zeros, any number of them (docs/LOADING.md, "Integers in the
  input"), so ``05`` and ``5`` are one id1, sorted together.
- ``key_lines`` needs whole lines, each ending in ``\\n``, sorted by ``(id1, link_type)``: whole
  blocks of a bucket file's data.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Sequence
from itertools import groupby

import numpy as np

from debl.bucket_file import BLOOM_HASHES, bloom_hash
from debl.model import Link, Origin, merge_batch

_BIT = np.uint64(7)
_BYTE_SHIFT = np.uint64(3)
_STEPS = np.arange(BLOOM_HASHES, dtype=np.uint64)
_INT_DIGITS = 4300  # int() refuses longer strings of digits (Python's conversion limit)


class FileFilters:
    """The Bloom filters of a bucket's files, tested for one key with a few numpy operations
    whatever the number of files (a change log's bucket has one file per chunk slice: 35 in the
    1 GiB bench). Every filter has at least one byte."""

    def __init__(self, blooms: Sequence[bytes]) -> None:
        sizes = [len(b) for b in blooms]
        if not sizes or min(sizes) == 0:
            raise ValueError("FileFilters needs at least one filter, each of at least one byte")
        self._bits = np.array(sizes, dtype=np.uint64)[:, None] * np.uint64(8)
        self._starts = np.cumsum([0] + sizes[:-1], dtype=np.intp)[:, None]
        self._bytes = np.frombuffer(b"".join(blooms), dtype=np.uint8)
        self.nbytes = self._bytes.nbytes + self._bits.nbytes + self._starts.nbytes

    def holding(self, id1: int, link_type: int) -> list[int]:
        """The files (their positions in the sequence given) whose filter may hold the key:
        every file that holds it, and about 1% of the others."""
        h1, h2 = bloom_hash(id1, link_type)
        positions = (np.uint64(h1) + _STEPS * np.uint64(h2)) % self._bits  # files x hashes
        found = self._bytes[self._starts + (positions >> _BYTE_SHIFT).astype(np.intp)]
        held = ((found >> (positions & _BIT)) & np.uint64(1)).all(axis=1)
        return np.flatnonzero(held).tolist()


def _number(field: bytes) -> int:
    return int(field) if len(field) < _INT_DIGITS else int(field.lstrip(b"0") or b"0")


def _line_key(data: bytes, start: int) -> tuple[int, int]:
    """(id1, link_type) of the line starting at *start*."""
    tab = data.index(b"\t", start)
    return _number(data[start:tab]), _number(data[tab + 1:data.index(b"\t", tab + 1)])


def _first_line(data: bytes, key: tuple[int, int], lo: int, past: bool) -> int:
    """The start of the first line from *lo* (a line start) whose key is at or above *key*
    (past: above it); ``len(data)`` if none. A binary search over bytes: each probe finds the
    line around the middle."""
    hi = len(data)
    while lo < hi:
        mid = (lo + hi) // 2
        start = data.rfind(b"\n", lo, mid) + 1 or lo
        k = _line_key(data, start)
        if k < key or (past and k == key):
            lo = data.index(b"\n", start) + 1
        else:
            hi = start
    return lo


def key_lines(data: bytes, id1: int, link_type: int) -> list[bytes]:
    """The lines (without newline) of (id1, link_type) in whole sorted blocks: one run, found
    by two binary searches (about 20 probes in a 64 KiB block), by value."""
    key = (id1, link_type)
    first = _first_line(data, key, 0, False)
    if first == len(data) or _line_key(data, first) != key:
        return []
    return data[first:_first_line(data, key, first, True) - 1].split(b"\n")


def merge_newest_first(streams: list[Iterator[tuple[Link, Origin]]]) -> Iterator[Link]:
    """One winner per key by the merge rule, newest first (ties: id2 descending), from
    per-file streams of one (id1, link_type) in time-descending order.

    The rows of one time form a group: a key's winner is in the first group that holds the key
    (the greatest time), where merge_batch ranks its rows (version, then file, then line); a
    key seen in an earlier group has already won."""
    merged = streams[0] if len(streams) == 1 else heapq.merge(
        *streams, key=lambda row: row[0].time, reverse=True)
    seen: set[int] = set()
    for _, group in groupby(merged, key=lambda row: row[0].time):
        _, winners = merge_batch(row for row in group if row[0].id2 not in seen)
        for link in sorted(winners.values(), key=lambda link: link.id2, reverse=True):
            seen.add(link.id2)
            yield link
