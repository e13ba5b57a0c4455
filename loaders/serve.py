"""``debl source serve``: a directory over HTTP on loopback, with a bandwidth cap.

It stands in for the paper's remote server behind a 100 Mbit/s link: every response shares one
token bucket, so the cap holds for the sum of all concurrent transfers, as on a real link.
A file request may carry one HTTP ``Range`` (``bytes=A-B``, ``bytes=A-``, ``bytes=-N``): the
answer is 206 with those bytes, or 416 when the range starts past the end (RFC 9110).
"""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from loaders.source import LocalSource

BLOCK = 64 * 1024
_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


def byte_range(header: str | None, size: int) -> tuple[int, int] | None | str:
    """The inclusive ``(first, last)`` byte of a ``Range`` header over a file of *size* bytes;
    None to send the whole file (no header, an invalid one, or one this server does not serve:
    several ranges, another unit), "unsatisfiable" for a range that starts past the end."""
    m = _RANGE.match(header.strip()) if header else None
    if m is None or m.groups() == ("", ""):
        return None
    first, last = m.groups()
    if not first:  # the last N bytes
        n = int(last)
        return (max(0, size - n), size - 1) if n and size else "unsatisfiable"
    start = int(first)
    if last and int(last) < start:  # invalid: the header is ignored
        return None
    if start >= size:
        return "unsatisfiable"
    return start, min(int(last), size - 1) if last else size - 1


class RateLimiter:
    """A token bucket shared by all transfers; rate in bytes per second (None: no cap)."""

    def __init__(self, rate: float | None, burst: float = 0.05):
        self.rate = rate
        self.capacity = rate * burst if rate else 0.0
        self.tokens = self.capacity
        self.last = time.monotonic()
        self.lock = threading.Lock()

    def take(self, n: int) -> None:
        if not self.rate:
            return
        with self.lock:
            now = time.monotonic()
            self.tokens = min(self.capacity, self.tokens + (now - self.last) * self.rate)
            self.last = now
            self.tokens -= n
            wait = -self.tokens / self.rate if self.tokens < 0 else 0.0
            # Sleeping under the lock serialises transfers: the shared link is the bottleneck.
            if wait:
                time.sleep(wait)


def make_server(directory: Path, host: str = "127.0.0.1", port: int = 8800,
                rate_mb_s: float | None = None) -> ThreadingHTTPServer:
    """An HTTP server for *directory*; call ``serve_forever()`` (or run it in a thread)."""
    source = LocalSource(directory)
    limiter = RateLimiter(rate_mb_s * 1e6 if rate_mb_s else None)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:  # quiet by default
            pass

        def do_GET(self) -> None:
            path = urllib.parse.unquote(urllib.parse.urlparse(self.path).path)
            if path == "/index.json":
                body = json.dumps([f.__dict__ for f in source.list()]).encode()
                self._reply(200, body, "application/json")
            elif path.startswith("/files/") and "/" not in path[7:] and path[7:]:
                self._send_file(path[7:])
            else:
                self._reply(404, b"not found\n", "text/plain")

        def _reply(self, status: int, body: bytes, ctype: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _send_file(self, name: str) -> None:
            file = source.path / name
            if not file.is_file() or name.startswith("."):
                self._reply(404, b"not found\n", "text/plain")
                return
            size = file.stat().st_size
            wanted = byte_range(self.headers.get("Range"), size)
            if wanted == "unsatisfiable":
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{size}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            first, last = wanted or (0, size - 1)
            self.send_response(206 if wanted else 200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Accept-Ranges", "bytes")
            if wanted:
                self.send_header("Content-Range", f"bytes {first}-{last}/{size}")
            self.send_header("Content-Length", str(last - first + 1))
            self.end_headers()
            with open(file, "rb") as f:
                f.seek(first)
                left = last - first + 1
                while left > 0 and (block := f.read(min(BLOCK, left))):
                    left -= len(block)
                    limiter.take(len(block))
                    try:
                        self.wfile.write(block)
                    except (BrokenPipeError, ConnectionResetError):
                        return

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    return server
