"""The raw route's reader: one (id1, link_type)'s rows straight from a bucket's files in HDFS,
for a bucket that gen_HF has not loaded into HBase yet (docs/COORDINATOR.md, "The raw route").

dist_ch writes every bucket file sorted by (id1, link_type, time) with a sparse index and a
Bloom filter of its keys as its footer (debl.format.bucket_file). For a query the reader

1. opens the bucket once per load: its files (the catalog's path prefix per chunk, one
   directory listing), each opened for reads over HDFS's own protocols (``debl.hdfs``: the
   NameNode's block locations) and its index and filter read (a ranged read of the file's
   tail), all files in parallel; it checks that each chunk's files hold exactly the rows
   dist_ch recorded for it, and the bucket the rows of the bucket index, so that a file gone or
   changed is an error naming it, never a smaller answer;
2. tests the key against every file's filter (``FileFilters``) and finds, in the files that
   may hold it, the blocks that can (``BucketIndex.key_blocks``); reads them newest first, each
   read one request to the DataNode: a light key's blocks (at most ``EAGER_BLOCKS`` over all
   files) all at once; a heavy id1's newest block of every file, then, as the merge asks for
   more, 2, 4, ... blocks back of the files it waits for, so that a page of its newest links
   stops early, as HBase's scan does;
3. finds the key's lines in the blocks by a binary search, by value (``key_lines``), parses them
   with the one line parser (``debl.format.bucket_file.parse_row``) and merges the files by the one
   merge rule (``NewestFirstMerge``: ``debl.format.link.merge_batch`` over each round's rows),
   yielding one winner per key, hidden ones included, newest first (ties: id2 descending):
   exactly ``LinkStore.scan_newest_first``, so the coordinator merges it with MySQL's rows as
   it merges HBase's.

Memory: the opened buckets (indexes and filters, about 1% of their files) and an LRU cache of
blocks read (``BlockCache``) share ``coordinator.raw_cache_bytes``, the blocks what the buckets
leave: LinkBench's requests are skewed, so cached blocks answer many of them.

Pitfalls:

- Thread-safe: the client threads share one reader; one thread opens a bucket while the
  others wait for it; HDFS reads run outside every lock.
- A read is by block (``debl.hdfs``): it returns the file's bytes as they were when the
  bucket was opened, or fails. So a thread of the reader checks the opened buckets' directories
  every ``coordinator.poll_interval`` seconds (``coordinator.raw_listing``): a file gone or
  changed since is a BucketFileError naming it from the next query on that would read. A query
  about to read checks its buckets itself only when that thread is far behind. A query answered
  from cached blocks alone reads nothing and checks nothing: those are the file's bytes as
  written.
- The coordinator says which buckets are still read (``serve``): at a switch of day (or a
  rollback) the other days' buckets go, at MySQL's take-over the hot ones, so that the listing
  thread never polls the NameNode for files that are gone.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from debl.format.bucket_file import BucketIndex, is_bucket_file, parse_row, read_index
from debl.catalog import IndexCatalog
from debl.config import Config
from debl.errors import BucketFileError, ServiceError
from debl.hdfs import (FileChanged, FileGone, HdfsClient, HdfsFile, HdfsTimeout, OpenFile,
                       read_file)
from debl.format.link import Link
from debl.measure.request_cost import HDFS_META, Timed
from coordinator.raw_cache import BlockCache
from coordinator.raw_listing import ListingChecks
from coordinator.merge import NewestFirstMerge
from coordinator.raw_scan import FileFilters, key_lines

MAX_READ_BLOCKS = 64  # the longest read of one file, in blocks (64 of 64 KiB): a heavy id1's page
# A key whose blocks over all files are at most this many (16 of 64 KiB: the default page of
# 10,000 lines, at LinkBench's line lengths) is read and merged at once; a heavier one lazily,
# newest first.
EAGER_BLOCKS = 16
READ_TIMEOUT_S = 30.0
# Memory of an opened bucket beside its filters: per file (the open file's block locations,
# the objects) and per index entry (its key tuple and offset as Python objects).
_FILE_COST = 2048
_ENTRY_COST = 256


@dataclass(frozen=True)
class ReaderMemory:
    """What the reader holds (``RawReader.memory``): opened buckets and cached blocks, whose
    bytes together stay under ``coordinator.raw_cache_bytes``."""

    buckets: int
    bucket_bytes: int
    blocks: int
    block_bytes: int


@dataclass(frozen=True)
class RawBucket:
    """What the reader needs of a bucket: the load it belongs to, its index, and its rows as
    the bucket index recorded them (the files must hold exactly these)."""

    load_id: str
    b_index: int
    rows: int
    hot: bool = False  # the bucket's hot files (read until MySQL takes the hot keys over)
    # A bucket of a load still copying (answering before its uptime): its files are at least
    # those that held *rows*; an opened bucket with fewer rows is opened again.
    growing: bool = False


@dataclass
class _File:
    """One file of an opened bucket; ``opened`` is replaced when it is opened again."""

    opened: OpenFile  # with the file as listed, to tell a file rewritten since
    index: BucketIndex  # keys and offsets; its filter is in the bucket's FileFilters


class _Bucket:
    """An opened bucket: its files with their indexes, and all their filters."""

    def __init__(self, bucket: RawBucket, directories: dict[str, int | None],
                 files: list[_File]) -> None:
        self.bucket = bucket
        self.directories = directories  # directory -> its modification time when listed
        self.files = files
        self.filters = FileFilters([f.index.bloom for f in files]) if files else None
        for f in files:  # the filter is in self.filters now; the keys are unpacked once here
            f.index = dataclasses.replace(f.index, bloom=b"")
            f.index.keys, f.index.offsets  # noqa: B018 -- computed now, under the open lock
        self.cost = (self.filters.nbytes if self.filters else 0) + sum(
            _FILE_COST + len(f.index.raw) + f.index.entries * _ENTRY_COST for f in files)
        self.rows = sum(f.index.rows for f in files)
        self.checked_at = time.monotonic()
        self.checking = threading.Lock()

    @property
    def b_index(self) -> int:
        return self.bucket.b_index

    def wanted(self, id1: int, link_type: int, min_time: int) -> list[tuple[_File, range]]:
        """The files that may hold the key, each with the blocks that can."""
        if self.filters is None:
            return []
        wanted = []
        for i in self.filters.holding(id1, link_type):
            f = self.files[i]
            blocks = f.index.key_blocks(id1, link_type, min_time)
            if blocks:
                wanted.append((f, blocks))
        return wanted


class RawReader:
    """Reads (id1, link_type)'s rows from the bucket files of buckets not loaded yet. *index*
    (the catalog's bucket index, thread-safe, the caller's) gives a bucket's file prefixes when
    it is first opened; HDFS is reached per read. ``close()`` stops the threads."""

    def __init__(self, config: Config, index: IndexCatalog) -> None:
        self.config = config
        self.cache = BlockCache(config.coordinator.raw_cache_bytes)
        self._hdfs = HdfsClient(config, timeout=READ_TIMEOUT_S,
                                threads=config.coordinator.raw_read_threads)
        self._listings = ListingChecks(self._hdfs, config.coordinator.poll_interval)
        self._index = index
        self._lock = threading.Lock()  # guards the three below
        self._opened: OrderedDict[tuple, _Bucket] = OrderedDict()
        self._opened_bytes = 0
        self._opening: dict[tuple, threading.Lock] = {}
        self._serving: tuple[str, bool] | None = None  # (load, its hot buckets too): ``serve``
        self._closed = threading.Event()
        self._sweeps = threading.Thread(target=self._sweep_listings, daemon=True)
        self._sweeps.start()

    def close(self) -> None:
        """Stop the listing and read threads, waiting for the HDFS calls in flight (a thread
        inside the HDFS client at the interpreter's exit aborts it: docs/COORDINATOR.md,
        "Threads")."""
        self._closed.set()
        self._sweeps.join(READ_TIMEOUT_S)
        self._hdfs.close()

    def memory(self) -> ReaderMemory:
        """The opened buckets and the cached blocks, counted as the budget counts them."""
        with self._lock:
            buckets, bucket_bytes = len(self._opened), self._opened_bytes
        return ReaderMemory(buckets, bucket_bytes, len(self.cache), self.cache.size)

    def opened_buckets(self) -> list[RawBucket]:
        """The buckets kept opened, least recently used first."""
        with self._lock:
            return [opened.bucket for opened in self._opened.values()]

    # ------------------------------------------------------------------ queries

    def reads_locally(self, buckets: Sequence[RawBucket]) -> bool:
        """Whether every file of *buckets* (opened now if they are not) is read from this
        host's block files (``debl.hdfs.local_reads``): then an answer waits on no server."""
        return all(f.opened.local is not None
                   for bucket in buckets for f in self._open(bucket).files)

    def scan_newest_first(self, buckets: Sequence[RawBucket], id1: int, link_type: int,
                          min_time: int = 0) -> Iterator[Link]:
        """Every winner of (id1, link_type) with time >= min_time in the files of *buckets*
        (of one load), hidden ones included, time descending (ties: id2 descending). A hot
        bucket's rows rank as hot rows, so the winners are those of merging each bucket's
        winners by the merge rule; the files of all are read in the same rounds, one wait on
        HDFS a round however many buckets (a change log's key reads its hot and its cold
        bucket). Lazy for a heavy id1: older blocks are read as the iterator is consumed.
        Raises BucketFileError naming a file gone or damaged."""
        opened = [self._open(bucket) for bucket in buckets]
        wanted = [(f, blocks, int(o.bucket.hot)) for o in opened
                  for f, blocks in o.wanted(id1, link_type, min_time)]
        if not wanted:
            return iter(())
        eager = sum(len(blocks) for _, blocks, _ in wanted) <= EAGER_BLOCKS
        return self._rounds(opened, wanted, id1, link_type, min_time, eager)

    def _rounds(self, opened: list[_Bucket], wanted: list[tuple[_File, range, int]],
                id1: int, link_type: int, min_time: int, eager: bool) -> Iterator[Link]:
        """Read the files' blocks of the key newest first, in rounds: the first reads the
        newest ``EAGER_BLOCKS`` blocks shared out over the files, at least one each (all of
        them when *eager*: a heavy id1's first page then costs about one round however few
        files hold it), each next one a batch twice as long of the files the merge waits for,
        all at once; each round gives the winners no older row can change."""
        merge = NewestFirstMerge(len(wanted))
        stops = [blocks.stop for _, blocks, _ in wanted]
        first = EAGER_BLOCKS if eager else max(1, EAGER_BLOCKS // len(wanted))
        batches = [first] * len(wanted)
        while files := merge.wanted():
            spans = [(i, max(wanted[i][1].start, stops[i] - batches[i]), stops[i]) for i in files]
            datas = self._read_blocks(opened, [(wanted[i][0], start, stop)
                                               for i, start, stop in spans])
            for (i, start, _), data in zip(spans, datas):
                rows, older, hot = [], False, wanted[i][2]
                for line in reversed(key_lines(data, id1, link_type)):
                    row = parse_row(line, hot)
                    if row[0].time < min_time:
                        older = True  # the rest of the file is older still
                        break
                    rows.append(row)
                stops[i], batches[i] = start, min(batches[i] * 2, MAX_READ_BLOCKS)
                merge.add(i, rows, older or start == wanted[i][1].start)
            yield from merge.winners()

    def _read_blocks(self, opened: list[_Bucket],
                     wanted: list[tuple[_File, int, int]]) -> list[bytes]:
        """Blocks [start, stop) of each file (of the *opened* buckets, of one load): from the
        cache, the missing runs by one read each, all in parallel."""
        load = opened[0].bucket.load_id
        parts = [[self.cache.get((load, f.opened.path, i)) for i in range(start, stop)]
                 for f, start, stop in wanted]
        runs = []  # (which, first part, past the last part) of each missing run
        for which, got in enumerate(parts):
            i = 0
            while i < len(got):
                if got[i] is not None:
                    i += 1
                    continue
                j = i
                while j < len(got) and got[j] is None:
                    j += 1
                runs.append((which, i, j))
                i = j
        if runs:
            offsets = [(wanted[w][0], wanted[w][0].index.offsets, wanted[w][1] + i,
                        wanted[w][1] + j) for w, i, j in runs]
            datas = self._read(opened, [(f, offs[a], offs[b] - offs[a])
                                        for f, offs, a, b in offsets])
            for (which, i, j), (f, offs, a, _), data in zip(runs, offsets, datas):
                for k in range(i, j):
                    lo, hi = offs[a + k - i] - offs[a], offs[a + k - i + 1] - offs[a]
                    parts[which][k] = data[lo:hi]
                    self.cache.put((load, f.opened.path, a + k - i), parts[which][k], hi - lo)
        return [got[0] if len(got) == 1 else b"".join(got) for got in parts]  # type: ignore

    def _read(self, opened: list[_Bucket], ranges: list[tuple[_File, int, int]]) -> list[bytes]:
        """The bytes of each (file, offset, length), read in parallel; the buckets' listings
        checked first when due (``ListingChecks.check``). A failed read is retried once on the
        files opened again (their blocks may have moved: a DataNode restarted), unless a file
        is gone or changed."""
        for bucket in opened:
            self._listings.check(bucket)
        try:
            return self._hdfs.read_many([(f.opened, o, n) for f, o, n in ranges])
        except HdfsTimeout:
            raise  # a server that hangs: asking again would only wait as long again
        except ServiceError:
            files = list({id(f): f for f, _, _ in ranges}.values())
            for bucket in opened:
                self._listings.check(bucket, force=True)
            for f, again in zip(files, self._hdfs.run(
                    [(self._hdfs.open_file, (f.opened.file,)) for f in files], "open again")):
                f.opened = again
            return self._hdfs.read_many([(f.opened, o, n) for f, o, n in ranges])

    def _sweep_listings(self) -> None:
        """The reader's listing thread: every ``coordinator.poll_interval`` every opened bucket
        is checked (``ListingChecks.sweep``), so that queries seldom check on their own path (a
        check is a NameNode call or more: it set the slowest answers). Nothing ends the thread
        but ``close``."""
        while not self._closed.wait(self._listings.interval):
            with self._lock:
                opened = list(self._opened.values())
            self._listings.sweep(opened)

    # ------------------------------------------------------------------ opening a bucket

    def open_ahead(self, bucket: RawBucket) -> bool:
        """Open *bucket* before any query needs it (``coordinator.raw_warmup``), unless the
        opened buckets already take half of ``coordinator.raw_cache_bytes``: then False, nothing
        opened. Raises what opening it raises (BucketFileError naming a file gone or changed)."""
        with self._lock:
            if self._opened_bytes >= self.config.coordinator.raw_cache_bytes // 2:
                return False
        self._open(bucket)
        return True

    def _open(self, bucket: RawBucket) -> _Bucket:
        """The bucket opened, by one thread at a time: the others wait on its lock and find it
        opened. The lock stays in ``_opening`` until an open succeeds: a thread coming after a
        failed open waits on the same lock as those already waiting, never on one of its own
        beside them (two opens at once were both counted)."""
        key = (bucket.load_id, bucket.b_index, bucket.hot)
        with self._lock:
            opened = self._opened.get(key)
            if opened is not None and opened.rows >= bucket.rows:
                self._opened.move_to_end(key)
                return opened
            lock = self._opening.setdefault(key, threading.Lock())
        with lock, Timed(HDFS_META):  # one thread opens it; the others find it opened
            with self._lock:
                opened = self._opened.get(key)
            if opened is None or opened.rows < bucket.rows:
                opened = self._keep(key, self._read_files(bucket, opened))
                with self._lock:
                    if self._opening.get(key) is lock:
                        del self._opening[key]
        return opened

    def serve(self, load_id: str, hot: bool) -> None:
        """Keep only *load_id*'s buckets from now on, its hot ones only while *hot* (until
        MySQL takes its hot keys over): the others opened are forgotten, with another load's
        cached blocks: their files go with their day (or the take-over), and the listing thread
        would poll the NameNode for them all day. A query reading one keeps it to
        its end; one opened for a query after now answers it and is not kept."""
        with self._lock:
            self._serving = (load_id, hot)
            gone = [key for key in self._opened if not self._wanted(key)]
            for key in gone:
                self._opened_bytes -= self._opened.pop(key).cost
            for key in [key for key in self._opening if key[0] != load_id]:
                del self._opening[key]  # a lock left by a failed open of another day's bucket
            if any(key[0] != load_id for key in gone):
                self.cache.clear()
            self.cache.set_budget(self.config.coordinator.raw_cache_bytes - self._opened_bytes)

    def _wanted(self, key: tuple) -> bool:
        """Whether the bucket *key* is one to keep (``serve``; lock held)."""
        load_id, hot = self._serving or (key[0], True)
        return key[0] == load_id and (hot or not key[2])

    def _keep(self, key: tuple, opened: _Bucket) -> _Bucket:
        """Keep an opened bucket (unless ``serve`` says it is nobody's any more); forget other
        loads' buckets and blocks; the blocks get what the opened buckets leave of the budget
        (the least recently used buckets go when they alone exceed it, never the one just
        opened). Returns the bucket kept: one opened and kept already is kept as it was,
        counted once."""
        with self._lock:
            kept = self._opened.get(key)
            if kept is not None and kept.rows >= opened.rows:
                return kept
            if kept is not None:  # a growing bucket opened again: the new files in
                self._opened_bytes -= self._opened.pop(key).cost
            if not self._wanted(key):
                return opened  # for the query that asked, not kept (``serve``)
            if any(k[0] != key[0] for k in self._opened):
                self._opened.clear()
                self._opened_bytes = 0
                self.cache.clear()
            self._opened[key] = opened
            self._opened_bytes += opened.cost
            while (self._opened_bytes > self.config.coordinator.raw_cache_bytes
                   and len(self._opened) > 1):
                _, evicted = self._opened.popitem(last=False)
                self._opened_bytes -= evicted.cost
            self.cache.set_budget(self.config.coordinator.raw_cache_bytes - self._opened_bytes)
            return opened

    def _read_files(self, bucket: RawBucket, previous: _Bucket | None = None) -> _Bucket:
        """The bucket's files opened with their indexes, checked against the bucket index's
        rows; a growing bucket opened before (*previous*) opens only its new files."""
        chunks = self._index.bucket_chunks(bucket.b_index, bucket.load_id, bucket.hot)
        listings: dict[str, list[HdfsFile]] = {}
        modified: dict[str, int | None] = {}
        located: dict[str, Any] = {}  # a file's blocks, when its listing gave them
        per_chunk = []
        for chunk in chunks:
            directory, stem = chunk.path.rsplit("/", 1)
            if directory not in listings:  # its time first: a change after it shows later
                modified[directory] = self._hdfs.modified_ms([directory])[0]
                listings[directory] = self._list(bucket, directory, located)
            found = [s for s in listings[directory] if is_bucket_file(s.name, stem)]
            if not found:
                raise BucketFileError(
                    f"bucket {bucket.b_index}: no file {chunk.path}.<slice> in HDFS, though "
                    "dist_ch wrote one; run `debl verify`, and reload the input")
            per_chunk.append((chunk, found))
        known = {} if previous is None or previous.filters is None else {
            f.opened.path: (f, previous.filters.bloom(i)) for i, f in enumerate(previous.files)}
        statuses = [s for _, found in per_chunk for s in found
                    if s.path not in known or known[s.path][0].opened.length != s.length]
        opened = dict(zip((s.path for s in statuses), self._hdfs.run(
            [(self._open_file, (bucket, s, located.get(s.path))) for s in statuses],
            f"open bucket {bucket.b_index}")))
        for path, (f, bloom) in known.items():
            if path not in opened:  # its filter back in its index: the new _Bucket takes it
                f.index = dataclasses.replace(f.index, bloom=bloom)
                opened[path] = f
        files: list[_File] = []
        for chunk, found in per_chunk:
            mine = [opened[s.path] for s in found]
            rows = sum(f.index.rows for f in mine)
            if rows != chunk.rows:
                raise BucketFileError(
                    f"bucket {bucket.b_index}: the files {chunk.path}.<slice> hold {rows} rows, "
                    f"dist_ch wrote {chunk.rows}: one of them is gone or changed; run `debl "
                    "verify`, and reload the input")
            files.extend(mine)
        rows = sum(f.index.rows for f in files)
        if rows < bucket.rows or (rows != bucket.rows and not bucket.growing):
            raise BucketFileError(
                f"bucket {bucket.b_index}: its HDFS files hold {rows} rows, the bucket index "
                f"says {bucket.rows}: a file is missing or changed since dist_ch wrote it; run "
                "`debl verify`, and reload the input")
        return _Bucket(bucket, modified, [f for f in files if f.index.rows])

    def _list(self, bucket: RawBucket, directory: str,
              located: dict[str, Any]) -> list[HdfsFile]:
        """The files of one of *bucket*'s directories; with local reads, their blocks too, in
        one NameNode call (into *located*), so that opening them asks the NameNode nothing more
        (docs/COORDINATOR.md, "Local block reads")."""
        listed = self._hdfs.list_located(directory)
        if listed is None:
            return self._listings.list(bucket.b_index, directory)
        located.update((f.path, blocks) for f, blocks in listed if blocks is not None)
        return [f for f, _ in listed]

    def _open_file(self, bucket: RawBucket, status: HdfsFile, located: Any = None) -> _File:
        """One file opened and its index read (on a read thread); *located*: its blocks, from
        its listing."""
        try:
            f = self._hdfs.open_file(status, located)
        except FileGone as exc:
            raise BucketFileError(
                f"bucket {bucket.b_index}: its file {status.path} is gone from HDFS; run `debl "
                "verify`, and reload the input") from exc
        except FileChanged as exc:
            raise BucketFileError(f"bucket {bucket.b_index}: {exc}; run `debl verify`") from exc
        index = read_index(f.path, f.length, lambda offset, n: read_file(f, offset, n))
        return _File(f, index)

