"""Ranged reads of a source: ``debl source serve`` answers HTTP ``Range`` with 206 (or 416), the
HTTP source asks for it, the local source seeks; both read the same bytes. The split-point sample
(loaders.sampling) reads the cold files this way."""

from __future__ import annotations

import http.client
import re
import socket
import struct
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from debl.bench.source_server import byte_range, byte_ranges, make_server
from debl.errors import SourceError
from loaders.http_client import parse_byteranges
from loaders.source import HttpSource, LocalSource

BODY = bytes(range(256)) * 40  # 10,240 bytes


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    directory = tmp_path_factory.mktemp("served")
    (directory / "f.tsv").write_bytes(BODY)
    (directory / "empty.tsv").write_bytes(b"")
    server = make_server(directory, port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield directory, server.server_address[1]
    server.shutdown()
    server.server_close()


def get(port: int, path: str, range_header: str | None = None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", path, headers={"Range": range_header} if range_header else {})
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    return resp.status, dict(resp.getheaders()), body


@pytest.mark.parametrize("header, first, last", [
    ("bytes=0-99", 0, 99), ("bytes=100-", 100, len(BODY) - 1), ("bytes=-10", len(BODY) - 10,
                                                               len(BODY) - 1),
    ("bytes=10000-999999", 10000, len(BODY) - 1), ("bytes=5-5", 5, 5)])
def test_a_range_is_answered_with_206_and_exactly_its_bytes(served, header, first, last):
    _, port = served
    status, headers, body = get(port, "/files/f.tsv", header)
    assert status == 206
    assert body == BODY[first:last + 1]
    assert headers["Content-Range"] == f"bytes {first}-{last}/{len(BODY)}"
    assert int(headers["Content-Length"]) == last - first + 1


def test_a_range_past_the_end_is_416_and_no_range_is_the_whole_file(served):
    _, port = served
    status, headers, body = get(port, "/files/f.tsv", f"bytes={len(BODY)}-")
    assert (status, headers["Content-Range"], body) == (416, f"bytes */{len(BODY)}", b"")
    assert get(port, "/files/empty.tsv", "bytes=0-")[0] == 416
    status, headers, body = get(port, "/files/f.tsv")
    assert (status, body, headers["Accept-Ranges"]) == (200, BODY, "bytes")
    # Another unit, an invalid range, overlapping ranges: the server sends the whole file.
    for header in ("items=0-1", "bytes=9-3", "bytes=0-5,3-8", "bytes=0-1,x"):
        assert get(port, "/files/f.tsv", header)[:3:2] == (200, BODY)


def test_byte_range_parsing():
    assert byte_range(None, 10) is None
    assert byte_range("bytes=-0", 10) == "unsatisfiable"
    assert byte_range("bytes=-20", 10) == (0, 9)
    assert byte_range("bytes=3-", 10) == (3, 9)
    assert byte_ranges("bytes=0-1, 5-6,-2", 10) == [(0, 1), (5, 6), (8, 9)]
    assert byte_ranges("bytes=0-1,20-30", 10) == [(0, 1)]  # past the end: left out
    assert byte_ranges("bytes=20-30,40-", 10) == "unsatisfiable"
    assert byte_ranges("bytes=0-5,5-6", 10) is None  # overlapping: the whole file
    assert byte_ranges("bytes=" + ",".join(f"{k}-{k}" for k in range(1025)), 2000) is None


def test_several_ranges_are_one_multipart_answer_of_exactly_their_bytes(served):
    _, port = served
    status, headers, body = get(port, "/files/f.tsv", "bytes=5000-5099,0-9,-5")
    assert status == 206 and int(headers["Content-Length"]) == len(body)
    ctype = headers["Content-Type"]
    assert ctype.startswith("multipart/byteranges; boundary=")
    boundary = ctype.split("boundary=")[1].encode()
    # RFC 9110 section 14.6, by hand: each part's head, its bytes, the closing delimiter.
    expected = b"".join(b"\r\n--%s\r\nContent-Type: application/octet-stream\r\n"
                        b"Content-Range: bytes %d-%d/%d\r\n\r\n%s" % (
                            boundary, a, b, len(BODY), BODY[a:b + 1])
                        for a, b in ((5000, 5099), (0, 9), (len(BODY) - 5, len(BODY) - 1)))
    assert body == expected + b"\r\n--%s--\r\n" % boundary
    assert parse_byteranges(ctype, body) == [(5000, BODY[5000:5100], len(BODY)),
                                             (0, BODY[:10], len(BODY)),
                                             (len(BODY) - 5, BODY[-5:], len(BODY))]


@pytest.mark.parametrize("ranges", [
    [(0, 10), (100, 50), (5000, 4096), (len(BODY) - 5, 100)],  # the last runs past the end
    [(10, 20), (15, 20), (0, 5), (25, 3)],  # overlapping, touching, out of order
    [(len(BODY) + 10, 5), (3, 0), (7, 1)],  # past the end, empty, one byte
    [(k * 37, 11) for k in range(270)],  # more than one request's worth
])
def test_http_and_local_sources_read_the_same_several_ranges(served, ranges):
    directory, port = served
    http_source = HttpSource(f"http://127.0.0.1:{port}")
    assert http_source.read_ranges("f.tsv", ranges) == [BODY[o:o + n] for o, n in ranges]
    assert LocalSource(directory).read_ranges("f.tsv", ranges) == [BODY[o:o + n]
                                                                   for o, n in ranges]


def test_a_server_that_ignores_several_ranges_is_asked_one_at_a_time(tmp_path):
    from tests.hostile_http import HostileSource

    (tmp_path / "f.tsv").write_bytes(BODY)
    with HostileSource(tmp_path) as server:  # answers several ranges with the whole file
        source = HttpSource(server.url)
        ranges = [(0, 10), (500, 20), (9000, 100)]
        for _ in range(2):
            assert source.read_ranges("f.tsv", ranges) == [BODY[o:o + n] for o, n in ranges]
    asked = server.ranges["f.tsv"]
    assert asked[0] == "bytes=0-9,500-519,9000-9099"  # once; then one range a request
    assert asked[1:] == ["bytes=0-9", "bytes=500-519", "bytes=9000-9099"] * 2


def test_http_and_local_sources_read_the_same_ranges(served):
    directory, port = served
    http_source, local = HttpSource(f"http://127.0.0.1:{port}"), LocalSource(directory)
    for offset, length in ((0, 1), (0, 100), (4000, 3000), (len(BODY) - 5, 100), (123, 0)):
        expected = BODY[offset:offset + length]
        assert http_source.read_range("f.tsv", offset, length) == expected
        assert local.read_range("f.tsv", offset, length) == expected


def test_a_server_without_ranges_is_a_clear_error(tmp_path):
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "f.tsv").write_bytes(BODY)

    class NoRanges(SimpleHTTPRequestHandler):  # the standard library's server ignores Range
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=str(tmp_path), **kwargs)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), NoRanges)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        source = HttpSource(f"http://127.0.0.1:{server.server_address[1]}")
        with pytest.raises(SourceError, match="does not answer ranged reads.*--bucket-width"):
            source.read_range("f.tsv", 10, 10)
    finally:
        server.shutdown()
        server.server_close()


class _Numbers(BaseHTTPRequestHandler):
    """Answers ``files/f.tsv`` with BODY, its ``Content-Range`` and ``Content-Length`` numbers
    written as the class says: ``size`` the size as sent, ``zeros`` leading zeros before each
    number of a range (a hostile server's thousands of digits)."""

    protocol_version = "HTTP/1.1"
    size = str(len(BODY))
    zeros = ""

    def log_message(self, *args):
        pass

    def do_GET(self) -> None:
        m = re.match(r"^bytes=(\d+)-(\d*)$", self.headers.get("Range") or "")
        first = int(m.group(1)) if m else 0
        last = min(int(m.group(2)), len(BODY) - 1) if m and m.group(2) else len(BODY) - 1
        self.send_response(206 if m else 200)
        if m:
            self.send_header("Content-Range", f"bytes {self.zeros}{first}-{self.zeros}{last}/"
                                              f"{self.size}")
            self.send_header("Content-Length", str(last - first + 1))
        else:
            self.send_header("Content-Length", self.size)
            self.close_connection = True  # a length it cannot read: the close ends the body
        self.end_headers()
        self.wfile.write(BODY[first:last + 1])


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        pass  # the source closes a connection whose answer it refused


@pytest.fixture()
def numbers():
    # A class of this test's own: the test sets its numbers.
    server = _QuietServer(("127.0.0.1", 0), type("Numbers", (_Numbers,), {}))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.RequestHandlerClass, HttpSource(f"http://127.0.0.1:{server.server_address[1]}",
                                                 retries=0)
    server.shutdown()
    server.server_close()


def test_a_number_of_thousands_of_digits_in_an_answer_is_a_source_error(numbers):
    """Defect: a 5,000-digit number in ``Content-Range`` (or ``Content-Length``) raised
    ``int()``'s ValueError out of the source. A number past any file is a SourceError naming
    the header, shortened; leading zeros are only zeros."""
    handler, source = numbers
    handler.size = "9" * 5000
    with pytest.raises(SourceError, match=r"'f.tsv' answered a ranged read with Content-Range "
                                          r"'bytes 0-0/9+\.\.\.'$"):
        source.stat("f.tsv")
    for read in (lambda: source.read_range("f.tsv", 5, 10),
                 lambda: source.read_ranges("f.tsv", [(5, 10), (100, 2)])):
        with pytest.raises(SourceError, match=r"'f.tsv' was asked from byte 5 and answered "
                                              r"Content-Range 'bytes 5-14/9+\.\.\.'$"):
            read()
    with source.open("f.tsv") as stream:  # a Content-Length past any file: read to the close
        assert b"".join(iter(lambda: stream.read(4096), b"")) == BODY
    handler.size, handler.zeros = "0" * 5000 + str(len(BODY)), "0" * 5000
    assert source.stat("f.tsv").size == len(BODY)
    assert source.read_range("f.tsv", 5, 10) == BODY[5:15]


def test_a_client_that_hangs_up_mid_request_leaves_no_traceback(served, capsys):
    """A sampler or a killed load drops its connection: routine for the server, no traceback."""
    _, port = served
    for _ in range(3):
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        sock.sendall(b"GET /files/f.tsv HTTP/1.1\r\n")
        time.sleep(0.1)  # the server is reading the headers when the reset arrives
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()  # with a zero linger: a reset, not a FIN
    assert get(port, "/files/f.tsv")[0] == 200  # the server still answers
    time.sleep(0.5)
    assert "Traceback" not in capsys.readouterr().err
