"""The cold path's copy: stream cold files from the source, cut line-aligned chunks, write each
chunk into HDFS.

A chunk is a slice of the concatenated cold files, cut at a line end once it holds at least
``chunk_size`` bytes (the last chunk may be smaller). It may span files; its *segments* say which
bytes and lines of which file it holds, so that dist_ch can give every line its origin
``(file_seq, line_no)`` and the reject file can name the source line. A file whose last line has
no newline gets one, so lines of two files never run together.

Each chunk is written under a temporary name and renamed (``WebHDFS.write_atomic``): a killed
copy never leaves a half chunk behind. The copy streams: a block read from the source is sent to
HDFS before the next one is read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass

from debl.catalog import ChunkRecord
from debl.webhdfs import WebHDFS
from loaders.source import Source, SourceFile

BLOCK = 1 << 20


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
    first_line: int
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

    def record(self, state: str) -> ChunkRecord:
        """The chunk as the catalog keeps it, in *state* (``copied`` / ``bucketed``)."""
        layout = {"segments": [s.as_dict() for s in self.segments],
                  "slices": [list(s) for s in self.slices]}
        return ChunkRecord(self.chunk_no, self.path, self.bytes, layout, state, self.hot)

    @staticmethod
    def of(record: ChunkRecord) -> "Chunk":
        """The chunk that ``record`` recorded."""
        return Chunk(record.chunk_no, record.path, record.bytes,
                     tuple(Segment(**s) for s in record.layout["segments"]),
                     tuple(tuple(s) for s in record.layout["slices"]), record.hot)


@dataclass(frozen=True)
class Position:
    """Where the copy stands: the next byte to read is *offset* of file index *file_index*
    (into the cold file list), which is line *line_no* of that file."""

    file_index: int = 0
    offset: int = 0
    line_no: int = 1

    @staticmethod
    def after(chunk: Chunk, files: list[tuple[int, SourceFile]]) -> "Position":
        """Where the copy goes on after *chunk* (a resumed load). A segment that reached its
        file's end may end one byte past it (the newline the copier adds to a last line
        without one): the copy then goes on with the next file."""
        last = chunk.segments[-1]
        index = next(i for i, (seq, _) in enumerate(files) if seq == last.file_seq)
        if last.end >= files[index][1].size:
            return Position(index + 1, 0, 1)
        return Position(index, last.end, last.first_line + last.lines)


class ChunkCopier:
    """Cuts the cold files into chunks and writes them to ``<directory>/chunk-NNNNN`` in HDFS.

    ``copy_next(chunk_size)`` copies one chunk and returns it (None when the input is used up);
    the size may change between calls (the loader adapts it).
    """

    def __init__(self, source: Source, files: list[tuple[int, SourceFile]], hdfs: WebHDFS,
                 directory: str, start: Position = Position(), first_chunk: int = 0,
                 progress: Callable[[int], None] = lambda n: None, hot: bool = False):
        self.source, self.files, self.hdfs, self.directory = source, files, hdfs, directory
        self.hot = hot  # the chunks it cuts are of hot files
        self.pos = start
        self.chunk_no = first_chunk
        self.progress = progress
        self._stream = None
        self._pending = b""  # bytes read from the current file but not yet sent
        self._mid_line = False  # the last block sent ended inside a line

    def copy_next(self, chunk_size: int, slices: int = 1) -> Chunk | None:
        if self.pos.file_index >= len(self.files) and not self._pending:
            return None
        segments: list[Segment] = []
        starts: list[tuple[int, int]] = [(0, 0)]
        slice_size = max(1, chunk_size // slices)
        sent = 0
        path = f"{self.directory}/{chunk_name(self.chunk_no)}"

        def blocks() -> Iterator[bytes]:
            nonlocal sent
            chunk_lines = 0
            # A chunk ends at a line end: inside a line longer than a block it goes on.
            while ((sent < chunk_size or self._mid_line)
                   and self.pos.file_index < len(self.files)):
                seq, file = self.files[self.pos.file_index]
                at_line_start = not self._mid_line
                block, at_eof = self._read_block(file)
                if block:
                    # A slice begins at the first block start past its share of the chunk
                    # that is a line start.
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
                    start = self.pos.offset
                    _extend(segments, Segment(seq, file.name, start, start + len(block),
                                              self.pos.line_no, lines, chunk_lines))
                    chunk_lines += lines
                    self.pos = Position(self.pos.file_index, start + len(block),
                                        self.pos.line_no + lines)
                    sent += len(block)
                    self.progress(len(block))
                    yield block
                if at_eof:
                    self._mid_line = False
                    self._close_stream()
                    self.pos = Position(self.pos.file_index + 1, 0, 1)

        self.hdfs.write_atomic(path, blocks())
        if sent == 0:
            self.hdfs.delete(path)
            return None
        chunk = Chunk(self.chunk_no, path, sent, tuple(segments), tuple(starts), self.hot)
        self.chunk_no += 1
        return chunk

    def _read_block(self, file: SourceFile) -> tuple[bytes, bool]:
        """The next block of *file*, and whether the file is used up after it. A block ends at
        a line end (a final newline added at EOF if missing), except inside a line longer than
        a block: then it holds no newline at all, and the line goes on in the next blocks.
        So memory stays within a few blocks whatever the lines (dist_ch rejects a line over
        ``max_line_bytes``), and no read copies more than two blocks."""
        if self._stream is None:
            # Opened with its listing: a file shorter or longer than listed, or one that
            # changes while it is copied, fails the load (loaders.source).
            self._stream = self.source.open(file.name, self.pos.offset, listed=file)
        data = self._pending
        self._pending = b""
        while True:
            cut = data.rfind(b"\n") + 1
            if cut:
                self._pending = data[cut:]
                return data[:cut], False
            if len(data) >= BLOCK:
                return data, False
            more = self._stream.read(BLOCK)
            if not more:
                if (data or self._mid_line) and not data.endswith(b"\n"):
                    data += b"\n"
                return data, True
            data += more

    def _close_stream(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None

    def close(self) -> None:
        self._close_stream()


def _extend(segments: list[Segment], seg: Segment) -> None:
    """Append *seg*, merging it into the previous segment when it continues the same file."""
    if segments and segments[-1].file_seq == seg.file_seq and segments[-1].end == seg.start:
        prev = segments[-1]
        segments[-1] = Segment(prev.file_seq, prev.name, prev.start, seg.end, prev.first_line,
                               prev.lines + seg.lines, prev.chunk_line)
    else:
        segments.append(seg)
