"""Positions in a source's binary log (docs/FRESHNESS.md, "Positions"): MariaDB's GTID
``domain-server-seq``, and the dump's position, the GTID of the snapshot a dump was taken from
with the id of the source it belongs to, as ``index.json`` carries it and a load records it.

A source is one GTID domain, so its positions are ordered by ``seq`` alone. A position is
checked where it is read (a listing from anywhere): three decimal numbers, the domain and the
server within 32 bits, the sequence within 64; the source's id a short printable string.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_GTID = re.compile(r"^(\d{1,10})-(\d{1,10})-(\d{1,20})$")
MAX_SOURCE_ID = 64  # characters: a UUID is 36


def parse_gtid(text: str) -> tuple[int, int, int]:
    """``(domain, server, seq)`` of a GTID ``domain-server-seq``; ValueError saying why not."""
    m = _GTID.match(text) if isinstance(text, str) else None
    if m is None:
        raise ValueError(f"{text!r} is not a GTID (domain-server-seq, e.g. 0-1-4711)")
    domain, server, seq = (int(g) for g in m.groups())
    if domain >= 1 << 32 or server >= 1 << 32 or seq >= 1 << 64:
        raise ValueError(f"{text!r} is not a GTID: domain and server are 32-bit numbers, the "
                         "sequence a 64-bit one")
    return domain, server, seq


@dataclass(frozen=True)
class DumpPosition:
    """The position of a dump: *gtid*, the GTID of its snapshot (the dump holds exactly the
    source's transactions up to it), of the source *source* (``debl.store.source_db``'s
    ``source_id``)."""

    gtid: str
    source: str

    def __post_init__(self) -> None:
        parse_gtid(self.gtid)
        if (not isinstance(self.source, str) or not 0 < len(self.source) <= MAX_SOURCE_ID
                or not self.source.isprintable()):
            raise ValueError(f"the source {self.source!r} is not an id of a source (printable, "
                             f"1 to {MAX_SOURCE_ID} characters)")

    @property
    def seq(self) -> int:
        """The sequence number: positions of one source are ordered by it."""
        return parse_gtid(self.gtid)[2]

    def to_json(self) -> dict:
        return {"gtid": self.gtid, "source": self.source}

    @classmethod
    def from_json(cls, value: Any) -> "DumpPosition":
        """A position from its JSON form (``{"gtid": ..., "source": ...}``; other fields are
        ignored); ValueError saying what is wrong."""
        if not isinstance(value, dict):
            raise ValueError(f"a position is an object with gtid and source, not "
                             f"{type(value).__name__}")
        return cls(value.get("gtid"), value.get("source"))  # type: ignore[arg-type]

    def __str__(self) -> str:
        return f"{self.gtid} of source {self.source}"
