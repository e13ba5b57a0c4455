"""The HBase link table's row layout: one link per row, a get_link_list is one range scan.

Row key (32 bytes, every field 8-byte big-endian unsigned, so byte order is numeric order)::

    id1 | link_type | MAX_TIME - time | 2**64-1 - id2

so the rows of one ``(id1, link_type)`` are contiguous and come newest first, ties on ``time``
by ``id2`` descending: exactly get_link_list's order (debl.format.link.select_links), so a scan
needs no re-sort and ``limit`` can stop it early. Python ``bytes`` order equals HBase's unsigned
byte order, so sorting keys in Python sorts them for HFiles.

One column family ``l``, one qualifier ``v``; the cell value is ``visibility`` (1 byte),
``version`` (8 bytes big-endian) and the raw ``data`` bytes. ``time`` and ``id2`` live only in the
key: decoding needs both the row and the value.

Cell timestamp: the constant ``CELL_TS`` for every cell, bulk-loaded or put. Why:

- Loading the same bucket twice writes cells with identical coordinates (row, family, qualifier,
  timestamp) and identical values, so the table reads the same (and compaction collapses them).
  With the writer's clock (``LATEST_TIMESTAMP``), a reload would add a new version instead.
- Of two cells with the same coordinates HBase returns the one with the higher sequence id: the
  later write. The bulk-load tool assigns the loaded files a fresh sequence id by default
  (``hbase.mapreduce.bulkload.assign.sequenceNumbers``), so a bulk-loaded cell is not shadowed by
  an older put of the same row, and a later put (written with ``timestamp=CELL_TS``) replaces it —
  the "written now wins on a tie" rule of ``LinkStore.write_links``. A put with a clock timestamp
  would shadow any later bulk load of that row forever: every writer must use ``CELL_TS``.
- Tombstones: a delete marker hides every cell at or below its timestamp until a major
  compaction, whatever the load order. So the table is emptied by truncate or drop, never by
  deletes, and a row key is deleted only when a link moves to a newer ``time`` (a new row key);
  the merge rule never brings the old row key back.
- ``time`` or ``version`` as the timestamp would buy nothing: ``time`` is already in the key, and
  the merge rule is applied before writing, so HBase's version resolution is never the judge.
  ``CELL_TS`` is 1, not 0, only so that it is visibly deliberate in a cell dump.
"""

from __future__ import annotations

import struct
from typing import overload

from debl.format.link import MAX_DATA, MAX_TIME, Link

FAMILY = b"l"
QUALIFIER = b"v"
COLUMN = FAMILY + b":" + QUALIFIER  # happybase's column name
CELL_TS = 1
KEY_LEN = 32

_U64 = (1 << 64) - 1
_KEY = struct.Struct(">QQQQ")
_PREFIX = struct.Struct(">QQ")
_HEAD = struct.Struct(">BQ")  # visibility, version; data follows
_Q = struct.Struct(">Q")


def row_key(link: Link) -> bytes:
    """The 32-byte row key of a link (any 7-tuple in Link field order).

    Raises struct.error for a field outside its range (negative, or time over MAX_TIME).
    """
    id1, link_type, id2, _, _, time, _ = link
    if time > MAX_TIME:  # MAX_TIME - time would still pack, but wrap the order
        raise struct.error(f"time {time} is over MAX_TIME")
    return _KEY.pack(id1, link_type, MAX_TIME - time, _U64 - id2)


def cell_value(link: Link) -> bytes:
    """The cell value: visibility, version, data."""
    _, _, _, visibility, data, _, version = link
    return _HEAD.pack(visibility, version) + data


def decode(row: bytes, value: bytes) -> Link:
    """The link of one cell; the inverse of (row_key, cell_value).

    Raises ValueError for a row or value that is not of this layout (wrong length), so that a
    foreign row in the table is reported instead of misread.
    """
    if len(row) != KEY_LEN or not _HEAD.size <= len(value) <= _HEAD.size + MAX_DATA:
        raise ValueError(f"not a DeBL link cell: row of {len(row)} bytes, value of "
                         f"{len(value)} bytes")
    id1, link_type, inv_time, inv_id2 = _KEY.unpack(row)
    visibility, version = _HEAD.unpack_from(value)
    return Link(id1, link_type, _U64 - inv_id2, visibility, value[_HEAD.size:],
                MAX_TIME - inv_time, version)


def prefix(id1: int, link_type: int) -> bytes:
    """The 16-byte key prefix shared by every row of one (id1, link_type)."""
    return _PREFIX.pack(id1, link_type)


@overload
def scan_bounds(id1: int, link_type: int) -> tuple[bytes, bytes]: ...  # the whole list
@overload
def scan_bounds(id1: int, link_type: int, min_time: int = 0,
                max_time: int = MAX_TIME) -> tuple[bytes, bytes] | None: ...
def scan_bounds(id1: int, link_type: int, min_time: int = 0,
                max_time: int = MAX_TIME) -> tuple[bytes, bytes] | None:
    """(start, stop) of the scan for min_time <= time <= max_time: start inclusive, stop
    exclusive, newest first; None when the range is empty (min_time > max_time).

    Pitfall: never turn an empty range into start == stop — HBase treats a scan whose start
    equals its stop as a get of that row, not as empty.
    """
    min_time = max(min_time, 0)
    max_time = min(max_time, MAX_TIME)
    if min_time > max_time:
        return None
    head = prefix(id1, link_type)
    # Rows with time <= max_time have inverted time >= MAX_TIME - max_time; the stop is one past
    # the inverted min_time, which fits 8 bytes (at most 2**63).
    return head + _Q.pack(MAX_TIME - max_time), head + _Q.pack(MAX_TIME - min_time + 1)


def id1_boundary(id1: int) -> bytes:
    """The region split key where id1 starts: rows of smaller id1 sort before it, every row of
    this id1 at or after it. Pre-splitting at bucket boundaries uses ``id1_boundary(b * w)``."""
    return _Q.pack(id1)
