"""The raw reader's bucket bookkeeping without HDFS (docs/COORDINATOR.md, "The raw route"): what
it counts against ``raw_cache_bytes`` for its opened buckets, and which buckets it keeps. Opening
a bucket's files is replaced by a stand-in that returns a bucket of a known cost (or fails);
everything else is the reader's own code. The reader on real HDFS files: tests/test_raw.py."""

from __future__ import annotations

import threading

import pytest

from coordinator.raw import RawBucket, RawReader, _Bucket
from debl.config import Config
from debl.errors import BucketFileError

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


def _opened(bucket: RawBucket) -> _Bucket:
    """An opened bucket of COST bytes, never due for a listing check."""
    opened = _Bucket(bucket, {}, [])
    opened.cost = COST
    opened.checked_at = float("inf")
    return opened


@pytest.fixture()
def reader():
    reader = RawReader(Config(poll_interval=3600.0), catalog=None)  # type: ignore[arg-type]
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
    """Issue 38.6: thread A's open fails; B, waiting on A's lock, opens the bucket under it,
    while C, coming after A gave its lock up, opened it under a new lock: both counted it, the
    extra was never subtracted, and the block cache shrank for good."""
    bucket = RawBucket("L1", 3, 10)
    first_in, fail_now, second_in, go_on = (threading.Event() for _ in range(4))
    calls: list[str] = []

    def read_files(b: RawBucket) -> _Bucket:
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
