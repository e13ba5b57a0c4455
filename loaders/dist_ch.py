"""dist_ch: the Spark job that buckets one copied chunk by id1 range.

For a chunk in HDFS, one Spark task per line-aligned slice streams its lines, validates each
(exactly as ``debl.model.parse_line``), gives each good line its origin ``(file_seq, line_no)``
from the chunk's segments, and writes, for every bucket ``b`` the slice touches (``b`` from the
load's bucket map, ``debl.buckets``), one bucket file ``<bucket_dir>/<b>/chunk-NNNNN.<slice>``
(``debl.bucket_file``): that bucket's lines, each followed by two more fields, the origin (gen_HF
needs it for the merge rule's last tie-breakers), sorted by (id1, link_type, time), with a sparse
index of byte offsets and a Bloom filter of its keys as its footer, so that the raw route reads
one id1's rows without the rest (docs/ONLINE.md, "Bucket files"). It returns, per bucket, rows,
bytes (of the lines, without the footer), a checksum and the lowest and highest id1 of its rows
(the coordinator's cold coverage); the loader records them in the bucket index. Bad lines come
back whole; the reason in the reject file is parse_line's own. A line over ``max_line_bytes`` is
never held whole (the JVM reads past it): it comes back as its length and first bytes. A CRLF
line is bucketed as its LF twin (its CR dropped).

The per-line work runs on the JVM (``debl.jobs.DistCh``, through py4j): in Python it bucketed
11-25 MB/s on 2 cores, the slowest stage before uptime on a fast link. This module keeps the plan
(slices, segments, the bucket map) and turns the tasks' reports into results.

Why one task per slice and no shuffle: a chunk is bucketed while the next one is copied, so
dist_ch needs to keep up with the link, not the whole machine; a Spark shuffle (a sort, two
stages) cost several times the parse itself (measured in Python: 16 s against ~3 s for a 16 MB
chunk).

Pitfalls:

- Lines stay bytes end to end, so data round-trips byte-exact.
- A re-run of a chunk rewrites exactly its own files (same names) and its own index rows.
- A slice's output is held in the task's memory before it is written, and sorted there (about
  1.3x the slice's size: the lines, and 28 bytes of key and offset per line; up to twice that
  while its arrays grow). ``slices_for`` cuts a chunk into more than ``dist_ch_tasks`` slices
  when a slice would pass its share of the task heap: a load whose chunks grew (uncapped, the
  load doubles a chunk that dist_ch lags behind) once ran the driver out of heap with two
  512 MiB slices (docs/SCALING.md, "Measured growth").
"""

from __future__ import annotations

from dataclasses import dataclass

from debl.buckets import BucketMap
from debl.catalog import BucketChunk
from debl.config import Config
from debl.errors import DeblError
from debl.model import CHECKSUM_MOD, ParseError, parse_line, too_long
from debl.spark import call_jvm, task_heap
from loaders.chunker import Chunk


# A slice's share of its task's heap: its output (up to ~2.6x the slice while it grows), and the
# JVM's and Spark's own objects beside it. Two 256 MiB slices ran in a 2 GiB driver, two 512 MiB
# ones did not.
HEAP_PER_SLICE = 4


def slices_for(config: Config, chunk_bytes: int) -> int:
    """How many slices (one task each) dist_ch cuts a chunk of *chunk_bytes* into:
    ``dist_ch_tasks``, or more so that no slice passes a quarter of its task's heap share."""
    limit = max(1, task_heap(config).per_task // HEAP_PER_SLICE)
    return max(config.dist_ch_tasks, -(-chunk_bytes // limit))


@dataclass(frozen=True)
class Reject:
    file: str
    line_no: int
    reason: str
    line: bytes


@dataclass(frozen=True)
class DistResult:
    chunk_no: int
    parts: list[BucketChunk]
    rejects: list[Reject]
    per_file: dict[int, tuple[int, int]]  # file_seq -> (rows bucketed, rejects)

    @property
    def rows(self) -> int:
        return sum(p.rows for p in self.parts)


def _reject(chunk: Chunk, file_seq: int, line_no: int, line: bytes) -> Reject:
    """A line the JVM refused, with parse_line's reason (which must refuse it too)."""
    name = next(s.name for s in chunk.segments if s.file_seq == file_seq)
    try:
        parse_line(line)
    except ParseError as exc:
        return Reject(name, line_no, str(exc), line)
    raise DeblError(f"dist_ch refused {name} line {line_no}, which parse_line accepts: "
                    f"{line[:200]!r} (the JVM and Python validations disagree: please report)")


def _chunk_result(chunk: Chunk, report: str, max_line_bytes: int) -> DistResult:
    """The JVM's report (debl.jobs.DistCh.bucket) as the chunk's result: per bucket, the sums
    over the slices' files (``<path>.<slice>``; the index row names ``<path>``); a line over
    *max_line_bytes* comes back as its length and first bytes only."""
    parts: dict[int, BucketChunk] = {}
    rejects: list[Reject] = []
    per_file = {s.file_seq: (0, 0) for s in chunk.segments}
    for line in filter(None, report.split("\n")):
        kind, _slice, *f = line.split("\t")
        if kind == "P":
            b, rows, size, checksum = int(f[0]), int(f[1]), int(f[2]), int(f[3])
            c_lo, c_hi = int(f[5]), int(f[6])
            old = parts.get(b)
            if old is not None:
                rows, size = rows + old.rows, size + old.bytes
                checksum = (checksum + old.checksum) % CHECKSUM_MOD
                c_lo, c_hi = min(c_lo, old.c_lo), max(c_hi, old.c_hi)
            parts[b] = BucketChunk(b, chunk.chunk_no, rows, size, checksum,
                                   f[4].rsplit(".", 1)[0], c_lo, c_hi)
        elif kind == "R":
            rejects.append(_reject(chunk, int(f[0]), int(f[1]), bytes.fromhex(f[2])))
        elif kind == "L":
            name = next(s.name for s in chunk.segments if s.file_seq == int(f[0]))
            rejects.append(Reject(name, int(f[1]), str(too_long(int(f[2]), max_line_bytes)),
                                  bytes.fromhex(f[3])))
        else:
            seq, n, bad = int(f[0]), int(f[1]), int(f[2])
            per_file[seq] = (per_file[seq][0] + n, per_file[seq][1] + bad)
    return DistResult(chunk.chunk_no, [parts[b] for b in sorted(parts)], rejects, per_file)


def bucket_chunk(spark, config: Config, chunk: Chunk, bucket_map: BucketMap,
                 bucket_dir: str) -> DistResult:
    """Run dist_ch on one chunk, one Spark task per slice, bucketing by *bucket_map*."""
    sc = spark.sparkContext
    call_jvm("dist_ch", sc.setJobGroup, f"dist_ch-{chunk.chunk_no}",
             f"dist_ch chunk {chunk.chunk_no}")
    # The tasks' line reader takes the limit from the Hadoop settings they are given.
    call_jvm("dist_ch", lambda: sc._jsc.hadoopConfiguration().setLong(
        "debl.max.line.bytes", config.max_line_bytes))
    uri = f"{config.hdfs_uri}{chunk.path}"
    slices = "\n".join(f"{offset}\t{line}" for offset, line in chunk.slices)
    segments = "\n".join(f"{s.file_seq}\t{s.first_line}\t{s.lines}\t{s.chunk_line}"
                         for s in chunk.segments)
    report = call_jvm("dist_ch", lambda: sc._jvm.debl.jobs.DistCh.bucket(
        sc._jsc, uri, slices, segments, bucket_map.to_json(), f"{config.hdfs_uri}{bucket_dir}",
        chunk.chunk_no))
    return _chunk_result(chunk, report, config.max_line_bytes)
