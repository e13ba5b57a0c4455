"""Measure a generated data set against LinkBench: out-degree CDF (plot) and request skew.

    python scripts/plot_outdegree.py DATA_DIR --max-id N [--start-id 1]
        [--png docs/img/outdegree.png]

Reads every ``links-*.tsv`` in DATA_DIR, counts the first versions (``version`` 0: one per key)
per id1 -- ids without links count as degree 0 -- and compares the empirical CDF of out-degree
with the ``nlinks`` CDF of Distribution.dat: prints the largest absolute deviation and writes a
log-x plot of both. Then draws requests as ``debl query`` does and prints the share that hits
the hottest 1% of ids. Figures quoted in docs/WORKLOAD.md come from this script.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from debl.workload.distribution import ZipfSampler, load_cdf  # noqa: E402
from debl.workload.requests import RequestSpec, RequestStream  # noqa: E402
from debl.workload.shuffle import degree_shuffler  # noqa: E402


def degrees_from_files(data_dir: Path, start_id: int, max_id: int) -> np.ndarray:
    counts: Counter[int] = Counter()
    for path in sorted(data_dir.glob("links-*.tsv")):
        with path.open("rb") as f:
            for line in f:
                head, _, version = line.rpartition(b"\t")
                if version == b"0\n":
                    counts[int(head[:head.index(b"\t")])] += 1
    degrees = np.zeros(max_id - start_id, dtype=np.int64)
    ids = np.fromiter(counts.keys(), dtype=np.int64, count=len(counts))
    degrees[ids - start_id] = np.fromiter(counts.values(), dtype=np.int64, count=len(counts))
    return degrees


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data_dir", type=Path)
    ap.add_argument("--max-id", type=int, required=True)
    ap.add_argument("--start-id", type=int, default=1)
    ap.add_argument("--png", type=Path, default=Path("docs/img/outdegree.png"))
    ap.add_argument("--requests", type=int, default=2_000_000)
    args = ap.parse_args()

    cdf = load_cdf("nlinks")
    degrees = degrees_from_files(args.data_dir, args.start_id, args.max_id)
    n = len(degrees)
    empirical = np.searchsorted(np.sort(degrees), cdf.values, side="right") / n
    deviation = np.abs(empirical - cdf.cum)
    worst = int(np.argmax(deviation))
    print(f"ids: {n:,}; links (first versions): {degrees.sum():,}; "
          f"mean out-degree {degrees.mean():.3f} (LinkBench CDF mean {cdf.mean():.3f})")
    print(f"largest |empirical CDF - LinkBench CDF|: {deviation[worst]:.2e} "
          f"at degree {cdf.values[worst]}")
    for v in (0, 1, 2, 5, 10, 15, 100, 1000):
        i = int(np.searchsorted(cdf.values, v))
        print(f"  P(degree <= {v:>4}): generated {empirical[i]:.6f}  LinkBench {cdf.cum[i]:.6f}")

    args.png.parent.mkdir(parents=True, exist_ok=True)
    fig, (ax, tail) = plt.subplots(1, 2, figsize=(11, 4.2), dpi=120)
    x = cdf.values + 1  # log scale: plot degree + 1 so that degree 0 shows
    for a, y_ref, y_gen in ((ax, cdf.cum, empirical), (tail, 1 - cdf.cum, 1 - empirical)):
        a.step(x, y_ref, where="post", label="LinkBench nlinks (Distribution.dat)", lw=2.5,
               color="#999999")
        a.step(x, y_gen, where="post", label=f"generated, {n:,} ids", lw=1, color="#d62728")
        a.set_xscale("log")
        a.set_xlabel("out-degree + 1 (links per id1, all types)")
        a.grid(True, which="both", alpha=0.3)
    ax.set_ylabel("P(out-degree <= x - 1)")
    ax.set_title(f"CDF; largest deviation {deviation[worst]:.1e}")
    ax.legend(loc="lower right")
    tail.set_yscale("log")
    tail.set_ylim(0.5 / n, 1)
    tail.set_ylabel("P(out-degree > x - 1)")
    tail.set_title("tail (log-log)")
    fig.tight_layout()
    fig.savefig(args.png)
    print(f"wrote {args.png}")

    spec = RequestSpec(max_id=args.max_id, start_id=args.start_id)
    ids, _ = RequestStream(spec).draw(args.requests)
    hits = np.bincount(ids - args.start_id, minlength=n)
    top = max(1, n // 100)
    top_share = np.sort(hits)[::-1][:top].sum() / len(ids)
    by_degree = degree_shuffler(n).inverse(np.arange(top))  # the 1% of ids with most links
    print(f"requests: {len(ids):,}; share hitting the hottest 1% of ids ({top:,} ids): "
          f"{top_share:.3f} (Zipf(0.8) exact: {ZipfSampler(0, n).top_share(top):.3f})")
    print(f"share hitting the 1% of ids with the highest out-degree: "
          f"{np.isin(ids - args.start_id, by_degree).mean():.4f}")
    print(f"links returned per request (if all were served): "
          f"mean {degrees[ids - args.start_id].mean():.1f}, "
          f"ids with no link requested: {(degrees[ids - args.start_id] == 0).mean():.3f}")


if __name__ == "__main__":
    main()
