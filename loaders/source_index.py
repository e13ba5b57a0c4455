"""``index.json`` beside a local directory's files: where a local source finds their manifests
(docs/LOADING.md, "The manifest").

The file is the HTTP listing's format, ``[{"name", "size", "mtime", "manifest": {...}}, ...]``
(``debl generate`` writes it; ``debl source dump`` adds each entry's ``"position"``, which
counts, as the manifest, only while the entry matches its file: ``position``). A file's manifest
is used only when its entry matches the file as it is now: same name, same size, same mtime (to
``MTIME_SLACK``); otherwise the file has no manifest and a message saying why (it then claims
every id1; the load goes on). An
``index.json`` past the listing's bounds, not JSON, or not a list (``loaders.listing``) gives
no file a manifest, each with a message naming it and the cause: the load goes on. A directory
without ``index.json`` loads as before, without manifests and without messages.

Pitfalls: the name ``index.json`` is reserved: it is never one of the directory's data files.
The file is parsed again only when it changes (its inode, size, mtime or ctime), and each
manifest validated once per version of it: a local source is listed several times per load.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from debl.keys.manifest import Manifest, manifest_of_entry
from loaders.listing import MAX_INDEX_BYTES, parse_index, points_fault

INDEX = "index.json"
MTIME_SLACK = 1e-6  # seconds: a float's rounding, never a rewrite of the file


class DirectoryIndex:
    """The manifests that ``<directory>/index.json`` gives the directory's files. Thread-safe
    (a source server lists from many threads)."""

    def __init__(self, directory: Path):
        self.path = Path(directory) / INDEX
        self._lock = threading.Lock()
        self._version: tuple[int, ...] | None = None  # the stat of the index.json read
        self._entries: dict[str, dict] = {}
        self._error: str | None = None  # why the whole index cannot be used
        self._found: dict[tuple[str, int, float], tuple[Manifest | None, str | None]] = {}

    def manifest(self, name: str, size: int, mtime: float) -> tuple[Manifest | None, str | None]:
        """The manifest of the file *name* as it is now (*size*, *mtime*), and the message of
        why it has none where it should: ``(None, None)`` without an index or an entry
        without manifest."""
        with self._lock:
            if not self._read():
                return None, None
            if self._error is not None:
                return None, (f"{name}: {self._error}: no file has a manifest, each claims "
                              "every id1")
            key = (name, size, mtime)
            if key not in self._found:
                self._found[key] = self._match(name, size, mtime)
            return self._found[key]

    def position(self, name: str, size: int, mtime: float) -> object:
        """The ``"position"`` that the entry of the file *name* as it is now carries (JSON, read
        by ``loaders.listing.listing_position``); None without one, or when the entry does not
        match the file."""
        with self._lock:
            if not self._read() or self._error is not None:
                return None
            entry = self._entries.get(name)
            return entry.get("position") if entry and _matches(entry, size, mtime) else None

    def _read(self) -> bool:
        """Whether there is an index (read again if it changed)."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self._version = None
            return False
        except OSError as exc:
            self._version, self._error = None, f"{self.path} cannot be read ({exc.strerror})"
            return True
        # A rewritten index.json may keep its size and mtime (debl generate sets its mtime):
        # its inode and ctime change whatever the writer does to the mtime.
        version = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        if version != self._version:
            self._version, self._entries, self._found = version, {}, {}
            doc: list = []
            try:
                with open(self.path, "rb") as f:
                    doc = parse_index(f.read(MAX_INDEX_BYTES + 1))
                self._error = points_fault(doc)
            except OSError as exc:
                self._error = f"cannot be read ({exc.strerror})"
            except ValueError as exc:  # the same road as a file without manifest
                self._error = f"is not a listing DeBL reads: {exc}"
            if self._error is not None:
                self._error, doc = f"{self.path} {self._error}", []
            for entry in doc:
                if isinstance(entry, dict) and isinstance(entry.get("name"), str):
                    self._entries.setdefault(entry["name"], entry)
        return True

    def problem(self) -> str | None:
        """Why the directory's ``index.json`` cannot be used at all, naming it (None: it can,
        or there is none)."""
        with self._lock:
            return self._error if self._read() else None

    def _match(self, name: str, size: int, mtime: float) -> tuple[Manifest | None, str | None]:
        entry = self._entries.get(name)
        if entry is None:
            return None, (f"{name}: not in {self.path}: it has no manifest and claims every "
                          "id1")
        listed_size, listed_mtime = entry.get("size"), entry.get("mtime")
        if not _matches(entry, size, mtime):
            return None, (f"{name}: {self.path} lists it with size {listed_size!r}, mtime "
                          f"{_when(listed_mtime)}; it has {size} bytes, mtime {_when(mtime)} "
                          "now: its manifest is not used (the file claims every id1); write "
                          "index.json again with the files (debl generate does)")
        return manifest_of_entry(entry, name, size)


def _matches(entry: dict, size: int, mtime: float) -> bool:
    """Whether the index's *entry* lists the file as it is now (*size*, *mtime*)."""
    listed_size, listed_mtime = entry.get("size"), entry.get("mtime")
    return (type(listed_size) is int and not isinstance(listed_mtime, bool)
            and isinstance(listed_mtime, (int, float))
            and listed_size == size and abs(listed_mtime - mtime) <= MTIME_SLACK)


def _when(mtime: object) -> str:
    if isinstance(mtime, bool) or not isinstance(mtime, (int, float)) or not 0 <= mtime < 1e11:
        return repr(mtime)
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(mtime)) + f" ({mtime:.6f})"
