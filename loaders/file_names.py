"""Plain file names and the entries of a listing: what a source may name, and paths built from
such names.

A source's names go into paths (fileCopy's copies, a local source's files) and onto terminals;
a name is plain when it is one file name in one directory: a string, not empty, not ``.`` or
``..``, without ``/`` or NUL, and (an HTTP listing's) without control characters. An
``index.json`` naming ``../../home/u/.ssh/authorized_keys`` once had fileCopy write the
source's bytes there (docs/RELIABILITY.md, "Security").
"""

from __future__ import annotations

import math
import os
import unicodedata
from pathlib import Path
from typing import Any

from debl.errors import SourceError


def name_fault(name: Any, plain_text: bool = True) -> str | None:
    """Why *name* is not a plain file name (None if it is): a string, not empty, not ``.`` or
    ``..``, without ``/`` or NUL; with *plain_text* also without control characters (ESC, tab,
    newline, DEL, C1) and lone surrogates, which an HTTP listing's names never need (a local
    directory's names are the file system's own, bytes not UTF-8 included)."""
    if not isinstance(name, str):
        return f"a name is a string, not {type(name).__name__}"
    if name in ("", ".", ".."):
        return "empty" if not name else f"{name} names a directory"
    for char in name:
        kind = unicodedata.category(char)
        if char == "/":
            return "it holds '/': a file name has no directory"
        if char == "\0":
            return "it holds NUL"
        if plain_text and kind in ("Cc", "Cs"):
            return (f"it holds the control character {char!r}" if kind == "Cc" else
                    f"it holds {char!r}, which is not a Unicode character")
    return None


def path_in(directory: Path, name: str) -> Path:
    """*directory* / *name*, for a *name* that is a plain file name: a path built from a
    source's name never leaves its directory (SourceError otherwise)."""
    why = name_fault(name, plain_text=False)
    path = Path(directory) / name
    if why is None and os.path.dirname(os.path.normpath(path)) != os.path.normpath(directory):
        why = "it leads out of the directory"
    if why is not None:
        raise SourceError(f"{name!r} is not a plain file name ({why}): refused as a path in "
                          f"{directory}")
    return path


MAX_SIZE = (1 << 63) - 1  # a size the catalog's BIGINT holds


def checked_entry(entry: Any, where: str, plain_text: bool = True) -> tuple[str, int, float]:
    """One entry of a source's listing, ``{"name": ..., "size": ..., "mtime": ...}``, as
    ``(name, size, mtime)``: the name a plain file name (``name_fault``), the size a whole number of
    bytes (0 to 2^63-1), the mtime a finite number of seconds. Else SourceError naming *where*
    (which entry of which listing) and what is wrong, with the name escaped.

    Pitfall: a name goes into paths (fileCopy's copies) and onto terminals; a listing that
    names ``../../home/u/.ssh/authorized_keys`` once wrote the source's bytes there (issue
    38.2), and a NaN mtime reached MySQL (38.9): the whole listing is refused before anything
    is read (docs/RELIABILITY.md, "Sources that misbehave")."""
    def refused(what: str) -> SourceError:
        shown = repr(entry)
        shown = shown if len(shown) <= 300 else shown[:300] + "..."
        return SourceError(f"{where} ({shown}): {what}; nothing was read: the source must list "
                           "its files by plain name, whole size and mtime "
                           "(docs/LOADING.md, row \"HTTP sources\")")

    if not isinstance(entry, dict):
        raise refused(f"not an object with name, size and mtime but a {type(entry).__name__}")
    for field in ("name", "size", "mtime"):
        if field not in entry:
            raise refused(f"it has no {field}")
    name, size, mtime = entry["name"], entry["size"], entry["mtime"]
    why = name_fault(name, plain_text)
    if why is not None:
        raise refused(f"the name {name!r} is not a plain file name ({why})" if isinstance(
            name, str) else f"the name {name!r} is not a file name ({why})")
    if (isinstance(size, bool) or not isinstance(size, (int, float))
            or (isinstance(size, float) and not size.is_integer()) or not 0 <= size <= MAX_SIZE):
        raise refused(f"the size {size!r} is not a whole number of bytes (0 to {MAX_SIZE})")
    if isinstance(mtime, bool) or not isinstance(mtime, (int, float)) or not math.isfinite(mtime):
        raise refused(f"the mtime {mtime!r} is not a finite number of seconds")
    return name, int(size), float(mtime)
