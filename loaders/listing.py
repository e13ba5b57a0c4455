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
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from debl.keys.manifest import Manifest, json_int, manifest_of_entry
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
        found.append(replace(f, manifest=manifest, manifest_error=error))
    return ordered(found)
