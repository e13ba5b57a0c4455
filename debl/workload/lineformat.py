"""Link records to input lines, vectorized: one numpy byte buffer for a whole chunk.

Every field is written for all lines at once (one pass per decimal digit), straight from the
generator's arrays, and the result is exactly the bytes of ``debl.format.link.Link.to_line``: seven
tab-separated fields, ``\\n``. What it costs against ``Link.to_line`` line by line:
docs/WORKLOAD.md, "Measured".

Pitfall: integers must be non-negative int64 (negative numbers are not formatted); ``data``
bytes must not be tab or newline -- the caller's byte range (32..100) guarantees it.
"""

from __future__ import annotations

import numpy as np

_POW10 = 10 ** np.arange(1, 19, dtype=np.int64)  # 10 .. 10^18: every int64 has <= 19 digits
_TAB, _NL, _ZERO = 9, 10, 48


def digit_counts(values: np.ndarray) -> np.ndarray:
    """Decimal digits of each non-negative value (0 has one digit)."""
    return (np.searchsorted(_POW10, values, side="right") + 1).astype(np.int64)


def _put_digits(buf: np.ndarray, last: np.ndarray, values: np.ndarray, ndig: np.ndarray) -> None:
    """Write each value right-aligned so that its last digit lands at ``buf[last[i]]``."""
    q = values.astype(np.int64, copy=True)
    pos = last.copy()
    nd = ndig
    d = 0
    while q.size:
        buf[pos] = (q % 10 + _ZERO).astype(np.uint8)
        q //= 10
        pos -= 1
        d += 1
        more = nd > d
        if not more.all():  # shrink to the longer numbers only
            q, pos, nd = q[more], pos[more], nd[more]


def encode_links(id1: np.ndarray, link_type: np.ndarray, id2: np.ndarray,
                 visibility: np.ndarray, sizes: np.ndarray, data: np.ndarray,
                 time: np.ndarray, version: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lines for n links; returns ``(buf, ends)``: ``buf`` a uint8 array of all the lines,
    ``ends[i]`` the offset just past line i's newline.

    ``sizes[i]`` is the length of link i's data; ``data`` holds all data bytes concatenated in
    line order (``len(data) == sizes.sum()``).
    """
    ints_before = (id1, link_type, id2, visibility)
    ints_after = (time, version)
    digits_before = [digit_counts(v) for v in ints_before]
    digits_after = [digit_counts(v) for v in ints_after]
    sizes = sizes.astype(np.int64, copy=False)
    lengths = sum(digits_before) + sum(digits_after) + sizes + 7  # 6 tabs + newline
    ends = np.cumsum(lengths)
    total = int(ends[-1]) if len(ends) else 0
    buf = np.empty(total, dtype=np.uint8)
    pos = ends - lengths  # where the next field starts, per line
    for values, nd in zip(ints_before, digits_before):
        pos += nd
        _put_digits(buf, pos - 1, values, nd)
        buf[pos] = _TAB
        pos += 1
    if len(data):
        # Each data byte's destination: its line's data start plus its offset within the data.
        starts_in_data = np.cumsum(sizes) - sizes
        dest = np.repeat(pos - starts_in_data, sizes) + np.arange(len(data), dtype=np.int64)
        buf[dest] = data
    pos += sizes
    buf[pos] = _TAB
    pos += 1
    for values, nd, sep in zip(ints_after, digits_after, (_TAB, _NL)):
        pos += nd
        _put_digits(buf, pos - 1, values, nd)
        buf[pos] = sep
        pos += 1
    return buf, ends
