"""The copy's ledger (loaders.coverage) and the bulk copy that claims from it (loaders.chunker):
the bulk copy and fetches on demand never take a byte twice, a fetch takes whole lines only,
every byte's line number is known once the bulk copy has passed it, and a stream that ends
short is a clear error."""

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
    block (inside a line longer than a block, a block that ends mid-line): in the end every
    byte is taken exactly once, a fetch takes whole lines only, and each range's first line
    number is the true one."""
    data = _file(lines, seed)
    starts = _line_starts(data)
    coverage = Coverage({0: len(data)})
    owner = [None] * len(data)
    pending = list(fetches)
    at, line_no, in_line = 0, 1, False
    taken_ranges = []
    while True:
        if pending:  # a fetch lands ahead of (or behind) the bulk copy
            first, n = pending.pop()
            first = min(first, len(starts) - 1)
            a = starts[first]
            b = starts[first + n] if first + n < len(starts) else len(data)
            for x, y, counted in coverage.take(0, a, data[a:b]):
                assert x in starts and (y in starts or y == len(data)), (x, y)
                assert counted == data[x:y].count(b"\n")
                taken_ranges.append((x, y))
                for i in range(x, y):
                    assert owner[i] is None
                    owner[i] = "fetch"
        if not in_line:  # (inside a line, the bulk copy goes on where it is)
            gap = coverage.next_gap(0, at)
            if gap is None:
                break
            if gap > at:
                line_no += coverage.lines_between(0, at, gap)
                at = gap
        assert coverage.first_line(0, at) == data[:at].count(b"\n") + 1 == line_no
        # The bulk reads up to `block` bytes from `at`, cut after their last newline, and keeps
        # what it may.
        chunk = data[at:at + block]
        chunk = chunk[:chunk.rfind(b"\n") + 1] or chunk
        # (claim calls the lambda at once: no late binding of chunk, whatever B023 says)
        keep = coverage.claim(0, at, len(chunk), lambda k: chunk.count(b"\n", 0, k),  # noqa: B023
                              in_line=not chunk.endswith(b"\n"))
        if in_line:  # no fetch took the rest of the line the bulk copy is in
            assert keep >= (chunk.find(b"\n") + 1 or len(chunk))
        for i in range(at, at + keep):
            assert owner[i] is None
            owner[i] = "bulk"
        line_no += chunk.count(b"\n", 0, keep)
        at += keep
        in_line = keep > 0 and not chunk[:keep].endswith(b"\n")
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
    closed early had cost the wire what the server sent ahead (docs/LOADING.md, "The copy
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
    """A fetch the bulk copy's pace would bring in under SHARE_BELOW_S shares the wire; a longer
    one, or one before the pace is known, has the wire to itself."""
    from loaders import chunker
    from loaders.chunker import SHARE_BELOW_S, WireTurn

    clock = [100.0]
    monkeypatch.setattr(chunker, "time", type("Clock", (), {
        "monotonic": staticmethod(lambda: clock[0])}))
    turn = WireTurn()

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
    """While a fetch on demand reads (``WireTurn.demand``), the bulk copy leaves its stream
    unread, so that the fetch has the wire; it goes on once the fetch is done."""
    import threading

    from loaders.chunker import ChunkCopier, WireTurn
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
    turn, numbers, hdfs = WireTurn(), iter(range(10)), _Chunks()
    copier = ChunkCopier(source, [(0, source.list()[0])], hdfs, "/c", Coverage({0: len(data)}),
                         lambda: next(numbers), turn=turn)
    chunks = []
    with turn.demand():
        copying = threading.Thread(target=lambda: chunks.append(copier.copy_next(1 << 20)))
        copying.start()
        assert not read.wait(0.5), "the bulk copy read while a fetch had the wire"
    copying.join(10)
    copier.close()
    assert read.is_set() and chunks[0].bytes == len(data)
    assert hdfs.files[chunks[0].path] == data


class _Missing:
    """What a round of fetches reads of the load's early answers: the pieces each waiting key
    misses (always the same here: the ledger says which are taken)."""

    stopped = False

    def __init__(self, missing: dict):
        self._missing = missing

    def missing(self, id1: int) -> list:
        return self._missing.get(id1, [])


def _fetcher(source, listed, coverage: Coverage, missing: dict) -> tuple:
    """A DemandFetcher of file 0 whose rounds keep their chunks' parts (segment, bytes) in a
    list instead of writing them to HDFS: (the fetcher, the parts)."""
    from concurrent.futures import ThreadPoolExecutor

    from loaders.chunker import WireTurn
    from loaders.demand import DemandFetcher

    fetcher = object.__new__(DemandFetcher)
    fetcher.source, fetcher.files, fetcher.hot = source, {0: listed}, frozenset()
    fetcher.coverage, fetcher.turn = coverage, WireTurn()
    fetcher.early = _Missing(missing)  # type: ignore[assignment]  # a stand-in
    fetcher._readers = ThreadPoolExecutor(2)
    parts: list = []
    # a stand-in for the recording
    fetcher._record = lambda hot, got, t0: parts.extend(got)  # type: ignore[method-assign, assignment]
    return fetcher, parts


@pytest.mark.parametrize("after_line", ["short", "long"])
def test_a_fetch_never_takes_the_rest_of_a_line_the_bulk_copy_is_in(tmp_path, monkeypatch,
                                                                    after_line):
    """Defect: a bad line longer than a block, the bulk copy inside it, a round of fetches
    for the piece that holds it. The fetch took the line's rest from the bulk copy's last claim
    (mid-line): its last bytes, which look like a line, became a row, and the bulk copy's chunk
    glued the line's first block onto the next line it copied (read through when the piece's
    rest was *short*, after a new stream when *long*). Every range either copies is whole
    lines, every byte once, each where it comes from."""
    from debl.keys.manifest import Piece
    from loaders import chunker
    from loaders.chunker import ChunkCopier
    from loaders.source import LocalSource

    monkeypatch.setattr(chunker, "BLOCK", 4096)
    monkeypatch.setattr(chunker, "READ_THROUGH", 1024)
    good = [b"%d\t123456789\t%d\t1\tok\t1000\t1\n" % (k // 20 + 1, k) for k in range(400)]
    long = b"y" * 4096 + b"5\t123456789\t6\t1\tevil\t1000\t1\n"  # its tail looks like a line
    head = b"".join(good[:100])
    data = head + long + b"".join(good[100:])
    (tmp_path / "f.tsv").write_bytes(data)
    starts = set(_line_starts(data)) | {len(data)}
    # The piece that holds the long line ends past the line's end by a short or a long way.
    end = min(s for s in starts if s >= len(head) + len(long) + (512 if after_line == "short"
                                                                   else 4096))
    source = LocalSource(tmp_path)
    listed = source.list()[0]
    coverage = Coverage({0: len(data)})
    last = min(s for s in starts if s >= len(data) - 1000)  # a piece the bulk copy reaches last
    fetcher, fetched = _fetcher(source, listed, coverage, {
        7: [Piece(0, len(head), end, 5, 7)], 20: [Piece(0, last, len(data), 20, 20)]})
    sent = [0]

    def a_round_each_block(n: int) -> None:  # once the bulk copy is past the line's start
        sent[0] += n
        if sent[0] > len(head) and (chosen := fetcher._choose({7: 2, 20: 1})):
            fetcher._fetch(chosen)
    numbers, hdfs = iter(range(100)), _Chunks()
    copier = ChunkCopier(source, [(0, listed)], hdfs, "/c", coverage, lambda: next(numbers),
                         progress=a_round_each_block)
    chunks = []
    while (chunk := copier.copy_next(64 << 10)) is not None:
        chunks.append(chunk)
    copier.close()
    fetcher._readers.shutdown()
    assert fetched, "no round fetched anything"
    copied = [(s, hdfs.files[c.path][_at(c, s):_at(c, s) + s.end - s.start])
              for c in chunks for s in c.segments] + fetched
    for s, body in copied:
        assert s.start in starts and min(s.end, len(data)) in starts, (s.start, s.end)
        assert body == data[s.start:s.end], (s.start, s.end)
        assert s.lines == body.count(b"\n")
    assert sorted((s.start, s.end) for s, _ in copied) == _tiled(copied, len(data))
    assert coverage.done()


def _at(chunk, segment) -> int:
    """Where *segment* starts in its chunk's bytes."""
    return sum(s.end - s.start for s in chunk.segments[:chunk.segments.index(segment)])


def _tiled(copied: list, size: int) -> list[tuple[int, int]]:
    """The copied ranges, checked to tile ``[0, size)`` exactly (every byte once)."""
    ranges = sorted((s.start, s.end) for s, _ in copied)
    assert ranges[0][0] == 0 and ranges[-1][1] == size
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:])), ranges
    return ranges


@pytest.mark.parametrize("kind", ["local", "http"])
@pytest.mark.parametrize("cut", ["at a line end", "mid-line"])
def test_a_file_truncated_under_a_stretch_of_the_bulk_copy_is_a_clear_error(
        tmp_path, monkeypatch, kind, cut):
    """Defect: two ranges taken by fetches on demand bound the bulk copy's streams; the file
    is truncated once the bulk copy reaches the first. The stream to the second ended short and
    the copy took that for the second range: it opened the file again and again (the HTTP
    source: a request each time), or, cut inside a line, failed with an AttributeError. A
    bounded stream that ends short is a SourceError naming the file, the bytes expected and
    those that came."""
    import os
    import threading

    from debl.bench.source_server import make_server
    from debl.errors import SourceError
    from loaders import chunker
    from loaders.chunker import ChunkCopier
    from loaders.source import HttpSource, LocalSource

    monkeypatch.setattr(chunker, "BLOCK", 4096)
    data = _file(2000, 6)
    (tmp_path / "f.tsv").write_bytes(data)
    starts = _line_starts(data)
    coverage = Coverage({0: len(data)})
    for first in (600, 1600):
        coverage.take(0, starts[first], data[starts[first]:starts[first + 20]])
    truncated_at = starts[1000] + (0 if cut == "at a line end" else 5)
    if kind == "http":
        server = make_server(tmp_path, port=0)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        source = HttpSource(f"http://127.0.0.1:{server.server_address[1]}")
    else:
        server, source = None, LocalSource(tmp_path)
    opened, opens = source._open, []

    def counted(name, offset, end=None):
        opens.append((offset, end))
        assert len(opens) < 20, f"the copy spins: {opens[-3:]}"
        return opened(name, offset, end)
    monkeypatch.setattr(source, "_open", counted)
    sent = [0]

    def truncate_at_the_first_range(n: int) -> None:
        sent[0] += n
        if sent[0] == starts[600]:
            os.truncate(tmp_path / "f.tsv", truncated_at)
    numbers = iter(range(100))
    copier = ChunkCopier(source, [(0, source.list()[0])], _Chunks(), "/c", coverage,
                         lambda: next(numbers), progress=truncate_at_the_first_range)
    try:
        with pytest.raises(SourceError, match=rf"'f\.tsv': .*bytes {starts[620]}\.\."
                                              rf"{starts[1600]}.*ended at byte {truncated_at}"):
            copier.copy_next(1 << 20)
    finally:
        copier.close()
        if server is not None:
            server.shutdown()
            server.server_close()
    assert opens == [(0, starts[600]), (starts[620], starts[1600])]

