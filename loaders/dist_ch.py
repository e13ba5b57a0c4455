"""dist_ch: the Spark job that buckets one copied chunk by id1 range.

For a chunk in HDFS, one Spark task streams the chunk, parses every line (bad lines go back to the
driver for the reject file), gives each good line its origin ``(file_seq, line_no)`` from the
chunk's segments, and writes, for every bucket ``b = id1 // width`` the chunk touches, one file
``<bucket_dir>/<b>/chunk-NNNNN``: that bucket's lines in input order, each followed by two more
fields, the origin (gen_HF needs it for the merge rule's last tie-breakers). It returns, per
bucket, rows, bytes and a checksum; the loader records them in the bucket index.

Why one task and no shuffle: a chunk is bucketed while the next one is copied, so dist_ch needs
one core, not the machine; and a Spark shuffle of Python rows (pickling, a sort, two stages) cost
five times more than the parse itself (measured: 16 s against ~3 s for a 16 MB chunk). The task
reads and writes HDFS through WebHDFS from the executor, with only the picklable Config shipped.

Pitfalls:

- Lines stay bytes end to end, so data round-trips byte-exact.
- A re-run of a chunk rewrites exactly its own files (same names) and its own index rows.
- The whole chunk's output is held in the task's memory before it is written (about the chunk's
  size again): keep ``chunk_size`` well under the executor's memory.
"""

from __future__ import annotations

from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from debl.catalog import BucketChunk
from debl.config import Config
from debl.model import CHECKSUM_MOD, ParseError, line_checksum, line_id1
from loaders.chunker import Chunk

BLOCK = 4 << 20
WRITERS = 4  # parallel bucket-file writes per task (measured: 8 files of 2 MB, 0.5-1.0 s
             # side by side against 1.1-1.8 s one after the other)


@dataclass(frozen=True)
class Reject:
    file: str
    line_no: int
    reason: str
    line: bytes


@dataclass(frozen=True)
class DistResult:
    chunk_no: int
    width: int
    parts: list[BucketChunk]
    rejects: list[Reject]
    per_file: dict[int, tuple[int, int]]  # file_seq -> (rows bucketed, rejects)

    @property
    def rows(self) -> int:
        return sum(p.rows for p in self.parts)


def derive_width(k_lo: int, k_hi: int, total_bytes: int, target_bytes: int,
                 sorted_share: float | None = None) -> int:
    """The bucket width that makes buckets of about *target_bytes* (DESIGN section 4).

    The first chunk's key range [k_lo, k_hi] stands for the whole input's. One exception: when
    the chunk's lines are in id1 order (daily dumps often are: ``debl generate`` writes each file
    sorted) the chunk has seen only *sorted_share* of its file, so the file's range is estimated
    as the seen range divided by that share.
    """
    span = k_hi - k_lo + 1
    if sorted_share:
        span = int(span / min(1.0, max(sorted_share, 1e-9)))
    buckets = max(1, -(-total_bytes // target_bytes))
    return max(1, -(-span // buckets))


def _lines(config: Config, path: str, offset: int, length: int | None):
    from loaders.webhdfs import WebHDFS

    tail = b""
    for block in WebHDFS(config).stream(path, BLOCK, offset, length):
        block = tail + block
        cut = block.rfind(b"\n") + 1
        tail = block[cut:]
        yield from block[:cut].split(b"\n")[:-1]
    if tail:
        yield tail


def _slice(chunk: Chunk, index: int) -> tuple[int, int | None, int]:
    """(byte offset, length or None for the rest, first chunk line) of slice *index*."""
    offset, first_line = chunk.slices[index]
    end = chunk.slices[index + 1][0] if index + 1 < len(chunk.slices) else None
    return offset, None if end is None else end - offset, first_line


def _key_range_task(config: Config, chunk: Chunk, index: int) -> tuple[int, int, bool] | None:
    """(min id1, max id1, whether id1 never decreased) over one slice's parseable lines."""
    offset, length, _ = _slice(chunk, index)
    lo = hi = last = None
    ordered = True
    for line in _lines(config, chunk.path, offset, length):
        try:
            id1 = line_id1(line)
        except ParseError:
            continue
        if last is not None and id1 < last:
            ordered = False
        last = id1
        lo = id1 if lo is None or id1 < lo else lo
        hi = id1 if hi is None or id1 > hi else hi
    return None if lo is None else (lo, hi, ordered)


def _bucket_task(config: Config, chunk: Chunk, index: int, width: int,
                 bucket_dir: str) -> DistResult:
    """The body of one Spark task: parse, bucket and write one slice of the chunk."""
    from loaders.webhdfs import WebHDFS

    offset, length, first = _slice(chunk, index)
    buckets: dict[int, list[bytes]] = defaultdict(list)
    sums: dict[int, int] = defaultdict(int)
    rejects: list[Reject] = []
    per_file = {s.file_seq: [0, 0] for s in chunk.segments}
    segments = iter(chunk.segments)
    seg = next(segments)
    seg_end = seg.chunk_line + seg.lines
    for index_in_chunk, line in enumerate(_lines(config, chunk.path, offset, length), first):
        while index_in_chunk >= seg_end:
            seg = next(segments)
            seg_end = seg.chunk_line + seg.lines
        line_no = seg.first_line + index_in_chunk - seg.chunk_line
        try:
            b = line_id1(line) // width
        except ParseError as exc:
            rejects.append(Reject(seg.name, line_no, str(exc), line))
            per_file[seg.file_seq][1] += 1
            continue
        per_file[seg.file_seq][0] += 1
        buckets[b].append(b"%s\t%d\t%d\n" % (line, seg.file_seq, line_no))
        sums[b] += line_checksum(line)

    fs = WebHDFS(config)

    def write(b: int) -> BucketChunk:
        body = b"".join(buckets[b])
        path = f"{bucket_dir}/{b}/chunk-{chunk.chunk_no:05d}.{index}"
        fs.write_atomic(path, body)
        return BucketChunk(b, chunk.chunk_no, len(buckets[b]), len(body),
                           sums[b] % CHECKSUM_MOD, path)

    # Small HDFS files cost a round of create/close latency each: write them side by side.
    with ThreadPoolExecutor(WRITERS) as pool:
        parts = list(pool.map(write, sorted(buckets)))
    return DistResult(chunk.chunk_no, width, parts, rejects,
                      {seq: (n, bad) for seq, (n, bad) in per_file.items()})


def _combine(chunk: Chunk, width: int, results: list[DistResult]) -> DistResult:
    """One result for the chunk: per bucket, the sums over its slices."""
    merged: dict[int, BucketChunk] = {}
    for part in (p for r in results for p in r.parts):
        old = merged.get(part.b_index)
        path = part.path.rsplit(".", 1)[0]  # the bucket's files of this chunk: <path>.<slice>
        merged[part.b_index] = part.__class__(
            part.b_index, chunk.chunk_no, part.rows + (old.rows if old else 0),
            part.bytes + (old.bytes if old else 0),
            (part.checksum + (old.checksum if old else 0)) % CHECKSUM_MOD, path)
    per_file = {s.file_seq: (0, 0) for s in chunk.segments}
    for r in results:
        for seq, (n, bad) in r.per_file.items():
            per_file[seq] = (per_file[seq][0] + n, per_file[seq][1] + bad)
    return DistResult(chunk.chunk_no, width, [merged[b] for b in sorted(merged)],
                      [rej for r in results for rej in r.rejects], per_file)


def bucket_chunk(spark, config: Config, chunk: Chunk, width: int, bucket_dir: str,
                 total_bytes: int = 0, file_sizes: dict[int, int] | None = None) -> DistResult:
    """Run dist_ch on one chunk, one Spark task per slice. With width 0 a first small job
    derives the width from this chunk's key range and *total_bytes* (the cold input's size)."""
    sc = spark.sparkContext
    sc.setJobGroup(f"dist_ch-{chunk.chunk_no}", f"dist_ch chunk {chunk.chunk_no}")
    n = len(chunk.slices)
    tasks = sc.parallelize(range(n), n)
    if not width:
        ranges = [r for r in tasks.map(lambda i: _key_range_task(config, chunk, i)).collect() if r]
        first = chunk.segments[0]
        # Slices in order and each ordered: the chunk is sorted only if they chain up too.
        ordered = (len(chunk.segments) == 1 and all(r[2] for r in ranges)
                   and all(a[1] <= b[0] for a, b in zip(ranges, ranges[1:])))
        share = ((first.end - first.start) / file_sizes[first.file_seq]
                 if ordered and file_sizes and file_sizes.get(first.file_seq) else None)
        width = (derive_width(min(r[0] for r in ranges), max(r[1] for r in ranges), total_bytes,
                              config.bucket_target_bytes, share) if ranges else 1)
    results = tasks.map(lambda i: _bucket_task(config, chunk, i, width, bucket_dir)).collect()
    return _combine(chunk, width, results)
