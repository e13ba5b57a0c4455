"""The one record of a file (or directory) in HDFS, as a listing or a status gives it: every
part of DeBL that lists, stats or opens an HDFS file speaks of it by this record."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class HdfsFile:
    """A file or directory of HDFS as the NameNode described it: its absolute path, its length
    in bytes (0 for a directory), and its modification time in epoch milliseconds (a
    directory's moves when an entry is created, deleted or renamed in it)."""

    path: str
    length: int
    is_dir: bool
    modification_time_ms: int

    @property
    def name(self) -> str:
        """The last part of the path."""
        return self.path.rsplit("/", 1)[-1]
