"""The hot files as the hot path reads them once they are in HDFS: a ``Source`` over the hot
chunks, so that the wire is crossed once (docs/LOADING.md, "Uptime without MySQL").

A load copies its hot files into HDFS as chunks of their own (before its cold ones), where
dist_ch buckets them for the raw route; MySQL's hot path then reads the same chunks back from
HDFS instead of the remote source. ``HotChunkSource.open(name)`` streams a hot file's bytes in
order from the segments of the chunks that hold it (a file may span chunks, a chunk may hold
several files, and a piece fetched on demand may sit in a later chunk than the bytes after it:
the segments are read in the file's order).

The chunks are read over HDFS's own protocols (``debl.hdfs``), 1 MiB a request, not over
WebHDFS, which cost the DataNode far more CPU: while MySQL takes the hot keys over, the raw
route serves from the same DataNode, and a WebHDFS stream of a chunk held its reads up
(docs/BENCHMARKS.md, "What changed, one step at a time", has the measurement).

Pitfalls: a file whose last line has no newline reads back with the newline the copier added
(``loaders.chunker``), one byte more than its listing: the hot path treats both the same. A
chunk shorter than its segments say (changed since it was copied) is a SourceError naming it.
"""

from __future__ import annotations

from collections.abc import Iterator

from debl.errors import SourceError
from debl.hdfs import HdfsClient
from loaders.chunker import Chunk
from loaders.source import SourceFile

_BLOCK = 1 << 20


class HotChunkSource:
    """The hot files of a load, read back from its hot chunks in HDFS."""

    def __init__(self, hdfs: HdfsClient, chunks: list[Chunk]):
        self.hdfs = hdfs
        # (chunk path, offset in the chunk, length) of each file's segments, in file order
        found: dict[str, list[tuple[int, int, str, int]]] = {}
        for chunk in chunks:
            at = 0
            for s in chunk.segments:
                found.setdefault(s.name, []).append((s.start, s.end, chunk.path, at))
                at += s.end - s.start
        self._parts: dict[str, list[tuple[str, int, int]]] = {}
        for name, segments in found.items():
            segments.sort()
            expected = 0
            for start, end, _, _ in segments:
                if start != expected:
                    raise SourceError(f"hot file {name!r}: its chunks hold bytes from {start}, "
                                      f"not {expected}: a piece of it is missing from HDFS")
                expected = end
            self._parts[name] = [(path, at, end - start) for start, end, path, at in segments]

    def describe(self) -> str:
        return "the load's hot chunks in HDFS"

    def open(self, name: str, offset: int = 0, listed: SourceFile | None = None) -> "_Stream":
        """The whole hot file *name* (only from its start: the hot path reads files whole)."""
        if offset:
            raise ValueError("the hot chunks are read from a file's start")
        parts = self._parts.get(name)
        if parts is None:
            if listed is not None and listed.size == 0:
                return _Stream(self.hdfs, [])  # an empty file has no segment in any chunk
            raise SourceError(f"hot file {name!r} is in none of the load's hot chunks")
        return _Stream(self.hdfs, parts)


class _Stream:
    """A readable stream over a file's segments in the chunks (``read``, ``close``, ``with``)."""

    def __init__(self, hdfs: HdfsClient, parts: list[tuple[str, int, int]]):
        self._blocks: Iterator[bytes] = (block for path, at, n in parts if n
                                         for block in _blocks(hdfs, path, at, n))
        self._pending = b""

    def read(self, n: int = -1) -> bytes:
        while n < 0 or len(self._pending) < n:
            block = next(self._blocks, None)
            if block is None:
                break
            self._pending += block
        if n < 0:
            data, self._pending = self._pending, b""
        else:
            data, self._pending = self._pending[:n], self._pending[n:]
        return data

    def close(self) -> None:
        self._blocks = iter(())

    def __enter__(self) -> "_Stream":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _blocks(hdfs: HdfsClient, path: str, at: int, n: int) -> Iterator[bytes]:
    """Bytes [at, at + n) of the chunk *path*, ``_BLOCK`` a read."""
    f = hdfs.open(path)
    if f.length < at + n:
        raise SourceError(f"hot chunk {path} holds {f.length} bytes, its segments need "
                          f"{at + n}: it changed after it was copied; load the input again")
    for offset in range(at, at + n, _BLOCK):
        yield hdfs.read_many([(f, offset, min(_BLOCK, at + n - offset))])[0]
