"""Shared fixtures and the suite's tiers (docs/ARCHITECTURE.md, "The test suite").

``stack_config``: the config of a running local stack. A test that uses it (directly or through
another fixture, such as ``spark``) is marked ``stack`` here, whether or not it says so, so
``pytest -m "not stack"`` is the quick tier: no service started, minutes. A test marked
``exclusive`` stops, freezes or restarts a service of the shared stack: the README's test
command runs those alone, after the others (scripts/test.sh).

Several test processes may share one stack (pytest-xdist's workers, ``-n``): each worker then
works in a namespace of its own, its catalog database, HBase tables and HDFS root named after
it (``DEBL_MYSQL_DATABASE`` and the others, set before any config is read, so the commands the
tests start inherit them), so no worker sees another's loads or current day.

Outside CI a stack that cannot be brought up skips the stack tests (with the reason); in CI
(``CI=true``) it fails them, with the error that carries the service's log tail, so a broken
stack is never reported as a green run.

Hypothesis: the profile ``ci`` (under ``CI=true``) draws the same examples every run
(``derandomize``), so CI never fails at random on an example it never drew before; ``dev``
draws new ones each run. Neither has a deadline: a stack test's example waits on services.
"""

from __future__ import annotations

import dataclasses
import os

import pytest
from hypothesis import settings

from debl.config import Config, load_config
from tests.ui_browser import browser  # noqa: F401 -- the fixture of tests/test_ui_page*.py
from tests.unavailable import unavailable

_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
# The suite's Spark jobs are seconds long: the C1 JIT alone runs them on less
# CPU (spark.java_options; docs/ARCHITECTURE.md, "The test suite's wall time, measured").
os.environ.setdefault("DEBL_SPARK_JAVA_OPTIONS", "-XX:TieredStopAtLevel=1")
# The stack's own catalog database, read before a worker's namespace is set: the stack grants
# its user that database and the ones named after it (`<database>_...`), so a worker's database
# is `<database>_<worker>`, and the stack is always brought up under the shared name (a stack
# first started by a worker would otherwise grant that worker's database alone).
_STACK_DATABASE = load_config().mysql.database
if _WORKER:
    os.environ.setdefault("DEBL_MYSQL_DATABASE", f"{_STACK_DATABASE}_{_WORKER}")
    os.environ.setdefault("DEBL_HBASE_TABLE", f"linktable_{_WORKER}")
    os.environ.setdefault("DEBL_HDFS_ROOT", f"/debl-{_WORKER}")

settings.register_profile("ci", deadline=None, derandomize=True, print_blob=True)
settings.register_profile("dev", deadline=None)
settings.load_profile("ci" if os.environ.get("CI") == "true" else "dev")


# First: pytest-xdist's own hook reads the groups (`--dist loadgroup`) and runs before a
# conftest's, so a group marked after it would be ignored and a module's tests spread over
# every worker, each making and dropping the module's tables under the others.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark ``stack`` every test that needs the stack's config, however it gets it; keep a
    module's tests on one worker of a parallel run (its module fixtures, such as a loaded data
    set, are made once), unless a test names a group of its own (``xdist_group``); run the
    ``long`` ones first."""
    for item in items:
        if "stack_config" in getattr(item, "fixturenames", ()) \
                and item.get_closest_marker("stack") is None:
            item.add_marker(pytest.mark.stack)
        if item.get_closest_marker("xdist_group") is None and isinstance(item, pytest.Function):
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))
    items.sort(key=lambda item: item.get_closest_marker("long") is None)  # stable: else as found


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """Refuse a parallel run whose groups are not in effect: pytest-xdist groups a test by a
    suffix it adds to the test's id, which pytest 9.2 no longer keeps (pytest-xdist issue 1386;
    pyproject.toml pins pytest below it), and nothing else would tell: the run would go on
    with a module's tests on every worker, failing at random."""
    if _WORKER and session.config.getvalue("loadgroup"):
        ungrouped = [item.nodeid for item in session.items if "@" not in item.nodeid]
        if ungrouped:
            raise pytest.UsageError(
                f"pytest-xdist's groups are not in effect ({ungrouped[0]} has none) with "
                f"pytest {pytest.__version__}: install the versions pyproject.toml's dev extra "
                "gives (pip install -e '.[dev]')")


@pytest.fixture(scope="session")
def stack_config() -> Config:
    """The loaded config, after ``stack_up`` (idempotent: fast when every service answers)."""
    try:
        from debl.stack.stack import stack_up

        config = load_config()
        stack_up(dataclasses.replace(
            config, mysql=dataclasses.replace(config.mysql, database=_STACK_DATABASE)))
    except Exception as exc:  # any failure: missing binaries, ports in use, a service that died
        message = f"the local stack is not available: {type(exc).__name__}: {exc}"
        unavailable(message)
    return config


@pytest.fixture(scope="session")
def spark(stack_config):
    """The one SparkSession of the test run (DeBL's factory: HBase jars, fs.defaultFS)."""
    from debl.spark.session import spark_session

    session = spark_session(stack_config, "debl-tests")
    yield session
    session.stop()
