"""A tiny hostile HTTP source for the tests: the protocol of ``debl source serve`` (index.json,
files/NAME, one ``Range``, ``Last-Modified``), written independently of it, with faults on
demand:

- ``drop(name, at, times)``: a transfer of *name* that reaches byte *at* sends the bytes before
  it, then closes the connection, its ``Content-Length`` promised in full (*times* transfers,
  None: every one);
- ``lie(name, size)``: index.json gives *size* for *name*;
- ``mutate(name, at, change)``: once a transfer of *name* has sent the bytes before *at*,
  ``change(path)`` runs (it rewrites the file), then the transfer goes on;
- ``hold(name)``: whole-file transfers of *name* wait until the returned event is set;
- ``require_auth(user, password)``: every request without that HTTP basic authentication is
  answered 401;
- ``serve_listing(entries, files)``: index.json is *entries* as given (any JSON: names that
  climb out of a directory, numbers that are not, NaN; bytes: sent as they are), and
  ``files/NAME`` is answered with the directory's file ``files[NAME]``.

A ``Range`` of several ranges is ignored (the whole file, 200), as a simple server does.

``ranges`` records every ``Range`` header asked, per file; ``peers`` every client address
(host, port) a request came from: one per connection.
"""

from __future__ import annotations

import base64
import email.utils
import json
import os
import re
import threading
import urllib.parse
from collections import defaultdict
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


class HostileSource:
    def __init__(self, directory: Path):
        self.directory = Path(directory)
        self.drops: dict[str, list] = {}
        self.lies: dict[str, int] = {}
        self.mutations: dict[str, tuple[int, Callable[[Path], None]]] = {}
        self.gates: dict[str, threading.Event] = {}
        self.auth: str | None = None  # the Authorization header every request must carry
        self.listing: list | bytes | None = None  # index.json as given (None: the directory's)
        self.aliases: dict[str, str] = {}  # a listed name -> the file that answers it
        self.peers: set[tuple[str, int]] = set()
        self.ranges: dict[str, list[str | None]] = defaultdict(list)
        self.lock = threading.Lock()
        source = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # no delayed-ACK wait on kept-alive connections

            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                with source.lock:
                    source.peers.add(self.client_address)
                if source.auth is not None and self.headers.get("Authorization") != source.auth:
                    self.send_response(401)
                    self.send_header("WWW-Authenticate", 'Basic realm="links"')
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if self.path.endswith("/index.json") and source.listing is not None:
                    body = (source.listing if isinstance(source.listing, bytes)
                            else json.dumps(source.listing).encode())
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                if self.path.endswith("/index.json"):
                    entries = []
                    for p in sorted(source.directory.iterdir()):
                        if p.name == "index.json":  # not a data file (loaders.source_index)
                            continue
                        st = p.stat()
                        entries.append({"name": p.name, "size": source.lies.get(p.name,
                                                                                 st.st_size),
                                        "mtime": st.st_mtime})
                    body = json.dumps(entries).encode()
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                name = self.path.rsplit("/files/", 1)[1]
                real = source.aliases.get(urllib.parse.unquote(name))
                self.serve_file(name, source.directory / (real or name))

            def serve_file(self, name: str, path: Path) -> None:
                data, st = path.read_bytes(), path.stat()
                header = self.headers.get("Range")
                with source.lock:
                    source.ranges[name].append(header)
                if header and "," in header:
                    header = None  # several ranges: ignored, the whole file (as RFC 9110 allows)
                gate = source.gates.get(name)
                if gate is not None and header is None:
                    gate.wait(300)
                first, last, status = 0, len(data) - 1, 200
                if header:
                    m = re.match(r"^bytes=(\d+)-(\d*)$", header)
                    assert m is not None, header  # the loader's own Range
                    first = int(m.group(1))
                    last = min(int(m.group(2)), len(data) - 1) if m.group(2) else len(data) - 1
                    status = 206
                    if first >= len(data):
                        self.send_response(416)
                        self.send_header("Content-Range", f"bytes */{len(data)}")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                self.send_response(status)
                self.send_header("Last-Modified", email.utils.formatdate(st.st_mtime, usegmt=True))
                if status == 206:
                    self.send_header("Content-Range", f"bytes {first}-{last}/{len(data)}")
                self.send_header("Content-Length", str(last - first + 1))
                self.end_headers()
                stop = last + 1
                with source.lock:
                    drop = source.drops.get(name)
                    if drop is not None and first <= drop[0] <= last and drop[1] != 0:
                        stop = drop[0]
                        if drop[1] is not None:
                            drop[1] -= 1
                    mutation = source.mutations.get(name)
                    if mutation is not None and first < mutation[0] <= last:
                        del source.mutations[name]
                    else:
                        mutation = None
                if mutation is not None:
                    self.wfile.write(data[first:mutation[0]])
                    self.wfile.flush()
                    mutation[1](path)
                    first = mutation[0]
                self.wfile.write(data[first:stop])
                self.wfile.flush()
                if stop <= last:  # the promised bytes never come: close now
                    self.close_connection = True

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request, client_address) -> None:
                pass  # a client that closes its end is what some tests do

        self.server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def drop(self, name: str, at: int, times: int | None = 1) -> None:
        self.drops[name] = [at, times]

    def hold(self, name: str) -> threading.Event:
        self.gates[name] = threading.Event()
        return self.gates[name]

    def require_auth(self, user: str, password: str) -> None:
        self.auth = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()

    def serve_listing(self, entries: list | bytes, files: dict[str, str] | None = None) -> None:
        self.listing = entries
        self.aliases = dict(files or {})

    def lie(self, name: str, size: int) -> None:
        self.lies[name] = size

    def mutate(self, name: str, at: int, change: Callable[[Path], None]) -> None:
        self.mutations[name] = (at, change)

    def __enter__(self) -> "HostileSource":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        for gate in self.gates.values():
            gate.set()
        self.server.shutdown()
        self.server.server_close()


def rewrite_later(path: Path) -> None:
    """Change a file in place, same size, and move its mtime on by a minute."""
    data = path.read_bytes()
    path.write_bytes(data.replace(b"\t", b" ", 1))
    st = path.stat()
    os.utime(path, (st.st_atime, st.st_mtime + 60))
