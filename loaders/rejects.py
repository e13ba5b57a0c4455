"""The reject files: every line that does not parse, with its source file, line number and reason.

One directory per load, ``<state_dir>/loads/<load_id>/rejects/``, and in it one file per part of
the load: ``hot.tsv`` for the hot path, ``chunk-NNNNN.tsv`` for each cold chunk (the part names
of ``debl_file_counts``). Each holds a header (its first line, the only one that starts with
``#`` on purpose), then one record per line:
``file <TAB> line_no <TAB> reason <TAB> the raw line`` (the raw line last, since it may hold tabs;
of a line over ``loading.max_line_bytes`` only its first bytes, as the reason says).

Why one file per part: a part that runs again (a resumed load redoes the hot path if it had not
finished, and every chunk after the last bucketed one) replaces its own file, so nothing is ever
rewritten in place or read back while loading; the running count is kept in memory.

Crash safety: a part is written to ``<part>.tsv.tmp`` and only ``commit()`` (flush, fsync,
rename, fsync of the directory) makes it a reject file. The loader commits a part before it
records the part as done (the hot phase ended, the chunk bucketed): a killed load never loses
the records of a part it counts as done, and a part it will redo leaves nothing behind that
counts (``RejectWriter.keep`` drops the rest on resume).

A line of a piece copied out of its file's order (docs/LOADING.md, "Answers before the copy
ends") may be refused before the load knows how many lines come before it in its file: its
record names it ``@<first byte of its segment>+<line index in the segment>``
(``pending_line``) until ``resolve`` rewrites the part with the line number, which the load does
before its uptime, once every byte of every file is here.

File names are escaped (``escape_name``): a backslash, tab, newline or carriage return becomes
``\\\\``, ``\\t``, ``\\n``, ``\\r``, and a byte that is not UTF-8 (a name the OS gave with
``surrogateescape``) becomes ``\\xNN``; ``read_rejects`` undoes it. The catalog stores names
escaped the same way, since MySQL's utf8mb4 cannot hold such bytes.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

from loaders.chunker import chunk_name

HEADER = b"# file\tline_no\treason\tline\n"
SUFFIX = ".tsv"
HOT_PART = "hot"


def pending_line(segment_start: int, index: int) -> str:
    """The name of line *index* (0-based) of a segment starting at byte *segment_start* of its
    file, while its line number is not known (see the module)."""
    return f"@{segment_start}+{index}"


def chunk_part(chunk_no: int) -> str:
    """A cold chunk's part: the chunk's own name (``loaders.chunker.chunk_name``)."""
    return chunk_name(chunk_no)


class RejectWriter:
    """The reject files of one load. Thread-safe; ``count`` is the running total of the parts
    written or committed, each part counted once however often it was redone."""

    def __init__(self, directory: Path):
        self.path = directory
        directory.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}
        for entry in directory.iterdir():
            if entry.name.endswith(SUFFIX + ".tmp"):
                entry.unlink()  # a part a killed load never committed
            elif entry.name.endswith(SUFFIX):
                self._counts[entry.name[:-len(SUFFIX)]] = len(_records(entry.read_bytes()))

    @property
    def count(self) -> int:
        with self._lock:
            return sum(self._counts.values())

    def keep(self, parts: Iterable[str]) -> None:
        """Delete the committed files of every part not in *parts*: what a resumed load does
        with the parts it will redo or never reached."""
        keep = set(parts)
        with self._lock:
            for part in [p for p in self._counts if p not in keep]:
                (self.path / (part + SUFFIX)).unlink(missing_ok=True)
                del self._counts[part]

    def open_part(self, part: str) -> "RejectPart":
        """Start writing *part* anew; its old file (if any) stays until ``commit``."""
        with self._lock:
            self._counts[part] = 0
        return RejectPart(self, part)

    def write_part(self, part: str,
                   records: Iterable[tuple[str, int | str, str, bytes]]) -> None:
        """Write and commit a whole part at once: (file, line_no, reason, line) records."""
        with self.open_part(part) as writing:
            for record in records:
                writing.write(*record)
            writing.commit()

    def resolve(self, first_line: Callable[[str, int], int]) -> int:
        """Rewrite every committed part that names lines by ``pending_line`` with their line
        numbers: *first_line(file name, segment start)* is the number of the segment's first
        line. Returns the records rewritten."""
        with self._lock:
            parts = list(self._counts)
        rewritten = 0
        for part in parts:
            path = self.path / (part + SUFFIX)
            if not path.exists():
                continue
            records = _records(path.read_bytes())
            if not any(r.split(b"\t", 2)[1].startswith(b"@") for r in records):
                continue
            with self.open_part(part) as writing:
                for record in records:
                    file, line_no, reason, line = record.split(b"\t", 3)
                    if line_no.startswith(b"@"):
                        start, index = line_no[1:].split(b"+")
                        line_no = b"%d" % (first_line(unescape_name(file.decode()), int(start))
                                           + int(index))
                        rewritten += 1
                    writing.write_raw(file + b"\t" + line_no + b"\t" + reason + b"\t" + line
                                      + b"\n")
                writing.commit()
        return rewritten

    def _add(self, part: str, n: int) -> None:
        with self._lock:
            self._counts[part] = self._counts.get(part, 0) + n


class RejectPart:
    """One part's reject file while it is written. Use with ``with``: leaving without
    ``commit()`` drops what was written. Thread-safe."""

    def __init__(self, writer: RejectWriter, part: str):
        self._writer = writer
        self.part = part
        self.path = writer.path / (part + SUFFIX)
        self._tmp = writer.path / (part + SUFFIX + ".tmp")
        self._file = open(self._tmp, "wb")
        self._file.write(HEADER)
        self._lock = threading.Lock()
        self.count = 0

    def write(self, file: str, line_no: int | str, reason: str, line: bytes) -> None:
        """One record; *line_no* a number, or a ``pending_line`` name."""
        self.write_raw(b"%s\t%s\t%s\t%s\n" % (escape_name(file).encode(), str(line_no).encode(),
                                             reason.encode("utf-8", "backslashreplace"),
                                             line.rstrip(b"\n")))

    def write_raw(self, record: bytes) -> None:
        with self._lock:
            self._file.write(record)
            self.count += 1
        self._writer._add(self.part, 1)

    def commit(self) -> None:
        """Make the part's records durable and visible, replacing its previous file."""
        with self._lock:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
            os.replace(self._tmp, self.path)
            _fsync_directory(self.path.parent)

    def __enter__(self) -> "RejectPart":
        return self

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            if not self._file.closed:
                self._file.close()
                self._tmp.unlink(missing_ok=True)


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_rejects(directory: Path) -> list[tuple[str, int | str, str, bytes]]:
    """The records of a load's reject files (hot first, then the chunks in order); a line not
    numbered yet by its ``pending_line`` name (a load still copying)."""
    out: list[tuple[str, int | str, str, bytes]] = []
    if not directory.is_dir():
        return out
    parts = sorted((p for p in directory.iterdir() if p.name.endswith(SUFFIX)),
                   key=lambda p: (p.name != HOT_PART + SUFFIX, p.name))
    for path in parts:
        for record in _records(path.read_bytes()):
            file, line_no, reason, line = record.split(b"\t", 3)
            number = line_no.decode() if line_no.startswith(b"@") else int(line_no)
            out.append((unescape_name(file.decode()), number, reason.decode(), line))
    return out


def _records(data: bytes) -> list[bytes]:
    """The records of one reject file: every line after its header. Only the first line is
    the header: a record may start with ``#`` (a file named ``#...``; names are escaped, but
    ``#`` needs no escape), so no ``#`` line is taken for a comment."""
    # Not splitlines: a raw line may hold \r.
    lines = data.split(b"\n")
    if lines[0] == HEADER.rstrip(b"\n"):
        lines = lines[1:]
    return [r for r in lines if r]


_SPECIAL = {b"\\": b"\\\\", b"\t": b"\\t", b"\n": b"\\n", b"\r": b"\\r"}
_UNSPECIAL = {v[1:]: k for k, v in _SPECIAL.items()}
_ESCAPED = re.compile(rb"\\(\\|t|n|r|x[0-9a-f]{2})")


def escape_name(name: str) -> str:
    """*name* as printable, reversible text with no tab, newline or carriage return (see the
    module docstring); a plain name is returned unchanged."""
    raw = name.encode("utf-8", "surrogateescape")
    for char, escaped in _SPECIAL.items():
        raw = raw.replace(char, escaped)
    return raw.decode("utf-8", "backslashreplace")


def unescape_name(text: str) -> str:
    """The name that ``escape_name`` turned into *text*."""
    def one(m: re.Match) -> bytes:
        code = m.group(1)
        return bytes([int(code[1:], 16)]) if code[:1] == b"x" else _UNSPECIAL[code]
    return _ESCAPED.sub(one, text.encode("utf-8")).decode("utf-8", "surrogateescape")
