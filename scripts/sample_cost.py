"""What the split-point sample costs and how even its buckets are (docs/LOADING.md, "Bucket
boundaries").

For each input directory: the sample of all its files (as a load with every file cold),
drawn from the directory itself and, with ``--url``, over HTTP from a ``debl source serve`` of
it; its wall time, reads, bytes and HTTP requests; then its bucket map applied to the raw files: the
number of buckets, largest / mean and smallest / mean bucket bytes (input bytes, without the origin
fields dist_ch adds). Run it alone on the machine: the times are wall-clock.

    python scripts/sample_cost.py DIR [DIR ...] [--url URL ...] [--repeat N] [--busy]

``--url`` is given once per DIR, in the same order. The config is the usual one (debl.toml,
``DEBL_*``): ``loading.bucket_target_bytes``, ``loading.sample_reads_per_bucket``,
``loading.sample_bytes``.
"""

from __future__ import annotations

import argparse
import http.client
import sys
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from debl.format.bucket_map import BucketMap  # noqa: E402
from debl.config import load_config  # noqa: E402
from loaders.sampling import sample_bucket_map  # noqa: E402
from loaders.source import Source, open_source  # noqa: E402


class Counted:
    """A source that counts the reads asked (ranges) and their bytes, and the HTTP requests
    the process sent meanwhile (``http.client``'s, whoever sent them)."""

    requests = 0

    def __init__(self, inner: Source):
        self.inner, self.reads, self.bytes = inner, 0, 0

    def read_ranges(self, name: str, ranges: list[tuple[int, int]]) -> list[bytes]:
        blocks = self.inner.read_ranges(name, ranges)
        self.reads += len(ranges)
        self.bytes += sum(map(len, blocks))
        return blocks

    def read_range(self, name: str, offset: int, length: int) -> bytes:
        return self.read_ranges(name, [(offset, length)])[0]

    def __getattr__(self, name: str):
        return getattr(self.inner, name)


_send = http.client.HTTPConnection.request


def _counted_request(self, *args, **kwargs):
    Counted.requests += 1
    return _send(self, *args, **kwargs)


http.client.HTTPConnection.request = _counted_request  # type: ignore[method-assign]  # the profile patches it


def bucket_bytes(directory: Path, bucket_map: BucketMap) -> np.ndarray:
    """Input bytes per bucket of *bucket_map* over every line of the files of *directory*."""
    splits = np.array(bucket_map.splits, dtype=np.uint64)
    sizes = np.zeros(bucket_map.count, dtype=np.float64)
    for path in sorted(p for p in directory.iterdir()
                       if p.is_file() and not p.name.startswith(".")
                       and p.name != "index.json"):  # as a source lists them
        raw = np.fromfile(path, dtype=np.uint8)
        ends = np.flatnonzero(raw == ord("\n"))
        starts = np.concatenate(([0], ends[:-1] + 1))
        tabs = np.flatnonzero(raw == ord("\t"))
        first_tab = tabs[np.searchsorted(tabs, starts)]
        id1 = np.zeros(len(starts), dtype=np.uint64)
        for k in range(int((first_tab - starts).max())):  # one digit column at a time
            live = starts + k < first_tab
            digit = raw[np.where(live, starts + k, 0)].astype(np.uint64) - np.uint64(48)
            id1 = np.where(live, id1 * np.uint64(10) + digit, id1)
        buckets = np.searchsorted(splits, id1, side="right")
        sizes += np.bincount(buckets, weights=ends - starts + 1, minlength=bucket_map.count)
    return sizes


def sample(spec: str, config) -> tuple[float, Counted, BucketMap]:
    source = Counted(open_source(spec, config))
    files = source.list()
    sent = Counted.requests
    started = time.perf_counter()
    bucket_map = sample_bucket_map(config, source, files)  # type: ignore[arg-type]  # a Source
    seconds = time.perf_counter() - started
    source.requests = Counted.requests - sent
    source.close()
    return seconds, source, bucket_map


def _burn() -> None:
    x = 0
    while True:
        for i in range(10_000):
            x += i * i


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dirs", nargs="+", type=Path)
    parser.add_argument("--url", action="append", default=[])
    parser.add_argument("--repeat", type=int, default=1, help="samples per source (times)")
    parser.add_argument("--busy", action="store_true",
                        help="a CPU-bound Python thread beside the samples, as the hot path's "
                             "feeder is in a load (each request then waits for the GIL)")
    args = parser.parse_args()
    config = load_config()
    if args.busy:
        threading.Thread(target=_burn, daemon=True).start()
    for k, directory in enumerate(args.dirs):
        specs = [str(directory)] + ([args.url[k]] if k < len(args.url) else [])
        maps = []
        for spec in specs:
            runs = [sample(spec, config) for _ in range(args.repeat)]
            seconds = ", ".join(f"{s:.2f}" for s, _, _ in runs)
            _, source, bucket_map = runs[-1]
            print(f"{spec}: {seconds} s; {source.reads} reads, {source.bytes / 1e6:.2f} MB, "
                  f"{source.requests} HTTP requests")
            maps.append(bucket_map)
        if any(m != maps[0] for m in maps):
            print(f"{directory}: the maps differ between the local and the HTTP sample")
        sizes = bucket_bytes(directory, maps[0])
        mean = sizes.mean()
        print(f"{directory}: {sizes.sum() / 1e9:.2f} GB, {maps[0].count} buckets, largest / mean "
              f"{sizes.max() / mean:.2f}, smallest / mean {sizes.min() / mean:.2f}")


if __name__ == "__main__":
    main()
