"""Where the input files are: a local directory, or a remote one reached over HTTP.

A source lists its files (name, size, modification time) and opens one as a byte stream; the
loader never downloads everything first. The HTTP protocol is the one ``debl source serve``
speaks and any static web server can imitate: ``GET <url>/index.json`` returns
``[{"name": ..., "size": ..., "mtime": <unix seconds>}, ...]`` and ``GET <url>/files/<name>``
returns the bytes; with a ``Range: bytes=A-B`` header it answers 206 with bytes A..B only (the
split-point sample reads a few slices of every file that way, and a dropped transfer resumes
that way, docs/LOADING.md).

Files are ordered oldest first (by mtime, then name); that order is the ``file_seq`` of the
merge rule ("the later file wins").

What a stream guarantees (docs/RELIABILITY.md, "Sources that misbehave"):

- An HTTP transfer that ends early (the server closes the connection before its
  ``Content-Length``, a reset, a timeout) is resumed with ``Range`` from the first byte not yet
  received; after ``retries`` resumes in a row that brought no byte, SourceError names the file
  and the offset. ``http.client`` itself returns ``b""`` at an early close, which once let a
  truncated last line load as a valid line with another version (issue 15).
- Opened with the file's ``listed`` entry, a stream checks at its end that it gave exactly the
  listed size and that the file's size and mtime are still the listed ones (``stat``): a file
  shorter or longer than its listing, or one that changed while it was read, is a SourceError
  and never a silent mix of two versions.
- A ``user:password@`` in an HTTP URL is sent as HTTP basic authentication and never shown:
  ``describe()`` (what the catalog, the reports and every message hold) drops the password.
"""

from __future__ import annotations

import base64
import email.utils
import http.client
import json
import os
import re
import time
import urllib.parse
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from debl.errors import SourceError

RETRIES = 5  # resumes in a row without a byte before a transfer is given up
_RETRY_PAUSE_S = 0.1  # doubled after each fruitless resume
_CONTENT_RANGE = re.compile(r"^bytes (\d+)-(\d+)/(\d+|\*)$")


@dataclass(frozen=True)
class SourceFile:
    name: str
    size: int
    mtime: float


class Source(ABC):
    # Whether ``stat``'s mtime is the listing's own (a local file) or only comparable with
    # another ``stat`` (HTTP's Last-Modified: whole seconds, from whatever made the listing).
    mtime_as_listed = True

    @abstractmethod
    def list(self) -> list[SourceFile]:
        """Every input file, oldest first."""

    @abstractmethod
    def stat(self, name: str) -> SourceFile:
        """One file's size and mtime now (SourceError if it is gone)."""

    @abstractmethod
    def _open(self, name: str, offset: int) -> BinaryIO:
        """The file's bytes from *offset* to its end (``open`` wraps it)."""

    def open(self, name: str, offset: int = 0, listed: SourceFile | None = None) -> BinaryIO:
        """A readable binary stream of one file from byte *offset*. Close it (use ``with``).

        With *listed* (the file's entry in the listing the load recorded), the stream raises
        SourceError when the file turns out shorter or longer than listed, or its size or mtime
        changed by the time it was read to its end."""
        if listed is None:
            return self._open(name, offset)
        checked = _CheckedStream(self, listed, offset)  # the file as it is before the read
        checked.stream = self._open(name, offset)
        return checked

    @abstractmethod
    def read_range(self, name: str, offset: int, length: int) -> bytes:
        """Up to *length* bytes of one file from *offset* (fewer only at the end of the file)."""

    @abstractmethod
    def describe(self) -> str:
        """Where the files are, as DeBL records and shows it (never with a password)."""


def _ordered(files: list[SourceFile]) -> list[SourceFile]:
    return sorted(files, key=lambda f: (f.mtime, f.name))


def changed_files(source: Source, recorded: list[SourceFile]) -> list[str]:
    """How the files of *recorded* (a load's listing) differ from the source now, one line per
    file that is gone or whose size or mtime changed; empty when none did."""
    now = {f.name: f for f in source.list()}
    found = []
    for f in recorded:
        current = now.get(f.name)
        if current is None:
            found.append(f"{f.name!r} is gone")
        elif (current.size, current.mtime) != (f.size, f.mtime):
            found.append(f"{f.name!r} was {f.size} bytes, mtime {_when(f.mtime)}; now "
                         f"{current.size} bytes, mtime {_when(current.mtime)}")
    return found


def _when(mtime: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(mtime)) + f" ({mtime:.3f})"


class _CheckedStream:
    """A stream that holds the file to its listing: the listed size and mtime when it is
    opened, exactly ``listed.size`` bytes, and the same size and mtime when its end is read."""

    def __init__(self, source: Source, listed: SourceFile, offset: int):
        self._source, self._listed = source, listed
        self.stream: BinaryIO | None = None  # opened after the first stat, by Source.open
        self._pos = offset
        self._checked = False
        self._start = source.stat(listed.name)
        if self._start.size != listed.size or (source.mtime_as_listed
                                               and self._start.mtime != listed.mtime):
            raise self._error(f"listed {listed.size} bytes, mtime {_when(listed.mtime)}; "
                              f"now {self._start.size} bytes, mtime {_when(self._start.mtime)}: "
                              "it changed after it was listed")

    def _error(self, what: str) -> SourceError:
        return SourceError(f"{self._listed.name!r}: {what}; nothing of this load is visible: "
                           "load it again once the source is stable")

    def read(self, n: int = -1) -> bytes:
        data = self.stream.read(n)
        self._pos += len(data)
        f = self._listed
        if self._pos > f.size:
            raise self._error(f"it holds more than the {f.size} bytes its listing gave (read "
                              f"{self._pos} so far): it changed after it was listed, or the "
                              "listing is wrong")
        if not data and not self._checked:
            self._checked = True
            if self._pos < f.size:
                raise self._error(f"it ended after {self._pos} bytes, its listing gave "
                                  f"{f.size}: it changed after it was listed, or the listing "
                                  "is wrong")
            now = self._source.stat(f.name)
            if (now.size, now.mtime) != (self._start.size, self._start.mtime):
                raise self._error(f"it changed while it was read: {self._start.size} bytes, "
                                  f"mtime {_when(self._start.mtime)} when opened; "
                                  f"{now.size} bytes, mtime {_when(now.mtime)} at its end")
        return data

    def close(self) -> None:
        if self.stream is not None:
            self.stream.close()

    def __enter__(self) -> "_CheckedStream":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class LocalSource(Source):
    def __init__(self, path: Path):
        self.path = Path(path)
        if not self.path.is_dir():
            raise SourceError(f"source {self.path} is not a directory (or does not exist)")

    def list(self) -> list[SourceFile]:
        files = []
        for entry in os.scandir(self.path):
            if entry.is_file() and not entry.name.startswith("."):
                st = entry.stat()
                files.append(SourceFile(entry.name, st.st_size, st.st_mtime))
        return _ordered(files)

    def stat(self, name: str) -> SourceFile:
        try:
            st = os.stat(self.path / name)
        except OSError as exc:
            raise SourceError(f"cannot read {self.path / name}: {exc.strerror}") from exc
        return SourceFile(name, st.st_size, st.st_mtime)

    def _open(self, name: str, offset: int) -> BinaryIO:
        try:
            f = open(self.path / name, "rb")
        except OSError as exc:
            raise SourceError(f"cannot read {self.path / name}: {exc.strerror}") from exc
        f.seek(offset)
        return f

    def read_range(self, name: str, offset: int, length: int) -> bytes:
        with self._open(name, offset) as f:
            return f.read(length)

    def describe(self) -> str:
        return str(self.path.absolute())


class HttpSource(Source):
    mtime_as_listed = False

    def __init__(self, url: str, timeout: float = 60.0, retries: int = RETRIES):
        parsed = urllib.parse.urlparse(url.rstrip("/"))
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise SourceError(f"not an http(s) URL: {_redacted(parsed)}")
        self._auth = ({"Authorization": "Basic " + base64.b64encode(
            f"{urllib.parse.unquote(parsed.username or '')}:"
            f"{urllib.parse.unquote(parsed.password or '')}".encode()).decode()}
            if parsed.username is not None else {})
        self.url = _redacted(parsed)
        self._parsed = parsed
        self.timeout = timeout
        self.retries = retries

    def _get(self, path: str, headers: dict[str, str] | None = None,
             accept: tuple[int, ...] = (200,)) -> http.client.HTTPResponse:
        p = self._parsed
        cls = http.client.HTTPSConnection if p.scheme == "https" else http.client.HTTPConnection
        conn = cls(p.hostname, p.port, timeout=self.timeout)
        try:
            conn.request("GET", f"{p.path}/{path}", headers={**self._auth, **(headers or {})})
            resp = conn.getresponse()
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            raise SourceError(f"source {self.url} is unreachable: {exc}") from exc
        if resp.status not in accept:
            conn.close()
            hint = (" instead of 206: the server does not answer ranged reads, which choosing "
                    "bucket split points and resuming a dropped transfer need (give `debl load "
                    "--bucket-width W` to do without the sample)"
                    if 206 in accept and resp.status == 200 else
                    ": it wants credentials (give them in the URL, user:password@host; DeBL "
                    "never stores the password, so give the URL again to resume or verify)"
                    if resp.status in (401, 403) else "")
            raise SourceError(f"source {self.url}/{path} answered HTTP {resp.status}{hint}")
        return resp

    def list(self) -> list[SourceFile]:
        resp = self._get("index.json")
        try:
            entries = json.loads(_read_whole(resp, f"{self.url}/index.json"))
            return _ordered([SourceFile(e["name"], int(e["size"]), float(e["mtime"]))
                             for e in entries])
        except (ValueError, KeyError, TypeError) as exc:
            raise SourceError(f"{self.url}/index.json is not a file listing: {exc}") from exc
        finally:
            resp.close()

    def stat(self, name: str) -> SourceFile:
        """Size from a one-byte ranged read (``Content-Range: bytes 0-0/SIZE``, or ``*/0`` for
        an empty file), mtime from its ``Last-Modified`` (0 if the server sends none)."""
        resp = self._get(self._path(name), {"Range": "bytes=0-0"}, accept=(206, 416))
        try:
            m = re.match(r"^bytes (?:\d+-\d+|\*)/(\d+)$", resp.getheader("Content-Range", ""))
            if m is None:
                raise SourceError(f"source {self.url}: {name!r} answered a ranged read with "
                                  f"Content-Range {resp.getheader('Content-Range')!r}")
            modified = resp.getheader("Last-Modified")
            try:
                mtime = email.utils.parsedate_to_datetime(modified).timestamp() if modified else 0.0
            except (TypeError, ValueError):
                mtime = 0.0
            return SourceFile(name, int(m.group(1)), mtime)
        finally:
            resp.close()

    def _path(self, name: str) -> str:
        return "files/" + urllib.parse.quote(name, safe="")

    def _open(self, name: str, offset: int) -> BinaryIO:
        return _HttpStream(self, name, offset, None)  # type: ignore[return-value]

    def read_range(self, name: str, offset: int, length: int) -> bytes:
        if length <= 0:
            return b""
        with _HttpStream(self, name, offset, offset + length) as stream:
            parts = []
            while block := stream.read(1 << 20):
                parts.append(block)
            return b"".join(parts)

    def describe(self) -> str:
        return self.url


class _HttpStream:
    """One file's bytes ``[offset, end)`` over HTTP (*end* None: to the file's end), resumed
    with ``Range`` from the first byte not yet received when a transfer ends early."""

    def __init__(self, source: HttpSource, name: str, offset: int, end: int | None):
        self._source, self._name = source, name
        self._pos = offset
        self._end = end  # narrowed to the file's end once a response says where it is
        self._total: int | None = None  # the file's size, as the first response gave it
        self._resp: http.client.HTTPResponse | None = None
        self._request()

    def _request(self) -> None:
        """Ask for ``[pos, end)``: a plain GET for the whole file, else a ranged one (206;
        416 when the file ends at or before pos)."""
        ranged = self._pos > 0 or self._end is not None
        if not ranged:
            resp = self._source._get(self._source._path(self._name))
            length = resp.getheader("Content-Length")
            total = end = int(length) if length is not None and length.isdigit() else None
        else:
            last = "" if self._end is None else str(self._end - 1)
            resp = self._source._get(self._source._path(self._name),
                                     {"Range": f"bytes={self._pos}-{last}"}, accept=(206, 416))
            header = resp.getheader("Content-Range", "")
            m = _CONTENT_RANGE.match(header)
            if resp.status == 416:
                resp.close()
                m = re.match(r"^bytes \*/(\d+)$", header)
                total = int(m.group(1)) if m else None
                self._check_total(total)
                if total is None or total > self._pos:
                    raise SourceError(f"source {self._source.url}: {self._name!r} from byte "
                                      f"{self._pos} answered HTTP 416 ({header!r})")
                self._end = self._pos  # nothing from pos on
                return
            if m is None or int(m.group(1)) != self._pos:
                resp.close()
                raise SourceError(f"source {self._source.url}: {self._name!r} was asked from "
                                  f"byte {self._pos} and answered Content-Range {header!r}")
            total = None if m.group(3) == "*" else int(m.group(3))
            end = int(m.group(2)) + 1
        try:
            self._check_total(total)
        except SourceError:
            resp.close()
            raise
        if end is not None and (self._end is None or end < self._end):
            self._end = end
        self._resp = resp

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
        fruitless, pause = 0, _RETRY_PAUSE_S
        cause = "the connection closed early"
        while True:
            if self._end is not None and self._pos >= self._end:
                return b""
            if self._resp is not None:
                try:
                    data = self._resp.read(n if n >= 0 else None)
                except (OSError, http.client.HTTPException) as exc:
                    data, cause = b"", f"{type(exc).__name__}: {exc}"
                if data:
                    self._pos += len(data)
                    return data
                if self._end is None:  # no length given: the server's close is the end
                    return b""
                # Ended before its length: resume from the first byte not received.
                self._resp.close()
                self._resp = None
            fruitless += 1
            if fruitless > self._source.retries:
                raise SourceError(
                    f"source {self._source.url}: reading {self._name!r} failed at byte "
                    f"{self._pos} of {self._end} ({cause}); {self._source.retries} resumes "
                    "in a row brought nothing; nothing of this load is visible: check the "
                    "server, then load again (or resume the load)")
            time.sleep(pause)
            pause *= 2
            try:
                self._request()
            except SourceError as exc:  # unreachable for now: another try; anything else ends it
                if not isinstance(exc.__cause__, (OSError, http.client.HTTPException)):
                    raise
                cause = str(exc)

    def close(self) -> None:
        if self._resp is not None:
            self._resp.close()
            self._resp = None

    def __enter__(self) -> "_HttpStream":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _read_whole(resp: http.client.HTTPResponse, what: str) -> bytes:
    """A small body whole, or SourceError if it ends before its Content-Length."""
    try:
        body = resp.read()
    except (OSError, http.client.HTTPException) as exc:
        raise SourceError(f"{what}: the transfer failed: {exc}") from exc
    length = resp.getheader("Content-Length")
    if length is not None and length.isdigit() and len(body) != int(length):
        raise SourceError(f"{what}: {len(body)} bytes received of the {length} announced")
    return body


def _redacted(parsed: urllib.parse.ParseResult) -> str:
    """The URL without its password (the user name stays: it says which account)."""
    if parsed.password is None:
        return parsed.geturl()
    host = parsed.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{parsed.username}@{host}" + (f":{parsed.port}" if parsed.port else "")
    return parsed._replace(netloc=netloc).geturl()


def redact_url(text: str) -> str:
    """*text* with the password of an http(s) URL dropped; any other text unchanged."""
    if not text.startswith(("http://", "https://")):
        return text
    return _redacted(urllib.parse.urlparse(text))


def open_source(spec: str | Path, retries: int = RETRIES) -> Source:
    """A Source for a directory path or an http(s) URL."""
    text = str(spec)
    if text.startswith(("http://", "https://")):
        return HttpSource(text, retries=retries)
    return LocalSource(Path(text))
