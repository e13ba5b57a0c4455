#!/usr/bin/env python
"""Where the slowest 1% of a bench's answers come from: ``debl bench`` as it runs, its query
client's every request traced (``scripts/tail_trace.py``), then the slowest 1% of each approach
broken down by route and by cause
(docs/BENCHMARKS.md, "The tool: scripts/tail_profile.py").

    python scripts/tail_profile.py [--out FILE.json] -- --size 1GiB --layout days \\
        --approaches bulkLoad-hbase,debl-raw --threads 50 --requests 50000

Everything after ``--`` is ``debl bench``'s own arguments; the bench runs as usual (its
directory, report and figures), with the query client's targets wrapped. For each approach it
prints:

- the latency percentiles of the traced run (the tracer costs a few µs per request);
- the slowest 1% by route (``mysql``, ``merged``, ``raw``, ``partial`` for DeBL, with the hot
  side; ``hbase``/``mysql`` for a baseline), beside each route's share of all answers;
- the slowest 1% by cause: the mean milliseconds per request in each step (a raw bucket opened
  on the query's path, its listing check, HDFS reads and the wait for a read thread, Thrift
  calls to HBase, MySQL reads, the buffered wait for a bucket, garbage collections of the
  worker, the thread's own CPU, and the rest: waiting for the interpreter lock or a core), and
  how many requests each step dominated;
- what ran beside them: the share of the slowest 1% (and of all requests, the base rate) that
  overlapped a gen_HF run's Spark tasks (``hfiles``), its HBase bulk load (``bulkload``), the
  hot path's phases (MySQL taking the hot keys over), a garbage collection, or the first second
  of the run (the warm-up).

Pitfall: the figures are the traced run's; compare traced runs with each other.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

# The checkout's packages unless PYTHONPATH names another checkout (a before/after run).
sys.path.append(str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # tail_trace, for the workers too

import numpy as np  # noqa: E402

import tail_trace  # type: ignore[import-not-found]  # noqa: E402 -- beside it, on its path

CAUSES = ("buffered", "open", "listing", "hdfs", "read_wait", "hbase", "mysql", "gc", "cpu",
          "waiting")
# gen_HF's Spark tasks and its HBase bulk load; the hot path's MySQL load, merge and index (MySQL
# taking the hot keys over after uptime)
BESIDE_PHASES = ("hfiles", "bulkload", "mysql_load", "mysql_merge", "mysql_index")
_traces: dict[str, list[dict]] = {}
_current = [""]


def _patch(no_full: bool) -> None:
    """The bench's query targets wrapped by the tracer; their reports kept per approach. With
    *no_full*, gen_HF is stopped when the query phase ends (no full availability measured)."""
    import functools

    import debl.bench.approach as approach
    from debl.workload.client_spec import TargetSource

    def target_source(config, name, **options):
        return TargetSource(open=functools.partial(tail_trace.open_traced, config, name, options),
                            on_start=tail_trace.on_start, report=tail_trace.report)

    original_merged = approach.merged_reports

    def merged_reports(reports):
        _traces.setdefault(_current[0], []).extend(r for r in reports if r is not None)
        return original_merged([r["counters"] for r in reports if r is not None])

    original_phase = approach._query_phase

    def query_phase(config, spec, app, run, service, client, progress):
        _current[0] = app.name
        return original_phase(config, spec, app, run, service, client, progress)

    if no_full:
        approach.GenHFProcess.wait = (  # type: ignore[method-assign]  # the profile patches it
            lambda self, timeout: {"stopped": "tail_profile --no-full"})
    approach.target_source = target_source
    approach.merged_reports = merged_reports
    approach._query_phase = query_phase


def _records(reports: list[dict]) -> tuple[np.ndarray, list[tuple[float, float]]]:
    """Every request as a row (epoch start, latency s, cpu s, route, hot, buffered s, steps s),
    and the garbage collections as epoch spans."""
    rows, gcs = [], []
    for r in reports:
        perf, epoch = r["clock"]
        for t0, took, cpu, route, hot, waited, *steps in r["records"]:
            rows.append((epoch - (perf - t0) / 1e9, took / 1e9, cpu / 1e9, route, hot,
                         waited / 1e9, *(s / 1e9 for s in steps)))
        gcs += [(epoch - (perf - a) / 1e9, epoch - (perf - b) / 1e9) for a, b in r["gc"]]
    return np.array(rows, dtype=np.float64), gcs


def _overlap(starts: np.ndarray, ends: np.ndarray, spans: list[tuple[float, float]]) -> np.ndarray:
    """Per request, the seconds its [start, end) shares with the union of *spans*."""
    out = np.zeros(len(starts))
    for a, b in spans:
        out += np.clip(np.minimum(ends, b) - np.maximum(starts, a), 0, None)
    return out


def analyse(name: str, reports: list[dict], run: dict | None) -> dict:
    """The breakdown of one approach's traced query phase."""
    rows, gcs = _records(reports)
    start, took, cpu, route, hot, waited = (rows[:, i] for i in range(6))
    steps = {s: rows[:, 6 + i] for i, s in enumerate(tail_trace.STEPS)}
    end = start + took
    ms = took * 1000
    p99 = float(np.percentile(ms, 99))
    slow = ms >= p99
    gc = _overlap(start, end, gcs)
    parts = {"buffered": waited, "open": steps["open"], "listing": steps["listing"],
             "hdfs": np.clip(steps["hdfs"] - steps["read_wait"], 0, None),
             "read_wait": steps["read_wait"], "hbase": steps["hbase"], "mysql": steps["mysql"],
             "gc": gc, "cpu": cpu}
    known = sum(parts.values())
    parts["waiting"] = np.clip(took - known, 0, None)
    matrix = np.stack([parts[c] for c in CAUSES], axis=1)
    dominant = Counter(CAUSES[i] for i in matrix[slow].argmax(axis=1))
    routes = [f"{tail_trace.ROUTES[int(r)]}/{tail_trace.HOTS[int(h)]}"
              for r, h in zip(route, hot)]
    by_route_slow = Counter(r for r, s in zip(routes, slow) if s)
    by_route_all = Counter(routes)
    t_first = start.min()
    context = {"first_second": (start < t_first + 1.0)}
    if run is not None:
        base = run["load_started"]
        spans: dict[str, list[tuple[float, float]]] = {}
        for p in run["phases"]:
            group = p["phase"] if p["phase"] in BESIDE_PHASES else None
            if group is not None:  # a phase still open (gen_HF stopped in a run) lasts on
                end = float("inf") if p["end_s"] is None else base + p["end_s"]
                spans.setdefault(group, []).append((base + p["start_s"], end))
        for group, s in spans.items():
            context[group] = _overlap(start, end, s) > 0
    context["gc"] = gc > 0
    n_slow = int(slow.sum())
    return {
        "approach": name, "requests": len(ms),
        "p50_ms": float(np.percentile(ms, 50)), "p99_ms": p99,
        "p999_ms": float(np.percentile(ms, 99.9)), "max_ms": float(ms.max()),
        "slowest": n_slow,
        "by_route": {r: {"slowest": by_route_slow[r] / n_slow, "all": by_route_all[r] / len(ms)}
                     for r in sorted(by_route_all, key=lambda r: -by_route_slow[r])},
        "cause_ms": {c: float(parts[c][slow].mean() * 1000) for c in CAUSES},
        "cause_ms_all": {c: float(parts[c].mean() * 1000) for c in CAUSES},
        "dominant": {c: dominant[c] / n_slow for c in CAUSES if dominant[c]},
        "beside": {k: {"slowest": float(v[slow].mean()), "all": float(v.mean())}
                   for k, v in context.items()},
        "slowest_seconds_after_start": float(np.median(start[slow] - t_first)),
        "uptime_s": run["uptime_s"] if run else None,
        # when the workers began to open their targets, and were ready (the coordinator's
        # buckets opened ahead), in seconds since the load started
        "target_open_s": [r["opened"]["open"] - run["load_started"] for r in reports] if run
        else None,
        "target_ready_s": [r["opened"]["ready"] - run["load_started"] for r in reports] if run
        else None,
        "query_start_s": run["query_start_s"] if run else None,
        "all_served_s": run["all_served_s"] if run else None,
    }


def _print(a: dict) -> None:
    print(f"\n{a['approach']}: {a['requests']:,} requests, p50 {a['p50_ms']:.2f} p99 "
          f"{a['p99_ms']:.1f} p99.9 {a['p999_ms']:.1f} max {a['max_ms']:.0f} ms; the slowest 1%: "
          f"{a['slowest']} requests, median {a['slowest_seconds_after_start']:.1f} s into the run")
    if a["uptime_s"] is not None:
        print(f"  up at {a['uptime_s']:.1f} s, first query at {a['query_start_s']:.1f} s, last "
              f"answer at {a['all_served_s']:.1f} s (since the load started); the workers "
              f"opened their targets from {min(a['target_open_s']):.1f} s, all ready at "
              f"{max(a['target_ready_s']):.1f} s")
    print("  by route (of the slowest 1% / of all): " + ", ".join(
        f"{r} {v['slowest']:.0%}/{v['all']:.0%}" for r, v in a["by_route"].items()))
    print("  by cause, ms per request (slowest 1% / all): " + ", ".join(
        f"{c} {a['cause_ms'][c]:.1f}/{a['cause_ms_all'][c]:.2f}" for c in CAUSES
        if a["cause_ms"][c] >= 0.05))
    print("  dominant cause in the slowest 1%: " + ", ".join(
        f"{c} {v:.0%}" for c, v in sorted(a["dominant"].items(), key=lambda kv: -kv[1])))
    print("  overlapping (slowest 1% / all): " + ", ".join(
        f"{k} {v['slowest']:.0%}/{v['all']:.0%}" for k, v in a["beside"].items()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="write the breakdown as JSON here")
    parser.add_argument("--no-full", action="store_true",
                        help="stop gen_HF when the query phase ends (no full availability)")
    parser.add_argument("bench", nargs=argparse.REMAINDER, help="-- then debl bench's arguments")
    args = parser.parse_args()
    bench_args = args.bench[1:] if args.bench[:1] == ["--"] else args.bench
    _patch(args.no_full)
    from debl.bench.results import bench_root
    from debl.cli import main as cli
    from debl.config import load_config

    root = bench_root(load_config())
    before = set(root.glob("B*")) if root.exists() else set()
    try:
        cli.main(["bench", *bench_args], standalone_mode=False)
    except SystemExit as exc:  # click's own exit after a usage error
        if exc.code:
            return int(exc.code)
    made = sorted(set(root.glob("B*")) - before)
    directory = made[-1] if made else None
    out = []
    for name, reports in _traces.items():
        run = None
        if directory is not None and (directory / f"{name}.json").exists():
            run = json.loads((directory / f"{name}.json").read_text())
        a = analyse(name, reports, run)
        a["bench"] = directory.name if directory else None
        out.append(a)
        _print(a)
    if args.out:
        args.out.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
