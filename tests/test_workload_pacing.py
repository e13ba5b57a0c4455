"""The open-loop schedule, and latency counted from the intended send instant."""

from __future__ import annotations

import itertools
import threading
import time

import numpy as np
import pytest

from debl.errors import ConfigError
from debl.workload.client import ClientSpec, run_client
from debl.workload.pacing import PoissonSchedule
from debl.workload.requests import RequestSpec

REQ = RequestSpec(max_id=2001, seed=4)


def _take(schedule: PoissonSchedule, n: int) -> np.ndarray:
    return np.array(list(itertools.islice(schedule, n)), dtype=np.int64)


def test_schedule_is_deterministic_per_seed_and_stream():
    a = _take(PoissonSchedule(100.0, seed=4, stream=2), 3000)
    assert np.array_equal(a, _take(PoissonSchedule(100.0, seed=4, stream=2), 3000))
    assert not np.array_equal(a, _take(PoissonSchedule(100.0, seed=4, stream=3), 3000))
    assert not np.array_equal(a, _take(PoissonSchedule(100.0, seed=5, stream=2), 3000))
    assert np.all(np.diff(a) >= 0) and a[0] >= 0


def test_schedule_offers_the_rate_with_exponential_gaps():
    instants = _take(PoissonSchedule(250.0, seed=1, stream=0), 100_000)
    gaps = np.diff(np.concatenate([[0], instants])) / 1e9
    # 100,000 exponential gaps of mean 4 ms: the sample mean's standard error is 0.3%.
    assert gaps.mean() == pytest.approx(1 / 250, rel=0.03)
    assert np.std(gaps) == pytest.approx(1 / 250, rel=0.05)  # exponential: sd = mean
    assert instants[-1] / 1e9 == pytest.approx(100_000 / 250, rel=0.03)


def test_threads_together_offer_the_total_rate():
    # As the client deals them: T threads at rate/T each.
    total = np.concatenate([_take(PoissonSchedule(600.0 / 6, seed=9, stream=t), 20_000)
                            for t in range(6)])
    within = total[total < 100e9]  # the first 100 s
    assert len(within) / 100 == pytest.approx(600, rel=0.03)


def test_schedule_rejects_a_non_positive_rate():
    with pytest.raises(ConfigError):
        PoissonSchedule(0.0, seed=1, stream=0)


class _StallsOnce:
    """Answers at once, except the first request, which blocks for ``stall_s``."""

    def __init__(self, stall_s: float) -> None:
        self.stall_s, self.calls, self.lock = stall_s, 0, threading.Lock()

    def get_link_list(self, id1, link_type):
        with self.lock:
            self.calls += 1
            first = self.calls == 1
        if first:
            time.sleep(self.stall_s)
        return []


def test_open_loop_latency_counts_from_the_intended_instant():
    """A 0.5 s stall of the first request: every request meant to be sent during the stall
    waits for it, and its latency says so (a client that timed from the late send would
    report one slow request)."""
    rate, total, stall = 100.0, 40, 0.5
    instants = _take(PoissonSchedule(rate, REQ.seed, 0), total)
    # Requests meant within 0.25 s of the first one are sent after the stall ends, at least
    # 0.25 s after their intended instant. Enough of them to hold the median:
    late = int(np.sum(instants - instants[0] < 0.25e9))
    assert late > total // 2
    result = run_client(_StallsOnce(stall),
                        ClientSpec(REQ, threads=1, total=total, rate=rate))
    assert result.completed == total
    assert result.latency.p50 >= 250.0
    assert result.latency.max >= stall * 1000

