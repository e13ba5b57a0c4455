"""``debl source serve`` under hostile or merely numerous clients, with real sockets
against the real server: a ``Range`` of thousands of digits is answered (416 or 206), never a
dropped connection; clients that connect and send nothing do not stop others from being
served (they once held its 16 handler slots for a minute); idle connections are let go after
the timeout; past the connection cap a client gets 503 at once; one connection serves many
requests (keep-alive, what the HTTP source reuses)."""

from __future__ import annotations

import http.client
import socket
import threading
import time

import pytest

from debl.bench.source_server import make_server

BODY = bytes(range(256)) * 40  # 10,240 bytes
DIGITS = "9" * 5000  # past int()'s 4,300-digit limit


@pytest.fixture()
def serve(tmp_path):
    """Start a server on *tmp_path* (holding f.tsv) with the given settings; its port."""
    (tmp_path / "f.tsv").write_bytes(BODY)
    servers = []

    def start(**settings) -> int:
        server = make_server(tmp_path, port=0, **settings)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server.server_address[1]

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def get(port: int, path: str = "/files/f.tsv", headers: dict | None = None,
        timeout: float = 5.0) -> tuple[int, dict, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read()
    finally:
        conn.close()


@pytest.mark.parametrize("header, status, body", [
    (f"bytes={DIGITS}-", 416, b""),
    (f"bytes={DIGITS}-{DIGITS}", 416, b""),
    (f"bytes=0-{DIGITS}", 206, BODY),
    (f"bytes=-{DIGITS}", 206, BODY),
    (f"bytes=10-{'0' * 5000}20", 206, BODY[10:21]),  # leading zeros are just zeros
    (f"bytes={'0' * 5000}-", 206, BODY),
])
def test_a_range_of_thousands_of_digits_is_answered_and_the_server_goes_on(serve, header,
                                                                           status, body):
    port = serve()
    got = get(port, headers={"Range": header})
    assert (got[0], got[2]) == (status, body)
    if status == 416:
        assert got[1]["Content-Range"] == f"bytes */{len(BODY)}"
    assert get(port)[0::2] == (200, BODY)


def test_clients_that_connect_and_send_nothing_do_not_stop_others(serve):
    port = serve(timeout=60.0)
    started = time.monotonic()
    # 40: more than the 16 handlers that once held the accept loop (the rest then waited in
    # the listen queue, and a connection past it could not even be made).
    idle = [socket.create_connection(("127.0.0.1", port), timeout=2) for _ in range(40)]
    try:
        time.sleep(0.2)  # every idle connection accepted and waiting
        for _ in range(5):
            assert get(port, timeout=5.0)[0::2] == (200, BODY)
        assert time.monotonic() - started < 5.0
    finally:
        for s in idle:
            s.close()


def test_idle_connections_are_let_go_after_the_timeout(serve):
    port = serve(timeout=0.5)
    idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(5)]
    try:
        for s in idle:
            s.settimeout(10)
            assert s.recv(1) == b""  # the server closed it
    finally:
        for s in idle:
            s.close()


def test_past_the_connection_cap_a_client_gets_503_at_once_and_later_ones_are_served(serve):
    port = serve(timeout=60.0, max_connections=4)
    idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(4)]
    time.sleep(0.2)
    status, headers, body = get(port, timeout=5.0)
    assert status == 503 and "Retry-After" in headers
    for s in idle:
        s.close()
    deadline = time.monotonic() + 5
    while get(port)[0] != 200:  # the server counts the closed ones out as it sees them
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_one_connection_serves_many_requests(serve):
    port = serve()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", "/files/f.tsv", headers={"Range": "bytes=0-9"})
        resp = conn.getresponse()
        assert (resp.status, resp.read()) == (206, BODY[:10])
        sock = conn.sock
        for first in (100, 5000, len(BODY)):
            conn.request("GET", "/files/f.tsv", headers={"Range": f"bytes={first}-"})
            resp = conn.getresponse()
            assert resp.read() == BODY[first:]
            assert conn.sock is sock  # the same connection
    finally:
        conn.close()
