"""An HTTP source's URL as DeBL shows it, never with a password, and the refusal of a URL that
holds one (docs/LOADING.md, "Decisions where DESIGN is silent", row "HTTP sources"): a password
in a URL would sit in ``debl load``'s argv (readable by any local user in /proc) and in the
shell's history; it comes from the config instead (``loaders.http_client.source_credentials``).
Every URL DeBL records or shows goes through ``redact_url`` (or ``redacted``).
"""

from __future__ import annotations

import urllib.parse
from pathlib import Path

from debl.errors import SourceError


def redacted(parsed: urllib.parse.ParseResult) -> str:
    """The URL without its password (the user name stays: it says which account)."""
    if parsed.password is None:
        return parsed.geturl()
    host = parsed.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{parsed.username}@{host}" + (f":{parsed.port}" if parsed.port else "")
    return parsed._replace(netloc=netloc).geturl()


def check_no_password(spec: str | Path) -> None:
    """SourceError if *spec* is an http(s) URL that holds a password (refused: see the module
    docstring); the message shows the URL without it and says where the password goes."""
    text = str(spec)
    if not text.startswith(("http://", "https://")):
        return
    if urllib.parse.urlparse(text).password is not None:
        raise SourceError(
            f"source {redact_url(text)}: the URL holds a password, which would be in the "
            "command line (readable by every local user in /proc) and in the shell's history: "
            "give the URL without it, and the password in DEBL_SOURCE_PASSWORD or in a file "
            "only you can read named by source.password_file (README, \"Configuration\")")


def redact_url(text: str) -> str:
    """*text* with the password of an http(s) URL dropped; any other text unchanged."""
    if not text.startswith(("http://", "https://")):
        return text
    return redacted(urllib.parse.urlparse(text))
