"""dist_ch in the loading process: a small chunk bucketed in Python, without a Spark job.

The early chunks of a load that answers before its copy ends, and every piece fetched on demand,
are small (a few KB to a few MB): a Spark job per chunk would cost more than the chunk itself,
and Spark may not even have started yet when the first chunk lands (docs/LOADING.md, "Answers
before the copy ends"). This module buckets such a chunk by the same rules as dist_ch's JVM task
(``loaders.dist_ch``, ``debl.jobs.DistCh``), of which the Python definitions are the reference:
a line is valid when ``debl.format.link.parse_line`` accepts it, a bucket file is
``debl.format.bucket_file.encode`` of the bucket's lines (each the line's body, TAB file_seq, TAB
the line's byte offset in its file), its checksum ``debl.format.link.line_checksum`` summed mod
2^64, a line over ``max_line_bytes`` is refused by its length and first bytes. So a chunk bucketed
here and the same chunk bucketed by the JVM give the same bucket files byte for byte, the same index
rows and the same rejects (tests/test_local_dist_ch.py), one file per bucket (slice 0).

Pitfalls:

- The whole chunk is held in memory, with its bucket files: only for chunks up to a few MB
  (``LOCAL_MAX``); larger ones go to Spark.
- A segment copied out of its file's order (a piece fetched on demand) may not know the number
  of its first line: its rejects are named by ``pending_line`` until the load knows it
  (``loaders.rejects``).
"""

from __future__ import annotations

from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_incrementing

from debl.format.bucket_map import BucketMap
from debl.format.bucket_file import encode
from debl.catalog import BucketChunk
from debl.config import Config
from debl.errors import ServiceError
from debl.keys.manifest import Manifest, claim_violations
from debl.format.link import CHECKSUM_MOD, REJECT_PREFIX, ParseError, line_body, line_checksum, \
    parse_line, too_long
from debl.hdfs import HdfsClient
from debl.retry import retried
from loaders.chunker import Chunk, Segment, chunk_name
from loaders.dist_ch import DistResult, Reject
from loaders.rejects import pending_line

LOCAL_MAX = 8 << 20  # the largest chunk bucketed here (see the module's pitfalls)
_WRITERS = 4  # bucket files written side by side: each is a create and a rename in HDFS


class _Bucket:
    """One bucket's lines of the chunk, in input order, with its sums."""

    __slots__ = ("lines", "rows", "size", "checksum", "lo", "hi")

    def __init__(self) -> None:
        self.lines: list[bytes] = []
        self.rows = self.size = self.checksum = 0
        self.lo, self.hi = 1 << 63, -1

    def add(self, id1: int, line: bytes, checksum: int) -> None:
        self.lines.append(line)
        self.rows += 1
        self.size += len(line)
        self.checksum += checksum
        self.lo, self.hi = min(self.lo, id1), max(self.hi, id1)


def bucket_locally(config: Config, hdfs: HdfsClient, chunk: Chunk, bucket_map: BucketMap,
                   bucket_dir: str, data: bytes | None = None,
                   manifests: dict[int, Manifest | None] | None = None,
                   sizes: dict[int, int] | None = None) -> DistResult:
    """Bucket *chunk* (its bytes *data*, else read back from HDFS) by *bucket_map* into
    *bucket_dir*, as ``loaders.dist_ch.bucket_chunk`` does with one slice; with *manifests*
    (and the files' *sizes*), checking each segment's lines against its file's manifest
    (``debl.keys.manifest.claim_violations``)."""
    if data is None:
        data = hdfs.read(chunk.path)
    limit = config.loading.max_line_bytes
    buckets: dict[int, _Bucket] = defaultdict(_Bucket)
    rejects: list[Reject] = []
    per_file: dict[int, tuple[int, int]] = {s.file_seq: (0, 0) for s in chunk.segments}
    violations = []
    at = 0
    for s in chunk.segments:
        rows = bad = 0
        valid: list[tuple[int, int]] = []  # (offset, id1) of each valid line, for the check
        size = s.end - s.start
        block = data[at:at + size]
        at += size
        start = 0
        for index, line in enumerate(_lines(block)):
            offset, start = s.start + start, start + len(line)
            body = line_body(line)
            if len(body) > limit:
                bad += 1
                rejects.append(Reject(s.name, _line_no(s, index),
                                      str(too_long(len(body), limit)), body[:REJECT_PREFIX]))
                continue
            try:
                link = parse_line(body)
            except ParseError as exc:
                bad += 1
                rejects.append(Reject(s.name, _line_no(s, index), str(exc), body))
                continue
            rows += 1
            valid.append((offset, link.id1))
            buckets[bucket_map.bucket_of(link.id1)].add(
                link.id1, body + b"\t%d\t%d\n" % (s.file_seq, offset), line_checksum(body))
        old = per_file[s.file_seq]
        per_file[s.file_seq] = (old[0] + rows, old[1] + bad)
        manifest = manifests.get(s.file_seq) if manifests else None
        if manifest is not None and sizes is not None:  # (given together)
            found = claim_violations(s.file_seq, sizes[s.file_seq], manifest, s.start,
                                     min(s.end, sizes[s.file_seq]), valid)
            if found is not None:
                violations.append(found)
    name = chunk_name(chunk.chunk_no)
    with ThreadPoolExecutor(_WRITERS, thread_name_prefix="local-dist_ch") as pool:
        list(pool.map(lambda b: _write(hdfs, f"{bucket_dir}/{b}/{name}.0",
                                       encode(buckets[b].lines)), sorted(buckets)))
    parts = [BucketChunk(b, chunk.chunk_no, o.rows, o.size, o.checksum % CHECKSUM_MOD,
                         f"{bucket_dir}/{b}/{name}", o.lo, o.hi)
             for b, o in sorted(buckets.items())]
    return DistResult(chunk.chunk_no, parts, rejects, per_file, violations)


# A bucket file's write that failed (a busy DataNode drops the connection): written again
# whole after 0.2 s, then 0.4 s; the third failure is raised (docs/RELIABILITY.md, "Retries").
RETRY_BUCKET_WRITE = Retrying(retry=retry_if_exception_type(ServiceError),
                              stop=stop_after_attempt(3), wait=wait_incrementing(0.2, 0.2),
                              reraise=True)


def _write(hdfs: HdfsClient, path: str, data: bytes) -> None:
    """Write one bucket file (a temporary name renamed over *path*), again whole if it failed
    (``RETRY_BUCKET_WRITE``)."""
    retried(RETRY_BUCKET_WRITE, hdfs.write_atomic, path, data)


def _lines(block: bytes) -> list[bytes]:
    """The lines of a segment's bytes, each with its newline (a segment ends at a line end)."""
    lines = block.split(b"\n")
    last = lines.pop()
    out = [line + b"\n" for line in lines]
    if last:  # cannot happen for a chunk the copier cut; kept whole rather than lost
        out.append(last)
    return out


def _line_no(segment: Segment, index: int) -> int | str:
    """The line number of line *index* (0-based) of *segment*, or its pending name when the
    segment does not know its first line yet."""
    if segment.first_line is None:
        return pending_line(segment.start, index)
    return segment.first_line + index
