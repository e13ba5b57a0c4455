"""Opening the raw route's buckets ahead of their first query (docs/COORDINATOR.md, "The raw
route", "Opened ahead").

Opening a bucket (its files' block locations from the NameNode, each file's index and filter
read from its tail) is slow under load (docs/COORDINATOR.md, "Opened ahead", has the figure); a
query that finds its bucket unopened waits for it, and with every thread's first queries waiting
at once this set the raw route's slowest answers. So when a coordinator learns of a load, a
thread opens the buckets the raw route will read (the cold ones gen_HF has not loaded, and the
hot ones until MySQL takes the hot keys over), as HBase opens its regions before it serves
them. Queries never wait for it: one that comes first opens its bucket itself, as before, and
the warm-up finds it opened.

Buckets are opened ``AT_ONCE`` at a time, in order: opening one is a few round trips one after
another (the catalog, the directory's time and listing, then its files in parallel), so one at a
time left the NameNode and the DataNode mostly waiting, and the clients waited for the warm-up
(docs/BENCHMARKS.md, "What changed, one step at a time").

Pitfalls: the warm-up opens buckets only while the opened ones take under half of
``coordinator.raw_cache_bytes`` (``RawReader.open_ahead``), so it never evicts blocks a query has
read (the buckets already being opened when the budget's share is reached still are: at most
``AT_ONCE - 1`` more); a
bucket it cannot open (a file gone) is left to the query, which raises the error naming it; and
an HDFS that does not answer ends the warm-up at once (every bucket would wait out its timeout
the same way), so that ``Coordinator.wait_warm`` does not hold a client for nothing.
"""

from __future__ import annotations

import logging
import queue
import threading
from concurrent.futures import ThreadPoolExecutor

from debl.errors import BucketFileError
from coordinator.raw import RawBucket, RawReader
from coordinator.state import Dataset

log = logging.getLogger("debl.coordinator")

AT_ONCE = 4  # buckets opened at the same time


class RawWarmup:
    """A thread that opens the buckets offered to it, newest offer first; ``close()`` stops it
    after the bucket it is opening."""

    def __init__(self, reader: RawReader, at_once: int = AT_ONCE) -> None:
        self.reader = reader
        self._at_once = at_once
        self._offers: queue.SimpleQueue[list[RawBucket] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()  # guards _pending
        self._pending = 0  # offers not yet done
        self._idle = threading.Event()  # set while _pending is 0
        self._idle.set()
        self._thread = threading.Thread(target=self._run, daemon=True, name="debl-raw-warmup")
        self._thread.start()

    def offer(self, buckets: list[RawBucket]) -> None:
        """Open *buckets*, in order, from now on (a later offer replaces what is left of it)."""
        with self._lock:
            self._pending += 1
            self._idle.clear()
        self._offers.put(buckets)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until every offer is opened or given up; False if *timeout* passed first."""
        return self._idle.wait(timeout)

    def close(self, timeout: float | None = None) -> None:
        """Stop after the bucket being opened, and wait for it (at most *timeout*): the reader
        closes its HDFS threads after this, which must not be opening a bucket for it then."""
        self._offers.put(None)
        self._thread.join(timeout)

    def _run(self) -> None:
        while (buckets := self._offers.get()) is not None:
            try:
                self._open(buckets)
            finally:
                with self._lock:
                    self._pending -= 1
                    if not self._pending:
                        self._idle.set()

    def _open(self, buckets: list[RawBucket]) -> None:
        """Open *buckets* in order, ``at_once`` at a time, until a newer offer comes, the
        budget's share is used, or HDFS fails: no bucket is started after that (those being
        opened finish). A bucket whose files are wrong is skipped, but a service that does not
        answer would fail every other bucket the same way, each after its timeout. Whatever
        goes wrong is left to the queries, which raise it with its message."""
        stop = threading.Event()

        def one(bucket: RawBucket) -> None:
            if stop.is_set():
                return
            if not self._offers.empty():
                stop.set()  # a newer load's buckets (or close) come first
                return
            try:
                if not self.reader.open_ahead(bucket):
                    stop.set()  # the budget's share for buckets opened ahead is used
            except BucketFileError as exc:
                log.info("raw route: bucket %d not opened ahead: %s", bucket.b_index, exc)
            except Exception as exc:  # noqa: BLE001 -- a thread of its own: never let it die
                log.warning("raw route: buckets not opened ahead from bucket %d on: %s",
                            bucket.b_index, exc)
                stop.set()

        if self._at_once <= 1:
            for bucket in buckets:
                one(bucket)
            return
        with ThreadPoolExecutor(self._at_once, thread_name_prefix="debl-raw-warmup") as pool:
            list(pool.map(one, buckets))


def raw_buckets(dataset: Dataset) -> list[RawBucket]:
    """The buckets the raw route may read: the hot ones while MySQL has not taken the hot keys
    over, then every cold one with rows that gen_HF has not loaded."""
    load_id = dataset.load.load_id
    hot = [] if dataset.load.hot_in_mysql else [
        RawBucket(load_id, b.b_index, b.rows, hot=True) for b in dataset.hot_buckets.values()]
    return hot + [RawBucket(load_id, b.b_index, b.rows)
                  for b in sorted(dataset.buckets.values(), key=lambda b: b.b_index)
                  if b.rows and not b.loaded]
