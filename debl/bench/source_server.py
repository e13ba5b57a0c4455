"""``debl source serve``: a directory over HTTP on loopback, with a bandwidth cap.

It stands in for the paper's remote server behind a 100 Mbit/s wire: every response shares one
token bucket, so the cap holds for the sum of all concurrent transfers, as on a real wire.
A file request may carry an HTTP ``Range`` (``bytes=A-B``, ``bytes=A-``, ``bytes=-N``, or
several of them, comma-separated): the answer is 206 with those bytes (several ranges: one
``multipart/byteranges`` body, which the split-point sample asks for, a file's reads at once),
or 416 when every range starts past the end (RFC 9110). Every file answer carries
``Last-Modified``: the HTTP source compares it before and after a transfer.

``index.json`` lists every file with its manifest (docs/LOADING.md, "The manifest"): taken from
the directory's own ``index.json`` when it matches the file, else computed and cached
(``debl.bench.manifest_cache``) before the server answers its first request.

It never serves outside its directory (docs/RELIABILITY.md, "Security"): a file is a plain name
in the directory (no ``/``, no leading dot, no NUL, whatever the percent-encoding), and its real
path (symlinks resolved) must lie in the directory's real path; ``index.json`` lists only such
files.

Many clients, some hostile (docs/RELIABILITY.md, "Security"): each connection has a thread of
its own and the accept loop never waits for one, so clients that connect and send nothing
cannot stop others from being served (16 of them once held every handler slot, and the accept
loop with them, for a minute). At most *max_connections* are open at once: past that a new
client is answered 503 at once and its connection closed. A connection that sends no request
(or nothing more on a kept-alive one), or stops reading its answer, for *timeout* seconds is
closed. A connection serves any number of requests (HTTP/1.1 keep-alive: every answer carries
its ``Content-Length``), which the HTTP source reuses for its ranged reads.

A ``Range`` is answered whatever its numbers: one of thousands of digits (past ``int()``'s limit)
starts past any file (416) or ends past it (to the file's end); it once dropped the connection.
"""

from __future__ import annotations

import email.utils
import json
import logging
import os
import re
import secrets
import socket
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from debl.bench.manifest_cache import ServedManifests
from debl.config import Config
from debl.measure import thread_cpu
from loaders.source import LocalSource, SourceFile

log = logging.getLogger(__name__)

BLOCK = 64 * 1024
SEND_BUFFER = 64 * 1024  # a capped connection's socket send buffer
_SPEC = re.compile(r"^(\d*)-(\d*)$")
MAX_RANGES = 1024  # ranges of one request; more, or overlapping ones, get the whole file


def byte_ranges(header: str | None, size: int) -> list[tuple[int, int]] | None | str:
    """The inclusive ``(first, last)`` bytes of a ``Range`` header (``bytes=A-B, C-, -N``)
    over a file of *size* bytes, in the header's order; None to send the whole file (no
    header, an invalid one, another unit, more than MAX_RANGES ranges, or ranges that overlap:
    a request of many overlapping ranges would make the answer larger than the file, as RFC
    9110 lets a server decline); "unsatisfiable" when every range starts past the end. Ranges
    that start past the end are left out."""
    if not header or not header.strip().startswith("bytes="):
        return None
    specs = header.strip()[6:].split(",")
    if len(specs) > MAX_RANGES:
        return None
    wanted: list[tuple[int, int]] = []
    for spec in specs:
        m = _SPEC.match(spec.strip())
        if m is None or m.groups() == ("", ""):
            return None
        one = _one_range(m.group(1), m.group(2), size)
        if one is None:
            return None
        if isinstance(one, tuple):  # not "unsatisfiable"
            wanted.append(one)
    if not wanted:
        return "unsatisfiable"
    spans = sorted(wanted)
    if any(b[0] <= a[1] for a, b in zip(spans, spans[1:])):
        return None
    return wanted


def byte_range(header: str | None, size: int) -> tuple[int, int] | None | str:
    """``byte_ranges`` of a header that asks for one range (None for several)."""
    wanted = byte_ranges(header, size)
    if isinstance(wanted, list):
        return wanted[0] if len(wanted) == 1 else None
    return wanted


def _one_range(first: str, last: str, size: int) -> tuple[int, int] | None | str:
    if not first:  # the last N bytes
        n = _number(last)
        return (max(0, size - n), size - 1) if n and size else "unsatisfiable"
    start = _number(first)
    if last and _number(last) < start:  # invalid: the header is ignored
        return None
    if start >= size:
        return "unsatisfiable"
    return start, min(_number(last), size - 1) if last else size - 1


_PAST_ANY_FILE = 1 << 64


def _number(digits: str) -> int:
    """A Range number; one of more than 19 significant digits (``int()`` refuses past 4,300)
    is past the end of any file, and stands as 2^64."""
    digits = digits.lstrip("0") or "0"
    return int(digits) if len(digits) <= 19 else _PAST_ANY_FILE


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
            # Sleeping under the lock serialises transfers: the shared wire is the bottleneck.
            if wait:
                time.sleep(wait)


class _Server(ThreadingHTTPServer):
    """A thread per connection, at most *max_connections* open: past that a client is told
    503 at once, so the accept loop never waits (see the module's docstring)."""

    daemon_threads = True
    request_queue_size = 128  # the listen backlog: a burst of connections is not refused
    _BUSY_BODY = b"too many connections: try again shortly\r\n"
    _BUSY = (b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Type: text/plain"
             b"\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
             % (len(_BUSY_BODY), _BUSY_BODY))

    def __init__(self, address, handler, max_connections: int):
        self.max_connections = max_connections
        self._open = 0
        self._count_lock = threading.Lock()
        super().__init__(address, handler)

    def process_request(self, request, client_address) -> None:
        with self._count_lock:
            busy = self._open >= self.max_connections
            if not busy:
                self._open += 1
        if busy:
            self._refuse(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._closed()
            raise

    def process_request_thread(self, request, client_address) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._closed()

    def _closed(self) -> None:
        with self._count_lock:
            self._open -= 1

    def _refuse(self, request) -> None:
        """Answer 503 without a thread and without waiting: the request is not read. What
        it already sent is read first (without blocking), so the close is a FIN the client
        reads the answer before, not a reset that may discard it."""
        try:
            request.setblocking(False)
            try:
                request.sendall(self._BUSY)
                time.sleep(0.001)  # the request usually follows the connection at once
                while request.recv(65536):
                    pass
            except (BlockingIOError, InterruptedError):
                pass
        except OSError:
            pass
        self.shutdown_request(request)

    def handle_error(self, request, client_address) -> None:
        """A client that hangs up mid-request (a sampler that has read what it needed, a killed
        load) is routine: no traceback on stderr. Anything else is one line in the log."""
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError)):
            return
        log.warning("source server: a request from %s failed: %r", client_address[0], exc)


class _Files:
    """The served directory: which request names are files in it, by the rules above."""

    def __init__(self, directory: Path, manifest_cache: Path | None,
                 progress: Callable[[str], None] | None):
        self.source = LocalSource(directory)
        self.root = Path(os.path.realpath(directory))
        self.manifests = ServedManifests(self.source, manifest_cache, progress)

    def inside(self, name: str) -> Path | None:
        """The file a request's name stands for, or None if it is not a served file."""
        if not name or name.startswith(".") or "/" in name or "\0" in name:
            return None
        real = Path(os.path.realpath(self.root / name))
        if self.root not in real.parents:
            return None  # a symlink out of the directory
        return real if real.is_file() else None

    def served(self) -> list[SourceFile]:
        return [f for f in self.source.list() if self.inside(f.name) is not None]

    def listing(self) -> list[dict]:
        return self.manifests.entries(self.served())


def manifest_cache_dir(config: Config) -> Path:
    """Where a source server keeps the manifests it computed (docs/LOADING.md, "The
    manifest")."""
    return config.state_dir / "manifests"


def make_server(directory: Path, host: str = "127.0.0.1", port: int = 8800,
                rate_mb_s: float | None = None, max_connections: int = 256,
                timeout: float = 60.0, manifest_cache: Path | None = None,
                progress: Callable[[str], None] | None = None) -> ThreadingHTTPServer:
    """An HTTP server for *directory*; call ``serve_forever()`` (or run it in a thread).
    Every file's manifest is ready before it returns (cached on disk under *manifest_cache*,
    a directory, when given; *progress* gets a line per file)."""
    files = _Files(directory, manifest_cache, progress)
    limiter = RateLimiter(rate_mb_s * 1e6 if rate_mb_s else None)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # The headers and the body are two writes: with Nagle's algorithm the body of a
        # kept-alive connection waited for the client's delayed ACK on every request
        # (docs/LOADING.md, "What the sample costs").
        disable_nagle_algorithm = True

        def setup(self) -> None:
            # the socket's: an idle or stalled client lets go of its thread
            self.timeout = timeout  # type: ignore[misc]  # per server, read by setup below
            if limiter.rate:
                # The cap counts a byte as sent when it is written to the socket: a small
                # send buffer keeps that close to when it leaves, as on a real wire, where
                # what a paused client has not read waits at the server (docs/LOADING.md,
                # "The copy follows demand").
                self.request.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)
            super().setup()

        def log_message(self, format: str, *args: object) -> None:  # quiet by default
            pass

        def handle(self) -> None:  # a connection's requests: the server's CPU, not the load's
            with thread_cpu.counted(thread_cpu.SOURCE_SERVER):
                super().handle()

        def do_GET(self) -> None:
            path = urllib.parse.unquote(urllib.parse.urlparse(self.path).path,
                                        errors="surrogateescape")
            if path == "/index.json":
                body = json.dumps(files.listing()).encode()
                self._reply(200, body, "application/json")
            elif path.startswith("/files/") and (file := files.inside(path[7:])) is not None:
                self._send_file(file)
            else:
                self._reply(404, b"not found\n", "text/plain")

        def _reply(self, status: int, body: bytes, ctype: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _send_file(self, file: Path) -> None:
            try:
                f = open(file, "rb")
            except OSError:
                self._reply(404, b"not found\n", "text/plain")
                return
            with f:
                st = os.fstat(f.fileno())
                size = st.st_size
                modified = email.utils.formatdate(st.st_mtime, usegmt=True)
                wanted = byte_ranges(self.headers.get("Range"), size)
                if isinstance(wanted, str):  # "unsatisfiable"
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{size}")
                    self.send_header("Last-Modified", modified)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(206 if wanted else 200)
                self.send_header("Accept-Ranges", "bytes")
                self.send_header("Last-Modified", modified)
                if wanted and len(wanted) > 1:
                    self._send_parts(f, size, wanted)
                    return
                first, last = wanted[0] if wanted else (0, size - 1)
                self.send_header("Content-Type", "application/octet-stream")
                if wanted:
                    self.send_header("Content-Range", f"bytes {first}-{last}/{size}")
                self.send_header("Content-Length", str(last - first + 1))
                self.end_headers()
                self._send_bytes(f, first, last)

        def _send_parts(self, f, size: int, wanted: list[tuple[int, int]]) -> None:
            """A ``multipart/byteranges`` body (RFC 9110 section 14.6): each range after
            its own head, in the header's order; its length told up front."""
            boundary = secrets.token_hex(16)
            heads = [(f"\r\n--{boundary}\r\nContent-Type: application/octet-stream\r\n"
                      f"Content-Range: bytes {a}-{b}/{size}\r\n\r\n").encode()
                     for a, b in wanted]
            tail = f"\r\n--{boundary}--\r\n".encode()
            length = sum(map(len, heads)) + sum(b - a + 1 for a, b in wanted) + len(tail)
            self.send_header("Content-Type", f"multipart/byteranges; boundary={boundary}")
            self.send_header("Content-Length", str(length))
            self.end_headers()
            for head, (first, last) in zip(heads, wanted):
                limiter.take(len(head))
                self.wfile.write(head)
                if not self._send_bytes(f, first, last):
                    return
            self.wfile.write(tail)

        def _send_bytes(self, f, first: int, last: int) -> bool:
            """Bytes first..last of *f*; False if the client hung up."""
            f.seek(first)
            left = last - first + 1
            while left > 0 and (block := f.read(min(BLOCK, left))):
                left -= len(block)
                limiter.take(len(block))
                try:
                    self.wfile.write(block)
                except (BrokenPipeError, ConnectionResetError):
                    return False
            return True

    server = _Server((host, port), Handler, max_connections)  # the port taken before the work
    try:
        files.manifests.prepare(files.served())
    except BaseException:
        server.server_close()
        raise
    return server
