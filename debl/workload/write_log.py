"""The write log of ``debl query --write-log FILE``: every write the writer pool sent, one CSV row
each (``WriteRecord``: the operation, the key, the client's monotonic instants, the GTID,
whether it found and changed a row, its error, and the row add_link and update_link wrote), what
the check of fresh answers reads back (docs/FRESHNESS.md, "The checker").

The row's ``data`` is written in hex (``data_hex``): it is bytes 32..100 in LinkBench's writes,
but any byte in a row a CSV must carry. A write without a row (delete_link) leaves its four
columns empty.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from pathlib import Path

from debl.errors import ConfigError
from debl.format.link import Link
from debl.position import parse_gtid
from debl.workload.writers import WriteRecord

COLUMNS = ("op", "id1", "link_type", "id2", "intended_ns", "sent_ns", "acked_ns", "gtid",
           "found", "changed", "error", "visibility", "data_hex", "time", "version")


def save_writes(records: Iterable[WriteRecord], path: Path | str) -> Path:
    """Every write of *records* as a CSV row under the header ``COLUMNS``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(COLUMNS)
        for r in records:
            row = ("", "", "", "") if r.row is None else (
                r.row.visibility, r.row.data.hex(), r.row.time, r.row.version)
            out.writerow((r.op, r.id1, r.link_type, r.id2, r.intended_ns, _blank(r.sent_ns),
                          _blank(r.acked_ns), _blank(r.gtid), _blank(r.found),
                          _blank(r.changed), _blank(r.error), *row))
    return path


def read_writes(path: Path | str) -> list[WriteRecord]:
    """The writes of a write log; ConfigError naming the file and the line of what is not
    one (a log of an older ``debl query`` lacks the rows written: run the client again)."""
    path = Path(path)
    try:
        with path.open(newline="") as f:
            reader = csv.reader(f)
            header = next(reader, None)
            if header is None or tuple(header) != COLUMNS:
                raise ConfigError(
                    f"{path} is not a write log of this debl's `debl query --write-log` (its "
                    f"header is {header!r}; a log of an older debl lacks the rows written: "
                    "run the client again)")
            return [_record(row, path, n) for n, row in enumerate(reader, 2)]
    except OSError as exc:
        raise ConfigError(f"cannot read the write log {path}: {exc.strerror}") from exc


def _record(row: list[str], path: Path, line: int) -> WriteRecord:
    try:
        (op, id1, link_type, id2, intended, sent, acked, gtid, found, changed, error,
         visibility, data, time, version) = row
        link = None
        if data or visibility:
            link = Link(int(id1), int(link_type), int(id2), int(visibility),
                        bytes.fromhex(data), int(time), int(version))
        if gtid:
            parse_gtid(gtid)  # the checker orders writes by it
        return WriteRecord(op, int(id1), int(link_type), int(id2), int(intended),
                           _int(sent), _int(acked), gtid or None, _bool(found),
                           _bool(changed), error or None, link)
    except ValueError as exc:
        raise ConfigError(f"{path}, line {line}: not a write ({exc})") from None


def _blank(value: object) -> object:
    return "" if value is None else value


def _int(text: str) -> int | None:
    return int(text) if text else None


def _bool(text: str) -> bool | None:
    if text not in ("", "True", "False"):
        raise ValueError(f"{text!r} is not True or False")
    return None if not text else text == "True"
