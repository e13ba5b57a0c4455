"""The reject file: every line that does not parse, with its source file, line number and reason.

One file per load, ``<state_dir>/loads/<load_id>/rejects.tsv``: a header, then
``file <TAB> line_no <TAB> reason <TAB> the raw line`` (the raw line last, since it may hold tabs).
Thread-safe; reopened in append mode on resume.
"""

from __future__ import annotations

import threading
from pathlib import Path

HEADER = b"# file\tline_no\treason\tline\n"


class RejectWriter:
    def __init__(self, path: Path):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        new = not path.exists()
        self._file = open(path, "ab")
        if new:
            self._file.write(HEADER)
        self._lock = threading.Lock()
        self.count = 0

    def write(self, file: str, line_no: int, reason: str, line: bytes) -> None:
        record = b"%s\t%d\t%s\t%s\n" % (file.encode(), line_no, reason.encode(), line.rstrip(b"\n"))
        with self._lock:
            self._file.write(record)
            self.count += 1

    def forget(self, file: str, first_line: int, last_line: int) -> None:
        """Drop the records of lines [first_line, last_line] of *file*: a part of the load that
        is redone will reject them again."""
        with self._lock:
            self._file.close()
            records = self.path.read_bytes().split(b"\n")
            kept = [r for r in records if not _within(r, file.encode(), first_line, last_line)]
            self.path.write_bytes(b"\n".join(kept))
            self._file = open(self.path, "ab")

    def flush(self) -> None:
        with self._lock:
            self._file.flush()

    def close(self) -> None:
        with self._lock:
            self._file.close()

    def __enter__(self) -> "RejectWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _within(record: bytes, file: bytes, first: int, last: int) -> bool:
    parts = record.split(b"\t", 2)
    return (len(parts) == 3 and parts[0] == file and parts[1].isdigit()
            and first <= int(parts[1]) <= last)


def read_rejects(path: Path) -> list[tuple[str, int, str, bytes]]:
    """The records of a reject file."""
    out = []
    for record in path.read_bytes().split(b"\n"):  # not splitlines: a raw line may hold \r
        if not record or record.startswith(b"#"):
            continue
        file, line_no, reason, line = record.split(b"\t", 3)
        out.append((file.decode(), int(line_no), reason.decode(), line))
    return out
