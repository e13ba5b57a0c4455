"""dist_ch: the Spark job that buckets one copied chunk by id1 range.

For a chunk in HDFS, one Spark task per line-aligned slice streams its lines, validates each
(exactly as ``debl.format.link.parse_line``), gives each good line its origin
``(file_seq, line_no)`` from the chunk's segments, and writes, for every bucket ``b`` the slice
touches (``b`` from the load's bucket map, ``debl.format.bucket_map``), one bucket file
``<bucket_dir>/<b>/chunk-NNNNN.<slice>`` (``debl.format.bucket_file``): that bucket's lines, each
followed by two more fields, the origin (gen_HF needs it for the merge rule's last tie-breakers),
sorted by (id1, link_type, time), with a sparse index of byte offsets and a Bloom filter of its keys
as its footer, so that the raw route reads one id1's rows without the rest (docs/ONLINE.md,
"Bucket files"). It returns, per bucket, rows, bytes (of the lines, without the footer), a checksum
and the lowest and highest id1 of its rows (the coordinator's cold coverage); the loader records
them in the bucket index. Bad lines come back whole; the reason in the reject file is parse_line's
own. A line over ``loading.max_line_bytes`` is never held whole (the JVM reads past it): it comes
back as its length and first bytes. A CRLF line is bucketed as its LF twin (its CR dropped).

The per-line work runs on the JVM (``debl.jobs.DistCh``, through ``loaders.jobs``): in Python it
was the slowest stage before uptime on a fast wire (docs/LOADING.md, "Decisions where DESIGN is
silent"). This module keeps
the plan (slices, segments, the bucket map, the line limit) and turns the slices' reports into
the chunk's result.

Why one task per slice and no shuffle: a chunk is bucketed while the next one is copied, so
dist_ch needs to keep up with the wire, not the whole machine; a Spark shuffle (a sort, two
stages) cost several times the parse itself (docs/LOADING.md, "Decisions where DESIGN is
silent").

Pitfalls:

- Lines stay bytes end to end, so data round-trips byte-exact.
- A re-run of a chunk rewrites exactly its own files (same names) and its own index rows.
- A slice's output is held in the task's memory before it is written, and sorted there (the
  lines, and 28 bytes of key and offset per line; more while its arrays grow, the old array
  beside the new one). ``slices_for`` cuts a chunk into more than ``loading.dist_ch_tasks``
  slices when a slice would pass its share of the task heap: a load whose chunks grew (uncapped,
  the load doubles a chunk that dist_ch lags behind) ran the driver out of heap with larger
  slices (docs/SCALING.md, "Measured growth", has the slices that did and did not fit).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from debl.format.bucket_map import BucketMap
from debl.catalog import BucketChunk
from debl.config import Config
from debl.errors import DeblError
from debl.keys.manifest import ClaimViolation
from debl.format.link import CHECKSUM_MOD, ParseError, parse_line, too_long
from debl.spark.session import task_heap
from loaders import jobs
from loaders.chunker import Chunk, chunk_name
from loaders.jobs import DistChReport, LongLine, RefusedLine


# A slice's share of its task's heap: its output (up to ~4x the slice while its arrays double:
# the old array and the new one side by side), and the JVM's and Spark's own objects beside it:
# the limits that ran and the ones that did not are in docs/SCALING.md, "Measured growth".
HEAP_PER_SLICE = 8


def slice_limit(config: Config) -> int:
    """The most bytes one slice may hold: an eighth of its task's heap share."""
    return max(1, task_heap(config).per_task // HEAP_PER_SLICE)


def whole_waves(config: Config, chunk_bytes: int) -> int:
    """*chunk_bytes*, or less so that its slices fill whole waves of ``loading.dist_ch_tasks``
    tasks: a chunk a little over a wave takes a second wave with cores idle (260 MiB in a 2 GiB
    driver on 2 cores: three slices, the third alone; 256 MiB is two)."""
    tasks, slices = config.loading.dist_ch_tasks, slices_for(config, chunk_bytes)
    if slices % tasks == 0:
        return chunk_bytes
    return (slices - slices % tasks) * slice_limit(config)


def slices_for(config: Config, chunk_bytes: int) -> int:
    """How many slices (one task each) dist_ch cuts a chunk of *chunk_bytes* into:
    ``loading.dist_ch_tasks``, or more so that no slice passes ``slice_limit``."""
    return max(config.loading.dist_ch_tasks, -(-chunk_bytes // slice_limit(config)))


@dataclass(frozen=True)
class Reject:
    file: str
    line_no: int | str  # a pending_line name while it is not known (loaders.rejects)
    reason: str
    line: bytes


@dataclass(frozen=True)
class DistResult:
    chunk_no: int
    parts: list[BucketChunk]
    rejects: list[Reject]
    per_file: dict[int, tuple[int, int]]  # file_seq -> (rows bucketed, rejects)
    # The first line of each segment (in each slice) that breaks its manifest's claims
    # (docs/LOADING.md, "Answers before the copy ends"): none when it checks none.
    violations: list[ClaimViolation] = field(default_factory=list)

    @property
    def rows(self) -> int:
        return sum(p.rows for p in self.parts)


def _reject(chunk: Chunk, file_seq: int, line_no: int, line: bytes) -> Reject:
    """A line the JVM refused, with parse_line's reason (which must refuse it too)."""
    name = _file_name(chunk, file_seq)
    try:
        parse_line(line)
    except ParseError as exc:
        return Reject(name, line_no, str(exc), line)
    raise DeblError(f"dist_ch refused {name} line {line_no}, which parse_line accepts: "
                    f"{line[:200]!r} (the JVM and Python validations disagree: please report)")


def _file_name(chunk: Chunk, file_seq: int) -> str:
    return next(s.name for s in chunk.segments if s.file_seq == file_seq)


def _chunk_result(chunk: Chunk, report: DistChReport, bucket_dir: str,
                  max_line_bytes: int) -> DistResult:
    """The JVM's report as the chunk's result: per bucket, the sums over the slices' files
    (``<bucket_dir>/<b>/<chunk name>.<slice>``; the index row names the prefix without the
    slice); a line over *max_line_bytes* comes back as its length and first bytes only."""
    parts: dict[int, BucketChunk] = {}
    for p in report.parts:
        rows, size, checksum, c_lo, c_hi = p.rows, p.bytes, p.checksum, p.lo, p.hi
        old = parts.get(p.bucket)
        if old is not None:
            rows, size = rows + old.rows, size + old.bytes
            checksum = (checksum + old.checksum) % CHECKSUM_MOD
            c_lo, c_hi = min(c_lo, old.c_lo), max(c_hi, old.c_hi)
        parts[p.bucket] = BucketChunk(p.bucket, chunk.chunk_no, rows, size, checksum,
                                      f"{bucket_dir}/{p.bucket}/{chunk_name(chunk.chunk_no)}",
                                      c_lo, c_hi)
    # In input order, as the reject file lists them: by slice, then by segment and line.
    segment = {s.file_seq: i for i, s in enumerate(chunk.segments)}
    refused: list[RefusedLine | LongLine] = sorted([*report.rejects, *report.too_long],
                     key=lambda r: (r.slice, segment[r.file_seq], r.line_no))
    rejects = [_reject(chunk, r.file_seq, r.line_no, r.line) if isinstance(r, RefusedLine)
               else Reject(_file_name(chunk, r.file_seq), r.line_no,
                           str(too_long(r.length, max_line_bytes)), r.prefix)
               for r in refused]
    per_file = {s.file_seq: (0, 0) for s in chunk.segments}
    for f in report.per_file:
        per_file[f.file_seq] = (per_file[f.file_seq][0] + f.rows,
                                per_file[f.file_seq][1] + f.rejects)
    violations = [ClaimViolation(chunk.segments[v.segment].file_seq, v.offset, v.id1, v.lo,
                                 v.hi, f"id1 {v.id1} is {v.kind}" if v.id1 is not None
                                 else v.kind)
                  for v in report.violations]
    return DistResult(chunk.chunk_no, [parts[b] for b in sorted(parts)], rejects, per_file,
                      violations)


def _segments(chunk: Chunk) -> tuple[tuple[int, int | None, int, int, int, int], ...]:
    """The chunk's segments as the JVM takes them: file, first line, lines, first chunk line,
    first byte in the file and first byte in the chunk (the line's origin is its byte offset in
    its file: docs/ONLINE.md, "Bucket files")."""
    out, at = [], 0
    for s in chunk.segments:
        out.append((s.file_seq, s.first_line, s.lines, s.chunk_line, s.start, at))
        at += s.end - s.start
    return tuple(out)


def bucket_chunk(spark, config: Config, chunk: Chunk, bucket_map: BucketMap,
                 bucket_dir: str, claims: tuple[dict | None, ...] | None = None) -> DistResult:
    """Run dist_ch on one chunk, one Spark task per slice, bucketing by *bucket_map* into
    *bucket_dir* (a path of the configured HDFS); with *claims* (per segment, see
    ``loaders.early.segment_claims``), checking its lines against them."""
    jobs.job_group(spark, f"dist_ch-{chunk.chunk_no}", f"dist_ch chunk {chunk.chunk_no}")
    report = jobs.dist_ch(spark, jobs.DistChRequest(
        chunk_uri=f"{config.hdfs.uri}{chunk.path}", slices=tuple(chunk.slices),
        segments=_segments(chunk),
        bucket_map=bucket_map, bucket_dir=f"{config.hdfs.uri}{bucket_dir}",
        chunk_no=chunk.chunk_no, max_line_bytes=config.loading.max_line_bytes, claims=claims))
    return _chunk_result(chunk, report, bucket_dir, config.loading.max_line_bytes)
