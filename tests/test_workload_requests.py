"""LinkBench's request id choice: Zipf(0.8), shuffled, 0.5% towards high-degree ids."""

from __future__ import annotations

import numpy as np
import pytest

from debl.errors import ConfigError
from debl.workload.distribution import ZipfSampler, zeta
from debl.workload.requests import RequestSpec, RequestStream
from debl.workload.shuffle import degree_shuffler, request_shuffler
from debl.workload.spec import GenerateSpec
from debl.workload.synth import SynthContext

SPEC = RequestSpec(max_id=100_001, start_id=1, link_types=2, seed=11)


def test_deterministic_per_seed_and_stream():
    a = RequestStream(SPEC, stream=0).draw(5000)
    b = RequestStream(SPEC, stream=0).draw(5000)
    c = RequestStream(SPEC, stream=1).draw(5000)
    d = RequestStream(RequestSpec(max_id=100_001, seed=12), stream=0).draw(5000)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not np.array_equal(a[0], c[0]) and not np.array_equal(a[0], d[0])


def test_iteration_matches_batches():
    stream = RequestStream(SPEC, stream=3, batch=100)
    first = [next(stream) for _ in range(250)]
    ids, types = RequestStream(SPEC, stream=3, batch=100).draw(100)
    assert first[:100] == list(zip(ids.tolist(), types.tolist()))
    assert all(isinstance(i, int) and isinstance(t, int) for i, t in first)


def test_range_and_uniform_link_types():
    ids, types = RequestStream(SPEC).draw(200_000)
    assert ids.min() >= 1 and ids.max() < 100_001
    assert set(types.tolist()) == {123456789, 123456790}
    assert np.mean(types == 123456789) == pytest.approx(0.5, abs=0.01)


def test_top_one_percent_of_ids_gets_the_zipf_share():
    ids, _ = RequestStream(SPEC).draw(400_000)
    counts = np.bincount(ids - 1, minlength=100_000)
    top = np.sort(counts)[::-1][:1000].sum() / len(ids)
    expected = ZipfSampler(0, 100_000).top_share(1000)
    assert top == pytest.approx(expected, abs=0.03)
    # ... and the hottest ids are scattered, not the smallest ones.
    hottest = np.argsort(counts)[::-1][:100]
    assert np.median(hottest) > 10_000


def test_streams_compose_as_linkbench():
    n = 100_000
    ids, _ = RequestStream(SPEC).draw(400_000)
    offsets = ids - 1
    # The hottest uncorrelated id is the uncorrelated shuffle's image of rank 0.
    assert np.bincount(offsets).argmax() == request_shuffler(n).permute(0)
    # The correlated 0.5% go to high-degree ids: rank k of the degree order.
    top_degree_ids = degree_shuffler(n).inverse(np.arange(10))
    share = np.isin(offsets, top_degree_ids).mean()
    zipf = ZipfSampler(0, n)
    # Plus what the uncorrelated stream sends them by chance, at their uncorrelated ranks.
    by_chance = sum((int(r) + 1) ** -0.8 for r in request_shuffler(n).inverse(top_degree_ids))
    expected = 0.005 * zipf.top_share(10) + 0.995 * by_chance / zeta(n, 0.8)
    assert share == pytest.approx(expected, rel=0.25)


def test_correlated_stream_hits_high_degree_ids():
    spec = RequestSpec(max_id=100_001, seed=2, uncorrelated_share=0.0)
    ids, _ = RequestStream(spec).draw(50_000)
    ctx = SynthContext.of(GenerateSpec(max_id=100_001))
    degree_of_requested = ctx.degrees(1, 100_001)[ids - 1]
    # Requests weighted by Zipf on degree rank: the mean requested degree dwarfs the mean degree.
    assert degree_of_requested.mean() > 50 * 4.1
    assert np.median(degree_of_requested) >= 4  # Zipf median rank ~ n/32: degree 5; overall: 1


def test_rejects_empty_range():
    with pytest.raises(ConfigError):
        RequestSpec(max_id=1, start_id=1)


# ---------------------------------------------------------------- hotness that follows recency

N = 100_000


def _newest_share(ids: np.ndarray, fraction: float) -> float:
    """The share of requests for the newest ``fraction`` of the ids [1, N+1)."""
    return float(np.mean(ids > N - int(N * fraction)))


def test_recency_share_zero_is_linkbench_exactly():
    plain = RequestStream(SPEC, stream=2).draw(20_000)
    zero = RequestStream(RequestSpec(max_id=100_001, link_types=2, seed=11, recency_share=0.0),
                         stream=2).draw(20_000)
    assert all(np.array_equal(x, y) for x, y in zip(plain, zero))


def test_recency_draws_are_zipf_over_recency_rank():
    spec = RequestSpec(max_id=N + 1, seed=5, recency_share=1.0)
    ids, types = RequestStream(spec).draw(400_000)
    zipf = ZipfSampler(0, N)
    counts = np.bincount(N - ids, minlength=N)  # recency rank: 0 is the newest id, N
    assert ids.max() == N and ids.min() >= 1
    assert counts[0] / len(ids) == pytest.approx(1 / zeta(N, 0.8), rel=0.05)
    assert counts[0] > counts[1] > counts[10] > counts[1000]  # hottest first, newest first
    for fraction in (0.01, 0.1, 0.2):
        expected = zipf.top_share(int(N * fraction))
        assert _newest_share(ids, fraction) == pytest.approx(expected, abs=0.015)
    assert np.mean(types == 123456789) == pytest.approx(0.5, abs=0.01)


def test_recency_share_mixes_the_two_streams():
    """A share S of the requests follows recency, the rest LinkBench: the share of requests
    for the newest ids is the S-weighted mix of the two streams' shares."""
    only_recent = RequestStream(RequestSpec(max_id=N + 1, seed=21, recency_share=1.0)).draw(
        300_000)[0]
    linkbench = RequestStream(RequestSpec(max_id=N + 1, seed=22)).draw(300_000)[0]
    for s in (0.3, 0.9):
        mixed = RequestStream(RequestSpec(max_id=N + 1, seed=23, recency_share=s)).draw(
            300_000)[0]
        for fraction in (0.01, 0.2):
            expected = s * _newest_share(only_recent, fraction) + \
                (1 - s) * _newest_share(linkbench, fraction)
            assert _newest_share(mixed, fraction) == pytest.approx(expected, abs=0.01)
    # LinkBench alone is blind to recency: the newest 20% of ids get about 20% of its requests
    assert _newest_share(linkbench, 0.2) == pytest.approx(0.2, abs=0.05)


def test_recency_streams_are_deterministic_per_seed_and_stream():
    spec = RequestSpec(max_id=N + 1, seed=3, recency_share=0.6)
    a = RequestStream(spec, stream=4).draw(5000)
    b = RequestStream(spec, stream=4).draw(5000)
    c = RequestStream(spec, stream=5).draw(5000)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not np.array_equal(a[0], c[0])


@pytest.mark.parametrize("share", [-0.1, 1.5])
def test_recency_share_outside_zero_one_is_refused(share):
    with pytest.raises(ConfigError, match="--recency-share"):
        RequestSpec(max_id=100, recency_share=share)
