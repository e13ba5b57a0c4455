"""CPU seconds of two building blocks of ``debl generate`` (docs/WORKLOAD.md, "Measured"): the id
shuffle (``Shuffler.permute`` of 10^7 ids) and line formatting (a million links made lines by
``encode_links``, all at once, against ``Link.to_line`` one line at a time; the bytes compared).

    python scripts/generator_costs.py [--runs 3]

CPU time of this process (``time.process_time``), so a busy machine stretches the wall time
more than these figures; one line per run and measure.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from debl.format.link import Link
from debl.workload.lineformat import encode_links
from debl.workload.shuffle import Shuffler

SHUFFLED_IDS = 10**7
LINES = 10**6


def shuffle_cpu_s() -> float:
    ids = np.arange(SHUFFLED_IDS, dtype=np.int64)
    start = time.process_time()
    Shuffler(SHUFFLED_IDS, 1).permute(ids)
    return time.process_time() - start


def format_cpu_s(seed: int) -> tuple[float, float]:
    """(encode_links, Link.to_line line by line) for LINES links of generator-like fields."""
    rng = np.random.default_rng(seed)
    id1 = np.sort(rng.integers(1, 2_250_001, LINES))
    id2 = id1 + rng.integers(0, 100, LINES)
    link_type = 123456789 + rng.integers(0, 2, LINES)
    visibility = np.ones(LINES, dtype=np.int64)
    sizes = rng.integers(0, 20, LINES)
    data = rng.integers(32, 101, int(sizes.sum())).astype(np.uint8)
    ms = 1_767_225_600_000 - rng.integers(0, 10 * 86_400_000, LINES)
    version = np.zeros(LINES, dtype=np.int64)
    start = time.process_time()
    buf, _ = encode_links(id1, link_type, id2, visibility, sizes, data, ms, version)
    vectorized = time.process_time() - start
    start = time.process_time()
    raw, offsets = data.tobytes(), (np.cumsum(sizes) - sizes).tolist()
    lines = [Link(a, t, b, v, raw[o:o + s], m, n).to_line() for a, t, b, v, o, s, m, n in zip(
        id1.tolist(), link_type.tolist(), id2.tolist(), visibility.tolist(), offsets,
        sizes.tolist(), ms.tolist(), version.tolist())]
    one_by_one = time.process_time() - start
    if b"".join(lines) != buf.tobytes():
        raise SystemExit("encode_links and Link.to_line made different bytes")
    return vectorized, one_by_one


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    for run in range(args.runs):
        print(f"shuffle of {SHUFFLED_IDS:,} ids: {shuffle_cpu_s():.2f} s CPU", flush=True)
        vectorized, one_by_one = format_cpu_s(run)
        print(f"{LINES:,} lines: encode_links {vectorized:.2f} s CPU, Link.to_line one by one "
              f"{one_by_one:.2f} s CPU", flush=True)


if __name__ == "__main__":
    main()
