"""Split points by sampling: a load's bucket map, drawn from its cold files before the copy.

The id space is cut so that buckets hold about ``loading.bucket_target_bytes`` each, whatever the
ids look like (dense, sparse, clustered) and however the input is laid out (a range dump: each file
one contiguous id1 range; a change log: each file all ids), as TeraSort samples its input before
it sorts (docs/LOADING.md, "Bucket boundaries"):

1. **Reads.** Every cold file is cut into ``k`` equal strata, ``k`` from the file's share of
   the cold bytes (``loading.sample_reads_per_bucket`` per ``loading.bucket_target_bytes``); one
   ranged read of ``loading.sample_bytes`` falls in each stratum, at a phase that differs from file
   to file (so that files with the same id order, as in a change log, are not all read at the same
   ids). A file smaller than one read is read whole. A file's reads are asked together
   (``Source.read_ranges``: over HTTP up to 128 ranges a request, one ``multipart/byteranges``
   answer), a few files at once: a request each cost a round trip and, beside the hot path's
   busy threads, a wait for the interpreter lock per request (docs/LOADING.md, "Bucket
   boundaries").
2. **Weights.** The complete lines of a read (the partial first and last lines are dropped; the
   read starts one byte early to see whether its first line starts at its offset) are parsed with
   ``debl.format.link.parse_line``; bad lines do not count. The read stands for its stratum's bytes,
   shared among its lines by their length: each sampled id1 carries the bytes it stands for.
3. **Cuts.** The number of buckets is the cold weight over the target, rounded up. An id is
   never cut, so one bucket holds the heaviest id whole; with
   ``loading.bucket_target_covers_heaviest`` (the default) the target is at least that id's weight,
   so buckets stay about even (LinkBench's heaviest id alone outweighs the default target:
   docs/LOADING.md, "Bucket boundaries"). Over the id1s in order, buckets are filled greedily up to
   a limit, an id heavier than the limit alone in its bucket; the limit is the smallest (found by
   bisection) with which that many buckets hold everything: no such cut has a heavier bucket of
   several ids, and a heavy id ends up in a bucket of its own instead of doubling its neighbour.

Pitfalls:

- Within a sorted file a read's lines are neighbours: the file is resolved to its strata only.
  Buckets are therefore about ``loading.sample_reads_per_bucket`` strata wide per file; a stratum's
  error is at most its own bytes.
- The map is decided once, before the first chunk, and recorded with the load: a resumed load
  uses the recorded map, never a new sample (its bucketed chunks were cut by the old one).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from debl.format.bucket_map import BucketMap
from debl.config import Config
from debl.format.line_block import LINE
from debl.keys.manifest import pieces
from debl.format.link import ParseError, parse_line
from loaders.http_client import MAX_RANGES
from loaders.source import Source, SourceFile

READ_THREADS = 8  # batches of reads in flight: each is a request (a round trip) over HTTP
_PHASE = (math.sqrt(5) - 1) / 2  # the golden ratio's fraction: file phases spread evenly


@dataclass(frozen=True)
class Read:
    """One ranged read: bytes ``[offset, offset + length)`` of ``name``, standing for
    ``stands_for`` bytes of the file; ``at_eof`` when it reaches the end of the file."""

    name: str
    offset: int
    length: int
    stands_for: float
    at_eof: bool


def plan_reads(files: Iterable[SourceFile], target_bytes: int, reads_per_bucket: int,
               sample_bytes: int) -> list[Read]:
    """The ranged reads of a sample of *files* (see the module's step 1)."""
    reads = []
    for seq, f in enumerate(files):
        if f.size <= 0:
            continue
        k = _strata(f.size, target_bytes, reads_per_bucket)
        if f.size <= sample_bytes or k * sample_bytes >= f.size:
            reads.append(Read(f.name, 0, f.size, float(f.size), True))
            continue
        stratum = f.size / k
        phase = ((seq + 1) * _PHASE) % 1.0
        for i in range(k):
            offset = min(int((i + phase) * stratum), f.size - sample_bytes)
            reads.append(Read(f.name, offset, sample_bytes, stratum,
                              offset + sample_bytes >= f.size))
    return reads


def weighted_ids(block: bytes, read: Read) -> list[tuple[int, float]]:
    """``(id1, bytes it stands for)`` of each complete valid line of *block*, which holds the
    read's bytes preceded by the byte before ``read.offset`` when the offset is not 0."""
    if read.offset > 0:  # drop the line the read starts inside (none if the byte before is \n)
        block = block[block.find(b"\n") + 1:] if b"\n" in block else b""
    if not read.at_eof:  # drop the line the read ends inside
        block = block[:block.rfind(b"\n") + 1]
    ids, lengths = _ids_and_lengths(block)
    total = sum(lengths)
    return [(id1, read.stands_for * n / total) for id1, n in zip(ids, lengths)]


_WELL_FORMED = re.compile(rb"(?:" + LINE + rb")*")


def _ids_and_lengths(block: bytes) -> tuple[list[int], list[int]]:
    """The id1 and length (line end included) of each valid line of *block* (whole lines; the
    last may lack its newline at the end of a file). A block whose lines all take
    ``parse_line``'s fast path (``debl.format.line_block.LINE``, checked at C speed) has its id1s
    read straight off, much faster (docs/LOADING.md, "What the sample costs"); any other is
    parsed line by line, bad lines left out."""
    whole = block if block.endswith(b"\n") or not block else block + b"\n"
    if _WELL_FORMED.fullmatch(whole) is not None:
        lines = whole.split(b"\n")[:-1]
        lengths = [len(line) + 1 for line in lines]
        if lines and whole is not block:
            lengths[-1] -= 1  # the newline added above is not the file's
        return [int(line[:line.index(b"\t")]) for line in lines], lengths
    ids, lengths = [], []
    for line in block.splitlines(keepends=True):
        try:
            ids.append(parse_line(line).id1)
        except ParseError:
            continue
        lengths.append(len(line))
    return ids, lengths


def split_points(weights: Iterable[tuple[int, float]], target_bytes: int,
                 covers_heaviest: bool = True) -> list[int]:
    """The split points (first id1 of every bucket but the first) that cut *weights*
    (``(id1, bytes)``, an id1 may repeat) into buckets of about *target_bytes*, raised to the
    heaviest id's weight with *covers_heaviest* (module step 3)."""
    per_id: dict[int, float] = {}
    for id1, w in weights:
        per_id[id1] = per_id.get(id1, 0.0) + w
    if not per_id:
        return []
    ids = np.array(sorted(per_id), dtype=np.int64)
    sizes = np.array([per_id[i] for i in ids.tolist()], dtype=np.float64)
    total, heaviest = float(sizes.sum()), float(sizes.max())
    target = max(float(target_bytes), heaviest) if covers_heaviest else float(target_bytes)
    # At least one: a cold input far below the target (1e-9 of it) once made this 0 and the
    # limit below a division by zero. The 1e-9 keeps an exact multiple from an extra bucket.
    buckets = max(1, math.ceil(total / target - 1e-9))
    # The smallest limit whose greedy cut needs at most `buckets` buckets. Past total/buckets +
    # heaviest every closed bucket outweighs total/buckets, so that limit always fits.
    lo, hi = total / buckets, total / buckets + heaviest
    best = _greedy(sizes, hi)
    while hi - lo > 1e-6 * hi:
        mid = (lo + hi) / 2
        cut = _greedy(sizes, mid)
        if len(cut) < buckets:
            hi, best = mid, cut
        else:
            lo = mid
    return ids[best].tolist()


def _greedy(sizes: np.ndarray, limit: float) -> list[int]:
    """Indexes where a bucket starts when each bucket takes ids in order while it stays within
    *limit* (an id heavier than the limit alone)."""
    before = np.concatenate(([0.0], np.cumsum(sizes)))  # weight of the ids before index i
    starts: list[int] = []
    i = 0
    while True:
        # The first id that would take the bucket from i past the limit starts the next one.
        j = max(int(np.searchsorted(before, before[i] + limit * (1 + 1e-12), "right")) - 1,
                i + 1)
        if j >= len(sizes):
            return starts
        starts.append(j)
        i = j


def manifest_weights(f: SourceFile, strata: int) -> list[tuple[int, float]] | None:
    """The weights a sorted file's manifest gives without a read: each piece's bytes to the id1
    it starts with; None (the file is sampled) without such a manifest or when its pieces are
    fewer than the sample's *strata* of the file: coarser than the sample. A false manifest
    costs even buckets only, never a row: any split points give the same answers."""
    m = f.manifest
    if m is None or not m.sorted or not m.offsets or m.id1_lo is None or len(m.offsets) < strata:
        return None
    return [(p.lo, float(p.size)) for p in pieces(0, f.size, m)]


def _strata(size: int, target_bytes: int, reads_per_bucket: int) -> int:
    return max(1, math.ceil(reads_per_bucket * size / target_bytes))


def sample_bucket_map(config: Config, source: Source, cold: list[SourceFile]) -> BucketMap:
    """The bucket map of a load whose cold files are *cold*: split points from a sample, for
    buckets of about ``bucket_target_bytes``; a file whose manifest is sorted and fine enough
    is weighed from it (``manifest_weights``), without a read: the sample's bytes would
    cost the wire what the copy needs (docs/LOADING.md, "Bucket boundaries")."""
    target, per_bucket = config.loading.bucket_target_bytes, config.loading.sample_reads_per_bucket
    weighed = {f.name: manifest_weights(f, _strata(f.size, target, per_bucket)) for f in cold}
    known = [w for w in weighed.values() if w is not None]
    reads = plan_reads([f for f in cold if weighed[f.name] is None], target, per_bucket,
                       config.loading.sample_bytes)

    def sample(batch: list[Read]) -> list[tuple[int, float]]:
        # A read starts a byte early, to see whether its first line starts at its offset.
        blocks = source.read_ranges(batch[0].name, [
            (r.offset - 1, r.length + 1) if r.offset > 0 else (0, r.length) for r in batch])
        return [w for read, block in zip(batch, blocks) for w in weighted_ids(block, read)]

    with ThreadPoolExecutor(READ_THREADS, thread_name_prefix="sample") as pool:
        weights = [w for found in [*known, *pool.map(sample, _batches(reads))] for w in found]
    return BucketMap.from_splits(split_points(weights, target,
                                              config.loading.bucket_target_covers_heaviest))


def _batches(reads: list[Read]) -> list[list[Read]]:
    """The reads of each file, in runs of at most MAX_RANGES (one request each over HTTP)."""
    by_file: dict[str, list[Read]] = {}
    for read in reads:
        by_file.setdefault(read.name, []).append(read)
    return [same[k:k + MAX_RANGES] for same in by_file.values()
            for k in range(0, len(same), MAX_RANGES)]
