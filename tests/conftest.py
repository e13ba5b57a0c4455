"""Shared fixtures. ``stack_config``: the config of a running local stack, for tests marked
``@pytest.mark.stack``.

Outside CI a stack that cannot be brought up skips those tests (with the reason); in CI
(``CI=true``) it fails them, with the error that carries the service's log tail, so a broken
stack is never reported as a green run.
"""

from __future__ import annotations

import os

import pytest

from debl.config import Config, load_config
from tests.ui_browser import browser  # noqa: F401 -- the fixture of tests/test_ui_page*.py


@pytest.fixture(scope="session")
def stack_config() -> Config:
    """The loaded config, after ``stack_up`` (idempotent: fast when every service answers)."""
    try:
        from debl.stack.stack import stack_up

        config = load_config()
        stack_up(config)
    except Exception as exc:  # any failure: missing binaries, ports in use, a service that died
        message = f"the local stack is not available: {type(exc).__name__}: {exc}"
        if os.environ.get("CI") == "true":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return config


@pytest.fixture(scope="session")
def spark(stack_config):
    """The one SparkSession of the test run (DeBL's factory: HBase jars, fs.defaultFS)."""
    from debl.spark.session import spark_session

    session = spark_session(stack_config, "debl-tests")
    yield session
    session.stop()
