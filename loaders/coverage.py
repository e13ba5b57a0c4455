"""The copy's ledger: which bytes of each file are taken (copied, or being copied, by the bulk
copy or a fetch on demand), with the lines each taken range holds.

A load copies every byte of its input once. The bulk copy walks each file from its start; a
fetch on demand takes the pieces that waiting queries need, anywhere ahead of it
(docs/LOADING.md, "The copy follows demand"). Both take their bytes here first, under one lock,
so no byte is taken twice: the bulk copy ``claim``s each block it read and keeps only what no
fetch took before it; a fetch ``take``s only the bytes no one took, after it checked that its
bytes start and end at line starts. Every taken range therefore starts and ends at a line start
(or the file's end), and its lines are counted when it is taken.

Pitfall: inside a line longer than a block, the bulk copy keeps a block that ends mid-line. Its
claim then reaches to that line's end, wherever it is: the bytes after the block, up to the next
taken range, are *held* for the bulk copy until a claim of it ends at a line end. A fetch that
took them once started at the mid-line point: the line's last bytes loaded as a row, and the
bulk copy glued the line's first block onto the next line it copied (docs/LOADING.md, "The copy
follows demand").

The line counts give each range its first line number (``first_line``): the bulk copy walks its
files in order, so when it reaches a byte, every byte before it is taken and counted. A fetched
piece's first line is known only once the bulk copy has passed it; the load resolves its
rejects then (``loaders.rejects``).

A resumed load starts from the segments of its bucketed chunks (``add``).
"""

from __future__ import annotations

import bisect
import threading
from dataclasses import dataclass


@dataclass(frozen=True)
class Taken:
    """Bytes ``[start, end)`` of one file, holding *lines* lines."""

    start: int
    end: int
    lines: int


class Coverage:
    """The taken ranges of every file (by ``file_seq``). Thread-safe."""

    def __init__(self, sizes: dict[int, int]):
        self._sizes = dict(sizes)
        self._taken: dict[int, list[Taken]] = {seq: [] for seq in sizes}
        # Per file, the bytes [start, end) held for the bulk copy inside a line (the module).
        self._held: dict[int, tuple[int, int]] = {}
        self._lock = threading.Lock()

    def add(self, file_seq: int, start: int, end: int, lines: int) -> None:
        """Record bytes ``[start, end)`` as taken (a resumed load's bucketed segments); a
        range overlapping one already taken is an error: it would be loaded twice."""
        with self._lock:
            self._insert(file_seq, Taken(start, min(end, self._sizes[file_seq]), lines))

    def _insert(self, file_seq: int, taken: Taken) -> None:
        ranges = self._taken[file_seq]
        i = bisect.bisect_left(ranges, taken.start, key=lambda t: t.start)
        if (i > 0 and ranges[i - 1].end > taken.start) or (
                i < len(ranges) and ranges[i].start < taken.end):
            raise ValueError(f"file {file_seq}: bytes [{taken.start}, {taken.end}) are already "
                             "taken in part")
        ranges.insert(i, taken)

    # -- the bulk copy

    def _spans(self, file_seq: int) -> list[tuple[int, int]]:
        """``(start, end)`` of the file's taken ranges and held bytes, in order (under the
        lock)."""
        spans = [(t.start, t.end) for t in self._taken[file_seq]]
        if file_seq in self._held:
            bisect.insort(spans, self._held[file_seq])
        return spans

    def next_gap(self, file_seq: int, at: int) -> int | None:
        """The first byte at or after *at* that no range has taken or holds (None: the rest of
        the file is taken)."""
        with self._lock:
            for start, end in self._spans(file_seq):
                if end <= at:
                    continue
                if start > at:
                    break
                at = end
            return at if at < self._sizes[file_seq] else None

    def next_taken(self, file_seq: int, at: int) -> int | None:
        """Where the first range taken after byte *at* starts (None: nothing after it is
        taken): the bulk copy's stream from *at* stops there."""
        with self._lock:
            ranges = self._taken[file_seq]
            i = bisect.bisect_right(ranges, at, key=lambda t: t.start)
            return ranges[i].start if i < len(ranges) else None

    def claim(self, file_seq: int, start: int, length: int, lines_of,
              in_line: bool = False) -> int:
        """The bulk copy read *length* bytes from *start*: take those up to the next taken range
        and return how many that is (0 when a fetch took *start* itself since the bulk copy
        found it untaken). ``lines_of(n)`` counts the lines of the first *n* bytes read (the
        lines of what the bulk keeps). *in_line*: the bytes read end inside a line; kept whole,
        the bytes after them up to the next taken range are held for the bulk copy until its
        next claim (see the module)."""
        with self._lock:
            self._held.pop(file_seq, None)  # its next claim: at the held bytes' start
            ranges = self._taken[file_seq]
            i = bisect.bisect_right(ranges, start, key=lambda t: t.start)
            if i > 0 and ranges[i - 1].end > start:
                return 0
            limit = self._sizes[file_seq] if i == len(ranges) else ranges[i].start
            keep = length if i == len(ranges) else min(length, limit - start)
            if keep:
                self._merge_bulk(file_seq, i, Taken(start, min(start + keep,
                                                               self._sizes[file_seq]),
                                                    lines_of(keep)))
            if in_line and keep == length and start + keep < limit:
                self._held[file_seq] = (start + keep, limit)
            return keep

    def _merge_bulk(self, file_seq: int, i: int, taken: Taken) -> None:
        """Insert *taken* at *i*, merged into the range before it when that one ends where it
        starts (a file the bulk copies block by block stays a few ranges)."""
        ranges = self._taken[file_seq]
        if i > 0 and ranges[i - 1].end == taken.start:
            prev = ranges[i - 1]
            ranges[i - 1] = Taken(prev.start, taken.end, prev.lines + taken.lines)
        else:
            ranges.insert(i, taken)

    def lines_between(self, file_seq: int, start: int, end: int) -> int:
        """The lines of the taken ranges within ``[start, end)`` (the bulk copy skipping them)."""
        with self._lock:
            return sum(t.lines for t in self._taken[file_seq] if start <= t.start and t.end <= end)

    # -- fetches on demand

    def take(self, file_seq: int, start: int, data: bytes) -> list[tuple[int, int, int]]:
        """Take what nobody took of the bytes ``[start, start + len(data))``, which the caller
        fetched (*data*) and checked to start and end at line starts (or the file's end); the
        ranges it gets start and end at ranges already taken, which start at line starts too,
        or at bytes held for the bulk copy, which end at one. Returns ``(start, end, lines)``
        of each range taken, in order."""
        end = start + len(data)
        with self._lock:
            free, at = [], start
            for t_start, t_end in self._spans(file_seq):
                if t_end <= at:
                    continue
                if t_start >= end:
                    break
                if t_start > at:
                    free.append((at, t_start))
                at = max(at, t_end)
            if at < end:
                free.append((at, end))
            taken = []
            for a, b in free:
                lines = data.count(b"\n", a - start, b - start)
                if b == self._sizes[file_seq] and not data.endswith(b"\n"):
                    lines += 1  # a last line without its newline
                self._insert(file_seq, Taken(a, b, lines))
                taken.append((a, b, lines))
            return taken

    # -- the whole

    def first_line(self, file_seq: int, start: int) -> int | None:
        """The number of the line at byte *start*, when every byte before it is taken and
        counted (else None)."""
        with self._lock:
            n, at = 1, 0
            for t in self._taken[file_seq]:
                if t.start >= start:
                    break
                if t.start != at:
                    return None
                n, at = n + t.lines, t.end
            return n if at == start else None

    def done(self) -> bool:
        """Whether every byte of every file is taken."""
        with self._lock:
            return all(self._whole(seq) for seq in self._taken)

    def _whole(self, file_seq: int) -> bool:
        at = 0
        for t in self._taken[file_seq]:
            if t.start != at:
                return False
            at = t.end
        return at >= self._sizes[file_seq]
