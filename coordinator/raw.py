"""The raw route's reader: one (id1, link_type)'s rows straight from a bucket's files in HDFS,
for a bucket that gen_HF has not loaded into HBase yet (docs/COORDINATOR.md, "The raw route").

dist_ch writes every bucket file sorted by (id1, link_type, time) with a sparse index and a
Bloom filter of its keys as its footer (debl.bucket_file). For a query the reader

1. opens the bucket once: its files (the catalog's path prefix per chunk, one directory
   listing) and each file's index and filter (one ranged read of the file's tail, all files in
   parallel), checking that each chunk's files hold exactly the rows dist_ch recorded for it,
   and the bucket the rows of the bucket index, so that a file gone or changed is an error
   naming it, never a smaller answer;
2. reads, in only the files whose filter and index say they may hold the key
   (``BucketIndex.blocks``), the blocks that can hold it, newest first: the last block of every
   such file in parallel, then, as the merge asks for more, 2, 4, ... blocks back, so a heavy
   id1 read for one page of its newest links stops early, as HBase's scan does; each read is one
   WebHDFS OPEN with offset and length (``WebHDFS.read_range``: straight to the DataNode);
3. parses the key's lines with the one line parser (``debl.bucket_file.parse_row``, i.e.
   ``debl.model.parse_line``) and merges the files by the one merge rule
   (``debl.model.merge_batch``), yielding one winner per key, hidden ones included, newest first
   (ties: id2 descending): exactly ``LinkStore.scan_newest_first``, so the coordinator merges it
   with MySQL's rows as it merges HBase's.

Recently read blocks and opened buckets stay in an LRU cache under ``raw_cache_bytes``
(``BlockCache``): LinkBench's requests are skewed, so a few blocks answer most of them.

Pitfalls:

- Thread-safe: the coordinator's client threads share one reader. A bucket is opened by one
  thread while the others wait for it; HDFS reads run outside every lock.
- Cache keys carry the load id: the bucket directory is the dataset's and a new load rewrites it.
- A bucket file that vanished raises BucketFileError naming it, even if some of its blocks are
  cached: those are the file's bytes as written, so an answer from them would still be right,
  but the next block would be missing.
"""

from __future__ import annotations

import heapq
import re
import threading
from collections import OrderedDict
from collections.abc import Hashable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import groupby

from debl.bucket_file import BucketIndex, is_bucket_file, parse_row, read_index
from debl.catalog import Catalog
from debl.config import Config
from debl.errors import BucketFileError, ServiceError
from debl.model import Link, Origin, merge_batch
from debl.webhdfs import WebHDFS

MAX_READ_BLOCKS = 64  # the longest read of one file, in blocks (4 MiB): a heavy id1's page
# HDFS reads in flight per reader: a query's first read of each file (and a bucket's index
# reads) go out together, since a WebHDFS read is mostly waiting on the DataNode (2.4-3.9 ms on
# the 2-core stack under load, measured; a query over 10 files took half the time in parallel).
READ_THREADS = 16
_OPENED_COST = 256  # bytes of memory an opened bucket takes per file, beside its index


class BlockCache:
    """A least-recently-used map under a budget of bytes; each entry's cost is given when it is
    put. Thread-safe. An entry costlier than the whole budget is not kept."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._entries: OrderedDict[Hashable, tuple[object, int]] = OrderedDict()
        self._lock = threading.Lock()
        self.size = 0
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable) -> object | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return entry[0]

    def put(self, key: Hashable, value: object, cost: int) -> None:
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self.size -= old[1]
            if cost > self.budget:
                return
            self._entries[key] = (value, cost)
            self.size += cost
            while self.size > self.budget:
                _, (_, evicted) = self._entries.popitem(last=False)
                self.size -= evicted

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


@dataclass(frozen=True)
class RawBucket:
    """What the reader needs of a bucket: the load it belongs to, its index, and its rows as
    the bucket index recorded them (the files must hold exactly these)."""

    load_id: str
    b_index: int
    rows: int
    hot: bool = False  # the bucket's hot files (read until MySQL takes the hot keys over)


@dataclass(frozen=True)
class _File:
    path: str
    index: BucketIndex


class RawReader:
    """Reads (id1, link_type)'s rows from the bucket files of buckets not loaded yet.

    *catalog* (thread-safe, the caller's) gives a bucket's file prefixes when the bucket is
    first opened; HDFS is reached per read. ``close()`` stops the read threads."""

    def __init__(self, config: Config, catalog: Catalog) -> None:
        self.config = config
        self.cache = BlockCache(config.raw_cache_bytes)
        self._fs = WebHDFS(config, timeout=30.0)
        self._catalog = catalog
        self._opening: dict[tuple, threading.Lock] = {}
        self._opening_lock = threading.Lock()
        self._pool = ThreadPoolExecutor(READ_THREADS, thread_name_prefix="debl-raw-read")

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    # ------------------------------------------------------------------ queries

    def scan_newest_first(self, bucket: RawBucket, id1: int, link_type: int,
                          min_time: int = 0) -> Iterator[Link]:
        """Every winner of (id1, link_type) with time >= min_time in the bucket's files,
        hidden ones included, time descending (ties: id2 descending). Lazy: blocks are read
        as the iterator is consumed. Raises BucketFileError naming a file gone or damaged."""
        wanted = [(f, blocks) for f in self._open(bucket)
                  if (blocks := f.index.blocks(id1, link_type, min_time))]
        # The newest block of every file, read in parallel: the merge needs each file's first row.
        lasts = self._map(lambda fb: self._read_blocks(bucket, fb[0], fb[1].stop - 1,
                                                       fb[1].stop), wanted)
        streams = [self._file_rows(bucket, f, blocks, last, id1, link_type, min_time)
                   for (f, blocks), last in zip(wanted, lasts)]
        return _merge_newest_first(streams)

    def _map(self, fn, items: list) -> list:
        """fn over items, in parallel on the reader's pool when there is more than one."""
        if len(items) < 2:
            return [fn(item) for item in items]
        return list(self._pool.map(fn, items))

    def _file_rows(self, bucket: RawBucket, f: _File, blocks: range, last: bytes, id1: int,
                   link_type: int, min_time: int) -> Iterator[tuple[Link, Origin]]:
        """The file's rows of the key with time >= min_time, newest first (*last*: the bytes of
        the last of *blocks*, already read); rows of one time in reverse file order (any order
        is fine: the merge ranks them)."""
        stop, batch = blocks.stop, 1
        while stop > blocks.start:
            start = max(blocks.start, stop - batch)
            data = last if stop == blocks.stop else self._read_blocks(bucket, f, start, stop)
            lines = _key_lines(data, id1, link_type)
            for line in reversed(lines):
                row = parse_row(line)
                if row[0].time < min_time:
                    return
                yield row
            stop, batch = start, min(batch * 2, MAX_READ_BLOCKS)

    def _read_blocks(self, bucket: RawBucket, f: _File, start: int, stop: int) -> bytes:
        """Blocks [start, stop) of a file: from the cache, the missing runs by one read each."""
        parts: list[bytes | None] = [self.cache.get((bucket.load_id, f.path, i))
                                     for i in range(start, stop)]
        i = 0
        while i < len(parts):
            if parts[i] is not None:
                i += 1
                continue
            j = i
            while j < len(parts) and parts[j] is None:
                j += 1
            lo, hi = f.index.offset(start + i), f.index.offset(start + j)
            data = self._read_range(bucket, f.path, lo, hi - lo)
            for k in range(i, j):
                a, b = f.index.offset(start + k) - lo, f.index.offset(start + k + 1) - lo
                parts[k] = data[a:b]
                self.cache.put((bucket.load_id, f.path, start + k), parts[k], b - a)
            i = j
        return b"".join(parts)  # type: ignore[arg-type]

    def _read_range(self, bucket: RawBucket, path: str, offset: int, length: int) -> bytes:
        try:
            return self._fs.read_range(path, offset, length)
        except ServiceError as exc:
            if self._fs.status(path) is None:
                raise BucketFileError(
                    f"bucket {bucket.b_index}: its file {path} is gone from HDFS, so the query "
                    "cannot be answered from the raw files; run `debl verify`, and reload the "
                    "input if the file is lost") from exc
            raise

    # ------------------------------------------------------------------ opening a bucket

    def _open(self, bucket: RawBucket) -> list[_File]:
        key = ("bucket", bucket.load_id, bucket.b_index, bucket.hot)
        files = self.cache.get(key)
        if files is not None:
            return files  # type: ignore[return-value]
        with self._opening_lock:
            lock = self._opening.setdefault(key, threading.Lock())
        with lock:  # one thread opens it; the others find it in the cache
            files = self.cache.get(key)
            if files is None:
                files = self._read_files(bucket)
                self.cache.put(key, files, sum(len(f.index.raw) + len(f.index.bloom)
                                               + _OPENED_COST for f in files))
        with self._opening_lock:
            self._opening.pop(key, None)
        return files  # type: ignore[return-value]

    def _read_files(self, bucket: RawBucket) -> list[_File]:
        """The bucket's files and their indexes, checked against the bucket index's rows."""
        chunks = self._catalog.bucket_chunks(bucket.b_index, bucket.load_id, bucket.hot)
        listings: dict[str, list] = {}
        per_chunk = []
        for chunk in chunks:
            directory, stem = chunk.path.rsplit("/", 1)
            if directory not in listings:
                try:
                    listings[directory] = self._fs.list(directory)
                except ServiceError as exc:
                    if self._fs.status(directory) is None:
                        raise BucketFileError(
                            f"bucket {bucket.b_index}: its directory {directory} is gone from "
                            "HDFS; run `debl verify`, and reload the input") from exc
                    raise
            found = [s for s in listings[directory]
                     if is_bucket_file(s.path.rsplit("/", 1)[1], stem)]
            if not found:
                raise BucketFileError(
                    f"bucket {bucket.b_index}: no file {chunk.path}.<slice> in HDFS, though "
                    "dist_ch wrote one; run `debl verify`, and reload the input")
            per_chunk.append((chunk, found))
        indexes = iter(self._map(lambda s: read_index(
            s.path, s.length, lambda offset, n: self._read_range(bucket, s.path, offset, n)),
            [s for _, found in per_chunk for s in found]))
        files: list[_File] = []
        for chunk, found in per_chunk:
            mine = [_File(s.path, next(indexes)) for s in found]
            rows = sum(f.index.rows for f in mine)
            if rows != chunk.rows:
                raise BucketFileError(
                    f"bucket {bucket.b_index}: the files {chunk.path}.<slice> hold {rows} rows, "
                    f"dist_ch wrote {chunk.rows}: one of them is gone or changed; run `debl "
                    "verify`, and reload the input")
            files.extend(mine)
        rows = sum(f.index.rows for f in files)
        if rows != bucket.rows:
            raise BucketFileError(
                f"bucket {bucket.b_index}: its HDFS files hold {rows} rows, the bucket index "
                f"says {bucket.rows}: a file is missing or changed since dist_ch wrote it; run "
                "`debl verify`, and reload the input")
        return files


def _key_lines(data: bytes, id1: int, link_type: int) -> list[bytes]:
    """The lines (without newline) of (id1, link_type) in whole sorted blocks: one run.

    Matched by value, not by text: a bucket line keeps the input's bytes, and the input may
    write a number with leading zeros (docs/LOADING.md, "Integers in the input"), so ``05``
    and ``5`` are one id1 and their lines are sorted together; a text match on ``5\\t``
    would end the run at the first ``05``. Fields are plain digits (dist_ch wrote only lines
    that parse), so ``0*5`` at a line start is exactly "parses to 5"."""
    run = re.compile(rb"(?m)^(?:0*%d\t0*%d\t[^\n]*\n)+" % (id1, link_type)).search(data)
    return run.group().split(b"\n")[:-1] if run else []


def _merge_newest_first(streams: list[Iterator[tuple[Link, Origin]]]) -> Iterator[Link]:
    """One winner per key by the merge rule, newest first (ties: id2 descending), from
    per-file streams of one (id1, link_type) in time-descending order.

    The rows of one time form a group: a key's winner is in the first group that holds the key
    (the greatest time), where merge_batch ranks its rows (version, then file, then line); a
    key seen in an earlier group has already won."""
    merged = heapq.merge(*streams, key=lambda row: row[0].time, reverse=True)
    seen: set[int] = set()
    for _, group in groupby(merged, key=lambda row: row[0].time):
        _, winners = merge_batch(row for row in group if row[0].id2 not in seen)
        for link in sorted(winners.values(), key=lambda link: link.id2, reverse=True):
            seen.add(link.id2)
            yield link
