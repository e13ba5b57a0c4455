"""Plain file names: what a source's listing may name, and paths built from such names.

A source's names go into paths (fileCopy's copies, a local source's files) and onto terminals;
a name is plain when it is one file name in one directory: a string, not empty, not ``.`` or
``..``, without ``/`` or NUL, and (an HTTP listing's) without control characters. An
``index.json`` naming ``../../home/u/.ssh/authorized_keys`` once had fileCopy write the
source's bytes there (issue 38.2, docs/RELIABILITY.md, "Security").
"""

from __future__ import annotations

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
