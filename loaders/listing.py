"""``index.json`` as a source lists it: its bounds, its parse, its entries and their manifests
(docs/LOADING.md, "The listing's bounds").

The same file is an HTTP source's whole listing and a local directory's manifests
(``loaders.source_index``); both read it here:

- at most ``MAX_INDEX_BYTES``, JSON, no deeper than Python's parser goes (which raises
  ``RecursionError`` past about a thousand levels), and a list; ``parse_index`` says which of
  these does not hold (a ValueError). An HTTP listing that fails them is refused: without it
  there is no file to load. A local directory's is not used: no file has a manifest.
- its manifests together hold at most ``MAX_LISTING_POINTS`` points (``points_fault``), else
  none of them is used and every file claims every id1: the load goes on. One manifest's own
  bounds are ``debl.keys.manifest``'s.

An entry is a ``SourceFile`` once ``check_listing_entry`` took it (a plain name, a whole size, a
finite mtime; else the listing is refused naming the entry), and files are ordered oldest first
(``ordered``: mtime, then name), the ``file_seq`` of the merge rule ("the later file wins").

The dump's position (docs/LOADING.md, "The dump's position"): a dump's entries each carry the
same ``"position"`` (an old reader ignores a field of an entry it does not know, so the listing
stays a list); ``listing_position`` gives it when every file carries one and the same.
``index.json`` is written by ``write_index``, which ``debl generate`` and ``debl source dump``
use.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from debl.keys.manifest import Manifest, json_int, manifest_of_entry
from debl.position import DumpPosition
from loaders.file_names import checked_entry

# A 10 GB dump's index.json, a manifest for every file, is about 1.5 MB (10 bytes a point, a
# point per 64 KiB); 32 MiB also holds 150,000 entries of small files. What the bound caps is
# the parse: a hostile 32 MiB of "{}," cost Python 770 MiB.
MAX_INDEX_BYTES = 32 << 20
# A 10 GB dump has about 153,000 points; 2**20 is a 64 GiB dump's at DeBL's step. A point
# costs a load about 480 bytes (the manifest, its piece, the answerable keys' bookkeeping).
MAX_LISTING_POINTS = 1 << 20


@dataclass(frozen=True)
class SourceFile:
    name: str
    size: int
    mtime: float
    # What the listing says of its lines (None: it claims every id1), and why it has none when
    # it was given one that cannot be used; neither is part of the file's identity.
    manifest: Manifest | None = field(default=None, compare=False, repr=False)
    manifest_error: str | None = field(default=None, compare=False)
    # The entry's "position" as listed (JSON; None: it has none), read by listing_position.
    position: Any = field(default=None, compare=False, repr=False)


def check_listing_entry(entry: Any, where: str, *, plain_text: bool = True) -> SourceFile:
    """One entry of a source's listing as a SourceFile, checked (``loaders.file_names.
    checked_entry``: a plain name, a whole size, a finite mtime), else SourceError naming
    *where*."""
    return SourceFile(*checked_entry(entry, where, plain_text))


def ordered(files: list[SourceFile]) -> list[SourceFile]:
    return sorted(files, key=lambda f: (f.mtime, f.name))


def parse_index(data: bytes) -> list:
    """The entries of an ``index.json`` of *data*; ValueError saying why it is not a listing:
    over ``MAX_INDEX_BYTES`` (a caller reads at most one byte more), not JSON, nested past the
    parser, or not a list."""
    if len(data) > MAX_INDEX_BYTES:
        raise ValueError(f"it is over {MAX_INDEX_BYTES >> 20} MiB, more than any listing "
                         "DeBL reads (docs/LOADING.md, \"The listing's bounds\")")
    try:
        doc = json.loads(data, parse_int=json_int)
    except RecursionError:
        raise ValueError("it nests deeper than JSON's parser goes (a listing nests four "
                         "levels: the list, an entry, its manifest, the manifest's lists)"
                         ) from None
    except ValueError as exc:
        raise ValueError(f"it is not JSON ({exc})") from None
    if not isinstance(doc, list):
        raise ValueError("a JSON list of {name, size, mtime} objects was expected")
    return doc


def points_fault(entries: list) -> str | None:
    """Why none of the manifests of *entries* may be used (their points together are over
    ``MAX_LISTING_POINTS``), said of the listing, or None. Counted before any manifest is
    read: that is the cost bounded."""
    points = 0
    for entry in entries:
        manifest = entry.get("manifest") if isinstance(entry, dict) else None
        offsets = manifest.get("offsets") if isinstance(manifest, dict) else None
        points += len(offsets) if isinstance(offsets, list) else 0
    if points <= MAX_LISTING_POINTS:
        return None
    return (f"holds manifests of {points:,} points in all, more than the "
            f"{MAX_LISTING_POINTS:,} a listing may (docs/LOADING.md, \"The listing's bounds\")")


def listed_files(entries: list, where: str) -> list[SourceFile]:
    """The files of an HTTP listing's *entries*, oldest first, each with its manifest or the
    message of why it has none; SourceError for an entry that is not a file (naming *where*
    and the entry's number)."""
    files = [check_listing_entry(e, f"{where} entry {k}") for k, e in enumerate(entries, 1)]
    fault = points_fault(entries)
    found = []
    for f, entry in zip(files, entries):
        if fault is None or entry.get("manifest") is None:
            manifest, error = manifest_of_entry(entry, f.name, f.size)
        else:
            manifest, error = None, f"{f.name}: {where} {fault}: none is used"
        found.append(replace(f, manifest=manifest, manifest_error=error,
                             position=entry.get("position")))
    return ordered(found)


def listing_position(files: list[SourceFile],
                     say: Callable[[str], None] = lambda _: None) -> DumpPosition | None:
    """The dump's position of a listing: the one every file carries, None when no file
    carries one (a listing as before). Where some do but not all, or they differ or are
    malformed, the files are not one dump (a file added or changed since): None, and *say*
    is told why (a load of it is not kept fresh: docs/LOADING.md, "The dump's position")."""
    listed = [f for f in files if f.position is not None]
    if not listed:
        return None
    why = None
    try:
        found = {DumpPosition.from_json(f.position) for f in listed}
    except ValueError as exc:
        why = f"a file's position is malformed ({exc})"
    else:
        if len(found) > 1:
            why = f"its files carry {len(found)} positions ({', '.join(sorted(map(str, found)))})"
        elif len(listed) < len(files):
            bare = [f.name for f in files if f.position is None]
            why = (f"{len(bare)} of its {len(files)} files carry none (e.g. {bare[0]!r}: added "
                   "or changed since the dump, or not in its index.json)")
        else:
            return found.pop()
    say(f"the listing's dump position is not used: {why}; the load is not kept fresh "
        "(docs/LOADING.md, \"The dump's position\")")
    return None


def listing_entry(path: Path, manifest: Manifest | None,
                  position: DumpPosition | None = None) -> dict:
    """The ``index.json`` entry of the file at *path* as it is now (``stat``'s size and mtime,
    as a local source lists it), with its manifest and the dump's position."""
    st = path.stat()
    entry: dict = {"name": path.name, "size": st.st_size, "mtime": st.st_mtime,
                   "manifest": None if manifest is None else manifest.to_json()}
    if position is not None:
        entry["position"] = position.to_json()
    return entry


def write_index(out: Path, entries: list[dict], mtime_ns: int, name: str = "index.json") -> None:
    """``index.json`` of *entries* into the directory *out*: written under a temporary name,
    then renamed, with the mtime *mtime_ns* (older than every file's, so that it never passes
    for the newest file in a directory sorted by mtime)."""
    tmp = out / f".{name}.part"
    tmp.write_text(json.dumps(entries, separators=(",", ":")) + "\n")
    os.utime(tmp, ns=(mtime_ns, mtime_ns))
    os.replace(tmp, out / name)
