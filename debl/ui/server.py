"""The page's HTTP server: one page, its CSS and scripts, and the JSON it polls.

It listens on the loopback only (``127.0.0.1`` by default, any other address refused), answers
GET and HEAD alone (anything else: 501, nothing can change through it) and only requests whose
``Host`` names the loopback, so that a web page elsewhere cannot read it through a DNS name
rebound to 127.0.0.1. The JSON is encoded once per sample, however many pages poll it: the pages
cost the services nothing, the sampler one status read a second (docs/UI.md, "What it costs").

Every response forbids loading anything from another origin (``Content-Security-Policy``): the
page ships whole in the package (``static/``), since the machines reach no other host.
"""

from __future__ import annotations

import errno
import ipaddress
import logging
import re
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources

from debl.config import Config
from debl.errors import ConfigError, DeblError
from debl.ui.payload import encode, page_data
from debl.ui.rejects import RejectSample
from debl.ui.sampler import StatusSampler
from debl.ui.services import ServiceWatch

log = logging.getLogger(__name__)

STATIC = {"/": ("index.html", "text/html; charset=utf-8"),
          "/index.html": ("index.html", "text/html; charset=utf-8"),
          "/ui.css": ("ui.css", "text/css; charset=utf-8"),
          "/ui.js": ("ui.js", "text/javascript; charset=utf-8"),
          "/dom.js": ("dom.js", "text/javascript; charset=utf-8"),
          "/early.js": ("early.js", "text/javascript; charset=utf-8")}
JSON_PATH = "/status.json"
HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
                               "frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def check_loopback(host: str) -> str:
    """*host* if it is a loopback address, else ConfigError: the page shows the load to anyone
    who reaches it, and has no login."""
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise ConfigError(f"debl ui listens on the loopback only (127.0.0.1), not {host!r}: "
                          "the page has no login. To watch from another machine, forward the "
                          "port (e.g. ssh -L 8790:127.0.0.1:8790 this-host)")
    return host


# host [":" port], the host an IPv6 address in brackets or anything without a colon
_HOST = re.compile(r"(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<name>[^:\[\]]+))(?::(?P<port>\d{1,5}))?")


def _host_is_loopback(header: str | None) -> bool:
    """A ``Host`` header naming the loopback: an IP address that is a loopback one (IPv6 in
    brackets) or ``localhost``, with an optional port (any: an ssh forward may change it).

    Pitfall: a name is never judged by how it starts. ``127.attacker.example`` is a DNS name
    its owner can point at 127.0.0.1 (the rebinding this guard exists for); only a value that
    parses as an address is one (docs/UI.md, "Decisions")."""
    if not header:
        return False
    m = _HOST.fullmatch(header.strip())
    if m is None or int(m.group("port") or 0) > 65535:
        return False
    name = m.group("v6") or m.group("name")
    if m.group("name") is not None and name.lower() == "localhost":
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    return address.is_loopback and (m.group("v6") is not None) == (address.version == 6)


class _Handler(BaseHTTPRequestHandler):
    server: "_HTTPServer"
    protocol_version = "HTTP/1.1"
    timeout = 30.0  # the socket's (read by setup): an idle connection lets go of its thread

    def log_message(self, format: str, *args: object) -> None:  # quiet: a page polls each second
        pass

    def do_HEAD(self) -> None:
        self.do_GET(body=False)

    def do_GET(self, body: bool = True) -> None:
        path = self.path.split("?", 1)[0]
        if not _host_is_loopback(self.headers.get("Host")):
            self._reply(403, b"this page answers requests for 127.0.0.1 only\n",
                        "text/plain; charset=utf-8", body)
        elif path == JSON_PATH:
            self._reply(200, self.server.ui.json(), "application/json", body)
        elif path in STATIC:
            name, ctype = STATIC[path]
            self._reply(200, self.server.ui.static(name), ctype, body)
        else:
            self._reply(404, b"not found\n", "text/plain; charset=utf-8", body)

    def _reply(self, status: int, data: bytes, ctype: str, body: bool) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for name, value in HEADERS.items():
            self.send_header(name, value)
        self.end_headers()
        if body:
            self.wfile.write(data)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    ui: "UIServer"

    def handle_error(self, request, client_address) -> None:
        """A page closed mid-request is routine; anything else is one line in the log."""
        exc = sys.exc_info()[1]
        if not isinstance(exc, (ConnectionError, TimeoutError)):
            log.warning("debl ui: a request failed: %r", exc)


class UIServer:
    """The sampler, the service watch and the HTTP server of one ``debl ui``. ``start`` runs
    them in threads; ``close`` stops them. *port* None: ``ui.port``; 0: any free port (``url``
    says which)."""

    def __init__(self, config: Config, port: int | None = None, host: str = "127.0.0.1",
                 interval: float = 1.0):
        self.config = config
        self.interval = interval
        port = config.ui.port if port is None else port
        self.sampler = StatusSampler(config, interval)
        self.services = ServiceWatch(config)
        self.rejects = RejectSample(config)
        try:
            secret = config.mysql_secret
        except ConfigError:  # no password known: MySQL's mark will say so
            secret = None
        self._secrets = [secret]
        self._static = {name: (resources.files("debl.ui") / "static" / name).read_bytes()
                        for name, _ in STATIC.values()}
        self._cache: tuple[tuple[int, int], bytes] | None = None
        self._cache_lock = threading.Lock()
        try:
            self.httpd = _HTTPServer((check_loopback(host), port), _Handler)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise ConfigError(f"port {port} on {host} is in use: give another with "
                                  "`debl ui --port N` (or [ui] port in debl.toml)") from None
            raise DeblError(f"debl ui cannot listen on {host}:{port}: {exc}") from None
        self.httpd.ui = self
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self.httpd.socket.getsockname()[:2]
        return f"http://{host}:{port}/"

    def start(self) -> "UIServer":
        self.sampler.start()
        self.services.start()
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="debl-ui-http",
                                        daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self.sampler.stop()
        self.services.stop()
        if self._thread is not None:
            self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> "UIServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def static(self, name: str) -> bytes:
        return self._static[name]

    def json(self) -> bytes:
        """The page's JSON, encoded at most once per sample and interval however many pages
        poll (a read that hangs still lets the snapshot's age grow on the page)."""
        snapshot = self.sampler.snapshot()
        key = (snapshot.version, int(time.monotonic() / self.interval))
        with self._cache_lock:
            if self._cache is None or self._cache[0] != key:
                data = page_data(self.config, snapshot, self.services.marks(), self.rejects,
                                 self.interval)
                self._cache = (key, encode(data, self._secrets))
            return self._cache[1]


def serve_ui(config: Config, port: int | None = None,
             report: Callable[[str], None] = lambda _: None) -> None:
    """Serve the page until interrupted (Ctrl-C)."""
    with UIServer(config, port) as ui:
        report(f"DeBL's status page: {ui.url} (Ctrl-C stops it)")
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            report("stopped")
