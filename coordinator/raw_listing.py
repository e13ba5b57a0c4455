"""The raw route's listing checks: that an opened bucket's files are still the files it opened
(docs/COORDINATOR.md, "The raw route").

A read by block returns a file's bytes as they were when it was opened, or fails
(``debl.hdfs``), so a file deleted or rewritten since would go unnoticed. A directory's
modification time changes with every file created, deleted or renamed in it: a bucket whose
directories' times have not moved still has its files; one whose time moved is listed again,
and a file gone or changed is a BucketFileError naming it.

The reader's listing thread sweeps every opened bucket each ``coordinator.poll_interval``
(``sweep``): one listing of each parent directory gives the times of all the bucket directories
in it at once (a bucket is a directory; a load's buckets share a parent), so a sweep costs a
call or two however many buckets are opened. Checking them one NameNode call per bucket, one
after another, fell behind under load with a change log's many opened buckets, and the queries
then checked on their own path (docs/BENCHMARKS.md, "What changed, one step at a time"). A
query about to read HDFS checks its bucket itself only when the sweep is
``QUERY_CHECKS_AFTER`` intervals behind (``check``): a NameNode that answers slowly while gen_HF
starts or MySQL takes over delays the sweep, and a query that checked then waited as long (it set
the slowest answer of a change-log run). Meanwhile a read still returns the bytes the file had
when opened, or fails and lists the bucket again, so an answer is never of mixed or smaller data.

Pitfalls: a bucket whose file a sweep finds gone or changed is marked due (``checked_at``
-inf), so its next query checks it at once and raises the error; a parent directory whose
listing fails is left to the buckets' own checks, one call each, as before.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from collections.abc import Sequence
from typing import Any, Protocol

from debl.errors import BucketFileError, ServiceError
from debl.hdfs import FileGone, HdfsClient, HdfsFile

log = logging.getLogger("debl.coordinator")

QUERY_CHECKS_AFTER = 10  # poll intervals without a passed check before a query checks itself


class OpenedBucket(Protocol):
    """What the checks need of a bucket the reader opened (``coordinator.raw``)."""

    directories: dict[str, int | None]  # directory -> its modification time when listed
    files: list[Any]  # each with ``opened``: its ``file`` as listed when it was opened
    checked_at: float  # time.monotonic() of the last check that passed
    checking: threading.Lock  # held by the one thread checking it

    @property
    def b_index(self) -> int: ...


class ListingChecks:
    """Checks opened buckets against HDFS's listings; *interval*: ``coordinator.poll_interval``."""

    def __init__(self, hdfs: HdfsClient, interval: float) -> None:
        self._hdfs, self.interval = hdfs, interval

    def sweep(self, opened: Sequence[OpenedBucket]) -> None:
        """Check every bucket of *opened*: one listing per parent directory for the times of
        all their directories, a bucket whose time moved (or whose parent's listing failed)
        checked on its own. Never raises: a bucket whose file is gone or changed is marked due
        for its next query, which checks it and raises the error; one whose check could not be
        made (HDFS did not answer) is left to be overdue."""
        started = time.monotonic()
        parents: dict[str, list[OpenedBucket]] = defaultdict(list)
        for bucket in opened:
            for directory in bucket.directories:
                parents[directory.rsplit("/", 1)[0]].append(bucket)
        times: dict[str, int | None] = {}
        for parent, buckets in parents.items():
            try:
                listed = {s.path: s.modification_time_ms for s in self._hdfs.list(parent)}
            except ServiceError as exc:
                log.info("raw route: listing %s failed, its buckets checked one by one: %s",
                         parent, exc)
                continue
            for bucket in buckets:
                times.update({d: listed.get(d) for d in bucket.directories
                              if d.rsplit("/", 1)[0] == parent})
        for bucket in opened:
            unmoved = all(d in times and times[d] == ms for d, ms in bucket.directories.items())
            if unmoved:
                bucket.checked_at = max(bucket.checked_at, started)
                continue
            try:
                self.check(bucket, within=0.0)
            except BucketFileError as exc:
                bucket.checked_at = float("-inf")  # its next query raises the error
                log.info("raw route: bucket %d failed its listing check: %s",
                         bucket.b_index, exc)
            except Exception as exc:  # noqa: BLE001 -- a query checks it once it is overdue
                log.info("raw route: bucket %d failed its listing check: %s",
                         bucket.b_index, exc)

    def check(self, opened: OpenedBucket, force: bool = False,
              within: float | None = None) -> None:
        """BucketFileError if a file of the bucket is gone or changed since the bucket was
        opened. Done when *force*d; else when the last check is older than *within* (by default
        ``QUERY_CHECKS_AFTER`` intervals: the sweep checks every interval, a query only when the
        sweep is far behind or the bucket failed; by one thread, the others go on), and then
        cheaply: a directory is listed again only when its time moved."""
        within = QUERY_CHECKS_AFTER * self.interval if within is None else within
        if not force and time.monotonic() - opened.checked_at < within:
            return
        if not force and not opened.checking.acquire(blocking=False):
            return
        try:
            started = time.monotonic()
            directories = list(opened.directories)
            if not force:
                now = self._hdfs.modified_ms(directories)
                directories = [d for d, ms in zip(directories, now)
                               if ms != opened.directories[d]]
            for directory in directories:
                ms = self._hdfs.modified_ms([directory])[0]
                listed = {s.path: s for s in self.list(opened.b_index, directory)}
                for f in opened.files:
                    if f.opened.path.rsplit("/", 1)[0] == directory:
                        _check_file(opened.b_index, f, listed.get(f.opened.path))
                opened.directories[directory] = ms
            opened.checked_at = started
        finally:
            if not force:
                opened.checking.release()

    def list(self, b_index: int, directory: str) -> list[HdfsFile]:
        """The files of bucket *b_index*'s directory; BucketFileError naming it if it is gone."""
        try:
            return self._hdfs.list(directory)
        except FileGone as exc:
            raise BucketFileError(
                f"bucket {b_index}: its directory {directory} is gone from HDFS; "
                "run `debl verify`, and reload the input") from exc


def _check_file(b_index: int, f: Any, status: HdfsFile | None) -> None:
    """BucketFileError naming the file if it is gone from the listing or changed since opened."""
    path = f.opened.path
    if status is None:
        raise BucketFileError(
            f"bucket {b_index}: its file {path} is gone from HDFS, so the query cannot be "
            "answered from the raw files; run `debl verify`, and reload the input if the file "
            "is lost")
    if status != f.opened.file:
        raise BucketFileError(
            f"bucket {b_index}: its file {path} changed in HDFS since it was opened "
            f"({f.opened.length} bytes then, {status.length} now); run `debl verify`, and "
            "reload the input")
