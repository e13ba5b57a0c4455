"""The hot/cold split: the newest files are hot (MySQL), the rest cold (HDFS, then HBase)."""

from __future__ import annotations

from dataclasses import dataclass

from loaders.source import SourceFile


@dataclass(frozen=True)
class Split:
    hot: list[SourceFile]
    cold: list[SourceFile]


def split_files(files: list[SourceFile], hot_bytes: int | None = None,
                hot_since: float | None = None) -> Split:
    """Hot files: modified at or after *hot_since*, or the newest files whose sizes add up to
    at most *hot_bytes* (newest first; the first file that does not fit ends the hot set).
    With neither, every file is cold. Both lists keep the input's oldest-first order."""
    if hot_bytes is not None and hot_since is not None:
        raise ValueError("give hot_bytes or hot_since, not both")
    hot_names: set[str] = set()
    if hot_since is not None:
        hot_names = {f.name for f in files if f.mtime >= hot_since}
    elif hot_bytes is not None:
        total = 0
        for f in sorted(files, key=lambda f: (f.mtime, f.name), reverse=True):
            if total + f.size > hot_bytes:
                break
            total += f.size
            hot_names.add(f.name)
    return Split([f for f in files if f.name in hot_names],
                 [f for f in files if f.name not in hot_names])
