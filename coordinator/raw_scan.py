"""The raw reader's pure parts (docs/COORDINATOR.md, "The raw route"): which files of a bucket
may hold a key (their Bloom filters, tested together), the run of one key's lines in sorted
blocks (a binary search); the files' rows are merged by ``coordinator.merge.NewestFirstMerge``.

Pitfalls:

- Keys are matched by value, never by text: a bucket line keeps the input's bytes, and numbers
  may be written with leading zeros, any number of them (docs/LOADING.md, row "Integers in the
  input"), so ``05`` and ``5`` are one id1, sorted together.
- ``key_lines`` needs whole lines, each ending in ``\\n``, sorted by ``(id1, link_type)``: whole
  blocks of a bucket file's data.
"""

from __future__ import annotations

from collections.abc import Sequence

from debl.format.bucket_file import BLOOM_HASHES, bloom_hash

_INT_DIGITS = 4300  # int() refuses longer strings of digits (Python's conversion limit)


class FileFilters:
    """The Bloom filters of a bucket's files, tested for one key together: the key is hashed
    once, and each filter is probed position by position until the first bit not set, so a file
    that does not hold the key (most, in a change log) costs about two probes: faster than
    computing every position and testing each filter in turn, or one numpy pass over all the
    filters (its calls' overhead; docs/COORDINATOR.md, "The raw route", has the measurement).
    Every filter has at least one byte."""

    def __init__(self, blooms: Sequence[bytes]) -> None:
        if not blooms or not all(blooms):
            raise ValueError("FileFilters needs at least one filter, each of at least one byte")
        self._filters = [(bloom, len(bloom) * 8) for bloom in blooms]
        self.nbytes = sum(len(bloom) for bloom in blooms)

    def bloom(self, i: int) -> bytes:
        """The filter of file *i*."""
        return self._filters[i][0]

    def holding(self, id1: int, link_type: int) -> list[int]:
        """The files (their positions in the sequence given) whose filter may hold the key:
        every file that holds it, and about 1% of the others."""
        h1, h2 = bloom_hash(id1, link_type)
        held = []
        for i, (bloom, bits) in enumerate(self._filters):
            position = h1
            for _ in range(BLOOM_HASHES):  # the positions h1 + k * h2, as bloom_positions
                bit = position % bits
                if not bloom[bit >> 3] >> (bit & 7) & 1:
                    break
                position += h2
            else:
                held.append(i)
        return held


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
