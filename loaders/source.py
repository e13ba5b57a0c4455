"""Where the input files are: a local directory, or a remote one reached over HTTP.

A source lists its files (name, size, modification time) and opens one as a byte stream; the
loader never downloads everything first. The HTTP protocol is the one ``debl source serve``
speaks and any static web server can imitate: ``GET <url>/index.json`` returns
``[{"name": ..., "size": ..., "mtime": <unix seconds>}, ...]`` and ``GET <url>/files/<name>``
returns the bytes; with a ``Range: bytes=A-B`` header it answers 206 with bytes A..B only (a
dropped transfer resumes that way, docs/LOADING.md), and with several ranges
(``bytes=A-B,C-D``) one ``multipart/byteranges`` answer: the split-point sample reads a few
slices of every file that way, a file's at once (``read_ranges``; a server that ignores several
ranges is asked one a request instead).

Files are ordered oldest first (by mtime, then name); that order is the ``file_seq`` of the
merge rule ("the later file wins"). ``index.json`` is read within its bounds and its entries
checked by ``loaders.listing``.

Manifests (docs/LOADING.md, "The manifest"): an entry of ``index.json`` may carry the file's
``"manifest"``; a local directory's own ``index.json`` gives them the same way
(``loaders.source_index``: an entry is used only while the file keeps its size and mtime, and
``index.json`` itself is never a data file). A file without one, or with one that is malformed
or past the listing's bounds (``manifest_error`` says why), claims every id1: the load goes on.

What a stream guarantees (docs/RELIABILITY.md, "Sources that misbehave"):

- An HTTP transfer that ends early (the server closes the connection before its
  ``Content-Length``, a reset, a timeout) is resumed with ``Range`` from the first byte not yet
  received; after ``retries`` resumes in a row that brought no byte, SourceError names the file
  and the offset. ``http.client`` itself returns ``b""`` at an early close, which once let a
  truncated last line load as a valid line with another version (docs/RELIABILITY.md,
  "Sources that misbehave").
- Opened with the file's ``listed`` entry, a stream checks at its end that it gave exactly the
  listed size and that the file's size and mtime are still the listed ones (``stat``): a file
  shorter or longer than its listing, or one that changed while it was read, is a SourceError
  and never a silent mix of two versions. A stream bounded by ``end`` checks that it reached
  ``end``: a file truncated under it is a SourceError too.

Credentials (docs/LOADING.md, "Decisions where DESIGN is silent", row "HTTP sources"): an HTTP
source's password comes from the config
(``source.password`` / ``DEBL_SOURCE_PASSWORD``, or ``source.password_file``, a file only its
owner may read), never from the URL: a URL with a password is refused, since it would sit in
``debl load``'s argv (readable by any local user in /proc) and the shell's history. The user is
``source.user`` or the URL's ``user@``. ``describe()`` and every message show a URL without a
password (``loaders.source_url``).

Connections: an HTTP source keeps its connections open between requests (HTTP/1.1 keep-alive,
a few idle ones per source, reused by any thread), and a kept-alive connection the server has
closed meanwhile is replaced transparently; the transfers themselves (connections, resumed
streams, several ranges) are ``loaders.http_client``'s.
"""

from __future__ import annotations

import bisect
import builtins
import email.utils
import http.client
import os
import time
import urllib.parse
from abc import ABC, abstractmethod
from dataclasses import replace
from pathlib import Path
from typing import BinaryIO

from debl.config import Config
from debl.errors import SourceError
from loaders.file_names import path_in
from loaders.http_client import (MAX_RANGES, Connections, Credentials, HttpStream, basic_auth,
                                 check_transport, coalesce, content_range, parse_byteranges,
                                 range_header, read_whole, shown_header, source_credentials)
from loaders.listing import (MAX_INDEX_BYTES, SourceFile, check_listing_entry, listed_files,
                             ordered, parse_index)
from loaders.source_index import INDEX, DirectoryIndex
from loaders.source_url import check_no_password, redacted

RETRIES = 5  # resumes in a row without a byte before a transfer is given up


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
    def _open(self, name: str, offset: int, end: int | None = None) -> BinaryIO:
        """The file's bytes from *offset* to *end* (None: its end; ``open`` wraps it)."""

    def open(self, name: str, offset: int = 0, listed: SourceFile | None = None,
             end: int | None = None, seen: SourceFile | None = None) -> BinaryIO:
        """A readable binary stream of one file from byte *offset* up to *end* (None: the
        file's end). Close it (use ``with``).

        With *listed* (the file's entry in the listing the load recorded), the stream raises
        SourceError when the file turns out shorter or longer than listed, or its size or mtime
        changed by the time it was read to its end (*seen*: an earlier stream's ``seen``, not
        asked again). Pitfall: a stream closed early has cost the wire what an HTTP source
        sent ahead: a reader that stops at a known byte says so."""
        if listed is None:
            return self._open(name, offset, end)
        checked = _CheckedStream(self, listed, offset, end, seen)  # the file before the read
        checked.stream = self._open(name, offset, end)
        return checked  # type: ignore[return-value]  # read like a BinaryIO, as _open's

    @abstractmethod
    def read_range(self, name: str, offset: int, length: int) -> bytes:
        """Up to *length* bytes of one file from *offset* (fewer only at the end of the file)."""

    def read_ranges(self, name: str,
                    ranges: builtins.list[tuple[int, int]]) -> builtins.list[bytes]:
        """``read_range`` of each ``(offset, length)`` of one file, in order; a source may
        read them together (an HTTP source: several a request)."""
        return [self.read_range(name, offset, length) for offset, length in ranges]

    @abstractmethod
    def describe(self) -> str:
        """Where the files are, as DeBL records and shows it (never with a password)."""

    def close(self) -> None:  # noqa: B027 -- a local source keeps nothing open
        """Let go of what the source keeps open between reads (an HTTP source's kept-alive
        connections); it may still be used afterwards."""


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
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(mtime)) + f" ({mtime:.3f})"
    except (OverflowError, OSError, ValueError):  # a year past what the C library shows
        return f"{mtime:.3f}"


class _Bounded:
    """A local file's stream that ends after *left* bytes (``Source.open``'s *end*)."""

    def __init__(self, f: BinaryIO, left: int):
        self._f, self._left, self.close = f, max(0, left), f.close

    def read(self, n: int = -1) -> bytes:
        data = self._f.read(self._left if n < 0 else min(n, self._left))
        self._left -= len(data)
        return data


class _CheckedStream:
    """A stream that holds the file to its listing: the listed size and mtime when it is
    opened, exactly ``listed.size`` bytes, and the same size and mtime when its end is read."""

    def __init__(self, source: Source, listed: SourceFile, offset: int, end: int | None = None,
                 seen: SourceFile | None = None):
        self._source, self._listed = source, listed
        self.stream: BinaryIO  # opened after the first stat, by Source.open
        self._pos, self._offset = offset, offset
        self._end = listed.size if end is None else min(end, listed.size)
        # A stream that stops before the file's end checks only that it reaches *end* (read).
        self._checked = self._end < listed.size
        self._start = self.seen = seen or source.stat(listed.name)
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
        if not data and self._pos < self._end:
            # A stream bounded by *end* that ended short is no range a fetch took: the bulk
            # copy once opened it again and again (docs/LOADING.md, "The copy follows demand").
            came = (f"it ended after {self._pos} bytes" if self._end == f.size else
                    f"a read of bytes {self._offset}..{self._end} ended at byte {self._pos}")
            raise self._error(f"{came}, its listing gave {f.size}: it changed after it was "
                              "listed, or the listing is wrong")
        if not data and not self._checked:
            self._checked = True
            now = self._source.stat(f.name)
            if (now.size, now.mtime) != (self._start.size, self._start.mtime):
                raise self._error(f"it changed while it was read: {self._start.size} bytes, "
                                  f"mtime {_when(self._start.mtime)} when opened; "
                                  f"{now.size} bytes, mtime {_when(now.mtime)} at its end")
        return data

    def close(self) -> None:
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
        self._index = DirectoryIndex(self.path)

    def list(self) -> list[SourceFile]:
        files = []
        for entry in os.scandir(self.path):
            if entry.is_file() and not entry.name.startswith(".") and entry.name != INDEX:
                st = entry.stat()
                checked = check_listing_entry(
                    {"name": entry.name, "size": st.st_size, "mtime": st.st_mtime},
                    f"source {self.path}: file {entry.name!r}", plain_text=False)
                manifest, error = self._index.manifest(entry.name, st.st_size, st.st_mtime)
                files.append(replace(checked, manifest=manifest, manifest_error=error,
                                     position=self._index.position(entry.name, st.st_size,
                                                                   st.st_mtime)))
        return ordered(files)

    def index_problem(self) -> str | None:
        """Why the directory's ``index.json`` gives no manifest at all (None: it does, or there
        is none); each file's ``manifest_error`` says it too."""
        return self._index.problem()

    def stat(self, name: str) -> SourceFile:
        path = path_in(self.path, name)
        try:
            st = os.stat(path)
        except OSError as exc:
            raise SourceError(f"cannot read {path}: {exc.strerror}") from exc
        return SourceFile(name, st.st_size, st.st_mtime)

    def _open(self, name: str, offset: int, end: int | None = None) -> BinaryIO:
        path = path_in(self.path, name)
        try:
            f = open(path, "rb")
        except OSError as exc:
            raise SourceError(f"cannot read {path}: {exc.strerror}") from exc
        f.seek(offset)
        return f if end is None else _Bounded(f, end - offset)  # type: ignore[return-value]

    def read_range(self, name: str, offset: int, length: int) -> bytes:
        with self._open(name, offset) as f:
            return f.read(length)

    def describe(self) -> str:
        return str(self.path.absolute())


class HttpSource(Source):
    mtime_as_listed = False

    def __init__(self, url: str, timeout: float = 60.0, retries: int = RETRIES,
                 credentials: Credentials | None = None):
        parsed = urllib.parse.urlparse(url.rstrip("/"))
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise SourceError(f"not an http(s) URL: {redacted(parsed)}")
        self.url = redacted(parsed)
        check_no_password(url)
        user = (credentials.user if credentials and credentials.user is not None
                else urllib.parse.unquote(parsed.username) if parsed.username is not None
                else None)
        if credentials is not None and user is None:
            raise SourceError(f"source {self.url}: a source password is configured but no "
                              "user: set source.user (DEBL_SOURCE_USER) or give user@ in the URL")
        check_transport(parsed.scheme, parsed.hostname, credentials, self.url)
        password = credentials.password if credentials is not None else ""
        self._auth = basic_auth(user, password) if user is not None else {}
        self._parsed = parsed
        self.timeout = timeout
        self.retries = retries
        self._connections = Connections(parsed.scheme, parsed.hostname, parsed.port, timeout,
                                        self.url)
        self._several_ranges = True  # until the server answers several ranges with 200

    def _get(self, path: str, headers: dict[str, str] | None = None,
             accept: tuple[int, ...] = (200,),
             ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """Send a GET on a kept-alive connection; its response, which the caller reads and
        hands to ``done``. SourceError for a status not in *accept*, with what to do."""
        conn, resp = self._connections.get(f"{self._parsed.path}/{path}",
                                           {**self._auth, **(headers or {})})
        if resp.status not in accept:
            conn.close()
            hint = (" instead of 206: the server does not answer ranged reads, which choosing "
                    "bucket split points and resuming a dropped transfer need (give `debl load "
                    "--bucket-width W` to do without the sample)"
                    if 206 in accept and resp.status == 200 else
                    ": it wants credentials (or others): set DEBL_SOURCE_USER and "
                    "DEBL_SOURCE_PASSWORD, or source.user and source.password_file, a file only "
                    "you can read (README, \"Configuration\")"
                    if resp.status in (401, 403) else "")
            raise SourceError(f"source {self.url}/{path} answered HTTP {resp.status}{hint}")
        return conn, resp

    def get_file(self, name: str, headers: dict[str, str], accept: tuple[int, ...],
                 ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """``_get`` of one file's bytes (what an ``HttpStream`` asks)."""
        return self._get(self._path(name), headers, accept)

    def done(self, conn: http.client.HTTPConnection, resp: http.client.HTTPResponse) -> None:
        """Give a response's connection back (see ``Connections.done``)."""
        self._connections.done(conn, resp)

    def close(self) -> None:
        self._connections.close()

    def list(self) -> list[SourceFile]:
        conn, resp = self._get("index.json")
        try:
            entries = parse_index(read_whole(resp, f"{self.url}/index.json", MAX_INDEX_BYTES + 1))
            return listed_files(entries, f"source {self.url}: index.json")
        except (ValueError, KeyError, TypeError) as exc:
            raise SourceError(f"{self.url}/index.json is not a file listing: {exc}") from exc
        finally:
            self.done(conn, resp)

    def stat(self, name: str) -> SourceFile:
        """Size from a one-byte ranged read (``Content-Range: bytes 0-0/SIZE``, or ``*/0`` for
        an empty file), mtime from its ``Last-Modified`` (0 if the server sends none)."""
        conn, resp = self._get(self._path(name), {"Range": "bytes=0-0"}, accept=(206, 416))
        try:
            header = resp.getheader("Content-Range")
            found = content_range(header)
            if found is None or found[2] is None:
                raise SourceError(f"source {self.url}: {name!r} answered a ranged read with "
                                  f"Content-Range {shown_header(header)}")
            modified = resp.getheader("Last-Modified")
            try:
                mtime = email.utils.parsedate_to_datetime(modified).timestamp() if modified else 0.0
            except (TypeError, ValueError):
                mtime = 0.0
            read_whole(resp, f"{self.url}/{self._path(name)}")
            return SourceFile(name, found[2], mtime)
        finally:
            self.done(conn, resp)

    def _path(self, name: str) -> str:
        return "files/" + urllib.parse.quote(name, safe="")

    def _open(self, name: str, offset: int, end: int | None = None) -> BinaryIO:
        return HttpStream(self, name, offset, end)  # type: ignore[return-value]

    def read_range(self, name: str, offset: int, length: int) -> bytes:
        if length <= 0:
            return b""
        with HttpStream(self, name, offset, offset + length) as stream:
            parts = []
            while block := stream.read(1 << 20):
                parts.append(block)
            return b"".join(parts)

    def read_ranges(self, name: str,
                    ranges: builtins.list[tuple[int, int]]) -> builtins.list[bytes]:
        """Up to MAX_RANGES ranges a request (``multipart/byteranges``): the split-point
        sample's reads of a file in a request or a few, not one each. A server that answers
        several ranges with the whole file is asked one range a request from then on; a batch
        whose transfer fails is read again one range a request (each resumed as a stream)."""
        if not self._several_ranges:
            return super().read_ranges(name, ranges)
        spans = coalesce([(offset, offset + length) for offset, length in ranges if length > 0])
        parts: list[tuple[int, bytes, int | None]] = []
        for k in range(0, len(spans), MAX_RANGES):
            got = self._read_spans(name, spans[k:k + MAX_RANGES])
            if got is None:
                self._several_ranges = False
                return super().read_ranges(name, ranges)
            parts += got
        parts.sort(key=lambda part: part[0])
        return [self._cut(name, parts, offset, length) for offset, length in ranges]

    def _read_spans(self, name: str, spans: builtins.list[tuple[int, int]],
                    ) -> builtins.list[tuple[int, bytes, int | None]] | None:
        """``(first, data, file size)`` of the parts answering *spans*; None if the server
        does not answer several ranges at once."""
        if len(spans) == 1:
            (start, end), = spans
            return [(start, self.read_range(name, start, end - start), None)]
        try:
            conn, resp = self._get(self._path(name), {"Range": range_header(spans)},
                                   accept=(200, 206, 416))
        except SourceError:  # a server that fails on several ranges: one a request tells
            return None
        if resp.status == 200:  # several ranges ignored: not the whole file for a sample
            conn.close()
            return None
        try:
            body = read_whole(resp, f"{self.url}/{self._path(name)}")
        except SourceError:
            conn.close()
            return [(start, self.read_range(name, start, end - start), None)
                    for start, end in spans]
        self.done(conn, resp)
        if resp.status == 416:
            return []
        ctype = resp.getheader("Content-Type", "")
        # An answer this source cannot read (None) is read again one range a request.
        if ctype.lower().startswith("multipart/byteranges"):
            try:
                return parse_byteranges(ctype, body)
            except ValueError:
                return None
        found = content_range(resp.getheader("Content-Range"))
        return None if found is None or found[0] is None else [(found[0], body, found[2])]

    def _cut(self, name: str, parts: builtins.list[tuple[int, bytes, int | None]], offset: int,
             length: int) -> bytes:
        """Bytes ``[offset, offset + length)`` out of *parts* (fewer only at the file's
        end), or from a request of their own if the parts do not hold them."""
        if length <= 0:
            return b""
        k = bisect.bisect_right(parts, offset, key=lambda part: part[0]) - 1
        if k >= 0:
            first, data, size = parts[k]
            got = data[offset - first:offset - first + length]
            if len(got) == length or (size is not None and first + len(data) == size):
                return got
        return self.read_range(name, offset, length)

    def describe(self) -> str:
        return self.url


def open_source(spec: str | Path, config: Config | None = None, *,
                retries: int | None = None) -> Source:
    """A Source for a directory path or an http(s) URL; with *config*, an HTTP source takes
    its retries (``source.retries``) and credentials (``source_credentials``) from it."""
    text = str(spec)
    if retries is None:
        retries = config.source.retries if config is not None else RETRIES
    if text.startswith(("http://", "https://")):
        credentials = source_credentials(config) if config is not None else None
        return HttpSource(text, retries=retries, credentials=credentials)
    return LocalSource(Path(text))
