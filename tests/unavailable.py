"""What a test does when a service or tool it needs is missing: outside CI it skips (with the
reason); under ``CI=true`` it fails, so a broken set-up is never reported as a green run."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def unavailable(message: str) -> NoReturn:
    if os.environ.get("CI") == "true":
        pytest.fail(message, pytrace=False)
    pytest.skip(message)
