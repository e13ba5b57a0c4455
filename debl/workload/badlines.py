"""Malformed lines for testing the reject path (docs/DESIGN.md section 8), one per kind in turn.

Every kind breaks exactly one rule of the input format (docs/DESIGN.md section 3) in a line that is
otherwise a plausible link, so a parser that checks only some rules lets some through. Each line
is checked against ``debl.format.link.parse_line`` when it is made, and its reason is the parser's
own message, so the generator's report and the loader's reject file say the same thing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from debl.format.link import ParseError, parse_line

# Each kind breaks one rule; see _break for how.
KINDS = (
    "too few fields",
    "too many fields",
    "id1 not an integer",
    "id2 negative",
    "visibility not 0/1",
    "data too long",
    "carriage return in data",
    "time not an integer",
    "id1 beyond 64 bits",
    "empty line",
)


@dataclass(frozen=True)
class BadLine:
    """One injected line: where it is (file name, 1-based line number) and why it is bad."""

    file: str
    line_no: int
    kind: str
    reason: str


def _break(kind: str, fields: list[bytes], rng: np.random.Generator) -> bytes:
    f = list(fields)
    if kind == "too few fields":
        f = f[:-1]
    elif kind == "too many fields":
        f.append(b"0")
    elif kind == "id1 not an integer":
        f[0] = f[0][:1] + b"x" + f[0][1:]
    elif kind == "id2 negative":
        f[2] = b"-" + f[2]
    elif kind == "visibility not 0/1":
        f[3] = b"2"
    elif kind == "data too long":
        f[4] = bytes(rng.integers(32, 101, 256 + int(rng.integers(0, 100)), dtype=np.uint8))
    elif kind == "carriage return in data":
        f[4] = f[4] + b"\r"
    elif kind == "time not an integer":
        f[5] = f[5][:4] + b"." + f[5][4:]
    elif kind == "id1 beyond 64 bits":
        f[0] = b"9" * 20
    elif kind == "empty line":
        return b"\n"
    return b"\t".join(f) + b"\n"


def make_bad_line(kind: str, id1: int, link_type: int, time_ms: int,
                  rng: np.random.Generator) -> tuple[bytes, str]:
    """A bad line of ``kind`` (one of ``KINDS``) and the parser's reason for rejecting it."""
    data = bytes(rng.integers(32, 101, 8, dtype=np.uint8))
    good = [b"%d" % id1, b"%d" % link_type, b"%d" % (id1 + 1), b"1", data, b"%d" % time_ms, b"0"]
    line = _break(kind, good, rng)
    try:
        parse_line(line)
    except ParseError as exc:
        return line, str(exc)
    raise AssertionError(f"bad-line kind {kind!r} produced a line that parses: {line!r}")
