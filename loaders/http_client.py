"""HTTP/1.1 as the HTTP source speaks it: kept-alive connections, basic authentication from the
config, and several byte ranges in one request (docs/LOADING.md, "Decisions where DESIGN is
silent", row "HTTP sources").

- **Connections** (``Connections``): a request takes an idle connection of the pool (or opens
  one) and gives it back once its response was read to its end, so a run of small requests
  (the split-point sample's reads) costs a round trip each, not a TCP handshake and a server
  thread. Any thread may use the pool. A kept-alive connection the server closed while it sat
  idle fails at once when reused: the request is sent again on another (a GET may be).
- **Streams** (``HttpStream``): one file's bytes from an offset, resumed with ``Range`` from
  the first byte not received when a transfer ends before its ``Content-Length``
  (docs/RELIABILITY.md, "Sources that misbehave").
- **Credentials** (``source_credentials``): ``source.password`` (``DEBL_SOURCE_PASSWORD``),
  else the first line of ``source.password_file``, which must be its owner's alone; the user
  ``source.user``. Never from a URL (``loaders.source_url.check_no_password``), never over plain
  http to a host outside the loopback unless the config says so (``check_transport``).
- **Numbers in headers** (``header_size``, ``content_range``): a number past any file (over
  2^63-1, thousands of digits included) makes its header unreadable, a SourceError naming
  it, never ``int()``'s ValueError.
- **Several ranges** (``range_header``, ``parse_byteranges``): ``Range: bytes=A-B,C-D,...``
  answered 206 with a ``multipart/byteranges`` body (RFC 9110 section 14.6), each part with its
  ``Content-Range``. A part is cut by its length, never by searching for the boundary, which
  the data may hold. A server may merge ranges that overlap or nearly touch, or answer several
  with one range, or ignore them (200, the whole file): the caller handles each.

Pitfalls: a connection is reusable only when its response was read to exactly its end; one
given back early (a stream left half-read, a transfer cut short) is closed, never pooled.
"""

from __future__ import annotations

import base64
import http.client
import ipaddress
import logging
import os
import re
import stat
import threading
from dataclasses import dataclass, field
from typing import Protocol

from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential

from debl.config import Config
from debl.errors import ConfigError, SourceError
from debl.retry import retried
from loaders.file_names import MAX_SIZE

log = logging.getLogger(__name__)

IDLE_CONNECTIONS = 32  # kept-alive connections a pool keeps for the next requests
MAX_RANGES = 128  # ranges per request: a Range header of a few KiB, which any server takes
RETRY_PAUSE_S = 0.1  # before a stream's resume; doubled after each fruitless one
_CONTENT_RANGE = re.compile(r"^bytes (?:([0-9]+)-([0-9]+)|\*)/([0-9]+|\*)$")


@dataclass(frozen=True)
class Credentials:
    """HTTP basic authentication for a source; *user* None: the URL's ``user@``. Never shown:
    ``repr`` leaves the password out. *over_http*: ``source.allow_password_over_http``."""

    user: str | None
    password: str = field(repr=False)
    over_http: bool = False


def source_credentials(config: Config) -> Credentials | None:
    """The configured credentials of HTTP sources: ``source.password``, else the first line of
    ``source.password_file``, with ``source.user``; None when no password is configured.
    ConfigError for a password file that group or others may read or write (or that cannot be
    read): a password readable by other local users is what this avoids."""
    password = config.source.password
    path = config.source.password_file
    if password is None and path is not None:
        try:
            with open(path, encoding="utf-8") as f:
                mode = os.fstat(f.fileno()).st_mode
                if mode & 0o077:
                    raise ConfigError(
                        f"source.password_file {path} has mode {stat.filemode(mode)}: group or "
                        f"others may read or change it; make it yours alone (chmod 600 {path})")
                password = f.readline().rstrip("\r\n")
        except OSError as exc:
            raise ConfigError(f"source_password_file {path} cannot be read: {exc.strerror}"
                              ) from None
    if password is None:
        return None
    return Credentials(config.source.user, password, config.source.allow_password_over_http)


def check_transport(scheme: str, host: str, credentials: Credentials | None,
                    shown: str) -> None:
    """SourceError if a configured password would go over plain ``http://`` to a host outside
    the loopback, where anyone on the way reads it (basic authentication is the password in
    clear text); with ``source.allow_password_over_http`` a warning instead. A name other
    than ``localhost`` is not taken for the loopback: it may resolve anywhere."""
    if credentials is None or scheme != "http" or _loopback(host):
        return
    what = (f"source {shown}: its password would cross the network in clear text (HTTP basic "
            "authentication over http:// to a host outside the loopback)")
    if not credentials.over_http:
        raise SourceError(f"{what}: give its https:// URL, or set "
                          "source.allow_password_over_http = true "
                          "(DEBL_SOURCE_ALLOW_PASSWORD_OVER_HTTP=1) to send it anyway")
    log.warning("warning: %s; sent anyway, as source.allow_password_over_http says", what)


def _loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def basic_auth(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


class Connections:
    """Kept-alive connections to one server (see the module's docstring). *shown* names the
    server in messages (a URL without its password)."""

    def __init__(self, scheme: str, host: str, port: int | None, timeout: float, shown: str):
        self._cls = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
        self._host, self._port, self._timeout, self._shown = host, port, timeout, shown
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    def get(self, path: str, headers: dict[str, str],
            ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """Send a GET; its connection and response (any status), which the caller reads and
        hands to ``done``. SourceError if the server cannot be reached."""
        while True:
            with self._lock:
                conn, reused = (self._idle.pop(), True) if self._idle else (None, False)
            if conn is None:
                conn = self._cls(self._host, self._port, timeout=self._timeout)
            try:
                conn.request("GET", path, headers=headers)
                return conn, conn.getresponse()
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                # A kept-alive connection the server closed while it was idle: another one.
                if reused and isinstance(exc, (ConnectionError, http.client.BadStatusLine)):
                    continue
                raise SourceError(f"source {self._shown} is unreachable: {exc}") from exc

    def done(self, conn: http.client.HTTPConnection, resp: http.client.HTTPResponse) -> None:
        """Back to the pool if *resp* was read to its end, else closed."""
        # Closed with bytes still due (``length``): the server hung up early; not reusable.
        reusable = (resp.isclosed() and not resp.length and not resp.will_close
                    and conn.sock is not None)
        resp.close()
        if reusable:
            with self._lock:
                if len(self._idle) < IDLE_CONNECTIONS:
                    self._idle.append(conn)
                    return
        conn.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


def header_size(text: str | None) -> int | None:
    """A header's byte count or offset (ASCII digits), or None when it is not one or is past
    any file (over 2^63-1). A hostile server's number of thousands of digits is such a None,
    never ``int()``'s ValueError past 4,300 digits (docs/RELIABILITY.md, "Sources that
    misbehave")."""
    text = (text or "").strip()
    if not (text.isascii() and text.isdigit()):
        return None
    digits = text.lstrip("0") or "0"
    return int(digits) if len(digits) <= 19 and int(digits) <= MAX_SIZE else None


def content_range(header: str | None) -> tuple[int | None, int | None, int | None] | None:
    """``(first, last, size)`` of a ``Content-Range`` of ``bytes A-B/SIZE``, ``bytes A-B/*``
    or ``bytes */SIZE`` (None for a ``*``); None when the header is none of these or a number
    in it is past any file (``header_size``)."""
    m = _CONTENT_RANGE.match((header or "").strip())
    if m is None:
        return None
    first, last, size = (None if g in (None, "*") else header_size(g) for g in m.groups())
    if (m.group(1) is not None and None in (first, last)) or (m.group(3) != "*" and size is None):
        return None  # a number past any file
    if first is None and size is None:
        return None  # bytes */*
    return first, last, size


def shown_header(value: str | None) -> str:
    """A header's value as a message shows it: quoted, and cut after 60 characters."""
    return repr(value if value is None or len(value) <= 60 else value[:60] + "...")


def coalesce(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Half-open byte spans ``[start, end)`` sorted, with those that overlap or touch merged
    (a server may refuse overlapping ranges)."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def range_header(spans: list[tuple[int, int]]) -> str:
    """The ``Range`` value asking for the half-open *spans*."""
    return "bytes=" + ",".join(f"{start}-{end - 1}" for start, end in spans)


def parse_byteranges(content_type: str, body: bytes) -> list[tuple[int, bytes, int | None]]:
    """``(first byte, data, file size or None)`` of each part of a ``multipart/byteranges``
    *body*; ValueError if it is not one."""
    m = re.search(r'boundary="?([^";]+)"?', content_type)
    if m is None:
        raise ValueError(f"no boundary in {content_type!r}")
    delimiter = b"--" + m.group(1).encode()
    parts: list[tuple[int, bytes, int | None]] = []
    pos = body.find(delimiter)
    while pos >= 0:
        pos += len(delimiter)
        if body[pos:pos + 2] == b"--":  # the closing delimiter
            return parts
        head_end = body.find(b"\r\n\r\n", pos)
        if head_end < 0:
            raise ValueError("a part without the end of its headers")
        found = None
        for line in body[pos:head_end].split(b"\r\n"):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-range":
                found = content_range(value.decode("latin-1"))
        first, last, size = found if found is not None else (None, None, None)
        if first is None or last is None:  # (a first byte comes with a last)
            raise ValueError("a part without a valid Content-Range")
        start = head_end + 4
        if last < first or start + last - first + 1 > len(body):
            raise ValueError(f"a part of bytes {first}-{last} longer than the body")
        parts.append((first, body[start:start + last - first + 1], size))
        pos = body.find(delimiter, start + last - first + 1)
    raise ValueError("no closing delimiter")


class _TransferCut(Exception):
    """A stream's transfer ended before its end (the connection closed early, a read
    failed); its text is the cause a message gives."""


def _cut(exc: BaseException) -> bool:
    """A transfer cut, or a resume's request that found the server unreachable for now."""
    return isinstance(exc, _TransferCut) or (
        isinstance(exc, SourceError)
        and isinstance(exc.__cause__, (OSError, http.client.HTTPException)))


# An HTTP transfer cut: resumed from the first byte not received after RETRY_PAUSE_S, twice as
# long after each fruitless resume; a stream allows its source's ``retries`` resumes in a row
# (``source.retries``), then gives up. Anything else ends the read at once.
RETRY_CUT_TRANSFER = Retrying(retry=retry_if_exception(_cut),
                              wait=wait_exponential(multiplier=RETRY_PAUSE_S), reraise=True)


class FileServer(Protocol):
    """What an ``HttpStream`` reads through (``loaders.source.HttpSource``)."""

    url: str
    retries: int

    def get_file(self, name: str, headers: dict[str, str], accept: tuple[int, ...],
                 ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]: ...

    def done(self, conn: http.client.HTTPConnection,
             resp: http.client.HTTPResponse) -> None: ...


class HttpStream:
    """One file's bytes ``[offset, end)`` over HTTP (*end* None: to the file's end), resumed
    with ``Range`` from the first byte not yet received when a transfer ends early; *source*
    sends the requests (``get_file``), takes the connections back (``done``) and says how
    many fruitless resumes in a row to allow (``retries``) and what to call itself (``url``)."""

    def __init__(self, source: FileServer, name: str, offset: int, end: int | None):
        self._source, self._name = source, name
        self._pos = offset
        self._end = end  # narrowed to the file's end once a response says where it is
        self._total: int | None = None  # the file's size, as the first response gave it
        self._resp: http.client.HTTPResponse | None = None
        self._conn: http.client.HTTPConnection | None = None  # the response's, kept-alive
        self._resumes = RETRY_CUT_TRANSFER.copy(stop=stop_after_attempt(source.retries + 1))
        self._request()

    def _request(self) -> None:
        """Ask for ``[pos, end)``: a plain GET for the whole file, else a ranged one (206;
        416 when the file ends at or before pos)."""
        ranged = self._pos > 0 or self._end is not None
        if not ranged:
            conn, resp = self._source.get_file(self._name, {}, (200,))
            total = end = header_size(resp.getheader("Content-Length"))
        else:
            upto = "" if self._end is None else str(self._end - 1)
            conn, resp = self._source.get_file(self._name,
                                               {"Range": f"bytes={self._pos}-{upto}"},
                                               (206, 416))
            header = resp.getheader("Content-Range")
            found = content_range(header)
            if resp.status == 416:
                try:
                    resp.read()  # its (empty) body: the connection can take the next request
                except (OSError, http.client.HTTPException):
                    pass
                self._source.done(conn, resp)
                total = found[2] if found is not None else None
                self._check_total(total)
                if total is None or total > self._pos:
                    raise SourceError(f"source {self._source.url}: {self._name!r} from byte "
                                      f"{self._pos} answered HTTP 416 "
                                      f"({shown_header(header)})")
                self._end = self._pos  # nothing from pos on
                return
            first, last, total = found if found is not None else (None, None, None)
            if first != self._pos or last is None:  # (a first byte comes with a last)
                conn.close()
                raise SourceError(f"source {self._source.url}: {self._name!r} was asked from "
                                  f"byte {self._pos} and answered Content-Range "
                                  f"{shown_header(header)}")
            end = last + 1
        try:
            self._check_total(total)
        except SourceError:
            conn.close()
            raise
        if end is not None and (self._end is None or end < self._end):
            self._end = end
        self._conn, self._resp = conn, resp

    def _check_total(self, total: int | None) -> None:
        """The file's size must stay what the transfer's first response said."""
        if self._total is None:
            self._total = total
        elif total is not None and total != self._total:
            raise SourceError(f"source {self._source.url}: {self._name!r} changed while it "
                              f"was read ({self._total} bytes when its transfer began, {total} "
                              f"when it resumed at byte {self._pos}); nothing of this load is "
                              "visible: load it again once the source is stable")

    def read(self, n: int = -1) -> bytes:
        """Up to *n* bytes (what has arrived, at least one), b"" only at the end: read in a
        loop, as from a socket."""
        try:
            return retried(self._resumes, self._read_once, n)
        except (_TransferCut, SourceError) as exc:
            if not _cut(exc):
                raise
            raise SourceError(
                f"source {self._source.url}: reading {self._name!r} failed at byte "
                f"{self._pos} of {self._end} ({exc}); {self._source.retries} resumes "
                "in a row brought nothing; nothing of this load is visible: check the "
                "server, then load again (or resume the load)") from None

    def _read_once(self, n: int) -> bytes:
        """What has arrived, up to *n*, resuming first if the transfer was cut; _TransferCut
        if it ends early again."""
        if self._resp is None and not self._at_end():
            self._request()
        if self._at_end():
            return b""
        assert self._resp is not None
        try:
            # What has arrived, up to n: a reader that waited for the interpreter
            # lock takes all its socket holds in one call, not n at a time.
            data = self._resp.read1(n)
            if self._resp.length == 0:
                self._resp.read(0)  # marks it read to its end: the connection is kept
        except (OSError, http.client.HTTPException) as exc:
            data, cause = b"", f"{type(exc).__name__}: {exc}"
        else:
            cause = "the connection closed early"
        if data:
            self._pos += len(data)
            return data
        if self._end is None:  # no length given: the server's close is the end
            return b""
        # Ended before its length: resumed from the first byte not received.
        self.close()
        raise _TransferCut(cause)

    def _at_end(self) -> bool:
        return self._end is not None and self._pos >= self._end

    def close(self) -> None:
        """The connection goes back to the source's pool if the response was read to its
        end, else it is closed."""
        if self._resp is not None and self._conn is not None:  # set together
            self._source.done(self._conn, self._resp)
            self._conn, self._resp = None, None

    def __enter__(self) -> "HttpStream":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_whole(resp: http.client.HTTPResponse, what: str, most: int | None = None) -> bytes:
    """A small body whole, or SourceError if it ends before its Content-Length; with *most*,
    at most that many bytes (a longer body is cut there, and its connection is not reused:
    the caller refuses it)."""
    try:
        body = resp.read() if most is None else resp.read(most)
    except (OSError, http.client.HTTPException) as exc:
        raise SourceError(f"{what}: the transfer failed: {exc}") from exc
    length = header_size(resp.getheader("Content-Length"))
    if length is not None and len(body) != length and (most is None or len(body) < most):
        raise SourceError(f"{what}: {len(body)} bytes received of the {length} announced")
    return body
