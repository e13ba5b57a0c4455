"""``generate``: a LinkBench-faithful data set as link files in one directory, laid out as a
daily change log (``days``) or a table dump by key range (``ranges``; docs/WORKLOAD.md).

The run walks the id range in chunks (``debl.workload.synth``), formats each chunk's records in
one vectorized pass (``debl.workload.lineformat``) and appends each file's slice of the chunk to
that file. So every file is in (id1, id2) order, memory stays bounded by one chunk, and the output
is byte-identical for one spec (seed included) on any machine.

Files are written under hidden temporary names (``.links-000.tsv.part``) and renamed when the run
completes, then their mtimes are set: in ``days`` to the end of their periods, in ``ranges`` to
their newest line's time (the start of the period for a file without lines). A crashed run leaves
no file that looks complete. Pitfall: copying the files elsewhere must preserve mtimes
(``cp -p``, ``rsync -t``), since DeBL splits hot from cold by mtime.

Last, ``index.json`` is written beside the files: the HTTP listing's format, each file's entry
with its manifest (docs/LOADING.md, "The manifest"), made as the file is written from the
offsets and id1s of its good lines (an injected bad line is never a point and claims nothing).
It matches each file by size and mtime: a file changed later loses its manifest, not its load.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from debl.errors import ConfigError, SourceError
from debl.keys.manifest_build import ManifestBuilder
from debl.workload import idspace
from debl.workload.badlines import KINDS, BadLine, make_bad_line
from debl.workload.lineformat import encode_links
from debl.workload.spec import GenerateSpec
from debl.workload.synth import CHUNK_IDS, Records, SynthContext, synthesize
from loaders.listing import listing_entry, write_index

# Above this many files, files are opened per write instead of all at once (descriptor limits).
_MAX_OPEN_FILES = 256
INDEX = "index.json"  # the listing with every file's manifest, beside the files

Progress = Callable[[int, int], None]  # (ids done, ids in total)


@dataclass(frozen=True)
class FileSummary:
    """One generated file. ``end_ms`` is its mtime. In ``days`` its lines' times are in
    ``[start_ms, end_ms)``; in ``ranges`` in ``[start_ms, end_ms]`` (the mtime is the newest
    line's time). Its lines' id1s are in ``[id_lo, id_hi)`` (``days``: the whole id range)."""

    name: str
    lines: int
    bytes: int
    links: int
    updates: int
    hidden: int
    bad_lines: int
    start_ms: int
    end_ms: int
    id_lo: int
    id_hi: int


@dataclass(frozen=True)
class GenerateSummary:
    """What ``generate`` wrote. ``links`` counts distinct keys (first versions); ``updates`` the
    later versions (``hidden`` of them with visibility 0); ``lines = links + updates + bad``."""

    out_dir: str
    spec: GenerateSpec
    links: int
    updates: int
    hidden: int
    lines: int
    bytes: int
    files: tuple[FileSummary, ...]
    bad_lines: tuple[BadLine, ...]
    seconds: float

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _chunks_of_file(spec: GenerateSpec, k: int, chunks: int) -> tuple[int, int]:
    """The chunks ``[first, last]`` that hold ids of file ``k`` (``ranges``)."""
    lo, hi = spec.file_ids(k)
    first = min((lo - spec.start_id) // CHUNK_IDS, chunks - 1)
    return first, max(first, (hi - 1 - spec.start_id) // CHUNK_IDS)


def _plan_bad_lines(spec: GenerateSpec,
                    chunks: int) -> dict[tuple[int, int], list[tuple[float, str]]]:
    """(chunk, file) -> [(relative position in that chunk's slice of the file, kind), ...].
    In ``ranges`` the chunk is one that holds ids of the file, so a bad line sits among the
    lines of its file's ids."""
    rng = np.random.default_rng([spec.seed, 0xBAD, 0xBAD])
    plan: dict[tuple[int, int], list[tuple[float, str]]] = defaultdict(list)
    for i in range(spec.bad_lines):
        if spec.layout == "ranges":
            k = int(rng.integers(spec.files))
            first, last = _chunks_of_file(spec, k, chunks)
            key = (int(rng.integers(first, last + 1)), k)
        else:
            key = (int(rng.integers(chunks)), int(rng.integers(spec.files)))
        plan[key].append((float(rng.random()), KINDS[i % len(KINDS)]))
    for items in plan.values():
        items.sort()
    return plan


class _Outputs:
    """The temporary files being written, one per period. Writes are large slices of a chunk:
    a BufferedWriter passes them straight through (and, unlike a raw file, loops on short
    writes), so its small default buffer costs nothing."""

    def __init__(self, out: Path, names: list[str]) -> None:
        self.tmp = [out / f".{name}.part" for name in names]
        self.final = [out / name for name in names]
        self._keep_open = len(names) <= _MAX_OPEN_FILES
        self._handles = [open(p, "wb") for p in self.tmp] if self._keep_open else []
        if not self._keep_open:
            for p in self.tmp:
                p.write_bytes(b"")

    def write(self, k: int, parts: list) -> None:
        if self._keep_open:
            for part in parts:
                self._handles[k].write(part)
        else:
            with open(self.tmp[k], "ab") as f:
                for part in parts:
                    f.write(part)

    def close(self) -> None:
        for h in self._handles:
            h.close()
        self._handles = []

    def discard(self) -> None:
        self.close()
        for p in self.tmp:
            p.unlink(missing_ok=True)


def _bad_line(ctx: SynthContext, rec: Records, k: int, first: int, last: int, kind: str,
              rng: np.random.Generator) -> tuple[bytes, str]:
    """A bad line of ``kind`` for file ``k`` that imitates one of its links (id1, time)."""
    if last > first:
        pick = int(rng.integers(first, last))
        id1, t = int(rec.id1[pick]), int(rec.time[pick])
    else:
        id1, t = ctx.spec.file_ids(k)[0], int(ctx.bounds[k])
    return make_bad_line(kind, id1, int(ctx.types[0]), t, rng)


def _good_lines(builder: ManifestBuilder, rec: Records, byte_at: np.ndarray, first: int,
                last: int, pos: int) -> int:
    """Feed good lines [first, last) of the chunk, the first at file offset *pos*, to the
    file's manifest; the offset after them."""
    if last > first:
        builder.add(byte_at[first:last] - byte_at[first] + pos, rec.id1[first:last])
    return pos + int(byte_at[last] - byte_at[first])


def _prepare(out: Path, overwrite: bool) -> None:
    if out.exists() and not out.is_dir():
        raise SourceError(f"{out} exists and is not a directory")
    out.mkdir(parents=True, exist_ok=True)
    existing = sorted(out.glob("links-*.tsv"))
    if existing and not overwrite:
        raise ConfigError(f"{out} already holds {len(existing)} link files "
                          f"(e.g. {existing[0].name}); pass --overwrite to replace them")
    for path in existing:
        path.unlink()
    if existing:
        (out / INDEX).unlink(missing_ok=True)  # it described the files just deleted


def _mtimes_ms(spec: GenerateSpec, ctx: SynthContext, newest: np.ndarray) -> np.ndarray:
    """``days``: the end of each period. ``ranges``: each file's newest line's time, so that the
    newest files are those written last, as a dump's files are; a file without lines gets its
    period's start, still after every earlier file's lines and before every later one's."""
    if spec.layout == "days":
        return ctx.bounds[1:]
    return np.where(newest >= 0, newest, ctx.bounds[:-1])


def generate(out_dir: Path | str, spec: GenerateSpec, progress: Progress | None = None,
             overwrite: bool = False) -> GenerateSummary:
    """Write the data set of ``spec`` into ``out_dir`` (created if missing).

    Refuses a directory that already holds ``links-*.tsv`` files unless ``overwrite`` (which
    deletes them first; other files are left alone). ``progress(ids_done, ids_total)`` is called
    after each chunk.
    """
    started = time.perf_counter()
    out = Path(out_dir)
    _prepare(out, overwrite)
    ctx = SynthContext.of(spec)
    names = [spec.file_name(k) for k in range(spec.files)]
    bad_plan = _plan_bad_lines(spec, ctx.chunks)
    bad_rng = np.random.default_rng([spec.seed, 0xBAD, 0xBAD + 1])

    lines = np.zeros(spec.files, dtype=np.int64)
    nbytes = np.zeros(spec.files, dtype=np.int64)
    updates = np.zeros(spec.files, dtype=np.int64)
    hidden = np.zeros(spec.files, dtype=np.int64)
    bad_per_file = np.zeros(spec.files, dtype=np.int64)
    newest = np.full(spec.files, -1, dtype=np.int64)  # each file's newest line's time (ms)
    bad_lines: list[BadLine] = []
    builders = [ManifestBuilder() for _ in range(spec.files)]

    outputs = _Outputs(out, names)
    try:
        for chunk in range(ctx.chunks):
            rec = idspace.place(synthesize(ctx, chunk), spec)
            buf, ends = encode_links(rec.id1, rec.link_type, rec.id2, rec.visibility, rec.sizes,
                                     rec.data, rec.time, rec.version)
            line_bounds = np.concatenate(([0], np.cumsum(rec.file_counts)))
            byte_at = np.concatenate(([0], ends))  # byte_at[i]: where line i starts
            for k in range(spec.files):
                first, last = int(line_bounds[k]), int(line_bounds[k + 1])
                bads = bad_plan.get((chunk, k), ())
                if first == last and not bads:
                    continue
                if last > first:
                    newest[k] = max(newest[k], int(rec.time[first:last].max()))
                # Good lines [first, last) of this chunk, with the planned bad lines in between.
                parts: list[bytes | memoryview] = []
                cursor, written = first, int(lines[k])
                pos = int(nbytes[k])  # the file offset of line `cursor`
                for rel, kind in bads:
                    at = min(first + int(rel * (last - first + 1)), last)
                    parts.append(buf[byte_at[cursor]:byte_at[at]].data)
                    pos = _good_lines(builders[k], rec, byte_at, cursor, at, pos)
                    written += at - cursor + 1
                    line, reason = _bad_line(ctx, rec, k, first, last, kind, bad_rng)
                    parts.append(line)
                    bad_lines.append(BadLine(names[k], written, kind, reason))
                    nbytes[k] += len(line)
                    pos += len(line)
                    cursor = at
                parts.append(buf[byte_at[cursor]:byte_at[last]].data)
                _good_lines(builders[k], rec, byte_at, cursor, last, pos)
                outputs.write(k, parts)
                lines[k] = written + (last - cursor)
                nbytes[k] += int(byte_at[last] - byte_at[first])
                bad_per_file[k] += len(bads)
            updates += rec.updates
            hidden += rec.hidden
            if progress is not None:
                progress(ctx.chunk_ids(chunk)[1] - spec.start_id, spec.n_ids)
        outputs.close()
    except BaseException:
        outputs.discard()
        raise

    mtimes = _mtimes_ms(spec, ctx, newest)
    for k in range(spec.files):
        os.replace(outputs.tmp[k], outputs.final[k])
        end_ns = int(mtimes[k]) * 1_000_000
        os.utime(outputs.final[k], ns=(end_ns, end_ns))
    # index.json's mtime: the same on every run of one spec, like the files', and older than
    # every file's, so that it never passes for the newest file in a directory sorted by mtime.
    write_index(out, [listing_entry(path, builders[k].finish(int(nbytes[k]), int(lines[k])))
                      for k, path in enumerate(outputs.final)],
                (int(ctx.bounds[0]) - 1) * 1_000_000, INDEX)

    links_per_file = lines - updates - bad_per_file
    files = tuple(
        FileSummary(names[k], int(lines[k]), int(nbytes[k]), int(links_per_file[k]),
                    int(updates[k]), int(hidden[k]), int(bad_per_file[k]), int(ctx.bounds[k]),
                    int(mtimes[k]), *spec.file_ids(k))
        for k in range(spec.files))
    bad_lines.sort(key=lambda b: (b.file, b.line_no))
    return GenerateSummary(
        out_dir=str(out.absolute()), spec=spec, links=int(links_per_file.sum()),
        updates=int(updates.sum()), hidden=int(hidden.sum()), lines=int(lines.sum()),
        bytes=int(nbytes.sum()), files=files, bad_lines=tuple(bad_lines),
        seconds=time.perf_counter() - started)
