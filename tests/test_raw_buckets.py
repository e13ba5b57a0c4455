"""The raw reader's bucket bookkeeping without HDFS (docs/COORDINATOR.md, "The raw route"): what
it counts against ``raw_cache_bytes`` for its opened buckets, and which buckets it keeps. Opening
a bucket's files is replaced by a stand-in that returns a bucket of a known cost (or fails);
everything else is the reader's own code. The reader on real HDFS files: tests/test_raw.py."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from types import SimpleNamespace

import pytest

from coordinator.raw import RawBucket, RawReader, _Bucket
from coordinator.raw_listing import QUERY_CHECKS_AFTER, ListingChecks
from debl.config import Config
from debl.errors import BucketFileError, ServiceError
from debl.hdfs import HdfsFile, OpenFile

COST = 1000


class _SeenOpening(dict):
    """The reader's ``_opening`` map, telling the test how many threads asked it for a lock."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = 0
        self.cond = threading.Condition()

    def setdefault(self, key, default=None):
        lock = super().setdefault(key, default)
        with self.cond:
            self.asked += 1
            self.cond.notify_all()
        return lock

    def wait_asked(self, n: int) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: self.asked >= n, timeout=10)


def _opened(bucket: RawBucket, previous: _Bucket | None = None) -> _Bucket:
    """An opened bucket of COST bytes, never due for a listing check."""
    opened = _Bucket(bucket, {}, [])
    opened.cost = COST
    opened.checked_at = float("inf")
    return opened


@pytest.fixture()
def reader():
    reader = RawReader(Config(coordinator_poll_interval=3600.0), index=None)  # type: ignore[arg-type]
    yield reader
    reader.close()


def _run(target, errors: list) -> threading.Thread:
    def run() -> None:
        try:
            target()
        except Exception as exc:  # noqa: BLE001 -- the test looks at it
            errors.append(exc)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_a_bucket_opened_again_after_a_failed_open_is_counted_once(reader, monkeypatch):
    """Defect: thread A's open fails; B, waiting on A's lock, opens the bucket under it,
    while C, coming after A gave its lock up, opened it under a new lock: both counted it, the
    extra was never subtracted, and the block cache shrank for good."""
    bucket = RawBucket("L1", 3, 10)
    first_in, fail_now, second_in, go_on = (threading.Event() for _ in range(4))
    calls: list[str] = []

    def read_files(b: RawBucket, previous: _Bucket | None = None) -> _Bucket:
        calls.append(threading.current_thread().name)
        if len(calls) == 1:  # A: fails once B waits for its lock
            first_in.set()
            assert fail_now.wait(10)
            raise BucketFileError("bucket 3: a file is gone (for now)")
        if len(calls) == 2:  # B: opens it, slowly
            second_in.set()
            assert go_on.wait(10)
        return _opened(b)

    monkeypatch.setattr(reader, "_read_files", read_files)
    seen = reader._opening = _SeenOpening()
    errors: list = []
    a = _run(lambda: reader._open(bucket), errors)
    assert first_in.wait(10)
    b = _run(lambda: reader._open(bucket), errors)
    seen.wait_asked(2)  # B holds A's lock object and waits for it
    fail_now.set()
    a.join(10)
    assert second_in.wait(10)
    c = _run(lambda: reader._open(bucket), errors)
    seen.wait_asked(3)
    c.join(2)  # C opens it under a lock of its own, or waits for B's: either way, on
    go_on.set()
    for thread in (a, b, c):
        thread.join(10)
    assert [type(e) for e in errors] == [BucketFileError]  # A's, and only A's
    memory = reader.memory()
    assert (memory.buckets, memory.bucket_bytes) == (1, COST)
    assert reader.cache.budget == reader.config.coordinator.raw_cache_bytes - COST


def test_the_reader_forgets_hot_buckets_at_the_take_over_and_other_loads_at_a_switch(
        monkeypatch):
    """Defect: the reader kept the hot buckets after MySQL's take-over (their directory is
    deleted) and an old day's buckets after a switch or rollback, and its listing thread polled
    the NameNode for each of them every poll for the rest of the day. ``serve`` says which
    buckets it keeps: the others go, and are never checked again; a bucket an old query opens
    after that answers it but is not kept."""
    reader = RawReader(Config(coordinator_poll_interval=0.05), index=None)  # type: ignore[arg-type]
    try:
        monkeypatch.setattr(reader, "_read_files", _opened)
        checked: list[tuple] = []
        polled = threading.Condition()

        def sweep(opened: list[_Bucket]) -> None:
            with polled:
                checked.extend((b.bucket.load_id, b.b_index, b.bucket.hot) for b in opened)
                polled.notify_all()

        monkeypatch.setattr(reader._listings, "sweep", sweep)
        cold, hot, hot2 = RawBucket("L1", 1, 10), RawBucket("L1", 2, 10, hot=True), \
            RawBucket("L1", 3, 10, hot=True)
        for bucket in (cold, hot, hot2):
            reader._open(bucket)
        reader.cache.put(("L1", "/loads/L1/buckets/chunk-00000.0", 0), b"block", 5)
        assert reader.opened_buckets() == [cold, hot, hot2]

        reader.serve("L1", hot=False)  # MySQL took L1's hot keys over
        assert reader.opened_buckets() == [cold]
        assert reader.memory().bucket_bytes == COST and len(reader.cache) == 1
        key = ("L1", 1, False)
        with polled:
            checked.clear()
            assert polled.wait_for(lambda: checked.count(key) >= 2, timeout=10)
            # from its second check of the cold bucket on, every pass of the listing thread
            # began after serve(): the hot ones are never polled again
            again = checked[checked.index(key, checked.index(key) + 1):]
        assert set(again) == {key}
        assert reader._open(hot) is not None and reader.opened_buckets() == [cold]

        reader.serve("L2", hot=True)  # the next day (or a rollback)
        assert reader.opened_buckets() == [] and reader.memory().bucket_bytes == 0
        assert len(reader.cache) == 0
        assert reader._open(RawBucket("L1", 4, 10)) is not None  # an old day's query
        new = RawBucket("L2", 1, 10, hot=True)
        reader._open(new)
        assert reader.opened_buckets() == [new]
        assert reader.cache.budget == reader.config.coordinator.raw_cache_bytes - COST
    finally:
        reader.close()


class _Directories:
    """HDFS's answers for the listing checks: each directory's time, and the calls asked."""

    def __init__(self, times: dict[str, int]) -> None:
        self.times = times
        self.calls: list[tuple[str, ...]] = []
        self.failing: set[str] = set()

    def list(self, parent: str) -> list[HdfsFile]:  # HdfsClient.list
        self.calls.append(("list", parent))
        if parent in self.failing:
            raise ServiceError(f"HDFS refused to list {parent}")
        return [HdfsFile(d, 0, True, ms) for d, ms in self.times.items()
                if d.rsplit("/", 1)[0] == parent]

    def modified_ms(self, paths: Sequence[str]) -> Sequence[int | None]:  # HdfsClient's
        self.calls.append(("status", *paths))
        if self.failing & set(paths):
            raise ServiceError(f"HDFS did not answer for {paths}")
        return [self.times.get(p) for p in paths]


def test_a_sweep_lists_each_parent_once_and_checks_alone_only_the_buckets_that_moved():
    """The listing thread fell behind a change log's many opened buckets, one NameNode call
    each, and the queries checked on their own path (docs/BENCHMARKS.md, "What changed, one step
    at a time"): a sweep asks one listing per parent directory; a bucket whose
    directory's time has not moved is checked by it, one whose time moved, or whose parent
    could not be listed, is checked on its own."""
    hdfs = _Directories({f"/L/buckets/{b}": 100 + b for b in range(4)}
                        | {f"/L/hot/{b}": 200 + b for b in range(2)})
    checks = ListingChecks(hdfs, interval=0.5)  # type: ignore[arg-type]
    opened = [_Bucket(RawBucket("L", b, 0), {f"/L/buckets/{b}": 100 + b}, []) for b in range(4)]
    opened += [_Bucket(RawBucket("L", b, 0, hot=True), {f"/L/hot/{b}": 200 + b}, [])
               for b in range(2)]
    for bucket in opened:
        bucket.checked_at = 0.0
    hdfs.times["/L/buckets/2"] = 999  # a file created, deleted or renamed in bucket 2
    checks.sweep(opened)
    assert sorted(hdfs.calls[:2]) == [("list", "/L/buckets"), ("list", "/L/hot")]
    assert ("status", "/L/buckets/2") in hdfs.calls[2:]  # bucket 2 checked on its own
    assert {c for c in hdfs.calls[2:] if c[0] == "status"} == {("status", "/L/buckets/2")}
    assert opened[2].directories["/L/buckets/2"] == 999
    assert all(b.checked_at > 0 for b in opened)  # every bucket checked by this sweep

    hdfs.calls.clear()
    hdfs.failing.add("/L/hot")
    checks.sweep(opened)
    assert sorted(c for c in hdfs.calls if c[0] == "status") == [
        ("status", "/L/hot/0"), ("status", "/L/hot/1")]  # the hot ones one by one


def test_a_query_checks_only_when_the_sweep_is_far_behind_or_the_bucket_failed():
    """A query that checked its bucket when the sweep was two intervals behind waited on a slow
    NameNode while gen_HF started, and set the slowest answer of a change-log run
    (docs/BENCHMARKS.md, "The listing check off the query's path"). A query checks only when
    the last passed check is ``QUERY_CHECKS_AFTER`` intervals old; a bucket the sweep found
    changed is due at once, and its query raises the error naming the file."""
    hdfs = _Directories({"/L/buckets/0": 100})
    checks = ListingChecks(hdfs, interval=0.5)  # type: ignore[arg-type]
    gone = SimpleNamespace(opened=OpenFile(HdfsFile("/L/buckets/0/chunk-0.0", 5, False, 100)))
    bucket = _Bucket(RawBucket("L", 0, 0), {"/L/buckets/0": 100}, [])
    bucket.files = [gone]  # the checks look at its path, length and time only
    bucket.checked_at = time.monotonic() - 3 * checks.interval  # the sweep is behind
    checks.check(bucket)
    assert hdfs.calls == []  # not far enough behind: the query goes on to read
    bucket.checked_at = time.monotonic() - (QUERY_CHECKS_AFTER + 1) * checks.interval
    checks.check(bucket)
    assert hdfs.calls == [("status", "/L/buckets/0")]  # far behind: it checks (nothing moved)
    assert bucket.checked_at > time.monotonic() - 1

    hdfs.calls.clear()
    hdfs.times["/L/buckets/0"] = 101  # the file was renamed away
    hdfs.failing.add("/L/buckets/0")  # ... and HDFS does not answer the bucket's own check
    passed = bucket.checked_at
    checks.sweep([bucket])
    assert bucket.checked_at == passed  # not known to be wrong: overdue only in its own time
    hdfs.failing.clear()
    checks.sweep([bucket])
    assert bucket.checked_at == float("-inf")  # the sweep found it gone: due for its query
    with pytest.raises(BucketFileError, match="bucket 0: its file /L/buckets/0/chunk-0.0 is gone"):
        checks.check(bucket)
