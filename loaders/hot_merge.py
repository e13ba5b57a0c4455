"""The hot path's merge on the client: the good hot lines held in memory, each key's winner chosen
by the merge rule with numpy, the winners given back in the link table's primary-key order
(docs/LOADING.md, "The hot path's cost").

``HotRows`` holds one run of lines: their bytes, each line as its body and a LF (a CRLF line is
held as its LF twin), one after the other in one byte array, in input order (file, then line),
and their numbers column-wise (``debl.format.line_block.LineColumns``). ``merge()`` sorts the keys
``(link_type, id1, id2)`` (a stable sort, so each key's rows stay in input order) and, for the keys
that appear more than once, keeps the row with the greatest ``(time, version, input order)``:
docs/DESIGN.md section 3, the later file and then the later line winning a tie. ``Winners``
gives each winner's line once, in primary-key order, in blocks ready for ``LOAD DATA``.

Memory: the bytes and the columns live in anonymous maps sized for the most a run can hold
(*capacity* bytes, and as many lines as the shortest lines would make); a page costs memory only
once written, so the resident memory is what the run holds: its bytes, the columns (six 8-byte
numbers a line) and, while merging, the sort's arrays. The columns are never copied into one
array: per-block arrays, freed after a concatenation, stayed in the allocator's heap and raised
the resident memory. docs/LOADING.md, "The hot path's cost", has the figures.

Pitfall: ``merge()``'s ``Winners`` read the run's bytes: ``reset()`` (the next run) must wait
until they are written. The maps are freed with the last reference to them.
"""

from __future__ import annotations

import mmap
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from debl.format.line_block import HEAD_ROOM, LineColumns, block_columns
from debl.format.link import Link

SHORTEST_LINE = len(b"0\t0\t0\t0\t\t0\t0\n")  # so a run of n bytes holds at most n // 13 lines
LINES_PER_BLOCK = 1 << 17  # about 8 MB of LinkBench lines per block handed to LOAD DATA
_COLUMN_TYPES = {"id1": np.uint64, "link_type": np.uint64, "id2": np.uint64,
                 "time": np.uint64, "version": np.uint64, "ends": np.int64}


def _mapped(nbytes: int) -> mmap.mmap:
    """Anonymous private memory: pages are resident only once written."""
    return mmap.mmap(-1, max(nbytes, 1), flags=mmap.MAP_PRIVATE)


class HotRows:
    """One run of good hot lines, in input order, in at most *capacity* bytes."""

    def __init__(self, capacity: int) -> None:
        self._bytes_map = _mapped(HEAD_ROOM + capacity)
        self.buf = np.frombuffer(self._bytes_map, dtype=np.uint8)
        most = capacity // SHORTEST_LINE + 1
        self._columns_map = _mapped(most * 8 * len(_COLUMN_TYPES))
        self._columns = {name: np.frombuffer(self._columns_map, dtype=kind, count=most,
                                             offset=i * most * 8)
                         for i, (name, kind) in enumerate(_COLUMN_TYPES.items())}
        self.used = HEAD_ROOM  # the next line's position
        self.lines = 0

    @property
    def room(self) -> int:
        """Bytes that can still be added."""
        return len(self.buf) - self.used

    def add_checked(self, block: bytes) -> LineColumns:
        """Add whole lines that ``debl.format.line_block.well_formed`` accepted; returns their
        columns. The CR before each LF is dropped."""
        if b"\r" in block:
            block = block.replace(b"\r\n", b"\n")  # only before a LF in a well-formed block
        lo = self._put(block)
        columns = block_columns(self.buf, lo, self.used)
        self._keep(columns)
        return columns

    def add_parsed(self, bodies: list[bytes], links: list[Link]) -> None:
        """Add lines parsed one by one: *bodies* (without their line ends) and their links."""
        if not bodies:
            return
        lo = self._put(b"\n".join(bodies) + b"\n")
        ends = lo - 1 + np.cumsum(np.fromiter((len(b) + 1 for b in bodies), dtype=np.int64,
                                              count=len(bodies)))
        fields = [np.fromiter((link[i] for link in links), dtype=np.uint64, count=len(links))
                  for i in (0, 1, 2, 5, 6)]  # id1, link_type, id2, time, version
        self._keep(LineColumns._make([*fields, ends]))

    def _keep(self, columns: LineColumns) -> None:
        n = len(columns.ends)
        for name, values in zip(LineColumns._fields, columns):
            self._columns[name][self.lines:self.lines + n] = values
        self.lines += n

    def _put(self, data: bytes) -> int:
        lo, hi = self.used, self.used + len(data)
        if hi > len(self.buf):
            raise ValueError(f"{len(data)} bytes do not fit in the {self.room} left")
        self.buf[lo:hi] = np.frombuffer(data, dtype=np.uint8)
        self.used = hi
        return lo

    def column(self, name: str) -> np.ndarray:
        """A column of the lines held (a view)."""
        return self._columns[name][:self.lines]

    def merge(self, listing: bool = False) -> Winners:
        """Each key's winner, in LinkBench's primary-key order ``(link_type, id1, id2)``, or
        with *listing* in the listing layout's ``(id1, link_type, time, id2)``
        (``debl.store.mysql.listing_table_ddl``)."""
        if not self.lines:
            empty = np.empty(0, dtype=np.int64)
            return Winners(self.buf, empty, empty, None, None)
        link_type, id1, id2 = self.column("link_type"), self.column("id1"), self.column("id2")
        # stable: a key's rows stay in input order
        order = np.lexsort((id2, link_type, id1) if listing else (id2, id1, link_type))
        # same[i]: sorted row i + 1 has sorted row i's key. One sorted column at a time.
        same = np.ones(len(order) - 1, dtype=bool)
        for keys in (link_type, id1, id2):
            ordered = keys[order]
            same &= ordered[1:] == ordered[:-1]
            del ordered
        winners = order[np.append(~same, True)]  # one a key, in key order; so far its last row
        if same.any():
            _choose(winners, order, same, self.column("time"), self.column("version"))
        del order, same
        if listing:
            winners = winners[_by_time_within_lists(id1[winners], link_type[winners],
                                                    self.column("time")[winners])]
        ends = self.column("ends")
        # The lines lie one after the other: each starts after the LF of the one before.
        starts = ends[winners - 1] + 1
        starts[winners == 0] = HEAD_ROOM
        # Every row's id1 is some winner's.
        return Winners(self.buf, starts, ends[winners] + 1, int(id1.min()), int(id1.max()))

    def reset(self) -> None:
        """Empty, for the next run (the pages stay resident, to be written again)."""
        self.used, self.lines = HEAD_ROOM, 0


def _by_time_within_lists(id1: np.ndarray, link_type: np.ndarray,
                          time: np.ndarray) -> np.ndarray:
    """The order that sorts rows (at least one) in ``(id1, link_type, id2)`` order into
    ``(id1, link_type, time, id2)`` order: a stable sort by (list, time), so rows of one time
    keep their id2 order. One sort of a 64-bit key (list number, then time from the least) when
    both fit in it, as they do for LinkBench's times; two passes otherwise."""
    lists = np.cumsum(np.append(True, (id1[1:] != id1[:-1]) | (link_type[1:] != link_type[:-1])),
                      dtype=np.uint64) - np.uint64(1)
    lowest = int(time.min())
    time_bits = (int(time.max()) - lowest).bit_length()
    if int(lists[-1]).bit_length() + time_bits <= 64:
        key = (lists << np.uint64(time_bits)) | (time - np.uint64(lowest))
        return np.argsort(key, kind="stable")
    return np.lexsort((time, lists))


def _choose(winners: np.ndarray, order: np.ndarray, same: np.ndarray, time: np.ndarray,
            version: np.ndarray) -> None:
    """Set ``winners[g]`` of each key group g with more than one row to the row with the
    greatest ``(time, version, input order)``; the row numbers are the input order."""
    group = np.cumsum(np.append(True, ~same), dtype=np.int64) - 1  # each sorted row's key group
    shared = np.append(same, False) | np.append(False, same)  # rows of groups of two or more
    rows, groups = order[shared], group[shared]
    del group, shared
    ranked = np.lexsort((rows, version[rows], time[rows], groups))  # the winner last
    rows, groups = rows[ranked], groups[ranked]
    last = np.append(groups[1:] != groups[:-1], True)
    winners[groups[last]] = rows[last]


@dataclass
class Winners:
    """The lines to load, one a key, in primary-key order: ``buf[starts[i]:stops[i]]`` is the
    i-th, its LF included. ``k_lo``/``k_hi``: the least and greatest id1 (None if empty)."""

    buf: np.ndarray
    starts: np.ndarray
    stops: np.ndarray
    k_lo: int | None
    k_hi: int | None

    def __len__(self) -> int:
        return len(self.starts)

    def blocks(self, first: int = 0, stop: int | None = None,
               lines: int = LINES_PER_BLOCK) -> Iterator[memoryview]:
        """The lines of winners ``first`` to ``stop - 1``, joined in blocks of *lines* lines.
        A block is valid until the next is asked for: its memory is used again.

        Gathered by numpy (an index per byte), not by joining slices in Python: numpy lets go
        of the interpreter lock while it works, so the thread that sends the blocks to MySQL
        (pymysql, 16 KiB a packet, each needing the lock) keeps sending; a join in Python held
        the lock, and the server waited for data. The index and the block are written into
        the same two arrays each time: new arrays for every block cost the client much CPU
        time in the kernel, clearing the fresh pages (docs/LOADING.md, "The hot path's
        cost")."""
        stop = len(self) if stop is None else stop
        if first >= stop:
            return
        firsts = np.arange(first, stop, lines)
        lengths = self.stops[first:stop] - self.starts[first:stop]
        largest = int(np.add.reduceat(lengths, firsts - first).max())
        # int64 (numpy's intp) indexes: take() would copy any other type into a new array
        index = np.empty(largest, dtype=np.intp)
        block = np.empty(largest, dtype=np.uint8)
        for lo in firsts.tolist():
            hi = min(lo + lines, stop)
            starts = self.starts[lo:hi]
            sizes = lengths[lo - first:hi - first]
            at = np.cumsum(sizes) - sizes  # where each line starts in the block
            n = int(at[-1] + sizes[-1])
            # index[k] = index[k - 1] + 1 within a line; at a line's first byte, the jump to
            # its start from the previous line's last byte.
            steps = index[:n]
            steps.fill(1)
            steps[0] = starts[0]
            steps[at[1:]] = starts[1:] - (starts[:-1] + sizes[:-1]) + 1
            np.cumsum(steps, out=steps)
            np.take(self.buf, steps, out=block[:n], mode="clip")  # "raise" copies: a new array
            yield block.data[:n]
