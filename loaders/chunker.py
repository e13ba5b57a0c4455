"""The cold path's copy: stream cold files from the source, cut line-aligned chunks, write each
chunk into HDFS.

A chunk is a slice of the concatenated files, cut at a line end once it holds at least
``chunk_size`` bytes (the last chunk may be smaller). It may span files, and skip the ranges a
fetch on demand took (``loaders.coverage``); its *segments* say which bytes and lines of which
file it holds, so that dist_ch can give every line its origin ``(file_seq, byte offset)`` and
the reject file can name the source line. A chunk fetched on demand is a set of pieces of
several files (``loaders.demand``); a segment of it may not know its first line's number yet
(``first_line`` None). A file whose last line has
no newline gets one, so lines of two files never run together.

Each chunk is written under a temporary name and renamed (``HdfsClient.write_atomic``): a killed
copy never leaves a half chunk behind. The copy streams: a block read from the source is sent to
HDFS before the next one is read; a chunk's file closes while the next chunk is sent
(``ChunkCopier.start_next``: a close may wait 0.5 s for the NameNode, docs/RUNTIME.md, "HDFS
from Python").
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import BinaryIO

from debl.catalog import ChunkRecord, ChunkState
from debl.hdfs import HdfsClient
from loaders.coverage import Coverage
from loaders.source import Source, SourceFile

BLOCK = 1 << 20
# A range a fetch took inside the bulk copy's open stream, up to this long, is read through and
# dropped rather than the stream closed: a closed stream loses what the source sent ahead.
READ_THROUGH = 512 << 10
YIELD_MAX_S = 10.0  # the longest the bulk copy waits for one fetch on demand's reads
SHARE_BELOW_S = 0.5  # a fetch this short at the bulk copy's pace shares the wire (WireTurn)
RATE_WINDOW_S = 1.0


class WireTurn:
    """Whose turn the wire is (the network from the source: docs/DESIGN.md section 2): while a
    fetch on demand that would take long reads (``demand(nbytes)``), the bulk copy does not
    read its stream (``bulk_waits()``), so the fetch has the whole wire (docs/LOADING.md, "The
    copy follows demand"). A paused stream loses nothing: the source stops sending once the
    socket's buffers are full, and the bytes in them are read after the fetch. A fetch that
    would take less than SHARE_BELOW_S at the bulk copy's own pace (``bulk_read``) shares the
    wire instead: a pause costs the wire the fetch's requests' latency, and on a fast wire that
    is more than the fetch gains.

    Pitfall: the bulk copy waits at most YIELD_MAX_S per fetch, so that a source that closes a
    connection left unread for long never sees one."""

    def __init__(self) -> None:
        self._free = threading.Event()
        self._free.set()
        self._rate: float | None = None  # the bulk copy's bytes a second, once measured
        self._counted, self._since = 0, time.monotonic()

    def bulk_read(self, nbytes: int) -> None:
        """The bulk copy read *nbytes* (its pace, measured over a second or more)."""
        self._counted += nbytes
        now = time.monotonic()
        if now - self._since >= RATE_WINDOW_S:
            self._rate = self._counted / (now - self._since)
            self._counted, self._since = 0, now

    @contextmanager
    def demand(self, nbytes: int | None = None) -> Iterator[None]:
        """A fetch of *nbytes* (None: unknown) reads: the bulk copy waits unless the fetch is
        short at the bulk copy's pace."""
        rate = self._rate
        if nbytes is not None and rate and nbytes / rate < SHARE_BELOW_S:
            yield
            return
        self._free.clear()
        try:
            yield
        finally:
            self._free.set()

    def bulk_waits(self) -> None:
        self._free.wait(YIELD_MAX_S)


def chunk_name(chunk_no: int) -> str:
    """A chunk's file name, and the stem of its bucket files (``<stem>.<slice>``); dist_ch's JVM
    task (``debl.jobs.DistCh``) builds the bucket files' names the same way."""
    return f"chunk-{chunk_no:05d}"


def chunk_no_of(name: str) -> int | None:
    """The chunk number of a chunk's or bucket file's name (``chunk-N`` or ``chunk-N.<slice>``,
    N of five digits or more), None for any other name."""
    stem = name.split(".", 1)[0]
    digits = stem.removeprefix("chunk-")
    if stem == digits or not (digits.isdigit() and digits.isascii()):
        return None
    return int(digits)


@dataclass(frozen=True)
class Segment:
    """Lines [first_line, first_line + lines) of file *file_seq*, bytes [start, end) of it,
    starting at line *chunk_line* of the chunk (0-based)."""

    file_seq: int
    name: str
    start: int
    end: int
    first_line: int | None  # None: not known yet (a piece fetched ahead of the bulk copy)
    lines: int
    chunk_line: int

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Chunk:
    chunk_no: int
    path: str
    bytes: int
    segments: tuple[Segment, ...]
    # Line-aligned slices for parallel dist_ch tasks: (byte offset, chunk line index) of each
    # slice's first line; the first is (0, 0).
    slices: tuple[tuple[int, int], ...] = ((0, 0),)
    hot: bool = False  # a chunk of hot files (a chunk never mixes hot and cold files)

    @property
    def lines(self) -> int:
        return sum(s.lines for s in self.segments)

    def record(self, state: ChunkState) -> ChunkRecord:
        """The chunk as the catalog keeps it, in *state*."""
        layout = {"segments": [s.as_dict() for s in self.segments],
                  "slices": [list(s) for s in self.slices]}
        return ChunkRecord(self.chunk_no, self.path, self.bytes, layout, state, self.hot)

    @staticmethod
    def of(record: ChunkRecord) -> "Chunk":
        """The chunk that ``record`` recorded."""
        return Chunk(record.chunk_no, record.path, record.bytes,
                     tuple(Segment(**s) for s in record.layout["segments"]),
                     tuple(tuple(s) for s in record.layout["slices"]), record.hot)


class ChunkCopier:
    """Cuts the files' untaken bytes into chunks and writes them to ``<directory>/chunk-NNNNN``
    in HDFS: the bulk copy.

    It walks its files in order, each from its first untaken byte (``loaders.coverage``), and
    streams every stretch no one took; before it keeps a block it read, it claims it in the
    ledger, which gives it only the bytes up to the next range taken by a fetch on demand: the
    copy then goes on after that range (a new ranged read). So a byte a fetch took is never
    copied again, and the bulk copy knows each line's number: every byte before its position is
    taken and counted.

    ``copy_next(chunk_size)`` copies one chunk and returns it (None when the input is used up);
    the size may change between calls (the loader adapts it). *numbers* gives each chunk its
    number (``loaders.pipeline``: fetches on demand number their chunks from the same counter).
    """

    def __init__(self, source: Source, files: list[tuple[int, SourceFile]], hdfs: HdfsClient,
                 directory: str, coverage: Coverage, numbers: Callable[[], int],
                 progress: Callable[[int], None] = lambda n: None, hot: bool = False,
                 turn: WireTurn | None = None):
        self.source, self.files, self.hdfs, self.directory = source, files, hdfs, directory
        self.turn = turn or WireTurn()  # fetches on demand read first
        self.coverage, self.numbers = coverage, numbers
        self.hot = hot  # the chunks it cuts are of hot files
        self.progress = progress
        self._index = 0  # the file being copied (into self.files)
        self._offset = 0  # the next byte of it to copy...
        self._line_no = 1  # ...and that byte's line
        # open at self._offset + len(self._pending)
        self._stream: BinaryIO | _Prepended | None = None
        self._pending = b""  # bytes read and claimed from the current file but not yet sent
        self._eof = False  # the stream reached the file's end (the pending bytes are its last)
        self._bounded = False  # the stream stops before the file's end, where a fetch took
        self._stream_end = 0  # where the open stream stops
        self._skip_to: int | None = None  # the stream read through a taken range to here
        self._seen = None  # the file as its first stream found it (loaders.source: seen)
        self._mid_line = False  # the last block sent ended inside a line

    def copy_next(self, chunk_size: int, slices: int = 1) -> Chunk | None:
        """The next chunk copied into HDFS (None when the input is used up)."""
        chunk, finished = self.start_next(chunk_size, slices)
        finished()
        return chunk

    def start_next(self, chunk_size: int,
                   slices: int = 1) -> tuple[Chunk | None, Callable[[], None]]:
        """``copy_next`` in two steps: the chunk once its bytes are sent, and a function that
        waits for its file's close and rename (and raises their error); the chunk is in HDFS
        only then."""
        segments: list[Segment] = []
        starts: list[tuple[int, int]] = [(0, 0)]
        slice_size = max(1, chunk_size // slices)
        sent = 0
        chunk_no = self.numbers()
        path = f"{self.directory}/{chunk_name(chunk_no)}"

        def blocks() -> Iterator[bytes]:
            nonlocal sent
            chunk_lines = 0
            # A chunk ends at a line end: inside a line longer than a block it goes on.
            while (sent < chunk_size or self._mid_line) and self._find_stretch():
                seq, file = self.files[self._index]
                at_line_start = not self._mid_line
                block, at_eof = self._read_block(file)
                if not block:
                    self._next_stretch(at_eof)
                    continue
                # A slice begins at the first block start past its share of the chunk that is
                # a line start.
                if (at_line_start and sent >= slice_size * len(starts)
                        and len(starts) < slices):
                    starts.append((sent, chunk_lines))
                room = chunk_size - sent
                if len(block) > room:
                    # Cut at the first line end past the size: the chunk stays line-aligned.
                    cut = block.find(b"\n", room) + 1
                    if cut == 0:  # no newline after room: keep the whole block
                        cut = len(block)
                    block, self._pending = block[:cut], block[cut:] + self._pending
                    at_eof = at_eof and not self._pending
                self._mid_line = not block.endswith(b"\n")
                lines = block.count(b"\n")
                start = self._offset
                _extend(segments, Segment(seq, file.name, start, start + len(block),
                                          self._line_no, lines, chunk_lines))
                chunk_lines += lines
                self._offset += len(block)
                self._line_no += lines
                sent += len(block)
                self.progress(len(block))
                yield block
                if at_eof:
                    self._next_stretch(True)

        finished = self.hdfs.start_write_atomic(path, blocks())
        if sent == 0:
            finished()
            self.hdfs.delete(path)
            return None, lambda: None
        return Chunk(chunk_no, path, sent, tuple(segments), tuple(starts), self.hot), finished

    def _find_stretch(self) -> bool:
        """Make the stream point at the next byte to copy, skipping what fetches took; False
        when every file is done."""
        if self._skip_to is not None and not self._pending and not self._mid_line:
            seq = self.files[self._index][0]  # the stream is past the range read through
            self._line_no += self.coverage.lines_between(seq, self._offset, self._skip_to)
            self._offset, self._skip_to = self._skip_to, None
        if self._stream is not None or self._pending or self._mid_line:
            return True
        while self._index < len(self.files):
            seq, file = self.files[self._index]
            gap = self.coverage.next_gap(seq, self._offset)
            if gap is None:
                self._index, self._offset, self._line_no, self._seen = self._index + 1, 0, 1, None
                continue
            if gap > self._offset:  # skipping ranges fetched on demand: their lines count
                self._line_no += self.coverage.lines_between(seq, self._offset, gap)
                self._offset = gap
            # Opened with its listing: a file shorter or longer than listed, or one that
            # changes while it is copied, fails the load (loaders.source). It stops where a
            # fetch took bytes: what a source sends ahead of a stream closed early costs the
            # wire (docs/LOADING.md, "The copy follows demand").
            end = self.coverage.next_taken(seq, self._offset)
            self._bounded = end is not None
            self._stream_end = file.size if end is None else end
            self._stream = self.source.open(file.name, self._offset, listed=file, end=end,
                                            seen=self._seen)
            self._seen = getattr(self._stream, "seen", None)
            self._eof = False
            return True
        return False

    def _next_stretch(self, at_eof: bool) -> None:
        """The stream's stretch ended: at the file's end, or at a range a fetch took (unless
        the stream reads through it)."""
        if not at_eof and self._skip_to is not None:
            return
        self._close_stream()
        self._skip_to = None
        self._pending, self._mid_line, self._eof = b"", False, False
        if at_eof:
            self._index, self._offset, self._line_no, self._seen = self._index + 1, 0, 1, None

    def _read_block(self, file: SourceFile) -> tuple[bytes, bool]:
        """The next block of *file* that the bulk copy may keep, and whether the file is used
        up after it. A block ends at a line end (a final newline added at EOF if missing),
        except inside a line longer than a block: then it holds no newline at all, and the line
        goes on in the next blocks. So memory stays within a few blocks whatever the lines
        (dist_ch rejects a line over ``max_line_bytes``), and no read copies more than two
        blocks. A block is claimed in the ledger before it is kept: it ends where a fetch on
        demand took bytes (empty, not at EOF, when the next byte is taken); one that ends
        inside a line holds the rest of that line for the bulk copy (``loaders.coverage``), so
        no fetch takes it."""
        if self._pending:  # read and claimed already
            data, self._pending = self._pending, b""
            return data, self._eof
        data, at_eof = self._read_raw()
        seq = self.files[self._index][0]
        keep = self.coverage.claim(seq, self._offset, len(data),
                                   lambda n: data.count(b"\n", 0, n),
                                   in_line=not data.endswith(b"\n"))
        if keep < len(data):  # a fetch took the bytes from there on
            if not self._read_through(seq, data, keep):
                self._close_stream()
            return data[:keep], False
        if at_eof:
            self._close_stream()
            self._eof = True
        return data, at_eof

    def _read_through(self, seq: int, data: bytes, keep: int) -> bool:
        """*data* (read from ``self._offset``) runs into a range a fetch took at *keep*: if that
        range is short and the stream goes on after it, drop its bytes and keep the stream,
        positioned after it (``_skip_to``); False when the stream must close instead."""
        at = self._offset + keep
        gap = self.coverage.next_gap(seq, at)
        if gap is None or gap - at > READ_THROUGH or gap >= self._stream_end:
            return False
        rest, skip = data[keep:], gap - at
        if len(rest) > skip:  # (a stream read to its end is closed already: _Ended)
            self._stream = _Prepended(rest[skip:], self._stream or _Ended())
        elif self._stream is None:
            return False
        left = max(skip - len(rest), 0)
        while left:
            more = self._stream.read(left)
            if not more:
                return False
            left -= len(more)
        self._skip_to = gap
        return True

    def _read_raw(self) -> tuple[bytes, bool]:
        """Up to BLOCK bytes of the stream, cut after their last newline (the rest goes back
        in front of the stream: its position stays where the ledger's claims end), and whether
        the file ended. Each read takes what the stream holds (up to the block): a fetch on
        demand waits for one read at most before it has the wire."""
        stream = self._stream
        assert stream is not None  # open while its file is copied
        parts: list[bytes] = []
        size = 0
        while size < BLOCK:
            self.turn.bulk_waits()
            more = stream.read(BLOCK - size)
            self.turn.bulk_read(len(more))
            if not more:
                data = b"".join(parts)
                # At the range a fetch took, a line start: a stream that ends short of it raises
                # (loaders.source).
                if self._bounded:
                    self._close_stream()
                    return data, False
                # The file's last line gets its newline also when the blocks before sent all
                # of it (a line longer than a block that ends on a block's end: nothing is left
                # for this read): without it the chunk held a line its segment did not count,
                # and dist_ch's task ran past its last segment.
                if (data or self._mid_line) and not data.endswith(b"\n"):
                    data += b"\n"
                return data, True
            parts.append(more)
            size += len(more)
        data = b"".join(parts)
        cut = data.rfind(b"\n") + 1
        if 0 < cut < len(data):
            self._stream = _Prepended(data[cut:], stream)
            return data[:cut], False
        return data, False  # inside a line longer than a block, or at a line end

    def _close_stream(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None

    def close(self) -> None:
        self._close_stream()


class _Prepended:
    """A stream with some bytes put back in front of it."""

    def __init__(self, head: bytes, stream: BinaryIO | _Prepended | _Ended):
        if isinstance(stream, _Prepended):
            head, stream = head + stream._head, stream._stream
        self._head: bytes = head
        self._stream: BinaryIO | _Prepended | _Ended = stream

    def read(self, n: int) -> bytes:
        if self._head:
            data, self._head = self._head[:n], self._head[n:]
            return data
        return self._stream.read(n)

    def close(self) -> None:
        self._stream.close()


class _Ended:
    """A stream read to its end."""

    def read(self, n: int) -> bytes:
        return b""

    def close(self) -> None:
        pass


def _extend(segments: list[Segment], seg: Segment) -> None:
    """Append *seg*, merging it into the previous segment when it continues the same file."""
    if segments and segments[-1].file_seq == seg.file_seq and segments[-1].end == seg.start:
        prev = segments[-1]
        segments[-1] = Segment(prev.file_seq, prev.name, prev.start, seg.end, prev.first_line,
                               prev.lines + seg.lines, prev.chunk_line)
    else:
        segments.append(seg)
