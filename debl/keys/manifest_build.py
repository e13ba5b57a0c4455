"""Making a file's manifest (``debl.keys.manifest``; docs/LOADING.md, "The manifest"): from its
bytes in one pass (``build_manifest``), or from its valid lines as a writer knows them
(``ManifestBuilder``, which ``debl generate`` feeds as it writes).

A block of whole lines that ``debl.format.line_block.well_formed`` accepts (every line takes
``parse_line``'s fast path) has its line starts and id1s found with numpy, without a Python step
per line; a block it refuses is cut into smaller ones, and those it still refuses are parsed
line by line with ``parse_line``. So a line counts as valid exactly when ``parse_line`` takes it:
CRLF reads as LF, a last line without newline counts, a 19-digit id1 or one with many leading
zeros is read right (slowly).

Pitfalls:

- A line longer than ``max_line`` (64 MiB by default) is never held whole: the builder gives
  up on such a file, whose manifest then claims every id1 (unsorted, ``0..ID1_MAX``). Such a
  line is over any sane ``max_line_bytes``, so it would be rejected by the load anyway.
- Points: the first valid line start at or after each multiple of ``step``, one point per line
  start (a long line or a run of bad lines spans several multiples and gives one point).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

import numpy as np

from debl.format.line_block import HEAD_ROOM, numbers_at, well_formed
from debl.keys.manifest import ID1_MAX, STEP, Manifest
from debl.format.link import ParseError, parse_line

MAX_LINE = 64 << 20  # a longer line makes the builder give up on its file (see above)
BLOCK = 4 << 20  # bytes read at a time by manifest_of_file
_SUB_BLOCK = 64 << 10  # a refused block is checked again in pieces of about this size
_NL, _TAB = ord("\n"), ord("\t")


class ManifestBuilder:
    """A manifest built from a file's valid lines, fed in file order: ``add(starts, id1s)``
    with their absolute byte offsets (increasing) and id1s, then ``finish(size, lines)``."""

    def __init__(self, step: int = STEP):
        if step < 1:
            raise ValueError(f"step must be at least 1 byte, not {step}")
        self.step = step
        self._mark = 0  # the next multiple of step that has no point yet
        self._offsets: list[np.ndarray] = []
        self._id1s: list[np.ndarray] = []
        self._lo: int | None = None
        self._hi: int | None = None
        self._last: int | None = None  # the id1 of the last valid line so far
        self._sorted = True

    def add(self, starts: np.ndarray, id1s: np.ndarray) -> None:
        if len(starts) == 0:
            return
        starts = np.asarray(starts, dtype=np.int64)
        id1s = np.asarray(id1s, dtype=np.uint64)
        lo, hi = int(id1s.min()), int(id1s.max())
        self._lo = lo if self._lo is None else min(self._lo, lo)
        self._hi = hi if self._hi is None else max(self._hi, hi)
        if self._sorted:
            self._sorted = ((self._last is None or int(id1s[0]) >= self._last)
                            and bool(np.all(id1s[1:] >= id1s[:-1])))
        self._last = int(id1s[-1])
        last_start = int(starts[-1])
        if last_start >= self._mark:
            marks = np.arange(self._mark, last_start + 1, self.step, dtype=np.int64)
            at = np.unique(np.searchsorted(starts, marks))
            self._offsets.append(starts[at])
            self._id1s.append(id1s[at])
            self._mark = (last_start // self.step + 1) * self.step

    def finish(self, size: int, lines: int | None = None) -> Manifest:
        if self._lo is None:
            return Manifest(None, None, True, (), (), lines, self.step)
        if not self._sorted:  # an unsorted file's map would claim nothing narrower
            return Manifest(self._lo, self._hi, False, (), (), lines, self.step)
        offsets = tuple(np.concatenate(self._offsets).tolist())
        id1s = tuple(np.concatenate(self._id1s).tolist())
        if offsets and offsets[-1] >= size:
            raise ValueError(f"a line starts at {offsets[-1]}, not before the end ({size})")
        return Manifest(self._lo, self._hi, True, offsets, id1s, lines, self.step)


def build_manifest(blocks: Iterable[bytes], step: int = STEP,
                   max_line: int = MAX_LINE) -> Manifest:
    """The manifest of the file whose bytes are *blocks* (any cut, in order); see the
    module's docstring for what counts."""
    scan = _Scan(ManifestBuilder(step), max_line)
    for block in blocks:
        scan.feed(block)
    return scan.finish()


def file_blocks(stream: BinaryIO, block: int = BLOCK) -> Iterator[bytes]:
    """A binary stream's bytes, a block at a time."""
    while data := stream.read(block):
        yield data


def manifest_of_file(path: Path | str, step: int = STEP) -> Manifest:
    """``build_manifest`` of the file at *path* (OSError if it cannot be read)."""
    with open(path, "rb") as f:
        return build_manifest(file_blocks(f), step)


class _Scan:
    """The bytes of one file, cut into whole lines for the builder; the bytes of a line not
    yet ended are carried to the next block."""

    def __init__(self, builder: ManifestBuilder, max_line: int):
        self.builder, self.max_line = builder, max_line
        self.carry = b""
        self.pos = 0  # the file offset of carry's first byte
        self.lines = 0
        self.skipping = False  # inside a line over max_line: its bytes are dropped
        self.gave_up = False

    def feed(self, block: bytes) -> None:
        if self.skipping:
            nl = block.find(b"\n")
            if nl < 0:
                self.pos += len(block)
                return
            self.skipping = False
            self.lines += 1
            self.pos += nl + 1
            block = block[nl + 1:]
        cut = block.rfind(b"\n") + 1
        if cut == 0:
            self.carry += block
            if len(self.carry) > self.max_line:
                self.skipping, self.gave_up = True, True
                self.pos += len(self.carry)
                self.carry = b""
            return
        head = len(self.carry)
        buf = np.empty(HEAD_ROOM + head + cut, dtype=np.uint8)
        buf[HEAD_ROOM:HEAD_ROOM + head] = np.frombuffer(self.carry, dtype=np.uint8)
        buf[HEAD_ROOM + head:] = np.frombuffer(block, dtype=np.uint8, count=cut)
        self.carry = block[cut:]
        self._lines(buf, self.pos)
        self.pos += head + cut

    def _lines(self, buf: np.ndarray, pos: int) -> None:
        """The whole lines of ``buf[HEAD_ROOM:]``, the first at file offset *pos*."""
        ends = np.flatnonzero(buf[HEAD_ROOM:] == _NL) + HEAD_ROOM
        self.lines += len(ends)
        if _well_formed(buf, HEAD_ROOM, len(buf)):
            self._fast(buf, HEAD_ROOM, len(buf), ends, pos)
            return
        # Cut into sub-blocks of whole lines; the refused ones go line by line.
        cuts = np.unique(np.searchsorted(ends, np.arange(HEAD_ROOM + _SUB_BLOCK, len(buf),
                                                         _SUB_BLOCK)))
        bounds = [HEAD_ROOM] + [int(ends[c]) + 1 for c in cuts if c < len(ends)] + [len(buf)]
        for lo, hi in zip(bounds, bounds[1:]):
            if lo == hi:
                continue
            sub = ends[np.searchsorted(ends, lo):np.searchsorted(ends, hi)]
            if _well_formed(buf, lo, hi):
                self._fast(buf, lo, hi, sub, pos + lo - HEAD_ROOM)
            else:
                self._slow(bytes(buf[lo:hi]), pos + lo - HEAD_ROOM)

    def _fast(self, buf: np.ndarray, lo: int, hi: int, ends: np.ndarray, pos: int) -> None:
        starts = np.empty_like(ends)
        starts[0], starts[1:] = lo, ends[:-1] + 1
        tabs = (np.flatnonzero(buf[lo:hi] == _TAB) + lo).reshape(-1, 6)  # six a line, checked
        self.builder.add(starts - lo + pos, numbers_at(buf, starts, tabs[:, 0]))

    def _slow(self, data: bytes, pos: int) -> None:
        starts, id1s = [], []
        at = 0
        for line in _lf_lines(data):
            try:
                id1 = parse_line(line).id1
            except ParseError:
                pass
            else:
                starts.append(pos + at)
                id1s.append(id1)
            at += len(line)
        self.builder.add(np.array(starts, dtype=np.int64), np.array(id1s, dtype=np.uint64))

    def finish(self) -> Manifest:
        size = self.pos + len(self.carry)
        if self.carry:  # a last line without newline counts
            self.lines += 1
            self._slow(self.carry, self.pos)
        if self.gave_up:
            return Manifest(0, ID1_MAX, False, (), (), self.lines, self.builder.step)
        return self.builder.finish(size, self.lines)


def _well_formed(buf: np.ndarray, lo: int, hi: int) -> bool:
    return well_formed(buf.data[lo:hi])


def _lf_lines(data: bytes) -> list[bytes]:
    """*data*'s lines, each with its LF, cut at LF only (``splitlines`` also cuts at a CR)."""
    lines = data.split(b"\n")
    last = lines.pop()
    out = [line + b"\n" for line in lines]
    if last:
        out.append(last)
    return out
