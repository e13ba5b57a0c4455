"""Where the input files are: a local directory, or a remote one reached over HTTP.

A source lists its files (name, size, modification time) and opens one as a byte stream; the
loader never downloads everything first. The HTTP protocol is the one ``debl source serve``
speaks and any static web server can imitate: ``GET <url>/index.json`` returns
``[{"name": ..., "size": ..., "mtime": <unix seconds>}, ...]`` and ``GET <url>/files/<name>``
returns the bytes; with a ``Range: bytes=A-B`` header it answers 206 with bytes A..B only (the
split-point sample reads a few slices of every file that way, docs/LOADING.md).

Files are ordered oldest first (by mtime, then name); that order is the ``file_seq`` of the
merge rule ("the later file wins").
"""

from __future__ import annotations

import http.client
import json
import os
import urllib.parse
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from debl.errors import SourceError


@dataclass(frozen=True)
class SourceFile:
    name: str
    size: int
    mtime: float


class Source(ABC):
    @abstractmethod
    def list(self) -> list[SourceFile]:
        """Every input file, oldest first."""

    @abstractmethod
    def open(self, name: str) -> BinaryIO:
        """A readable binary stream of one file. Close it (use ``with``)."""

    @abstractmethod
    def read_range(self, name: str, offset: int, length: int) -> bytes:
        """Up to *length* bytes of one file from *offset* (fewer only at the end of the file)."""

    @abstractmethod
    def describe(self) -> str: ...


def _ordered(files: list[SourceFile]) -> list[SourceFile]:
    return sorted(files, key=lambda f: (f.mtime, f.name))


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

    def open(self, name: str) -> BinaryIO:
        try:
            return open(self.path / name, "rb")
        except OSError as exc:
            raise SourceError(f"cannot read {self.path / name}: {exc.strerror}") from exc

    def read_range(self, name: str, offset: int, length: int) -> bytes:
        with self.open(name) as f:
            f.seek(offset)
            return f.read(length)

    def describe(self) -> str:
        return str(self.path.absolute())


class HttpSource(Source):
    def __init__(self, url: str, timeout: float = 60.0):
        self.url = url.rstrip("/")
        parsed = urllib.parse.urlparse(self.url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise SourceError(f"not an http(s) URL: {url}")
        self._parsed = parsed
        self.timeout = timeout

    def _get(self, path: str, headers: dict[str, str] | None = None,
             status: int = 200) -> http.client.HTTPResponse:
        p = self._parsed
        cls = http.client.HTTPSConnection if p.scheme == "https" else http.client.HTTPConnection
        conn = cls(p.hostname, p.port, timeout=self.timeout)
        try:
            conn.request("GET", f"{p.path}/{path}", headers=headers or {})
            resp = conn.getresponse()
        except OSError as exc:
            conn.close()
            raise SourceError(f"source {self.url} is unreachable: {exc}") from exc
        if resp.status != status:
            conn.close()
            hint = (" instead of 206: the server does not answer ranged reads, which choosing "
                    "bucket split points needs (give `debl load --bucket-width W` instead)"
                    if status == 206 and resp.status == 200 else "")
            raise SourceError(f"source {self.url}/{path} answered HTTP {resp.status}{hint}")
        return resp

    def list(self) -> list[SourceFile]:
        resp = self._get("index.json")
        try:
            entries = json.loads(resp.read())
            return _ordered([SourceFile(e["name"], int(e["size"]), float(e["mtime"]))
                             for e in entries])
        except (ValueError, KeyError, TypeError) as exc:
            raise SourceError(f"{self.url}/index.json is not a file listing: {exc}") from exc

    def open(self, name: str) -> BinaryIO:
        return self._get("files/" + urllib.parse.quote(name))  # type: ignore[return-value]

    def read_range(self, name: str, offset: int, length: int) -> bytes:
        if length <= 0:
            return b""
        resp = self._get("files/" + urllib.parse.quote(name),
                         {"Range": f"bytes={offset}-{offset + length - 1}"}, status=206)
        try:
            return resp.read()
        except OSError as exc:
            raise SourceError(f"source {self.url}: reading {name} failed: {exc}") from exc
        finally:
            resp.close()

    def describe(self) -> str:
        return self.url


def open_source(spec: str | Path) -> Source:
    """A Source for a directory path or an http(s) URL."""
    text = str(spec)
    if text.startswith(("http://", "https://")):
        return HttpSource(text)
    return LocalSource(Path(text))
