"""``debl source dump``: the source's link table as a day's files, from one consistent snapshot
while writes go on, with manifests and ``index.json`` carrying the snapshot's position (docs/
RUNTIME.md, "The source database"; docs/LOADING.md, "The dump's position").

The files are ``debl generate``'s: ``links-NNN.tsv``, one link a line (docs/DESIGN.md section 3,
written as ``debl.format.link.Link.to_line`` does), each file in id1 order, so every manifest is a
sorted one and its claims tight. Two layouts:

- ``ranges``: file k holds a contiguous id1 range, about an N-th of the rows (an id1 is never
  cut between files); its mtime is its newest line's time, as ``debl generate``'s, so the
  newest files are the hot ones of ``debl load``'s split.
- ``days``: the change-log shape: the snapshot's times, from the least to the greatest, cut in N
  periods of equal length, file k holding the rows of period k; its mtime is its period's end.

A row is written once (the table has one per key), so the merge rule has nothing to choose
within a dump. Files are written under hidden names (``.links-000.tsv.part``) and renamed at
the end, then ``index.json`` is written: a dump stopped on the way leaves no file that looks
complete. Memory is one fetch of rows (``ROWS_PER_FETCH``) and a buffer per file.

Pitfall: the table's checks (``debl.store.source_db``) keep out what a line cannot hold; a row
that passes them anyway (a table made by hand without them) stops the dump with its key named,
rather than writing a line that would not read back as the row.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from debl.config import Config
from debl.errors import ConfigError, SourceError
from debl.keys.manifest_build import ManifestBuilder
from debl.format.link import MAX_DATA, MAX_ID
from debl.position import DumpPosition
from debl.store import source_db
from debl.store.source_snapshot import Extent, Snapshot
from loaders.listing import listing_entry, write_index
from loaders.source_index import INDEX

LAYOUTS = ("ranges", "days")
_LINE = b"%d\t%d\t%d\t%d\t%s\t%d\t%d\n"  # debl.format.link.Link.to_line's
_MAX_MTIME_MS = 9_000_000_000_000  # the year 2255
_WRITE_BUFFER = 1 << 20


@dataclass(frozen=True)
class DumpedFile:
    name: str
    rows: int
    bytes: int
    id1_lo: int | None
    id1_hi: int | None
    mtime_ms: int


@dataclass(frozen=True)
class DumpSummary:
    out_dir: str
    layout: str
    position: DumpPosition
    rows: int
    bytes: int
    files: tuple[DumpedFile, ...]
    seconds: float

    def as_dict(self) -> dict:
        return asdict(self)


class _File:
    """One file being written: its hidden name, its manifest, its counts."""

    def __init__(self, out: Path, name: str):
        self.final = out / name
        self.tmp = out / f".{name}.part"
        self.stream = open(self.tmp, "wb", buffering=_WRITE_BUFFER)
        self.builder = ManifestBuilder()
        self.rows = self.bytes = 0
        self.newest: int | None = None
        self.lo: int | None = None
        self.hi: int | None = None

    def write(self, rows: list[tuple]) -> None:
        lines = [_LINE % row for row in rows]
        sizes = np.fromiter(map(len, lines), dtype=np.int64, count=len(lines))
        starts = self.bytes + np.cumsum(sizes) - sizes
        self.builder.add(starts, np.fromiter((r[0] for r in rows), dtype=np.uint64,
                                             count=len(rows)))
        self.stream.write(b"".join(lines))
        self.bytes += int(sizes.sum())
        self.rows += len(rows)
        newest = max(r[5] for r in rows)
        self.newest = newest if self.newest is None else max(self.newest, newest)
        self.lo = rows[0][0] if self.lo is None else self.lo
        self.hi = rows[-1][0]


def dump_source(config: Config, out: Path | str, files: int = 10, layout: str = "ranges",
                overwrite: bool = False,
                progress: Callable[[int, int], None] = lambda done, total: None) -> DumpSummary:
    """Dump the source's link table (``source_db.table``) into the directory *out* as *files*
    files of *layout*; returns what was written, with the snapshot's position.
    ``progress(rows done, rows in all)`` after each fetch.

    Refuses (ConfigError) a directory that holds link files or an ``index.json`` unless
    *overwrite*, which deletes them first; SourceError for a source whose log is not one GTID
    domain, or a row no line can hold."""
    if layout not in LAYOUTS:
        raise ConfigError(f"layout {layout!r}: choose one of {', '.join(LAYOUTS)}")
    if files < 1:
        raise ConfigError(f"a dump has at least one file, not {files}")
    started = time.monotonic()
    out = Path(out)
    _prepare(out, overwrite)
    table = config.source_db.table
    conn = source_db.connect(config)
    try:
        with conn.cursor() as cur, source_db.errors(config, f"the dump of `{table}`"):
            source_id = source_db.source_id(cur, table)  # a write: before the snapshot
    finally:
        conn.close()
    width = max(3, len(str(files - 1)))
    writing = [_File(out, f"links-{k:0{width}d}.tsv") for k in range(files)]
    try:
        with Snapshot(config) as snapshot:
            position = DumpPosition(snapshot.gtid, source_id)
            extent = snapshot.extent()
            split = (_RangeSplit(extent.rows, files) if layout == "ranges"
                     else _DaySplit(extent, files))
            done = 0
            for batch in snapshot.rows():
                _check(batch, table)
                for k, part in split.parts(batch):
                    writing[k].write(part)
                done += len(batch)
                progress(done, extent.rows)
        for f in writing:
            f.stream.close()
    except BaseException:
        for f in writing:
            f.stream.close()
            f.tmp.unlink(missing_ok=True)
        raise
    now_ms = int(time.time() * 1000)
    # a file's time past year 2255 would overflow its timestamp in ns
    mtimes = [min(max(ms, 1), _MAX_MTIME_MS)
              for ms in split.mtimes_ms([f.newest for f in writing], now_ms)]
    entries = []
    for f, mtime_ms in zip(writing, mtimes):
        os.replace(f.tmp, f.final)
        os.utime(f.final, ns=(mtime_ms * 1_000_000,) * 2)
        entries.append(listing_entry(f.final, f.builder.finish(f.bytes, f.rows), position))
    write_index(out, entries, (min(mtimes) - 1) * 1_000_000, INDEX)
    return DumpSummary(str(out.absolute()), layout, position, sum(f.rows for f in writing),
                       sum(f.bytes for f in writing),
                       tuple(DumpedFile(f.final.name, f.rows, f.bytes, f.lo, f.hi, m)
                             for f, m in zip(writing, mtimes)),
                       time.monotonic() - started)


def _prepare(out: Path, overwrite: bool) -> None:
    if out.exists() and not out.is_dir():
        raise ConfigError(f"{out} exists and is not a directory")
    out.mkdir(parents=True, exist_ok=True)
    existing = sorted([*out.glob("links-*.tsv"), *out.glob(INDEX)])
    if existing and not overwrite:
        raise ConfigError(f"{out} already holds a data set ({len(existing)} file(s), e.g. "
                          f"{existing[0].name}); pass --overwrite to replace it")
    for path in existing:
        path.unlink()


def _check(rows: list[tuple], table: str) -> None:
    """SourceError naming the first row no input line can hold (docs/DESIGN.md section 3)."""
    for row in rows:
        id1, link_type, id2, visibility, data, t, version = row
        if (visibility not in (0, 1) or len(data) > MAX_DATA or b"\t" in data or b"\n" in data
                or b"\r" in data or max(id1, link_type, id2, t, version) > MAX_ID):
            raise SourceError(
                f"the source's table `{table}` holds a row no input line can hold (key id1={id1} "
                f"link_type={link_type} id2={id2}: visibility {visibility}, data "
                f"{bytes(data)[:40]!r}, time {t}, version {version}; docs/DESIGN.md section 3): "
                "correct or delete it, and give the table the checks of `debl source db init` "
                "(docs/RUNTIME.md, \"The source database\")")


class _RangeSplit:
    """``ranges``: each file about an equal share of the rows not in an earlier file, cut only
    between id1s (a heavy id1, such as LinkBench's rank-0 id, fills its file past its share,
    and the files after it share the rest)."""

    def __init__(self, rows: int, files: int):
        self.rows, self.files = rows, files
        self.k = 0
        self.before = 0  # rows in the files before file k
        self.in_file = 0
        self.target = self._target()
        self.last_id1: int | None = None

    def _target(self) -> int:
        return max(1, -(-(self.rows - self.before) // (self.files - self.k)))

    def parts(self, rows: list[tuple]) -> list[tuple[int, list[tuple]]]:
        parts: list[tuple[int, list[tuple]]] = []
        start = 0
        for i, row in enumerate(rows):
            if (self.in_file >= self.target and row[0] != self.last_id1
                    and self.k < self.files - 1):
                if i > start:
                    parts.append((self.k, rows[start:i]))
                start, self.k, self.before = i, self.k + 1, self.before + self.in_file
                self.in_file, self.target = 0, self._target()
            self.in_file += 1
            self.last_id1 = row[0]
        if start < len(rows):
            parts.append((self.k, rows[start:]))
        return parts

    @staticmethod
    def mtimes_ms(newest: list[int | None], now_ms: int) -> list[int]:
        """Each file's newest line's time; a file without lines the one before it (or now):
        still not older than an earlier file."""
        found, last = [], None
        for t in newest:
            last = t if t is not None else last
            found.append(last if last is not None else now_ms)
        return found


class _DaySplit:
    """``days``: file k holds the times of period k of ``[min_time, max_time]`` cut in
    ``files`` periods of equal length."""

    def __init__(self, extent: Extent, files: int):
        # (no rows: MIN and MAX are NULL)
        lo = extent.min_time if extent.min_time is not None else 0
        hi = extent.max_time if extent.max_time is not None else 0
        span = hi - lo + 1
        # bounds[k]: period k's first time; bounds[files]: one past the last time
        self.bounds = [lo + span * k // files for k in range(files + 1)]
        self.empty = not extent.rows

    def parts(self, rows: list[tuple]) -> list[tuple[int, list[tuple]]]:
        times = np.fromiter((r[5] for r in rows), dtype=np.uint64, count=len(rows))
        period = np.searchsorted(np.array(self.bounds[1:-1], dtype=np.uint64), times,
                                 side="right")
        found = []
        for k in np.unique(period).tolist():
            found.append((k, [rows[i] for i in np.flatnonzero(period == k).tolist()]))
        return found

    def mtimes_ms(self, newest: list[int | None], now_ms: int) -> list[int]:
        """Each period's end (its last time + 1); all now for an empty table."""
        return [now_ms] * len(newest) if self.empty else self.bounds[1:]
