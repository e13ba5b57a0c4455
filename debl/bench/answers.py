"""Answers since the load started, per approach (docs/BENCHMARKS.md, "Answers before the copy
ends"): the first exact answer, the share of the bench's requests answered by the time a plain
copy of the files ends, and the curve of answers by each second, with its plot.

- ``copy_end``: when a plain copy of the files ends: the fileCopy approach's uptime in the same
  bench if it ran, else the input's bytes over ``--source-rate`` when one was given, else
  unknown (None), and the report says which;
- ``answered_by_copy_end``: the share of the bench's requests (``--requests``, whatever each
  phase completed) answered by then; ``answered_curve``: the requests answered by the end of
  each second of the query phase's timeline, since the load started (what the timeline CSV's
  ``answered`` column holds); ``plot_answered``: those curves as shares, one line per approach,
  a vertical line at the copy's end.

Pitfalls: the first answer is the client's own instant (``ClientResult.first_answer_s``), exact;
the share at an instant inside a timeline second spreads that second's answers evenly over it
(``debl.bench.service.answered_count``), never before the first answer. A baseline's client
starts at its uptime whatever ``--queries-from`` says: MySQL and HBase answer nothing before.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from debl.bench.results import ApproachRun
from debl.bench.service import answered_count


@dataclass(frozen=True)
class CopyEnd:
    """When a plain copy of the bench's files ends, in seconds since a load started, and what
    that figure is: ``basis`` "fileCopy" (that approach's uptime in the bench) or "source rate"
    (the input's bytes over the source's rate)."""

    seconds: float
    basis: str

    def describe(self, input_bytes: int, source_rate: float | None) -> str:
        if self.basis == "fileCopy":
            return f"{self.seconds:,.1f} s, the fileCopy approach's uptime in this bench"
        return (f"{self.seconds:,.1f} s, the input's {input_bytes / 1e6:,.1f} MB at the "
                f"source's {source_rate:g} MB/s (no fileCopy in this bench)")


def copy_end(runs: list[ApproachRun], input_bytes: int,
             source_rate: float | None) -> CopyEnd | None:
    """The end of a plain copy of the files (see ``CopyEnd``); None without a fileCopy run or
    a source rate (an uncapped copy's time is not known without copying)."""
    copy = next((r for r in runs if r.approach == "fileCopy"), None)
    if copy is not None:
        return CopyEnd(copy.uptime_s, "fileCopy")
    if source_rate:
        return CopyEnd(input_bytes / (source_rate * 1e6), "source rate")
    return None


def answered_by(run: ApproachRun, t: float, requests: int) -> float | None:
    """The share of the bench's *requests* that *run* answered by *t* seconds since its load
    started (None: the approach has no query phase)."""
    if run.query is None:
        return None
    return min(answered_count(run, t) / max(requests, 1), 1.0)


def answered_curve(run: ApproachRun) -> tuple[tuple[float, int], ...]:
    """(seconds since the load started, requests answered by then): the query phase's start
    with none, then the end of each second of its timeline (the last one at the last query),
    cumulative. Empty without a query phase."""
    if run.query is None or run.query_start_s is None:
        return ()
    points, answered = [(run.query_start_s, 0)], 0
    for point in run.timeline:
        end = float(point[0]) + 1.0
        if run.all_served_s is not None:
            end = max(min(end, run.all_served_s), float(point[0]))
        answered += int(point[1])
        points.append((round(end, 3), answered))
    return tuple(points)


def answers_summary(runs: list[ApproachRun], input_bytes: int, source_rate: float | None,
                    requests: int) -> dict:
    """The figures of this module for bench.json: the copy's end and, per approach with a
    query phase, when its client started, its first answer and its share answered by the
    copy's end and by its uptime."""
    end = copy_end(runs, input_bytes, source_rate)
    per = {}
    for r in runs:
        if r.query is None:
            continue
        per[r.approach] = {
            "queries_from": r.queries_from or "uptime", "first_answer_s": r.first_answer_s,
            "answered_by_uptime": answered_by(r, r.uptime_s, requests),
            "answered_by_copy_end": None if end is None else answered_by(r, end.seconds,
                                                                         requests)}
    return {"copy_end": None if end is None else {"s": end.seconds, "basis": end.basis},
            "requests": requests, "approaches": per}


def plot_answered(runs: list[ApproachRun], requests: int, end: CopyEnd | None, path: Path,
                  title: str) -> Path:
    """The share of the bench's *requests* answered against seconds since the load started,
    one line per approach with a query phase (its first answer marked), and a vertical line at
    the plain copy's end when it is known."""
    # lazy import: matplotlib would cost every `debl` command's start-up (docs/ARCHITECTURE.md,
    # "Lazy imports"); and the headless backend must be chosen before pyplot loads
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy import: as matplotlib above

    fig, ax = plt.subplots(figsize=(11, 5), dpi=110)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    total = max(requests, 1)
    for i, r in enumerate(runs):
        curve = answered_curve(r)
        if not curve:
            continue
        color = colors[i % len(colors)]
        first = "" if r.first_answer_s is None else f", first answer {r.first_answer_s:,.1f} s"
        ax.step([t for t, _ in curve], [n / total for _, n in curve], where="post",
                color=color, lw=1.4, label=f"{r.approach} (from {r.queries_from or 'uptime'}"
                                           f"{first})")
        ax.axvline(r.uptime_s, color=color, ls="--", lw=0.8, alpha=0.6)
        if r.first_answer_s is not None:
            ax.plot([r.first_answer_s], [0.0], marker="o", color=color, ms=5)
    if end is not None:
        ax.axvline(end.seconds, color="black", lw=1.2,
                   label=f"plain copy ends ({end.seconds:,.1f} s, {end.basis})")
    ax.set_xlabel("seconds since the load started")
    ax.set_ylabel("share of the bench's requests answered")
    ax.set_title(title, fontsize=10)
    ax.set_xlim(left=0)
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
