"""Answers per second by route over the last minutes, from the cumulative counts coordinators
publish per load (``catalog.serving.answers``: the outcomes ``immediate``, ``raw``, ``buffered``,
``waited_uptime``, ``partial``, ``timeouts``, coordinator/stats.py says what each means; and
the answers at once by store, ``via_mysql`` and ``via_hbase``, and ``via_hot_raw``, those whose
hot rows came from the hot files: coordinator.coordinator.VIA).

Each sample is the counts of the load served at that moment. A rate is the growth of the counts
over the last few samples (``span``) divided by the time between them: a coordinator publishes
its counts at most once per poll interval and the sampler reads them once a second, so a rate
over one sample alone would swing between 0 and twice the truth.

The same history follows a load that answers before its uptime (the sampler keeps a second
one): the bytes it fetched on demand are a count (their rate is bytes/s) and the keys waiting a
level, given as read (``levels``).

Pitfalls: the counts belong to a load; when another load becomes current its counts start from
zero, so the rate across the switch counts the new load's answers from zero (the old load's last
answers, routed before the switch, are not seen). A sample that could not be read (MySQL down)
is a gap: no rate spans it, since the counts published meanwhile arrive all at once after it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

# In the order the page draws them; a route a coordinator publishes that is not here follows.
ROUTES = ("immediate", "early", "raw", "buffered", "waited_uptime", "partial", "timeouts",
          "via_mysql", "via_hbase", "via_hot_raw")


@dataclass(frozen=True)
class _Sample:
    t: float  # seconds since the epoch
    load_id: str | None
    counts: dict[str, int]
    after_gap: bool  # nothing was read just before it
    levels: dict[str, int]


class AnswerHistory:
    """The samples of the last *window_s* seconds. Not thread-safe: the sampler holds it under
    its lock."""

    def __init__(self, window_s: float = 600.0, span: int = 3):
        self.window_s = window_s
        self.span = span
        self._samples: deque[_Sample] = deque()
        self._gap = True

    def add(self, t: float, load_id: str | None, counts: dict[str, int],
            levels: dict[str, int] | None = None) -> None:
        """The cumulative counts per route of *load_id* read at *t*, and *levels* (values
        drawn as read, not as a rate)."""
        self._samples.append(_Sample(t, load_id, dict(counts), self._gap, dict(levels or {})))
        self._gap = False
        while self._samples and self._samples[0].t < t - self.window_s:
            self._samples.popleft()

    def gap(self) -> None:
        """The counts could not be read now: no rate spans this moment."""
        self._gap = True

    def series(self) -> dict:
        """``{"window_s", "t": [...], "rates": {route: [answers/s, ...]}}``: one point per
        sample that has an earlier one to compare with, rates rounded to 0.01; with
        ``"levels": {name: [value, ...]}`` at the same points when any sample had levels."""
        samples = list(self._samples)
        seen = {route for s in samples for route in s.counts}
        routes = [r for r in ROUTES if r in seen] + sorted(seen - set(ROUTES))
        names = sorted({name for s in samples for name in s.levels})
        times: list[float] = []
        rates: dict[str, list[float]] = {route: [] for route in routes}
        levels: dict[str, list[int]] = {name: [] for name in names}
        for i, sample in enumerate(samples):
            base = self._base(samples, i)
            if base is None:
                continue
            dt = sample.t - base.t
            same_load = base.load_id == sample.load_id
            times.append(round(sample.t, 3))
            for route in routes:
                before = base.counts.get(route, 0) if same_load else 0
                rates[route].append(round(max(0, sample.counts.get(route, 0) - before) / dt, 2))
            for name in names:
                levels[name].append(sample.levels.get(name, 0))
        series = {"window_s": self.window_s, "t": times, "rates": rates}
        if names:
            series["levels"] = levels
        return series

    def _base(self, samples: list[_Sample], i: int) -> _Sample | None:
        """The sample *span* before *i* (fewer after a gap or at the start; None: none), with
        a time strictly before *i*'s."""
        j = i
        while j > 0 and i - j < self.span and not samples[j].after_gap:
            j -= 1
        if j == i or samples[j].t >= samples[i].t:
            return None
        return samples[j]
