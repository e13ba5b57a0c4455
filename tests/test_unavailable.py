"""A missing service or tool fails a test under CI=true and skips it elsewhere."""

import pytest

from tests.unavailable import unavailable


def test_a_missing_service_fails_under_ci(monkeypatch):
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="no stack"):
        unavailable("no stack")


def test_a_missing_service_skips_outside_ci(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no stack"):
        unavailable("no stack")
