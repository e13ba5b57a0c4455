"""The copy follows demand: the pieces that waiting queries need are fetched next, ahead of the
bulk copy (docs/LOADING.md, "The copy follows demand").

Before a load's uptime, coordinators publish the keys their queries wait for
(``Catalog.key_demand``): the same waiting queries whose per-bucket demand steers gen_HF. A
thread of the load reads them every ``POLL_S``, most wanted first, finds for each the pieces not
yet bucketed whose claims can hold it (``loaders.early``), and fetches those not taken yet by
ranged reads (a file's pieces in one request), each with the byte before it, so that it knows
the piece starts and ends at line starts before it takes it: a manifest whose offset is not a
line start is a false claim, and the bulk copy copies those bytes as any others. The bytes it
takes (``loaders.coverage``: never a byte the bulk copy or an earlier fetch took) become one
chunk of hot pieces and one of cold ones, written to HDFS and bucketed in this process
(``loaders.local_dist_ch``), without a Spark job: a key's bytes are a few hundred KB, and a
Spark job per fetch would cost more than the fetch. The answerable keys follow at once.

Pitfalls:

- A round takes at most ``ROUND_BYTES``, so that the wire is not held from the bulk copy for
  long, and no piece larger than ``MAX_PIECE`` (a file without manifest is one piece claiming
  every id1: the bulk copy brings it).
- A key missing several pieces of more than ``MAX_KEY_BYTES`` in all waits for the bulk copy:
  on a change log a key has a piece in every file, and fetching a dozen for each of a few keys
  cost the whole copy its pace (docs/LOADING.md, "The copy follows demand"); once the copy is
  in its last files, the key's last pieces are fetched as a range dump's one piece is.
- What a round takes must be recorded, or the load fails: those bytes are copied by no one
  else. A resumed load starts from its bucketed chunks (the bytes of a round killed before its
  chunk was recorded are taken again).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from debl.catalog import ChunkState, EarlyCatalog, FalseClaim
from debl.errors import SourceError
from debl.faultpoints import reached
from debl.keys.manifest import Piece
from debl.measure import thread_cpu
from loaders.chunker import Chunk, Segment, chunk_name
from loaders.dist_ch import DistResult
from loaders.early import EarlyAnswers
from loaders.load_context import CopyState
from loaders.source import SourceFile

POLL_S = 0.05  # how often the waiting keys are read
ROUND_BYTES = 4 << 20  # the most one round fetches
READERS = 8  # a round's files read side by side
MAX_PIECE = 16 << 20  # a piece larger than this is left to the bulk copy
MAX_KEY_BYTES = 256 << 10  # a key missing several pieces of more bytes waits for the bulk copy


class DemandFetcher:
    """The thread that fetches what waiting queries need (see the module). ``run`` until
    ``stop`` is set or every byte is taken; raises what a fetch, HDFS or the catalog raised.
    *early*: the copy's early answers (``state.early``: only a load that answers early fetches
    on demand); *bucket*: ``Bucketer.bucket``."""

    def __init__(self, state: CopyState, early: EarlyAnswers, bucket: Callable[..., DistResult]):
        load = state.load
        self.config, self.load_id = load.config, load.load_id
        self.chunk_dir = load.namespace.chunk_dir
        self.source, self.files, self.hot = state.io.source, dict(load.files), load.hot_seqs
        self.coverage, self.numbers, self.early = state.coverage, state.numbers, early
        self.bucket = bucket
        self.catalog: EarlyCatalog = early.catalog  # the keys waited for, false claims
        self.index, self.progress = state.index, state.io.progress
        self.turn = state.turn  # the bulk copy waits while a round reads
        self.hdfs = state.hdfs  # the pipeline's HdfsClient
        self._readers = ThreadPoolExecutor(READERS, thread_name_prefix="demand-read")
        self.fetched_bytes = 0
        self.chunks = 0

    def run(self, stop: threading.Event) -> None:
        # Once early answers stopped (a false claim), nothing is answered before the uptime:
        # the bulk copy alone goes on.
        with self._readers:
            while not stop.is_set() and not self.coverage.done() and not self.early.stopped:
                wanted = self.catalog.key_demand(self.load_id)
                chosen = self._choose(wanted) if wanted else []
                if not chosen:
                    stop.wait(POLL_S)
                    continue
                self._fetch(chosen)

    def _choose(self, wanted: dict[int, int]) -> list[Piece]:
        """The pieces to fetch this round: of the most wanted keys first, untaken, at most
        ROUND_BYTES in all."""
        chosen: dict[tuple[int, int], Piece] = {}
        total = 0
        for id1 in sorted(wanted, key=lambda k: (-wanted[k], k)):
            missing = self.early.missing(id1)
            if len(missing) > 1 and sum(p.size for p in missing) > MAX_KEY_BYTES:
                continue  # a big change log's key early on: left to the bulk copy (the module)
            for p in missing:
                if (p.file_seq, p.start) in chosen or p.size > MAX_PIECE:
                    continue
                if self.coverage.next_gap(p.file_seq, p.start) not in range(p.start, p.end):
                    continue  # taken (or held: loaders.coverage) whole: lands with its chunk
                chosen[(p.file_seq, p.start)] = p
                total += p.size
            if total >= ROUND_BYTES:
                break
        return sorted(chosen.values(), key=lambda p: (p.file_seq, p.start))

    def _fetch(self, chosen: list[Piece]) -> None:
        """One round: read the pieces (with the byte before each), check their ends, take what
        is still untaken, and write and bucket it as a hot and a cold chunk."""
        t0 = time.time()
        by_file: dict[int, list[Piece]] = {}
        for p in chosen:
            by_file.setdefault(p.file_seq, []).append(p)
        taken: dict[bool, list[tuple[Segment, bytes]]] = {True: [], False: []}
        with self.turn.demand(sum(p.size for p in chosen)):  # the wire to itself, if long
            # A request a file, side by side: one after the other, each request's own latency
            # left the wire idle while the bulk copy waited (docs/LOADING.md, "The copy
            # follows demand").
            reads = dict(zip(by_file, self._readers.map(self._read, by_file.items())))
        for seq, ps in by_file.items():
            f = self.files[seq]
            for p, data in zip(ps, reads[seq]):
                body = self._checked(f, p, data)
                if body is None:
                    continue
                for a, b, lines in self.coverage.take(seq, p.start, body):
                    segment = Segment(seq, f.name, a, b + (1 if b == f.size and not
                                                           body.endswith(b"\n") else 0),
                                      None, lines, 0)
                    piece = body[a - p.start:b - p.start]
                    if not piece.endswith(b"\n"):
                        piece += b"\n"  # a last line without its newline, as the bulk copy
                    taken[seq in self.hot].append((segment, piece))
        for hot, parts in taken.items():
            if parts:
                self._record(hot, parts, t0)

    def _read(self, item: tuple[int, list[Piece]]) -> list[bytes]:
        """The pieces of one file (with the byte before each), in one request."""
        seq, pieces = item
        with thread_cpu.counted(thread_cpu.COPY):
            return self.source.read_ranges(
                self.files[seq].name,
                [(max(p.start - 1, 0), p.end - max(p.start - 1, 0)) for p in pieces])

    def _checked(self, f: SourceFile, p: Piece, data: bytes) -> bytes | None:
        """The piece's bytes, or None (and the claim recorded false) when the manifest's
        offsets are not line starts, or the file is not as long as listed."""
        want = p.end - max(p.start - 1, 0)
        if len(data) != want:
            raise SourceError(f"{f.name!r}: a ranged read of bytes {max(p.start - 1, 0)}.."
                              f"{p.end} gave {len(data)} bytes, not {want}: the file changed "
                              "after it was listed; nothing of this load is visible: load it "
                              "again once the source is stable")
        body = data[1:] if p.start > 0 else data
        if p.start > 0 and data[:1] != b"\n":
            self._false(p, f, p.start, "a point that is not a line start")
            return None
        if p.end < f.size and not body.endswith(b"\n"):
            self._false(p, f, p.end, "a point that is not a line start")
            return None
        return body

    def _false(self, p: Piece, f: SourceFile, offset: int, what: str) -> None:
        if not self.early.stopped:
            self.early.stopped = True
            self.catalog.record_false_claim(self.load_id, FalseClaim(
                -1, p.file_seq, "offset", offset, f"{f.name} (file {p.file_seq}), byte "
                f"{offset}: {what} (claimed {p.lo}..{p.hi})", max(p.lo, 0), max(p.hi, 0)))

    def _record(self, hot: bool, parts: list[tuple[Segment, bytes]], t0: float) -> None:
        """Write *parts* as one chunk, record it copied, bucket and record it."""
        parts.sort(key=lambda sp: (sp[0].file_seq, sp[0].start))
        segments, at = [], 0
        for s, _ in parts:
            segments.append(Segment(s.file_seq, s.name, s.start, s.end, None, s.lines, at))
            at += s.lines
        data = b"".join(piece for _, piece in parts)
        chunk_no = self.numbers()
        chunk = Chunk(chunk_no, f"{self.chunk_dir}/{chunk_name(chunk_no)}", len(data),
                      tuple(segments), hot=hot)
        self.hdfs.write_atomic(chunk.path, data)
        reached(self.config, "demand-copied")
        self.index.chunk_copied(self.load_id, chunk.record(ChunkState.COPIED), t0, time.time(),
                                  chunk.lines)
        self.progress.copied(len(data))
        self.bucket(chunk, data, local=True, phase="demand")
        self.fetched_bytes += len(data)
        self.chunks += 1

