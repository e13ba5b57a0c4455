"""The copy's ledger (loaders.coverage): the bulk copy and fetches on demand never take a byte
twice, and every byte's line number is known once the bulk copy has passed it."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loaders.coverage import Coverage


def _file(lines: int, seed: int) -> bytes:
    rng = random.Random(seed)
    return b"".join(b"x" * rng.randint(0, 30) + b"\n" for _ in range(lines))


def _line_starts(data: bytes) -> list[int]:
    return [0] + [i + 1 for i, b in enumerate(data) if b == 10 and i + 1 < len(data)]


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 60), st.integers(0, 10_000), st.lists(st.tuples(st.integers(0, 59),
                                                                       st.integers(1, 8)),
                                                             max_size=12),
       st.integers(1, 40))
def test_the_bulk_copy_and_fetches_take_every_byte_once_with_its_lines(lines, seed, fetches,
                                                                       block):
    """Fetches take line-aligned ranges anywhere while the bulk copy walks the file block by
    block: in the end every byte is taken exactly once, and each range's first line number is
    the true one."""
    data = _file(lines, seed)
    starts = _line_starts(data)
    coverage = Coverage({0: len(data)})
    owner = [None] * len(data)
    pending = list(fetches)
    at, line_no = 0, 1
    taken_ranges = []
    while True:
        if pending:  # a fetch lands ahead of (or behind) the bulk copy
            first, n = pending.pop()
            first = min(first, len(starts) - 1)
            a = starts[first]
            b = starts[first + n] if first + n < len(starts) else len(data)
            for x, y, counted in coverage.take(0, a, data[a:b]):
                assert counted == data[x:y].count(b"\n")
                taken_ranges.append((x, y))
                for i in range(x, y):
                    assert owner[i] is None
                    owner[i] = "fetch"
        gap = coverage.next_gap(0, at)
        if gap is None:
            break
        if gap > at:
            line_no += coverage.lines_between(0, at, gap)
            at = gap
        assert coverage.first_line(0, at) == data[:at].count(b"\n") + 1 == line_no
        # The bulk reads up to `block` whole lines from `at` and keeps what it may.
        end = at
        while end < len(data) and end - at < block:
            end = data.index(b"\n", end) + 1
        chunk = data[at:end]
        keep = coverage.claim(0, at, len(chunk), lambda k: chunk.count(b"\n", 0, k))
        for i in range(at, at + keep):
            assert owner[i] is None
            owner[i] = "bulk"
        line_no += chunk.count(b"\n", 0, keep)
        at += keep
    assert None not in owner
    assert coverage.done()
    for x, _ in taken_ranges:
        assert coverage.first_line(0, x) == data[:x].count(b"\n") + 1


def test_a_range_taken_twice_is_refused():
    coverage = Coverage({3: 100})
    coverage.add(3, 10, 20, 2)
    with pytest.raises(ValueError, match="already taken"):
        coverage.add(3, 15, 30, 1)
    assert coverage.next_gap(3, 0) == 0 and coverage.next_gap(3, 10) == 20
    assert coverage.first_line(3, 10) is None  # bytes 0..10 not taken yet


def test_a_last_line_without_its_newline_counts():
    data = b"a\nbb\nccc"
    coverage = Coverage({0: len(data)})
    assert coverage.take(0, 2, data[2:]) == [(2, 8, 2)]
    assert coverage.claim(0, 0, 2, lambda k: data.count(b"\n", 0, k)) == 2
    assert coverage.done() and coverage.first_line(0, 5) is None  # 2..8 is one range
    assert coverage.first_line(0, 2) == 2


def test_a_fetch_that_takes_the_very_byte_the_bulk_copy_is_at_leaves_it_nothing():
    """The bulk copy found byte 0 untaken and read from there; a fetch took it meanwhile: the
    bulk copy keeps nothing of what it read and goes on after the fetch's range."""
    data = b"a\nbb\nccc\n"
    coverage = Coverage({0: len(data)})
    assert coverage.next_gap(0, 0) == 0
    assert coverage.take(0, 0, data[:5]) == [(0, 5, 2)]
    assert coverage.claim(0, 0, len(data), lambda k: data.count(b"\n", 0, k)) == 0
    assert coverage.next_gap(0, 0) == 5


class _Chunks:
    """HDFS as the copier writes to it (``write_atomic``, ``delete``), in memory."""

    def __init__(self):
        self.files: dict[str, bytes] = {}

    def write_atomic(self, path: str, blocks) -> None:
        self.files[path] = b"".join(blocks)

    def delete(self, path: str) -> None:
        self.files.pop(path, None)


def test_the_bulk_copy_reads_no_byte_a_fetch_took_ahead_of_it(tmp_path, monkeypatch):
    """The bulk copy's stream stops where a fetch took bytes ahead of it: over HTTP a stream
    closed early had cost the link what the server sent ahead (docs/LOADING.md, "The copy
    follows demand", has what it cost). Every byte is copied
    once, by the bulk copy or a fetch, and the bulk copy reads exactly the bytes it keeps."""
    from loaders import chunker
    from loaders.chunker import ChunkCopier
    from loaders.source import LocalSource

    monkeypatch.setattr(chunker, "BLOCK", 4096)
    data = _file(20_000, 3)
    (tmp_path / "f.tsv").write_bytes(data)
    source = LocalSource(tmp_path)
    read = []
    opened = source._open

    def counting(name, offset, end=None):
        stream = opened(name, offset, end)
        original = stream.read

        def counted(n=-1):
            got = original(n)
            read.append(len(got))
            return got
        stream.read = counted
        return stream
    monkeypatch.setattr(source, "_open", counting)
    listed = source.list()[0]
    coverage = Coverage({0: len(data)})
    starts = _line_starts(data)
    fetched = 0
    for first in range(500, len(starts) - 40, 1500):  # fetches ahead of the bulk copy
        a, b = starts[first], starts[first + 30]
        fetched += sum(y - x for x, y, _ in coverage.take(0, a, data[a:b]))
    numbers = iter(range(1000))
    hdfs = _Chunks()
    copier = ChunkCopier(source, [(0, listed)], hdfs, "/c", coverage, lambda: next(numbers))
    chunks = []
    while (chunk := copier.copy_next(64 << 10)) is not None:
        chunks.append(chunk)
    copier.close()
    kept = sum(c.bytes for c in chunks)
    assert kept + fetched == len(data) and coverage.done()
    for c in chunks:  # each chunk holds its segments' bytes of the file, in order
        body = hdfs.files[c.path]
        assert body == b"".join(data[s.start:s.end] for s in c.segments)
    assert sum(read) == kept


def test_the_bulk_copy_does_not_read_its_stream_while_a_fetch_reads(tmp_path, monkeypatch):
    """While a fetch on demand reads (``LinkTurn.demand``), the bulk copy leaves its stream
    unread, so that the fetch has the link; it goes on once the fetch is done."""
    import threading

    from loaders.chunker import ChunkCopier, LinkTurn
    from loaders.source import LocalSource

    data = _file(2_000, 4)
    (tmp_path / "f.tsv").write_bytes(data)
    source = LocalSource(tmp_path)
    read = threading.Event()
    opened = source._open

    def watched(name, offset, end=None):
        stream = opened(name, offset, end)
        original = stream.read

        def reading(n=-1):
            read.set()
            return original(n)
        stream.read = reading
        return stream
    monkeypatch.setattr(source, "_open", watched)
    turn, numbers, hdfs = LinkTurn(), iter(range(10)), _Chunks()
    copier = ChunkCopier(source, [(0, source.list()[0])], hdfs, "/c", Coverage({0: len(data)}),
                         lambda: next(numbers), turn=turn)
    chunks = []
    with turn.demand():
        copying = threading.Thread(target=lambda: chunks.append(copier.copy_next(1 << 20)))
        copying.start()
        assert not read.wait(0.5), "the bulk copy read while a fetch had the link"
    copying.join(10)
    copier.close()
    assert read.is_set() and chunks[0].bytes == len(data)
    assert hdfs.files[chunks[0].path] == data
