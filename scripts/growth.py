#!/usr/bin/env python3
"""Growth series: the same ``debl bench`` at several input sizes and source rates, then uptime,
full availability and "all served" against the input size, with a least-squares slope per
approach (docs/SCALING.md, "Measured growth").

Each (rate, size) is one ``debl bench --json`` run, its output kept as
``<out>/growth-<rate>-<size>.json``; a run whose file exists and holds every asked approach is
not repeated, so an interrupted series resumes where it stopped (delete a file to redo its run).
The table and plot take each approach at the sizes where it ran. Inputs are generated once per
size under ``<out>/inputs/`` and shared by both rates.

    python scripts/growth.py --out /work/data/growth --sizes 0.5GiB,1GiB,2GiB,4GiB \\
        --rates uncapped,12.5 --approaches fileCopy,bulkLoad-hbase,debl-cold,debl \\
        --plot docs/img/growth.png -- --threads 50 --requests 50000 --buckets 64

Arguments after ``--`` go to every ``debl bench``. Use a bench namespace of your own
(``DEBL_MYSQL_DATABASE`` etc., see ``debl bench --help``): every run empties its stores.

Pitfall: a figure's slope is only as good as the quietest of its runs; note the machine's load
beside the figures (the script prints the 1-minute load average before every run).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

GIB = 1 << 30
FIGURES = (("uptime_s", "uptime"), ("full_availability_s", "full availability"),
           ("all_served_s", "all served"))


def parse_size(text: str) -> float:
    """``0.5GiB`` -> 0.5 (GiB)."""
    if not text.endswith("GiB"):
        raise SystemExit(f"sizes are given in GiB (e.g. 0.5GiB), not {text!r}")
    return float(text[:-3])


def run_one(out: Path, rate: str, size: str, approaches: str, extra: list[str]) -> dict:
    path = out / f"growth-{rate}-{size}.json"
    if path.exists():
        kept = json.loads(path.read_text())
        if set(approaches.split(",")) <= {r["approach"] for r in kept["runs"]}:
            return kept
    data = out / "inputs" / size
    cmd = ["debl", "bench", "--size", size, "--data", str(data), "--approaches", approaches,
           "--json", *extra]
    if rate != "uncapped":
        cmd += ["--source-rate", rate]
    print(f"load average {os.getloadavg()[0]:.1f}: {' '.join(cmd)}", file=sys.stderr, flush=True)
    done = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    if done.returncode:
        raise SystemExit(f"debl bench failed (exit {done.returncode}) at {rate} {size}; "
                         "its progress is above; rerun to resume the series")
    result = json.loads(done.stdout)
    result["input_bytes"] = sum(f.stat().st_size for f in data.iterdir()
                                if f.is_file() and f.name != "index.json")  # the manifests
    result["load_average"] = os.getloadavg()[0]
    path.write_text(json.dumps(result, indent=2))
    return result


def slope(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least-squares ``(slope, intercept)`` of y over x."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    b = sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else 0.0
    return b, my - b * mx


def _run(results: dict[tuple[str, str], dict], rate: str, size: str, approach: str) -> dict:
    """The approach's run at (rate, size); empty if that bench did not run it."""
    return next((r for r in results[(rate, size)]["runs"] if r["approach"] == approach), {})


def _approaches(results: dict[tuple[str, str], dict], rate: str, sizes: list[str]) -> list[str]:
    """Every approach run at *rate*, in the order the benches ran them."""
    names: list[str] = []
    for size in sizes:
        names += [r["approach"] for r in results[(rate, size)]["runs"]
                  if r["approach"] not in names]
    return names


def table(results: dict[tuple[str, str], dict], rates: list[str], sizes: list[str]) -> str:
    lines = ["| rate MB/s | approach | figure | " + " | ".join(sizes)
             + " | slope s/GiB | largest / smallest size's |",
             "|---|---|---|" + "---:|" * (len(sizes) + 2)]
    for rate in rates:
        for approach in _approaches(results, rate, sizes):
            for key, name in FIGURES:
                row, points = [], []
                for size in sizes:
                    value = _run(results, rate, size, approach).get(key)
                    row.append("-" if value is None else f"{value:.1f}")
                    if value is not None:
                        points.append((results[(rate, size)]["input_bytes"] / GIB, value))
                if len(points) < 2:
                    continue
                b, _ = slope(points)
                ratio = points[-1][1] / points[0][1] if points[0][1] else float("nan")
                lines.append(f"| {rate} | {approach} | {name} | " + " | ".join(row)
                             + f" | {b:.1f} | {ratio:.2f} |")
    return "\n".join(lines)


def plot(results: dict[tuple[str, str], dict], rates: list[str], sizes: list[str],
         path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(rates), figsize=(6.5 * len(rates), 4.5), squeeze=False)
    for ax, rate in zip(axes[0], rates):
        for i, approach in enumerate(_approaches(results, rate, sizes)):
            color = f"C{i}"
            for (key, name), style in zip(FIGURES[:2], ("-o", ":s")):
                pts = []
                for size in sizes:
                    value = _run(results, rate, size, approach).get(key)
                    if value is not None:
                        pts.append((results[(rate, size)]["input_bytes"] / GIB, value))
                if pts:
                    ax.plot(*zip(*pts), style, color=color, label=f"{approach} {name}")
        ax.set_title(f"source {rate}{'' if rate == 'uncapped' else ' MB/s'}")
        ax.set_xlabel("input GiB")
        ax.set_ylabel("seconds since the load started")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--sizes", default="0.5GiB,1GiB,2GiB,4GiB")
    p.add_argument("--rates", default="uncapped,12.5")
    p.add_argument("--approaches", default="fileCopy,bulkLoad-hbase,debl-cold,debl")
    p.add_argument("--plot", type=Path)
    args = p.parse_args(argv)
    sizes = args.sizes.split(",")
    sizes.sort(key=parse_size)
    rates = args.rates.split(",")
    args.out.mkdir(parents=True, exist_ok=True)
    results = {(rate, size): run_one(args.out, rate, size, args.approaches, extra)
               for rate in rates for size in sizes}
    print(table(results, rates, sizes))
    if args.plot:
        plot(results, rates, sizes, args.plot)
        print(f"plot: {args.plot}", file=sys.stderr)


if __name__ == "__main__":
    main()
