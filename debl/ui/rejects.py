"""The first lines a load rejected, with their reasons, for the page.

The catalog counts rejects per file (``read_status``: ``load["rejects"]``); the lines themselves
are in the load's reject files on the machine that ran the load (``loaders.rejects``). They are
read again only when the catalog's count changes, and not at all past ``MAX_READ_BYTES`` (a load
with ``loading.max_bad`` unlimited may reject gigabytes): the page then names the directory instead.
"""

from __future__ import annotations

from pathlib import Path

from debl.config import Config
from loaders.load import reject_path
from loaders.rejects import read_rejects

SHOWN = 20  # records the page lists
LINE_CHARS = 160  # of each rejected line, shown as text
MAX_READ_BYTES = 8 << 20


class RejectSample:
    """The first ``SHOWN`` rejects of a load, cached by (load, count)."""

    def __init__(self, config: Config):
        self.config = config
        self._key: tuple[str, int] | None = None
        self._value: dict = {}

    def of(self, load_id: str, total: int) -> dict:
        """``{"dir", "records": [{"file", "line_no", "reason", "line"}], "note"}`` for the
        load whose catalog counts *total* rejects; ``note`` says why records are missing."""
        if self._key != (load_id, total):
            self._value = self._read(load_id, total)
            self._key = (load_id, total)
        return self._value

    def _read(self, load_id: str, total: int) -> dict:
        directory = reject_path(self.config, load_id)
        found: dict = {"dir": str(directory), "records": [], "note": None}
        if not total:
            return found
        if not directory.is_dir():
            found["note"] = (f"the rejected lines are in {directory} on the machine that ran "
                             "the load")
            return found
        size = sum(p.stat().st_size for p in directory.iterdir() if p.is_file())
        if size > MAX_READ_BYTES:
            found["note"] = f"{size / 1e6:,.0f} MB of rejected lines: see {directory}"
            return found
        try:
            records = read_rejects(Path(directory))
        except (OSError, ValueError) as exc:  # a part being written, or a damaged file
            found["note"] = f"{directory} could not be read: {exc}"
            return found
        found["records"] = [
            {"file": file, "line_no": line_no, "reason": reason,
             "line": line[:LINE_CHARS].decode("utf-8", "replace")}
            for file, line_no, reason, line in records[:SHOWN]]
        return found
