"""One set of hostile input lines for every reader of the input format (docs/DESIGN.md sections
3 and 8): the loads on the real stack (tests/test_hostile_input.py) and the JVM's line validation
and bucket choice against ``debl.format.link.parse_line`` and ``debl.format.bucket_map.BucketMap``
(tests/test_dist_ch_rules.py) take their lines from here, so a new hostile line added here is
checked by both.

Lines come without their line end; a reader test adds LF or CRLF.
"""

from __future__ import annotations

import numpy as np

from debl.format.link import REJECT_PREFIX
from debl.workload.badlines import KINDS, make_bad_line

U63 = (1 << 63) - 1
LT = 123456789
LIMIT = 64 * 1024  # max_line_bytes of the tests that use LONG

# An over-long line that would be valid but for its length (leading zeros), longer than the
# hot path's and the copy's 1 MiB blocks.
LONG = b"0" * (3 << 20) + b"7\t%d\t8\t1\tlong\t100\t1" % LT

# (kind, line without its line end, reason in the reject file)
HOSTILE = [
    ("carriage return alone in data", b"5\t%d\t6\t1\tab\rcd\t100\t1" % LT,
     "data holds a carriage return"),
    ("id1 = 2^63", b"%d\t%d\t6\t1\tx\t100\t1" % (U63 + 1, LT),
     "id1 is out of the 64-bit range: b'9223372036854775808'"),
    ("id1 = -1", b"-1\t%d\t6\t1\tx\t100\t1" % LT, "id1 is negative: b'-1'"),
    ("id1 = +5", b"+5\t%d\t6\t1\tx\t100\t1" % LT, "id1 is not an integer: b'+5'"),
    ("id1 = ' 5'", b" 5\t%d\t6\t1\tx\t100\t1" % LT, "id1 is not an integer: b' 5'"),
    ("a field missing", b"5\t%d\t6\t1\tx\t100" % LT, "expected 7 tab-separated fields, found 6"),
    ("a field extra", b"5\t%d\t6\t1\tx\t100\t1\t1" % LT,
     "expected 7 tab-separated fields, found 8"),
    ("an empty line", b"", "expected 7 tab-separated fields, found 1"),
    ("a line of 3 MiB, over loading.max_line_bytes", LONG,
     f"line is {len(LONG)} bytes, more than loading.max_line_bytes={LIMIT}; the reject file "
     f"keeps its first {REJECT_PREFIX}"),
]
# Valid lines that look hostile: they must load and round-trip exactly.
ODD_BUT_VALID = [
    b"7\t%d\t1009\t1\t\x00nul\x00\t200\t3" % LT,
    b"7\t%d\t1010\t1\t\xff\xfe\x80 not utf-8 \xc3\x28\t200\t3" % LT,
    b"0" * 5000 + b"7\t%d\t1011\t1\tleading zeros\t200\t3" % LT,
]
MAX_ID_LINE = b"%d\t%d\t1\t1\tthe largest id\t300\t1" % (U63, LT)


def generated_bad_lines() -> list[bytes]:
    """One line of each kind ``debl generate --bad-lines`` injects (``debl.workload.badlines``),
    without its newline."""
    rng = np.random.default_rng(13)
    return [make_bad_line(kind, 1000 + i, LT, 1_700_000_000_000, rng)[0].removesuffix(b"\n")
            for i, kind in enumerate(KINDS)]


def every_line() -> list[bytes]:
    """The whole set: the hostile lines, the odd but valid ones, the largest id and the
    generator's bad lines."""
    return ([line for _, line, _ in HOSTILE] + ODD_BUT_VALID + [MAX_ID_LINE]
            + generated_bad_lines())
