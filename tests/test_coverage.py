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


def _counted_source(monkeypatch, directory) -> tuple:
    """A LocalSource of *directory* whose streams record each open's ``(offset, end)`` and
    the length of each read: (the source, the opens, the reads)."""
    from loaders.source import LocalSource

    source = LocalSource(directory)
    opens, read = [], []
    opened = source._open

    def counting(name, offset, end=None):
        opens.append((offset, end))
        stream = opened(name, offset, end)
        original = stream.read

        def counted(n=-1):
            got = original(n)
            read.append(len(got))
            return got
        stream.read = counted
        return stream
    monkeypatch.setattr(source, "_open", counting)
    return source, opens, read


class _Chunks:
    """HDFS as the copier writes to it (``write_atomic``, ``delete``), in memory."""

    def __init__(self):
        self.files: dict[str, bytes] = {}

    def write_atomic(self, path: str, blocks) -> None:
        self.files[path] = b"".join(blocks)

    def start_write_atomic(self, path: str, blocks):
        self.write_atomic(path, blocks)
        return lambda: None

    def delete(self, path: str) -> None:
        self.files.pop(path, None)


def test_the_bulk_copy_reads_no_byte_a_fetch_took_ahead_of_it(tmp_path, monkeypatch):
    """The bulk copy's stream stops where a fetch took bytes ahead of it: over HTTP a stream
    closed early had cost the link what the server sent ahead (docs/LOADING.md, "The copy
    follows demand", has what it cost). Every byte is copied
    once, by the bulk copy or a fetch, and the bulk copy reads exactly the bytes it keeps."""
    from loaders import chunker
    from loaders.chunker import ChunkCopier

    monkeypatch.setattr(chunker, "BLOCK", 4096)
    data = _file(20_000, 3)
    (tmp_path / "f.tsv").write_bytes(data)
    source, _, read = _counted_source(monkeypatch, tmp_path)
    stats, stat = [], source.stat
    monkeypatch.setattr(source, "stat", lambda name: stats.append(name) or stat(name))
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
    # The file's state is asked for once when its first stretch opens, once at its end.
    assert stats == ["f.tsv", "f.tsv"]


@pytest.mark.parametrize("taken_before", [False, True])
def test_the_bulk_copy_reads_through_a_short_range_a_fetch_took_inside_its_stream(
        tmp_path, monkeypatch, taken_before):
    """A fetch that takes a short range inside the bulk copy's open stream does not close it:
    the bulk copy drops that range's bytes as they come and goes on (a closed stream had lost
    what the source sent ahead; docs/LOADING.md, "The copy follows demand"). One stream for the
    whole file, every byte copied once, every segment's first line the true one."""
    from loaders import chunker
    from loaders.chunker import ChunkCopier

    monkeypatch.setattr(chunker, "BLOCK", 4096)
    data = _file(20_000, 5)
    (tmp_path / "f.tsv").write_bytes(data)
    source, opens, read = _counted_source(monkeypatch, tmp_path)
    coverage = Coverage({0: len(data)})
    starts = _line_starts(data)
    fetched, blocks = [], [0]
    a0 = b0 = len(data)
    if taken_before:  # the first stream stops where this range starts, the second after it
        a0, b0 = starts[len(starts) // 2], starts[len(starts) // 2 + 3]
        fetched.extend(coverage.take(0, a0, data[a0:b0]))

    def fetch_ahead(n: int) -> None:  # every third block sent, a fetch takes 20 lines ahead
        blocks[0] += 1
        at = coverage.next_gap(0, 0)
        if blocks[0] % 3 or at is None:
            return
        k = next((i for i, x in enumerate(starts) if x >= at + 10_000), None)
        # Inside the open stream: before the range taken first while the stream ends there.
        if k is not None and k + 20 < len(starts) and starts[k + 20] <= (a0 if at < a0 else
                                                                           len(data)):
            a, b = starts[k], starts[k + 20]
            fetched.extend(coverage.take(0, a, data[a:b]))
    numbers = iter(range(1000))
    hdfs = _Chunks()
    copier = ChunkCopier(source, [(0, source.list()[0])], hdfs, "/c", coverage,
                         lambda: next(numbers), progress=fetch_ahead)
    chunks = []
    while (chunk := copier.copy_next(16 << 10)) is not None:
        chunks.append(chunk)
    copier.close()
    assert len(fetched) > 10
    assert opens == ([(0, a0), (b0, None)] if taken_before else [(0, None)])
    assert sum(c.bytes for c in chunks) + sum(y - x for x, y, _ in fetched) == len(data)
    assert coverage.done() and sum(read) == len(data) - (b0 - a0)
    for c in chunks:
        assert hdfs.files[c.path] == b"".join(data[s.start:s.end] for s in c.segments)
        for s in c.segments:
            assert s.first_line == data[:s.start].count(b"\n") + 1


def test_a_fetch_short_at_the_bulk_copys_pace_shares_the_link(monkeypatch):
    """A fetch the bulk copy's pace would bring in under SHARE_BELOW_S shares the link; a longer
    one, or one before the pace is known, has the link to itself."""
    from loaders import chunker
    from loaders.chunker import SHARE_BELOW_S, LinkTurn

    clock = [100.0]
    monkeypatch.setattr(chunker, "time", type("Clock", (), {
        "monotonic": staticmethod(lambda: clock[0])}))
    turn = LinkTurn()

    def bulk_may_read() -> bool:
        return turn._free.is_set()
    with turn.demand(1):
        assert not bulk_may_read()  # the pace is not known yet
    pace = 12.5e6  # the bulk copy's bytes a second in this test
    clock[0] += 2.0
    turn.bulk_read(int(2 * pace))  # two seconds' worth
    short, long = int(pace * SHARE_BELOW_S) - 1, int(pace * SHARE_BELOW_S) + 1
    with turn.demand(short):
        assert bulk_may_read()
    with turn.demand(long):
        assert not bulk_may_read()
    with turn.demand():
        assert not bulk_may_read()
    assert bulk_may_read()


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
