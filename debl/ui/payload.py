"""The JSON the page polls, built from the sampler's snapshot, the service marks and the
rejects, and encoded with every credential scrubbed.

The status holds none (the catalog records a source URL without its password,
``loaders.source``, and MySQL's errors name the account, never its password), and the scrub
keeps it so whatever a future field or error message carries: an ``http(s)://user:password@``
loses its password, and the MySQL password, where it appears in any text, becomes ``***``.
tests/test_ui.py checks both, and the real page of a load from a URL with a password.
"""

from __future__ import annotations

import json
import re
import time

from debl.config import Config
from debl.ui.rejects import RejectSample
from debl.ui.sampler import Snapshot
from debl.ui.services import ServiceMark

# scheme://user:password@ -> scheme://user@ (the user name says which account; as loaders.source)
_URL_PASSWORD = re.compile(r"(?i)\b(https?://[^/\s:@\"]*):[^@/\s\"]*@")
MIN_SECRET_CHARS = 4  # a shorter password would replace innocent text; none is that short


def page_data(config: Config, snapshot: Snapshot, services: list[ServiceMark],
              rejects: RejectSample, interval: float) -> dict:
    """Everything the page shows, as one JSON-ready dict (docs/UI.md lists the fields)."""
    now = time.time()
    status = snapshot.status
    mysql = ServiceMark("MySQL", f"{config.mysql.host}:{config.mysql.port}",
                        None if snapshot.version == 0 else snapshot.error is None,
                        snapshot.error or f"database {config.mysql.database} answers",
                        snapshot.status_at if snapshot.error is None else now)
    load = status["load"] if status else None
    return {
        "served_at": now,
        "interval_s": interval,
        "dataset": {"database": config.mysql.database, "mysql": mysql.address},
        "status": status,
        "status_age_s": None if snapshot.status_at is None else now - snapshot.status_at,
        "error": snapshot.error,
        "error_since": snapshot.error_since,
        "services": [m.as_dict() for m in [mysql, *services]],
        "history": snapshot.history,
        "early_history": snapshot.early_history,
        "rejects": (rejects.of(load["load_id"], load["rejects"]["total"])
                    if load and "rejects" in load else None),
    }


def scrub(text: str, secrets: list[str | None]) -> str:
    """*text* with URL passwords dropped and each of *secrets* replaced by ``***``."""
    text = _URL_PASSWORD.sub(r"\1@", text)
    for secret in secrets:
        if secret and len(secret) >= MIN_SECRET_CHARS:
            text = text.replace(secret, "***")
            text = text.replace(json.dumps(secret)[1:-1], "***")  # as JSON escapes it
    return text


def encode(data: dict, secrets: list[str | None]) -> bytes:
    return scrub(json.dumps(data, separators=(",", ":")), secrets).encode()
