"""The link: its text format, its parser, and the merge rule that every store obeys.

A link is one line of seven tab-separated fields, ``\\n``-terminated (``\\r\\n`` is read as
``\\n``: a CRLF file loads as its LF twin)::

    id1  link_type  id2  visibility  data  time  version

``data`` is raw bytes (LinkBench uses bytes 32..100, which include ``"``, ``,`` and ``\\``) with
no tab, no newline and no carriage return, at most 255 bytes; NUL and invalid UTF-8 are data.
Lines are handled as ``bytes`` end to end so that data round-trips byte-exact through MySQL,
HDFS and HBase.

The merge rule (docs/DESIGN.md section 3): for one key ``(id1, link_type, id2)`` the row with the
greatest ``time`` wins; on equal time the greatest ``version``; on equal version the hot row over
the cold one, then the later file, then the later line. Merge first, then filter: a newer hidden row
hides an older visible one. ``Origin`` carries the tie-breakers that are not part of the row itself.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from typing import NamedTuple

MAX_TIME = (1 << 63) - 1
MAX_DATA = 255
DEFAULT_LIMIT = 10000
LINK_TYPES = (123456789, 123456790)


class Link(NamedTuple):
    id1: int
    link_type: int
    id2: int
    visibility: int
    data: bytes
    time: int
    version: int

    @property
    def key(self) -> tuple[int, int, int]:
        return (self.id1, self.link_type, self.id2)

    def to_line(self) -> bytes:
        """The link as one input line, ``\\n`` included."""
        return b"%d\t%d\t%d\t%d\t%s\t%d\t%d\n" % (
            self.id1, self.link_type, self.id2, self.visibility, self.data, self.time, self.version)


class Origin(NamedTuple):
    """Where a row came from, for the merge rule's last tie-breakers (greater wins)."""

    hot: int  # 1 for a row from a hot file (MySQL), 0 for a cold one (HBase)
    file_seq: int  # the file's position in the input, oldest first
    # The line's place in its file, compared only within one file: its byte offset in bucket
    # files (dist_ch writes it; a piece copied out of file order knows it without counting the
    # lines before it: docs/LOADING.md, "The manifest"), its line number where a reader counts
    # lines (the hot path, the reference readers). Greater is later.
    position: int


class ParseError(ValueError):
    """A line that is not a valid link; ``str()`` is the reason, for the reject file."""


REJECT_PREFIX = 1024
"""How much of a line over ``max_line_bytes`` the reject file keeps (DistCh.Lines.PREFIX)."""


def too_long(length: int, limit: int) -> ParseError:
    """The error of a line of *length* bytes (its line end not counted) over *limit*: such a
    line is rejected without being held whole, and the reject file keeps only its first
    REJECT_PREFIX bytes (docs/DESIGN.md section 8)."""
    return ParseError(f"line is {length} bytes, more than loading.max_line_bytes={limit}; the "
                      f"reject file keeps its first {min(length, REJECT_PREFIX)}")


_INT_MAX = (1 << 63) - 1


def _integer(field: bytes, name: str) -> int:
    # int() accepts "+1", " 1", "1_0"; the format is plain non-negative digits only.
    if not field.isdigit():
        if field[:1] == b"-" and field[1:].isdigit():
            raise ParseError(f"{name} is negative: {field[:40]!r}")
        raise ParseError(f"{name} is not an integer: {field[:40]!r}")
    # Leading zeros are allowed, any number of them; int() refuses over 4300 digits.
    digits = field.lstrip(b"0") or b"0"
    value = int(digits) if len(digits) <= 19 else _INT_MAX + 1
    if value > _INT_MAX:
        raise ParseError(f"{name} is out of the 64-bit range: {field[:40]!r}")
    return value


def line_body(line: bytes) -> bytes:
    """The line without its line end: ``\n``, or ``\r\n`` (docs/DESIGN.md section 3: a CRLF file
    loads as its LF twin). A last line without a newline loses a final ``\r`` too, since the cold
    copy ends such a line with ``\n`` and the hot path must read it the same way. Any other
    carriage return stays: in ``data`` it makes the line bad, elsewhere it spoils a number."""
    if line[-1:] == b"\n":
        line = line[:-1]
    return line[:-1] if line[-1:] == b"\r" else line


def parse_line(line: bytes) -> Link:
    """Parse one input line (with or without its line end, ``\n`` or ``\r\n``) into a Link.

    Raises ParseError naming the reason: field count, a non-integer, a negative number,
    visibility not 0/1, data over 255 bytes, a carriage return in data (Hadoop's line reader
    would split the line there).

    This is the per-line hot loop of every loader: the common case is checked with a few C-level
    bytes methods, and only a line that fails them takes the slow path that finds the reason.
    """
    if line[-1:] == b"\n":  # line_body, inlined: this is the per-line hot loop
        line = line[:-1]
    if line[-1:] == b"\r":
        line = line[:-1]
    fields = line.split(b"\t")
    if len(fields) == 7:
        a, b, c, v, d, t, r = fields
        if _well_formed(a, b, c, v, d, t, r):
            return Link(int(a), int(b), int(c), 1 if v == b"1" else 0, d, int(t), int(r))
    return _parse_checked(fields)


def _well_formed(a: bytes, b: bytes, c: bytes, v: bytes, d: bytes, t: bytes, r: bytes) -> bool:
    """The common case, checked with a few C-level bytes methods; a line that fails it takes
    the slow path, which finds the reason (or accepts a 19-digit number that fits)."""
    # 18 digits always fit in 63 bits; longer numbers take the slow path's range check.
    return (a.isdigit() and b.isdigit() and c.isdigit() and t.isdigit() and r.isdigit()
            and len(a) < 19 and len(b) < 19 and len(c) < 19 and len(t) < 19 and len(r) < 19
            and (v == b"1" or v == b"0") and len(d) <= MAX_DATA and b"\r" not in d)


def _parse_checked(fields: list[bytes]) -> Link:
    if len(fields) != 7:
        raise ParseError(f"expected 7 tab-separated fields, found {len(fields)}")
    id1 = _integer(fields[0], "id1")
    link_type = _integer(fields[1], "link_type")
    id2 = _integer(fields[2], "id2")
    if fields[3] not in (b"0", b"1"):
        raise ParseError(f"visibility must be 0 or 1, not {fields[3][:40]!r}")
    data = fields[4]
    if len(data) > MAX_DATA:
        raise ParseError(f"data is {len(data)} bytes, more than {MAX_DATA}")
    if b"\r" in data:
        raise ParseError("data holds a carriage return")
    time = _integer(fields[5], "time")
    version = _integer(fields[6], "version")
    return Link(id1, link_type, id2, int(fields[3] == b"1"), data, time, version)


def merge_rank(link: Link, origin: Origin) -> tuple:
    """The merge rule as a sort key: of two rows with one key, the greater rank wins."""
    return (link.time, link.version, origin.hot, origin.file_seq, origin.position)


def merge_batch(links: Iterable[tuple[Link, Origin]]) -> tuple[int, dict[tuple, Link]]:
    """Apply the full merge rule within one batch: (rows given, winner per key).

    On a complete tie of merge_rank the first row seen is kept, as MemoryStore does.
    """
    n = 0
    best: dict[tuple, tuple[tuple, Link]] = {}
    for link, origin in links:
        n += 1
        rank = merge_rank(link, origin)
        old = best.get(link.key)
        if old is None or rank > old[0]:
            best[link.key] = (rank, link)
    return n, {key: link for key, (_, link) in best.items()}


def select_links(winners: list[Link], min_time: int, max_time: int, offset: int,
                 limit: int) -> list[Link]:
    """get_link_list's filter over already-merged rows: visible, time in range, newest first.

    Ties on time are ordered by id2 descending so that every store returns one order.
    """
    rows = [l for l in winners if l.visibility == 1 and min_time <= l.time <= max_time]
    rows.sort(key=lambda l: (l.time, l.id2), reverse=True)
    return rows[offset:offset + limit]


def count_visible(winners: Iterable[Link]) -> int:
    """count_link's answer over already-merged rows of one (id1, link_type): the visible ones.

    LinkBench reads a count table that its writes keep; DeBL has none, so every store counts
    the winners of the merge rule (docs/STORES.md, "count_link and multiget_link")."""
    return sum(link.visibility == 1 for link in winners)


def select_id2s(winners: Iterable[Link], id2s: Iterable[int]) -> list[Link]:
    """multiget_link's answer over already-merged rows of one (id1, link_type): the row of each
    asked id2 that has one, hidden or not (LinkBench's ``multigetLinks`` does not filter on
    visibility), in id2 order; an id2 asked twice is answered once."""
    wanted, found = set(id2s), []
    for link in winners:  # one row per key: stop once every asked id2 is found
        if link.id2 in wanted:
            found.append(link)
            if len(found) == len(wanted):
                break
    return sorted(found, key=lambda l: l.id2)


MAX_ID = (1 << 63) - 1
"""The largest id1, link_type (and id2) DeBL takes: a signed 64-bit integer, as LinkBench's
Java ``long``, MySQL's ``BIGINT`` and the 8-byte fields of the HBase row key hold it."""

MAX_COUNT = (1 << 63) - 1
"""The largest offset and limit of a query: both fit MySQL's ``LIMIT``/``OFFSET`` (64 bits
unsigned, their sum too) and a Java ``long``."""


def check_query(id1: int, link_type: int, min_time: int, max_time: int, offset: int,
                limit: int) -> None:
    """Reject arguments that no store could answer meaningfully, with a ValueError naming the
    argument and its range: id1 and link_type in 0..MAX_ID, min_time and max_time in
    0..MAX_TIME (an empty window, min_time > max_time, is valid), offset and limit in
    0..MAX_COUNT. Pitfall: without the upper bounds a link_type of 2^64 reached the HBase row
    key's ``struct.pack`` and a huge limit MySQL's parser, as their own errors."""
    for name, value, top in (("id1", id1, MAX_ID), ("link_type", link_type, MAX_ID),
                             ("min_time", min_time, MAX_TIME), ("max_time", max_time, MAX_TIME),
                             ("offset", offset, MAX_COUNT), ("limit", limit, MAX_COUNT)):
        _check_range(name, value, top)


MAX_MULTIGET = DEFAULT_LIMIT
"""The most id2s one multiget_link may ask for: get_link_list's default limit, so that one
answer is never more rows than a default list (LinkBench asks for 1 to 128)."""


def check_ids(id1: int, link_type: int, id2s: Iterable[int] = ()) -> tuple[int, ...]:
    """The arguments of count_link (no *id2s*) and multiget_link checked as check_query checks
    its own (ValueError naming the argument): id1, link_type and every id2 in 0..MAX_ID, at
    most MAX_MULTIGET id2s. Returns the id2s as a tuple."""
    _check_range("id1", id1, MAX_ID)
    _check_range("link_type", link_type, MAX_ID)
    id2s = tuple(id2s)
    if len(id2s) > MAX_MULTIGET:
        raise ValueError(f"multiget_link takes at most {MAX_MULTIGET} id2s, not {len(id2s)}")
    for id2 in id2s:
        _check_range("id2", id2, MAX_ID)
    return id2s


def _check_range(name: str, value: int, top: int) -> None:
    if not 0 <= value <= top:
        raise ValueError(f"{name} must be an integer from 0 to {top} (2^63-1), not "
                         f"{_shown(value)}")


def _shown(value: int) -> str:
    # str() of an int over 4300 digits raises; a number that long is shown by its size.
    return str(value) if value.bit_length() <= 256 else f"a number of {value.bit_length()} bits"


def line_checksum(line: bytes) -> int:
    """A 64-bit checksum of one input line given without its newline (CRC-32 and Adler-32 of
    the line with its newline, side by side: cheap enough for dist_ch's per-line loop). Sums of
    these (mod 2**64) are the order-independent checksums of the bucket index."""
    return zlib.crc32(b"\n", zlib.crc32(line)) | (zlib.adler32(b"\n", zlib.adler32(line)) << 32)


def row_checksum(link: Link) -> int:
    """line_checksum of the row's canonical line: what gen_HF records for HBase's rows. Equal to
    line_checksum of the input line when that was written canonically (as LinkBench writes)."""
    return line_checksum(link.to_line()[:-1])


CHECKSUM_MOD = 1 << 64
