"""How an approach served its queries over time, from a bench's per-second timeline: the paper's
Figure 7.6 in numbers (``service_from_uptime``) and the share of the query phase's requests
answered by each second since the load started (``answered_share``, ``least_margin``), which is
what a user feels of a load (docs/DESIGN.md section 11).

Pitfall: a second's completions count as spread evenly over it (the last second ends at the
last query), so window edges are exact only to that.
"""

from __future__ import annotations

from dataclasses import dataclass

from debl.bench.results import ApproachRun

SERVICE_WINDOW_S = 30.0  # "served in the first 30 s after uptime" (docs/BENCHMARKS.md)
# A second with fewer completions than this share of the approach's best second is a stall
# (next to nothing answered: a closed-loop client whose threads all wait on buffered queries).
STALL_SHARE = 0.01


@dataclass(frozen=True)
class Service:
    """How one approach served from its uptime; times in seconds since its load started.

    ``first_window``: requests completed in ``[uptime, uptime + window_s)``. ``loaded_from_s``:
    full availability (the uptime for approaches that load everything before it);
    ``loaded_rate``: requests per second from then to the last query (None if that is under a
    second, or full availability never came before the last query). ``longest_stall_s``: the
    longest stretch after uptime in which fewer than ``STALL_SHARE`` of the best second's
    requests completed per second, starting at ``stall_at_s`` (0.0 and None: no stall).
    ``last_query_s``: when the last request was answered."""

    first_window: int
    window_s: float
    loaded_from_s: float | None
    loaded_rate: float | None
    longest_stall_s: float
    stall_at_s: float | None
    last_query_s: float


def _bins(run: ApproachRun) -> list[tuple[float, float, float]]:
    """(start, end, completed) per second of the query phase, since the load started; the gap
    from uptime to the client's start is a bin of no completions. The last bin ends at the last
    query; seconds after it (a --duration phase that ended early) are dropped."""
    end_all = run.all_served_s
    bins: list[tuple[float, float, float]] = []
    if run.query_start_s is not None and run.query_start_s > run.uptime_s:
        bins.append((run.uptime_s, run.query_start_s, 0))
    for point in run.timeline:
        start, completed = float(point[0]), int(point[1])
        if end_all is not None and start >= end_all:
            continue
        end = start + 1.0 if end_all is None else max(min(start + 1.0, end_all), start + 1e-9)
        bins.append((start, end, completed))
    return bins


def _completed_between(bins: list[tuple[float, float, float]], lo: float, hi: float) -> float:
    """Completions in [lo, hi), each bin's spread evenly over it."""
    total = 0.0
    for start, end, completed in bins:
        overlap = min(end, hi) - max(start, lo)
        if overlap > 0:
            total += completed * overlap / (end - start)
    return total


def _after_uptime(run: ApproachRun,
                  bins: list[tuple[float, float, float]]) -> list[tuple[float, float, float]]:
    """The bins from the uptime on: a query phase that started with the load
    (``queries_from`` "load") waits before it, which is no stall of the service from uptime;
    a bin across the uptime keeps its rate over the part after it."""
    after = []
    for start, end, completed in bins:
        if end <= run.uptime_s:
            continue
        if start < run.uptime_s:
            completed = completed * (end - run.uptime_s) / (end - start)
            start = run.uptime_s
        after.append((start, end, completed))
    return after


def service_from_uptime(run: ApproachRun, window_s: float = SERVICE_WINDOW_S) -> Service | None:
    """The service figures of *run* (None without a query phase); see ``Service``."""
    if run.query is None or run.all_served_s is None:
        return None
    bins = _after_uptime(run, _bins(run))
    first = _completed_between(bins, run.uptime_s, run.uptime_s + window_s)
    loaded_from = run.full_availability_s
    rate = None
    if loaded_from is not None:
        lo = max(loaded_from, bins[0][0] if bins else run.all_served_s)
        if run.all_served_s - lo >= 1.0:
            rate = _completed_between(bins, lo, run.all_served_s) / (run.all_served_s - lo)
    # The best second among whole seconds (a partial last second says little), unless no
    # whole second served anything.
    peak = max((c for s, e, c in bins if e - s >= 1.0 - 1e-9), default=0) or \
        max((c / (e - s) for s, e, c in bins), default=0.0)
    longest, at, run_start = 0.0, None, None
    for start, end, completed in bins:
        if completed / (end - start) < STALL_SHARE * peak or peak == 0:
            run_start = start if run_start is None else run_start
            if end - run_start > longest:
                longest, at = end - run_start, run_start
        else:
            run_start = None
    return Service(int(round(first)), window_s, loaded_from, rate, longest, at,
                   run.all_served_s)


def answered_count(run: ApproachRun, t: float) -> float:
    """Requests answered by *t* seconds since the load started (each second of the timeline
    spread evenly over it; 0 before the run's first answer, when it is known)."""
    if run.query is None or (run.first_answer_s is not None and t < run.first_answer_s):
        return 0.0
    return _completed_between(_bins(run), 0.0, t)


def answered_share(run: ApproachRun, t: float) -> float:
    """The share of the query phase's requests answered by *t* seconds since the load started
    (0 before its first answer: the uptime, unless the phase started with the load)."""
    if run.query is None or not run.query.get("completed"):
        return 0.0
    return min(answered_count(run, t) / run.query["completed"], 1.0)


def least_margin(run: ApproachRun, other: ApproachRun,
                 step: float = 1.0) -> tuple[float, float]:
    """(the smallest ``answered_share(run, t) - answered_share(other, t)`` over every *step*
    from 0 to the later of the two last queries, the t where it is): >= 0 when *run* has
    answered at least as many requests as *other* at every second."""
    end = max(run.all_served_s or 0.0, other.all_served_s or 0.0)
    worst, at, t = float("inf"), 0.0, 0.0
    while t <= end + step:
        margin = answered_share(run, t) - answered_share(other, t)
        if margin < worst:
            worst, at = margin, t
        t += step
    return worst, at
