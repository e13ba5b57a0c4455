"""``generate``: a LinkBench-faithful data set as daily link files in one directory.

The run walks the id range in chunks (``debl.workload.synth``), formats each chunk's records in
one vectorized pass (``debl.workload.lineformat``) and appends each file's slice of the chunk to
that file. So every file is in (id1, id2) order, memory stays bounded by one chunk, and the output
is byte-identical for one spec (seed included) on any machine.

Files are written under hidden temporary names (``.links-000.tsv.part``) and renamed when the run
completes, then their mtimes are set to the end of their periods: a crashed run leaves no file
that looks complete. Pitfall: copying the files elsewhere must preserve mtimes (``cp -p``,
``rsync -t``), since DeBL splits hot from cold by mtime.
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
from debl.workload import idspace
from debl.workload.badlines import KINDS, BadLine, make_bad_line
from debl.workload.lineformat import encode_links
from debl.workload.spec import GenerateSpec
from debl.workload.synth import Records, SynthContext, synthesize

# Above this many files, files are opened per write instead of all at once (descriptor limits).
_MAX_OPEN_FILES = 256

Progress = Callable[[int, int], None]  # (ids done, ids in total)


@dataclass(frozen=True)
class FileSummary:
    """One generated file. ``end_ms`` is its mtime; its links' times are in [start_ms, end_ms)."""

    name: str
    lines: int
    bytes: int
    links: int
    updates: int
    hidden: int
    bad_lines: int
    start_ms: int
    end_ms: int


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


def _plan_bad_lines(spec: GenerateSpec, chunks: int) -> dict[tuple[int, int], list[tuple[float, str]]]:
    """(chunk, file) -> [(relative position in that chunk's slice of the file, kind), ...]."""
    rng = np.random.default_rng([spec.seed, 0xBAD, 0xBAD])
    plan: dict[tuple[int, int], list[tuple[float, str]]] = defaultdict(list)
    for i in range(spec.bad_lines):
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
        id1, t = ctx.spec.start_id, int(ctx.bounds[k])
    return make_bad_line(kind, id1, int(ctx.types[0]), t, rng)


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
    bad_lines: list[BadLine] = []

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
                # Good lines [first, last) of this chunk, with the planned bad lines in between.
                parts, cursor, written = [], first, int(lines[k])
                for rel, kind in bads:
                    at = min(first + int(rel * (last - first + 1)), last)
                    parts.append(memoryview(buf[byte_at[cursor]:byte_at[at]]))
                    written += at - cursor + 1
                    line, reason = _bad_line(ctx, rec, k, first, last, kind, bad_rng)
                    parts.append(line)
                    bad_lines.append(BadLine(names[k], written, kind, reason))
                    nbytes[k] += len(line)
                    cursor = at
                parts.append(memoryview(buf[byte_at[cursor]:byte_at[last]]))
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

    for k in range(spec.files):
        os.replace(outputs.tmp[k], outputs.final[k])
        end_ns = int(ctx.bounds[k + 1]) * 1_000_000
        os.utime(outputs.final[k], ns=(end_ns, end_ns))

    links_per_file = lines - updates - bad_per_file
    files = tuple(
        FileSummary(names[k], int(lines[k]), int(nbytes[k]), int(links_per_file[k]),
                    int(updates[k]), int(hidden[k]), int(bad_per_file[k]), int(ctx.bounds[k]),
                    int(ctx.bounds[k + 1]))
        for k in range(spec.files))
    bad_lines.sort(key=lambda b: (b.file, b.line_no))
    return GenerateSummary(
        out_dir=str(out.absolute()), spec=spec, links=int(links_per_file.sum()),
        updates=int(updates.sum()), hidden=int(hidden.sum()), lines=int(lines.sum()),
        bytes=int(nbytes.sum()), files=files, bad_lines=tuple(bad_lines),
        seconds=time.perf_counter() - started)
