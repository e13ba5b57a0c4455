"""The bench's tail: each approach's slowest 1% by route and by cause (docs/BENCHMARKS.md, "The
tail"), saved as ``<approach>.tail.json`` beside its ``<approach>.json``, and read back for the
report's section "The tail", ``debl report --tail`` and the summary ``debl bench`` prints.

The breakdown is the query client's (``debl.workload.tail``); here it is written, read, and put
in rows: the slowest by route (with each route's share of all answers), by dominant cause, every
route's percentiles over all answers, and what ran beside the slowest: each load phase that ran
during the query phase (``debl_phases``: gen_HF's ``hfiles`` and ``bulkload``, MySQL's
``mysql_load`` / ``mysql_merge`` / ``mysql_index``, the copy, ...), with the share of the
slowest that overlapped it against the share of all answers completed in a second it ran.

Pitfall: a bench recorded before this file existed has none; its report has no such section.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from debl.bench.results import ApproachRun, write_json
from debl.workload.tail import CAUSES, TailBreakdown, TailCounts, TailGroup

# The causes' column titles (debl.measure.request_cost.COMPONENTS, and the rest)
CAUSE_TITLES = {"wait": "wait", "mysql": "MySQL", "hbase": "HBase", "hdfs": "HDFS reads",
                "hdfs_meta": "HDFS other", "merge": "merge", "late": "late", "other": "other"}
Rows = tuple[tuple[str, ...], ...]


def tail_path(directory: Path, approach: str) -> Path:
    return Path(directory) / f"{approach}.tail.json"


def write_tail(directory: Path, approach: str, counts: TailCounts) -> TailBreakdown:
    """Save the breakdown of a query client's *counts* as ``<approach>.tail.json``."""
    breakdown = counts.breakdown()
    write_json(tail_path(directory, approach), breakdown.to_dict())
    return breakdown


def read_tails(directory: Path, runs: Sequence[ApproachRun]) -> dict[str, TailBreakdown]:
    """The breakdown of each run that has one, by approach, in the runs' order."""
    tails = {}
    for run in runs:
        path = tail_path(directory, run.approach)
        if path.is_file():
            tails[run.approach] = TailBreakdown.from_dict(json.loads(path.read_text()))
    return tails


def _shown(groups: Sequence[TailGroup]) -> tuple[str, ...]:
    """The causes that took any time in *groups* (late is 0 in a closed loop; HBase for an
    approach that never asks it): the others would be columns of zeros."""
    return tuple(c for c in CAUSES if any(g.ms.get(c, 0.0) > 0.0 for g in groups))


def _ms(x: float) -> str:
    return f"{x:,.2f}" if x < 10 else f"{x:,.1f}"


def group_rows(tails: dict[str, TailBreakdown], by: str) -> tuple[tuple[str, ...], Rows]:
    """Headers and rows of the slowest by ``"route"`` or by ``"cause"``: per approach and group
    the count, its share of the slowest (and for a route its share of all answers), the mean
    latency, the mean ms of each cause that took any time, the share beside a full collection,
    the mean byte ranges the raw route read from HDFS."""
    groups = {a: t.by_route if by == "route" else t.by_cause for a, t in tails.items()}
    shown = _shown([g for gs in groups.values() for g in gs])
    headers = ("approach", by, "slowest", "share", *(("of all answers",) if by == "route" else ()),
               "mean ms", *(f"{CAUSE_TITLES[c]} ms" for c in shown), "full GC", "ranges read")
    rows = []
    for approach, tail in tails.items():
        of_all = {r.route: r.share for r in tail.routes}
        for g in groups[approach]:
            name = g.name if by == "route" else CAUSE_TITLES[g.name]
            rows.append((approach, name, f"{g.count:,}", f"{g.share:.0%}",
                         *((f"{of_all.get(g.name, 0.0):.1%}",) if by == "route" else ()),
                         _ms(g.latency_ms), *(_ms(g.ms[c]) for c in shown),
                         f"{g.full_gc / g.count:.0%}", f"{g.hdfs_reads:.2f}"))
    return headers, tuple(rows)


def route_rows(tails: dict[str, TailBreakdown]) -> tuple[tuple[str, ...], Rows]:
    """Headers and rows of every answer by route: count, share, p50, p99, max, mean, the share
    beside a full collection, how many are among the slowest."""
    headers = ("approach", "route", "answers", "share", "p50 ms", "p99 ms", "max ms", "mean ms",
               "full GC", "in the slowest")
    rows = tuple((approach, r.route, f"{r.requests:,}", f"{r.share:.1%}", _ms(r.p50_ms),
                  _ms(r.p99_ms), _ms(r.max_ms), _ms(r.mean_ms),
                  f"{r.full_gc / r.requests:.1%}" if r.requests else "-", f"{r.in_tail:,}")
                 for approach, tail in tails.items() for r in tail.routes)
    return headers, rows


def beside_rows(tails: dict[str, TailBreakdown],
                runs: Sequence[ApproachRun]) -> tuple[tuple[str, ...], Rows]:
    """Headers and rows of the load phases that ran during each query phase: the share of the
    slowest whose span overlapped one of the phase's items, against the share of all answers
    completed in a second one of them ran (the per-second timeline's resolution)."""
    headers = ("approach", "phase", "slowest beside it", "all answers beside it")
    rows = []
    for run in runs:
        tail = tails.get(run.approach)
        if tail is None or run.query_start_s is None or not run.timeline:
            continue
        start, end = run.query_start_s, run.all_served_s or run.timeline[-1][0] + 1.0
        spans: dict[str, list[tuple[float, float]]] = {}
        for p in run.phases:
            stop = end if p.end_s is None else p.end_s
            if p.start_s < end and stop > start:
                spans.setdefault(p.phase, []).append((p.start_s, stop))
        answered = sum(point[1] for point in run.timeline) or 1
        for phase, items in sorted(spans.items()):
            hit = sum(any(a < start + s.end_s and start + s.end_s - s.latency_ms / 1e3 < b
                          for a, b in items) for s in tail.samples)
            during = sum(point[1] for point in run.timeline
                         if any(a < point[0] + 1.0 and point[0] < b for a, b in items))
            rows.append((run.approach, phase,
                         f"{hit / tail.slowest:.0%}" if tail.slowest else "-",
                         f"{during / answered:.0%}"))
    return headers, tuple(rows)


# Slow answers that end within BURST_GAP_S of each other, BURST_LEAST or more of them, ended
# together: one stall held them all (docs/BENCHMARKS.md, "The tail: what the slowest 1% waited
# for").
BURST_GAP_S = 0.02
BURST_LEAST = 5


def burst_rows(tails: dict[str, TailBreakdown]) -> tuple[tuple[str, ...], Rows]:
    """Headers and rows of the stalls in each approach's slowest: how many of them ended in a
    burst (``BURST_LEAST`` or more, each within ``BURST_GAP_S`` of the one before), the bursts,
    the largest, and the slowest answer of the largest (how long the stall held it)."""
    headers = ("approach", "slowest", "in bursts", "bursts", "largest burst",
               "its slowest ms")
    rows = []
    for approach, tail in tails.items():
        ends = sorted(tail.samples, key=lambda s: s.end_s)
        runs: list[list] = []
        for sample in ends:
            if runs and sample.end_s - runs[-1][-1].end_s < BURST_GAP_S:
                runs[-1].append(sample)
            else:
                runs.append([sample])
        bursts = [r for r in runs if len(r) >= BURST_LEAST]
        largest = max(bursts, key=len, default=[])
        rows.append((approach, f"{len(ends):,}",
                     f"{sum(map(len, bursts)) / len(ends):.0%}" if ends else "-",
                     f"{len(bursts):,}", f"{len(largest):,}",
                     _ms(max(s.latency_ms for s in largest)) if largest else "-"))
    return headers, tuple(rows)


def tail_tables(tails: dict[str, TailBreakdown], runs: Sequence[ApproachRun],
                ) -> list[tuple[str, tuple[str, ...], Rows, str]]:
    """The report's section "The tail" as (title, headers, rows, note) tables; none without a
    breakdown."""
    if not tails:
        return []
    share = next(iter(tails.values())).share
    cut = [a for a, t in tails.items() if not t.exact]
    kept = (f" Not every one of the slowest was kept for {', '.join(cut)} (a run with no "
            "request count): the slowest kept stand for them." if cut else "")
    causes = ("Mean ms per request of each cause (docs/BENCHMARKS.md, \"The tail\"): 'wait' "
              "deciding the route (the coordinator's lock; uptime, the bucket, the key's bytes), "
              "'MySQL' and 'HBase' their calls, 'HDFS reads' the raw route's block reads, 'HDFS "
              "other' its other HDFS calls on the query's path (a bucket opened, a listing "
              "checked), 'merge' the merge and parsing of sorted runs, 'late' an open loop's "
              "request sent late, 'other' the rest of the wall time (the interpreter lock, "
              "garbage collection, scheduling). Columns of zeros are left out. 'full GC': the "
              "share that ran beside a full collection of its client process; 'ranges read': "
              "the byte ranges the raw route read from HDFS, per answer.")
    return [
        (f"The tail: the slowest {share:.0%} by route", *group_rows(tails, "route"),
         f"Per approach, its slowest {share:.0%} of answers grouped by route (the "
         "coordinator's: 'merged' HBase, 'raw' the bucket's files, 'mysql' no cold row; ', hot "
         "raw' the hot rows from the hot files; '(buffered)' waited for its bucket; a baseline: "
         f"its store), beside the route's share of all answers. {causes}{kept}"),
        (f"The tail: the slowest {share:.0%} by dominant cause", *group_rows(tails, "cause"),
         "Each of the slowest counted once, under the cause that took most of its wall time. "
         + causes),
        ("The tail: every answer by route", *route_rows(tails),
         "Every successful answer of the query phase by route; 'in the slowest': how many of "
         f"them are among the approach's slowest {share:.0%}."),
        (f"The tail: what ran beside the slowest {share:.0%}", *beside_rows(tails, runs),
         "Each load phase (debl_phases) that ran during the query phase: the share of the "
         "slowest answers that overlapped one of its items, against the share of all answers "
         "completed in a second it ran."),
        (f"The tail: stalls in the slowest {share:.0%}", *burst_rows(tails),
         f"The slowest answers that ended in a burst: {BURST_LEAST} or more, each within "
         f"{BURST_GAP_S * 1e3:.0f} ms of the one before. One stall (a server's pause, a lock, "
         "the cores taken) held them all, and with every client thread waiting, a closed "
         "loop's slowest answers come this way whatever serves them; 'its slowest ms': how "
         "long the largest burst's stall held its slowest answer."),
    ]


def tail_line(tail: TailBreakdown) -> str:
    """One line for ``debl bench``'s summary: the slowest share's size and threshold, its
    largest routes and dominant causes."""
    if not tail.slowest:
        return "no answer to break down"
    routes = ", ".join(f"{g.name} {g.share:.0%}" for g in tail.by_route[:3])
    causes = ", ".join(f"{CAUSE_TITLES[g.name]} {g.share:.0%}" for g in tail.by_cause[:3])
    cut = "" if tail.exact else f" (of {tail.wanted:,}: the others were not kept)"
    return (f"slowest {tail.share:.0%}: {tail.slowest:,} answers from "
            f"{_ms(tail.threshold_ms)} ms{cut}; by route {routes}; by cause {causes}")
