"""Blocks of input lines checked and parsed at C speed: the hot path's common case (docs/LOADING.md,
"The hot path's cost").

``well_formed(block)`` tells whether *every* line of a block of whole lines takes
``debl.format.link.parse_line``'s fast path: one regular expression over the block, no Python step
per line. A block it refuses (a bad line, a 19-digit number, a line over the caller's length limit)
is no verdict: the caller parses that block line by line and finds the reason.

``block_columns(buf, lo, hi)`` then parses such a block's lines column-wise with numpy, once it
is in a byte array without its CRs: the five numbers of every line (``LineColumns``) and where
each line ends. A number is read eight digits at a time from the eight bytes that end at its
last digit (one unaligned 64-bit load per eight digits, the bytes before the number masked off,
then the digits combined pairwise in the word), not one digit column at a time.

Pitfalls:

- ``LINE`` must accept exactly what ``parse_line`` accepts at once (plain digits under 19 of
  them, visibility 0 or 1, data of at most ``MAX_DATA`` bytes without tab, CR or LF, an optional
  CR before the LF); accepting more would let a bad line into MySQL. tests/test_line_block.py
  holds the two to each other on generated lines.
- ``block_columns`` reads up to ``HEAD_ROOM`` bytes before ``lo`` (masked off, never used): the
  array needs that many bytes in front of the block, whatever they hold.
"""

from __future__ import annotations

import re
from typing import NamedTuple

import numpy as np

from debl.format.link import MAX_DATA

# 18 digits always fit in 63 bits (parse_line's fast path). Every repeat is possessive: what
# follows it (a tab, a CR or LF, the next line) is outside its class, so no match is lost, and the
# expression keeps no backtracking state, which makes it faster (docs/LOADING.md, "The hot
# path's cost").
_NUMBER = rb"[0-9]{1,18}+"
LINE = (rb"%(n)s\t%(n)s\t%(n)s\t[01]\t[^\t\n\r]{0,%(d)d}+\t%(n)s\t%(n)s\r?\n"
        % {b"n": _NUMBER, b"d": MAX_DATA})
_BLOCK = re.compile(rb"(?:" + LINE + rb")*+")

LONGEST_LINE = 5 * 18 + 1 + MAX_DATA + 6  # the longest body LINE accepts, its line end not counted
HEAD_ROOM = 24  # bytes before a block that block_columns reads: a number's 18 digits, in words

_U64 = np.dtype("<u8")
# For d digits (0 to 8) at the top of a word: the mask of their bytes, and their '0's.
_KEEP = np.array([((1 << 64) - 1) ^ ((1 << (64 - 8 * d)) - 1) for d in range(9)], dtype=np.uint64)
_KEPT_ZEROS = _KEEP & np.uint64(0x3030303030303030)
_PAIR_MASK = np.uint64(0x000000FF000000FF)
_PAIRS_HI = np.uint64(100 + (1000000 << 32))
_PAIRS_LO = np.uint64(1 + (10000 << 32))
_8, _16, _32, _TEN = np.uint64(8), np.uint64(16), np.uint64(32), np.uint64(10)
_E8, _E16 = np.uint64(10**8), np.uint64(10**16)


class LineColumns(NamedTuple):
    """The lines of a block, column-wise: each line's five numbers (uint64) and the position of
    its LF in the array it was parsed from (int64)."""

    id1: np.ndarray
    link_type: np.ndarray
    id2: np.ndarray
    time: np.ndarray
    version: np.ndarray
    ends: np.ndarray


def well_formed(block: bytes | memoryview) -> bool:
    """Whether *block* (whole lines, each ending in ``\\n``) is non-empty and every one of its
    lines takes ``parse_line``'s fast path."""
    return bool(block) and _BLOCK.fullmatch(block) is not None


def block_columns(buf: np.ndarray, lo: int, hi: int) -> LineColumns:
    """Parse ``buf[lo:hi]`` (uint8, C-contiguous): lines that ``well_formed`` accepted, with
    every CR before a LF removed since. ``lo >= HEAD_ROOM``."""
    if lo < HEAD_ROOM:
        raise ValueError(f"block_columns needs {HEAD_ROOM} bytes before the block, not {lo}")
    raw = buf[lo:hi]
    ends = np.flatnonzero(raw == ord("\n")) + lo
    tabs = (np.flatnonzero(raw == ord("\t")) + lo).reshape(-1, 6)  # six a line, checked before
    starts = np.empty_like(ends)
    starts[0], starts[1:] = lo, ends[:-1] + 1
    # Every eight bytes of buf as one little-endian word: words[p] is buf[p:p+8].
    words = np.ndarray(shape=(len(buf) - 7,), dtype=_U64, buffer=buf, strides=(1,))
    return LineColumns(_numbers(words, starts, tabs[:, 0]),
                       _numbers(words, tabs[:, 0] + 1, tabs[:, 1]),
                       _numbers(words, tabs[:, 1] + 1, tabs[:, 2]),
                       _numbers(words, tabs[:, 4] + 1, tabs[:, 5]),
                       _numbers(words, tabs[:, 5] + 1, ends), ends)


def numbers_at(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The decimal numbers at ``buf[starts[i]:ends[i]]`` (uint64): each 1 to 18 plain digits,
    as in a block ``well_formed`` accepted (the manifest's builder reads the id1s of a block this
    way, ``debl.keys.manifest``). Every ``starts[i] >= HEAD_ROOM``, as for ``block_columns``."""
    if len(starts) == 0:
        return np.zeros(0, dtype=np.uint64)
    words = np.ndarray(shape=(len(buf) - 7,), dtype=_U64, buffer=buf, strides=(1,))
    return _numbers(words, starts, ends)


def _numbers(words: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The decimal numbers at ``buf[starts[i]:ends[i]]`` (1 to 18 digits each)."""
    lengths = ends - starts
    longest = int(lengths.max())
    values = _eight(words, ends, np.minimum(lengths, 8))
    if longest > 8:
        values += _eight(words, ends - 8, np.clip(lengths - 8, 0, 8)) * _E8
    if longest > 16:
        values += _eight(words, ends - 16, np.clip(lengths - 16, 0, 8)) * _E16
    return values


def _eight(words: np.ndarray, ends: np.ndarray, digits: np.ndarray) -> np.ndarray:
    """The numbers written by the *digits* (0 to 8) bytes before each of *ends*."""
    word = words[ends - 8]  # its last byte, the last digit, is the word's most significant
    # The top `digits` bytes are the number's; the ones before it become 0.
    word = (word & _KEEP[digits]) - _KEPT_ZEROS[digits]
    word = word * _TEN + (word >> _8)  # pairs of digits
    return ((word & _PAIR_MASK) * _PAIRS_HI + ((word >> _16) & _PAIR_MASK) * _PAIRS_LO) >> _32
