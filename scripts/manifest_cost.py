"""What manifests cost (docs/LOADING.md, "The manifest"): their size, the speed of building
them, and the cost of keeping the answerable keys as a load lands.

    python scripts/manifest_cost.py build DIR [--repeat N]
    python scripts/manifest_cost.py answerable [--files 10] [--pieces 200000] [--layout ranges]

``build``: for each file of DIR (as a local source lists it), ``build_manifest`` of its bytes
(wall and CPU seconds, MB/s; the file read once before, so the page cache holds it), the
manifest's points and JSON bytes (as index.json holds it); then the totals and the JSON bytes
per GB of input. ``answerable``: synthetic pieces of a dump of ``--files`` sorted files
(``ranges``: file k holds its own id1 range; ``days``: every file spans every id1), then
``Answerability`` fed the pieces' bytes in the copy's order, three ways: one range per piece,
one per 64 MiB slice, and one per piece in random order; the seconds per ``add`` and per
``answerable()`` asked after every add, and of ``answerable_bytes()`` (CPU seconds).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from debl.keys.keyspace import Answerability  # noqa: E402
from debl.keys.manifest import Piece  # noqa: E402
from debl.keys.manifest_build import manifest_of_file  # noqa: E402
from loaders.source import LocalSource  # noqa: E402


def build(directory: Path, repeat: int) -> None:
    total_bytes = total_json = total_points = 0
    total_wall = total_cpu = 0.0
    for f in LocalSource(directory).list():
        path = directory / f.name
        path.read_bytes()  # into the page cache: the build's own speed, not the disk's
        best: tuple[float, float] = (0.0, float("inf"))
        for _ in range(repeat):
            wall, cpu = time.perf_counter(), time.process_time()
            manifest = manifest_of_file(path)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            best = (wall, cpu) if cpu < best[1] else best
        size = len(json.dumps(manifest.to_json(), separators=(",", ":")))
        print(f"{f.name}: {f.size / 1e6:9.1f} MB, {len(manifest.offsets):6} points, JSON "
              f"{size:8,} B, sorted {manifest.sorted}; wall {best[0]:.2f} s, CPU {best[1]:.2f} s "
              f"({f.size / 1e6 / best[1]:.0f} MB/s of CPU)")
        total_bytes += f.size
        total_json += size
        total_points += len(manifest.offsets)
        total_wall += best[0]
        total_cpu += best[1]
    print(f"total: {total_bytes / 1e6:.1f} MB, {total_points} points, JSON {total_json:,} B "
          f"({total_json / (total_bytes / 1e9):,.0f} B per GB); wall {total_wall:.1f} s "
          f"({total_bytes / 1e6 / total_wall:.0f} MB/s), CPU {total_cpu:.1f} s "
          f"({total_bytes / 1e6 / total_cpu:.0f} MB/s)")


def synthetic(files: int, count: int, layout: str) -> list[Piece]:
    """Pieces of *files* sorted files of 64 KiB pieces, *count* in all."""
    per = count // files
    pieces = []
    for k in range(files):
        for i in range(per):
            if layout == "ranges":
                lo = (k * per + i) * 100
            else:  # every file spans every id1, its points where they fall
                lo = i * 100 + k * 7
            pieces.append(Piece(k, i << 16, (i + 1) << 16, lo, lo + 100))
    return pieces


def feed(pieces: list[Piece], ranges: list[tuple[int, int, int]], label: str) -> None:
    """Times are CPU seconds of this (single-threaded) process: a busy machine stretches
    wall times, not these."""
    clock = time.process_time
    started = clock()
    state = Answerability(pieces)
    built = clock() - started
    add = ask = 0.0
    for r in ranges:
        t = clock()
        state.add(*r)
        t2 = clock()
        state.answerable()
        add += t2 - t
        ask += clock() - t2
    t = clock()
    state.answerable_bytes()
    nbytes = clock() - t
    assert state.answerable_bytes() == state.total_bytes()
    print(f"{label}: {len(pieces)} pieces, built in {built:.2f} s; {len(ranges)} adds: "
          f"{add / len(ranges) * 1e6:.1f} us per add, {ask / len(ranges) * 1e6:.1f} us per "
          f"answerable() after it; answerable_bytes() {nbytes * 1e3:.1f} ms")


def answerable(files: int, count: int, layout: str) -> None:
    pieces = synthetic(files, count, layout)
    per_piece = [(p.file_seq, p.start, p.end) for p in pieces]
    feed(pieces, per_piece, f"{layout}, a range per piece, in order")
    slices = []
    for k in range(files):
        end = max(p.end for p in pieces if p.file_seq == k)
        slices += [(k, a, min(a + (64 << 20), end)) for a in range(0, end, 64 << 20)]
    feed(pieces, slices, f"{layout}, a range per 64 MiB slice")
    random.Random(1).shuffle(per_piece)
    feed(pieces, per_piece, f"{layout}, a range per piece, in random order")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    b = sub.add_parser("build")
    b.add_argument("directory", type=Path)
    b.add_argument("--repeat", type=int, default=1)
    a = sub.add_parser("answerable")
    a.add_argument("--files", type=int, default=10)
    a.add_argument("--pieces", type=int, default=200_000)
    a.add_argument("--layout", choices=("ranges", "days"), default="ranges")
    args = parser.parse_args()
    if args.what == "build":
        build(args.directory, args.repeat)
    else:
        answerable(args.files, args.pieces, args.layout)


if __name__ == "__main__":
    main()
