"""Blocks of input lines checked at C speed: the hot path's common case (docs/LOADING.md,
"The hot path's cost").

``block_keys(block)`` tells whether *every* line of a block of whole lines takes
``debl.model.parse_line``'s fast path, and if so returns their keys' ``(id1, link_type)`` as
numpy arrays, without a Python step per line: one regular expression over the block, then the
two leading numbers parsed column-wise with numpy. A block it refuses (a bad line, a 19-digit
number, a line over the caller's length limit) is no verdict: the caller parses that block line
by line, as before, and finds the reason.

Pitfall: ``LINE`` must accept exactly what ``parse_line`` accepts at once (plain digits under 19
of them, visibility 0 or 1, data of at most ``MAX_DATA`` bytes without tab, CR or LF, an optional
CR before the LF); accepting more would let a bad line into MySQL. tests/test_line_block.py
holds the two to each other on generated lines.
"""

from __future__ import annotations

import re

import numpy as np

from debl.model import MAX_DATA

_NUMBER = rb"\d{1,18}"  # 18 digits always fit in 63 bits (parse_line's fast path)
LINE = (rb"%(n)s\t%(n)s\t%(n)s\t[01]\t[^\t\n\r]{0,%(d)d}\t%(n)s\t%(n)s\r?\n"
        % {b"n": _NUMBER, b"d": MAX_DATA})
_BLOCK = re.compile(rb"(?:" + LINE + rb")*")

LONGEST_LINE = 5 * 18 + 1 + MAX_DATA + 6  # the longest body LINE accepts, its line end not counted

_ZERO, _TEN = np.uint64(ord("0")), np.uint64(10)


def block_keys(block: bytes) -> tuple[np.ndarray, np.ndarray] | None:
    """``(id1s, link_types)`` (uint64) of the lines of *block*, which holds whole lines each
    ending in ``\\n``, if every one of them is well formed; else None."""
    if not block or _BLOCK.fullmatch(block) is None:
        return None
    raw = np.frombuffer(block, dtype=np.uint8)
    ends = np.flatnonzero(raw == ord("\n"))
    tabs = np.flatnonzero(raw == ord("\t")).reshape(-1, 6)  # six in every line, checked above
    starts = np.empty_like(ends)
    starts[0], starts[1:] = 0, ends[:-1] + 1
    return _numbers(raw, starts, tabs[:, 0]), _numbers(raw, tabs[:, 0] + 1, tabs[:, 1])


def _numbers(raw: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The decimal numbers at ``raw[starts[i]:ends[i]]`` (1 to 18 digits each), one digit
    column at a time."""
    lengths = ends - starts
    values = np.zeros(len(starts), dtype=np.uint64)
    for k in range(int(lengths.max())):
        live = k < lengths
        digits = raw[np.where(live, starts + k, 0)].astype(np.uint64) - _ZERO
        values = np.where(live, values * _TEN + digits, values)
    return values
