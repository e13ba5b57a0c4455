"""``debl source serve``: a directory over HTTP on loopback, with a bandwidth cap.

It stands in for the paper's remote server behind a 100 Mbit/s link: every response shares one
token bucket, so the cap holds for the sum of all concurrent transfers, as on a real link.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from loaders.source import LocalSource

BLOCK = 64 * 1024


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
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(file.stat().st_size))
            self.end_headers()
            with open(file, "rb") as f:
                while block := f.read(BLOCK):
                    limiter.take(len(block))
                    try:
                        self.wfile.write(block)
                    except (BrokenPipeError, ConnectionResetError):
                        return

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    return server
