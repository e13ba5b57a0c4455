"""The invertible shuffler: a permutation of [0, n), its inverse, determinism, and spread."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from debl.errors import ConfigError
from debl.workload.shuffle import Shuffler, degree_shuffler, request_shuffler


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 15, 16, 17, 1000, 4095, 4096, 4097, 65_537])
def test_is_a_permutation_and_invertible(n):
    s = Shuffler(n, seed=42)
    x = np.arange(n)
    y = s.permute(x)
    assert np.array_equal(np.sort(y), x)
    assert np.array_equal(s.inverse(y), x)
    assert np.array_equal(s.permute(s.inverse(x)), x)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 1 << 40), seed=st.integers(0, (1 << 64) - 1), data=st.data())
def test_scalar_round_trip_on_any_range(n, seed, data):
    s = Shuffler(n, seed)
    x = data.draw(st.integers(0, n - 1))
    y = s.permute(x)
    assert isinstance(y, int) and 0 <= y < n
    assert s.inverse(y) == x


def test_deterministic_and_seed_dependent():
    x = np.arange(10_000)
    assert np.array_equal(Shuffler(10_000, 1).permute(x), Shuffler(10_000, 1).permute(x))
    assert not np.array_equal(Shuffler(10_000, 1).permute(x), Shuffler(10_000, 2).permute(x))
    assert not np.array_equal(degree_shuffler(10_000).permute(x),
                              request_shuffler(10_000).permute(x))


def test_spreads_neighbours_apart():
    n = 1_000_000
    y = Shuffler(n, 9).permute(np.arange(n))
    assert abs(np.corrcoef(np.arange(n), y)[0, 1]) < 0.01
    # Consecutive ids land far apart: mean gap near n/3 (for independent uniforms).
    assert np.mean(np.abs(np.diff(y))) == pytest.approx(n / 3, rel=0.05)


def test_rejects_values_outside_the_range():
    s = Shuffler(10, 3)
    with pytest.raises(ValueError):
        s.permute(10)
    with pytest.raises(ValueError):
        s.inverse(np.array([-1]))
    with pytest.raises(ConfigError):
        Shuffler(0, 3)


def test_keeps_shape():
    s = Shuffler(100, 3)
    x = np.arange(100).reshape(10, 10)
    assert s.permute(x).shape == (10, 10)
    assert s.permute(np.empty(0, dtype=np.int64)).shape == (0,)
