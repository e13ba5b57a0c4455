"""The manifests ``debl source serve`` lists with its files (docs/LOADING.md, "The manifest"),
and each file's dump position as the directory's ``index.json`` gives it.

Every file of the served directory is listed with a manifest: the one of the directory's own
``index.json`` when its entry matches the file's size and mtime (``loaders.source_index``),
else one computed from the file's bytes (``debl.keys.manifest_build``) and cached by (name, size,
mtime): in memory, and in a cache file under the config's state directory (never in the served
directory, which may be read-only), so a restarted server computes nothing again.

``prepare`` computes what is missing before the server answers (a progress line per file), so
a listing never waits for it; a file changed later is computed again by the next listing. A
directory whose manifests hold more points together than a listing may (docs/LOADING.md, "The
listing's bounds") is listed without them, as its clients would use none.

Pitfall: a file that changes while its manifest is computed is read again (up to ``TRIES``
times); a manifest is never cached for a size and mtime it was not computed from.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from debl.errors import ManifestError
from debl.keys.manifest import Manifest, json_int
from debl.keys.manifest_build import manifest_of_file
from loaders.listing import points_fault
from loaders.source import LocalSource, SourceFile

TRIES = 3  # reads of a file that keeps changing while its manifest is computed
Key = tuple[str, int, float]  # name, size, mtime


def cache_path(cache_dir: Path, directory: Path) -> Path:
    """The cache file of one served directory (by its real path) under *cache_dir*."""
    real = os.path.realpath(directory)
    return Path(cache_dir) / f"{hashlib.sha256(real.encode()).hexdigest()[:20]}.json"


class ServedManifests:
    """The listing of a served directory, each file with its manifest (see the module's
    docstring). Thread-safe: listings come from the server's threads."""

    def __init__(self, source: LocalSource, cache_dir: Path | None = None,
                 progress: Callable[[str], None] | None = None):
        self.source = source
        self.cache_file = cache_path(cache_dir, source.path) if cache_dir is not None else None
        self.progress = progress or (lambda line: None)
        self._lock = threading.Lock()  # one computation at a time, and the caches with it
        self._json: dict[Key, dict] = {}  # the manifest's JSON form, by the file it is of
        self._computed: dict[Key, dict] = self._read_cache()

    def prepare(self, files: list[SourceFile] | None = None) -> None:
        """Make sure every listed file has a manifest (computing the missing ones)."""
        files = self.source.list() if files is None else files
        problem = self.source.index_problem()
        if problem is not None:  # said once, even when every manifest comes from the cache
            self.progress(f"{problem}: the manifests are computed from the files")
        for i, f in enumerate(files, 1):
            self._manifest(f, f"[{i}/{len(files)}] ", True)
        fault = points_fault([{"manifest": self._manifest(f, "", False)} for f in files])
        if fault is not None:
            self.progress(f"the listing {fault}: its files are listed without manifests")

    def entries(self, files: list[SourceFile]) -> list[dict]:
        """The listing's entries of *files*, each with its manifest; none at all when they
        hold more points together than a client takes (``loaders.listing.points_fault``):
        the listing stays small, and a client would not use them anyway."""
        entries = [{"name": f.name, "size": f.size, "mtime": f.mtime,
                    "manifest": self._manifest(f, "", False),
                    # the dump's position, as the directory's index.json gives it
                    **({} if f.position is None else {"position": f.position})}
                   for f in files]
        if points_fault(entries) is not None:
            return [{**e, "manifest": None} for e in entries]
        return entries

    def _manifest(self, f: SourceFile, counter: str, say: bool) -> dict | None:
        """*f*'s manifest (JSON); *say*: a progress line even when nothing is computed."""
        key = (f.name, f.size, f.mtime)
        with self._lock:
            if key in self._json:
                return self._json[key]
            if f.manifest is not None:
                self._json[key] = f.manifest.to_json()
                if say:
                    self.progress(f"{counter}{f.name}: manifest from index.json")
                return self._json[key]
            if key not in self._computed:
                why = f" ({f.manifest_error})" if f.manifest_error else ""
                started = time.monotonic()
                computed = self._compute(f)
                if computed is None:
                    self.progress(f"{counter}{f.name}: it kept changing while it was read: "
                                  "listed without manifest (it claims every id1)")
                    return None
                self._computed[key] = computed
                self._write_cache()
                seconds = time.monotonic() - started
                self.progress(f"{counter}{f.name}: manifest computed from its {f.size:,} bytes "
                              f"in {seconds:.1f} s{why}")
            elif say:
                self.progress(f"{counter}{f.name}: manifest from the cache")
            self._json[key] = self._computed[key]
            return self._json[key]

    def _compute(self, f: SourceFile) -> dict | None:
        """The manifest of *f* as listed, or None if the file does not stay as listed."""
        for _ in range(TRIES):
            path = self.source.path / f.name
            try:
                before = os.stat(path)
                manifest = manifest_of_file(path)
                after = os.stat(path)
            except OSError:
                return None  # gone, or unreadable: the listing says the rest
            if (before.st_size, before.st_mtime) == (after.st_size, after.st_mtime) == (
                    f.size, f.mtime):
                return manifest.to_json()
            if (after.st_size, after.st_mtime) != (f.size, f.mtime):
                return None  # another version than the one listed: the next listing has it
        return None

    def _read_cache(self) -> dict[Key, dict]:
        if self.cache_file is None:
            return {}
        try:
            doc = json.loads(self.cache_file.read_bytes(), parse_int=json_int)
            files = doc["files"]
            found = {}
            for name, e in files.items():
                Manifest.from_json(e["manifest"], name, e["size"])  # a damaged cache: recompute
                found[(name, e["size"], e["mtime"])] = e["manifest"]
            return found
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, KeyError, TypeError, AttributeError, ManifestError,
                RecursionError) as exc:
            self.progress(f"manifest cache {self.cache_file} not used ({exc!r}): computing again")
            return {}

    def _write_cache(self) -> None:
        """The computed manifests of the files as last seen, one per name (under the lock)."""
        if self.cache_file is None:
            return
        latest: dict[str, dict] = {}
        for (name, size, mtime), manifest in self._computed.items():
            latest[name] = {"size": size, "mtime": mtime, "manifest": manifest}
        doc = {"directory": os.path.realpath(self.source.path), "files": latest}
        try:
            self.cache_file.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.cache_file.with_name(f".{self.cache_file.name}.{os.getpid()}.part")
            tmp.write_text(json.dumps(doc, separators=(",", ":")))
            os.replace(tmp, self.cache_file)
        except OSError as exc:  # the cache only saves time: the listing goes on without it
            self.progress(f"manifest cache {self.cache_file} not written: {exc.strerror}")
