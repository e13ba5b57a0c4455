"""The vectorized line encoder writes exactly the bytes of Link.to_line."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from debl.format.link import Link, parse_line
from debl.workload.lineformat import digit_counts, encode_links

_INT64 = st.integers(0, (1 << 63) - 1)
_links = st.lists(st.tuples(_INT64, _INT64, _INT64, st.integers(0, 1),
                            st.binary(max_size=40).map(lambda b: bytes(32 + x % 69 for x in b)),
                            _INT64, _INT64), min_size=1, max_size=40)


@settings(max_examples=80, deadline=None)
@given(_links)
def test_encode_matches_to_line(rows):
    cols = [np.array([r[i] for r in rows], dtype=np.int64) for i in (0, 1, 2, 3, 5, 6)]
    sizes = np.array([len(r[4]) for r in rows], dtype=np.int64)
    data = np.frombuffer(b"".join(r[4] for r in rows), dtype=np.uint8)
    buf, ends = encode_links(cols[0], cols[1], cols[2], cols[3], sizes, data, cols[4], cols[5])
    expected = [Link(r[0], r[1], r[2], r[3], r[4], r[5], r[6]).to_line() for r in rows]
    assert buf.tobytes() == b"".join(expected)
    assert ends.tolist() == np.cumsum([len(e) for e in expected]).tolist()
    assert parse_line(expected[0]) == Link(*rows[0])


def test_digit_counts_at_powers_of_ten():
    values = np.array([0, 9, 10, 99, 100, 10**17, 10**18 - 1, 10**18, (1 << 63) - 1])
    assert digit_counts(values).tolist() == [len(str(v)) for v in values.tolist()]
