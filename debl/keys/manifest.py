"""The manifest of a source file, its pieces, and the check of its claims (docs/LOADING.md,
"The manifest").

A manifest says of one file: the id1 range of its valid lines (``id1_lo``..``id1_hi``), whether
they come in nondecreasing id1 order (``sorted``), and a sparse map of byte offsets of line
starts to their line's id1 (a point at the first valid line start at or after every ``step``
bytes). It travels with the listing, as the ``"manifest"`` of a file's entry in ``index.json``
(``to_json`` / ``from_json``; version ``MANIFEST_VERSION``). It is made by whoever writes the
dump (``debl generate``), or from the file's bytes (``debl.keys.manifest_build``).

A **piece** (``pieces``) is a byte range of one file with the id1s it claims: a sorted file's
map cuts it into one piece per point, each claiming the ids from its point's to the next's;
an unsorted file is one piece claiming ``id1_lo..id1_hi``; a file without manifest is one piece
claiming every id1. ``claim_violations`` is the reference of the check the bucketing makes of a
file's bytes against its manifest.

Pitfalls:

- "Valid" is ``debl.format.link.parse_line``'s word: claims are about valid lines only, and the
  bytes of bad lines lie inside pieces like any others. A point is always a valid line's start, so a
  file that begins with bad lines has its first point after them; its first piece still begins
  at byte 0.
- A file with bytes but no valid line has ``id1_lo = id1_hi = None``: its one piece claims
  nothing (``hi < lo``). An empty file has no piece at all.
- An unsorted file's map claims nothing narrower than the file's range; ``debl.keys.manifest_build``
  writes none for it.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import accumulate

from debl.errors import ManifestError
from debl.format.link import MAX_ID

MANIFEST_VERSION = 1
ID1_MAX = MAX_ID  # 2**63 - 1
STEP = 64 * 1024  # bytes between points, at least (docs/LOADING.md, "The manifest": sizes)
# The most points a manifest may have (docs/LOADING.md, "The listing's bounds"): the catalog
# keeps each manifest in a MEDIUMTEXT column (16 MiB), where a point takes at worst 38 bytes
# of JSON (an offset's delta of 14 digits, an unsorted file's id1 delta of 20 characters):
# 2**18 points are 10 MB. A 16 GiB file's at DeBL's step.
MAX_POINTS = 1 << 18
_FIELDS = ("version", "id1_lo", "id1_hi", "sorted", "step", "offsets", "id1s")


@dataclass(frozen=True)
class Manifest:
    """One file's manifest (see the module's docstring). ``offsets`` strictly increase, each
    the start of a valid line whose id1 is the matching ``id1s``; ``lines`` (optional) counts
    the file's lines, bad ones included."""

    id1_lo: int | None
    id1_hi: int | None
    sorted: bool
    offsets: tuple[int, ...] = ()
    id1s: tuple[int, ...] = ()
    lines: int | None = None
    step: int = STEP

    def to_json(self) -> dict:
        """The JSON object of ``index.json``: both arrays delta-encoded (the first value as
        it is, then each one's difference from the one before)."""
        obj = {"version": MANIFEST_VERSION, "id1_lo": self.id1_lo, "id1_hi": self.id1_hi,
               "sorted": self.sorted, "step": self.step, "offsets": _deltas(self.offsets),
               "id1s": _deltas(self.id1s)}
        if self.lines is not None:
            obj["lines"] = self.lines
        return obj

    @classmethod
    def from_json(cls, obj: object, name: str, size: int) -> "Manifest":
        """The manifest of file *name* (*size* bytes) from its JSON object; ManifestError,
        naming the file and the field, for anything that does not hold (docs/LOADING.md, "The
        manifest"). Fields it does not know are ignored (a version adds fields; a change of
        meaning is a new version)."""
        return _Reader(name, size).manifest(obj)


def _deltas(values: tuple[int, ...]) -> list[int]:
    return [b - a for a, b in zip((0,) + values, values)]


def json_int(text: str) -> int:
    """``json.loads``'s ``parse_int`` for listings: a number of more digits than any field can
    hold stands as one past every range, so a hostile one is a field's error, not a listing
    that cannot be read at all (``int()`` refuses over 4,300 digits)."""
    digits = text.lstrip("-")
    if len(digits) <= 40:
        return int(text)
    return -_HUGE if text.startswith("-") else _HUGE


_HUGE = 10 ** 40


class _Reader:
    """``Manifest.from_json`` of one file: each check fails with the file and the field."""

    def __init__(self, name: str, size: int):
        self.name, self.size = name, size

    def fail(self, field: str, what: str) -> ManifestError:
        return ManifestError(f"{self.name}: manifest field {field!r}: {what}; the file claims "
                             "every id1 (docs/LOADING.md, \"The manifest\")")

    def manifest(self, obj: object) -> Manifest:
        if not isinstance(obj, dict):
            raise ManifestError(f"{self.name}: the manifest is {_kind(obj)}, not a JSON object; "
                                "the file claims every id1 (docs/LOADING.md, \"The manifest\")")
        for field in _FIELDS:
            if field not in obj:
                raise self.fail(field, "missing")
        version = self.integer(obj, "version", 0, None)
        if version != MANIFEST_VERSION:
            raise self.fail("version", f"{version} is not a version this DeBL reads (it reads "
                                       f"{MANIFEST_VERSION})")
        lo, hi = (None if obj[f] is None else self.integer(obj, f, 0, ID1_MAX)
                  for f in ("id1_lo", "id1_hi"))
        if (lo is None) != (hi is None):
            raise self.fail("id1_lo" if lo is None else "id1_hi",
                            "null while the other bound is not (both are null only for a file "
                            "without valid lines)")
        if lo is not None and hi is not None and lo > hi:
            raise self.fail("id1_lo", f"{lo} is over id1_hi {hi}")
        if type(obj["sorted"]) is not bool:
            raise self.fail("sorted", f"{_kind(obj['sorted'])}, not true or false")
        step = self.integer(obj, "step", 1, None)
        lines = None if obj.get("lines") is None else self.integer(obj, "lines", 0, self.size)
        offsets = self.decoded(obj, "offsets")
        id1s = self.decoded(obj, "id1s")
        if len(offsets) != len(id1s):
            raise self.fail("id1s", f"{len(id1s)} values for {len(offsets)} offsets")
        self.check_offsets(offsets)
        most = -(-self.size // step)
        if len(offsets) > most:
            raise self.fail("offsets", f"{len(offsets):,} points in {self.size:,} bytes at step "
                                       f"{_shown(step)}: a map has at most a point a step "
                                       f"({most:,})")
        self.check_id1s(id1s, lo, hi, obj["sorted"])
        return Manifest(lo, hi, obj["sorted"], offsets, id1s, lines, step)

    def integer(self, obj: dict, field: str, low: int, high: int | None) -> int:
        value = obj[field]
        if type(value) is not int:
            raise self.fail(field, f"{_kind(value)}, not an integer")
        if value < low or (high is not None and value > high):
            top = "" if high is None else f" to {high}"
            raise self.fail(field, f"{_shown(value)} is out of its range, {low}{top}")
        return value

    def decoded(self, obj: dict, field: str) -> tuple[int, ...]:
        deltas = obj[field]
        if not isinstance(deltas, list):
            raise self.fail(field, f"{_kind(deltas)}, not a list")
        if len(deltas) > MAX_POINTS:
            raise self.fail(field, f"{len(deltas):,} values, more than the {MAX_POINTS:,} "
                                   "points a manifest may have")
        for i, d in enumerate(deltas):
            if type(d) is not int:
                raise self.fail(field, f"value {i} is {_kind(d)}, not an integer")
        return tuple(accumulate(deltas))

    def check_offsets(self, offsets: tuple[int, ...]) -> None:
        if offsets and offsets[0] < 0:
            raise self.fail("offsets", f"point 0 is at {_shown(offsets[0])}, before the file")
        for i in range(1, len(offsets)):
            if offsets[i] <= offsets[i - 1]:
                raise self.fail("offsets", f"not strictly increasing at point {i}")
        if offsets and offsets[-1] >= self.size:
            raise self.fail("offsets", f"point {len(offsets) - 1} is at {_shown(offsets[-1])}, "
                                       f"not before the file's end ({self.size} bytes)")

    def check_id1s(self, id1s: tuple[int, ...], lo: int | None, hi: int | None,
                   ordered: bool) -> None:
        if lo is None or hi is None:  # both, or neither (checked before)
            if id1s:
                raise self.fail("id1s", "points in a file whose id1_lo and id1_hi are null "
                                        "(no valid line)")
            return
        for i, v in enumerate(id1s):
            if not lo <= v <= hi:
                raise self.fail("id1s", f"point {i} is {_shown(v)}, outside id1_lo..id1_hi "
                                        f"({lo}..{hi})")
        if ordered:
            for i in range(1, len(id1s)):
                if id1s[i] < id1s[i - 1]:
                    raise self.fail("id1s", f"not nondecreasing at point {i} though 'sorted' "
                                            "is true")
            if id1s and id1s[0] != lo:
                raise self.fail("id1s", f"point 0 is {id1s[0]}, not id1_lo ({lo}), though "
                                        "'sorted' is true (the first point is the first valid "
                                        "line's)")


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return f"the integer {_shown(value)}"
    if isinstance(value, float):
        return f"the number {value!r}"
    kinds: dict[type, str] = {str: "a string", list: "a list", dict: "an object"}
    return kinds.get(type(value), type(value).__name__)


def _shown(value: int) -> str:
    text = str(value)
    return text if len(text) <= 30 else f"a number of {len(text)} digits"


def manifest_of_entry(entry: dict, name: str, size: int) -> tuple[Manifest | None, str | None]:
    """The manifest of a listing's entry (``entry["manifest"]``, optional) and the message of
    its error: ``(None, None)`` without one, ``(None, message)`` for a malformed one (the file
    then claims every id1; the load goes on)."""
    obj = entry.get("manifest")
    if obj is None:
        return None, None
    try:
        return Manifest.from_json(obj, name, size), None
    except ManifestError as exc:
        return None, str(exc)


@dataclass(frozen=True)
class Piece:
    """Bytes ``[start, end)`` of file ``file_seq``, whose valid lines have id1s in
    ``lo..hi`` (inclusive; ``hi < lo`` claims nothing)."""

    file_seq: int
    start: int
    end: int
    lo: int
    hi: int

    @property
    def size(self) -> int:
        return self.end - self.start

    def claims(self, id1: int) -> bool:
        return self.lo <= id1 <= self.hi


def pieces(file_seq: int, size: int, manifest: Manifest | None) -> list[Piece]:
    """The pieces of a file of *size* bytes, in byte order, covering it exactly: none for an
    empty file; one claiming every id1 without manifest, one claiming ``id1_lo..id1_hi`` for an
    unsorted file (or a sorted one without points), one claiming nothing for a file without
    valid lines; for a sorted file piece i is ``[offsets[i], offsets[i+1])`` claiming
    ``id1s[i]..id1s[i+1]`` (the next point's id1 included: lines before it may share it), the
    first starting at 0, the last ending at *size* and claiming up to ``id1_hi``."""
    if size == 0:
        return []
    if manifest is None:
        return [Piece(file_seq, 0, size, 0, ID1_MAX)]
    if manifest.id1_lo is None or manifest.id1_hi is None:  # both, or neither
        return [Piece(file_seq, 0, size, 0, -1)]
    if not manifest.sorted or not manifest.offsets:
        return [Piece(file_seq, 0, size, manifest.id1_lo, manifest.id1_hi)]
    starts = (0,) + manifest.offsets[1:]
    ends = manifest.offsets[1:] + (size,)
    his = manifest.id1s[1:] + (manifest.id1_hi,)
    return [Piece(file_seq, s, e, lo, hi)
            for s, e, lo, hi in zip(starts, ends, manifest.id1s, his)]


def piece_at(file_seq: int, size: int, manifest: Manifest | None, offset: int) -> Piece:
    """The piece of ``pieces(file_seq, size, manifest)`` holding byte *offset* (``0 <= offset
    < size``), found by a binary search: a check of a few lines of a file with many points
    must not build all its pieces."""
    if manifest is None or manifest.id1_lo is None or manifest.id1_hi is None \
            or not manifest.sorted or not manifest.offsets:
        return pieces(file_seq, size, manifest)[0]
    points = manifest.offsets
    i = max(bisect.bisect_right(points, offset) - 1, 0)
    last = i + 1 == len(points)
    return Piece(file_seq, points[i] if i else 0, size if last else points[i + 1],
                 manifest.id1s[i], manifest.id1_hi if last else manifest.id1s[i + 1])


@dataclass(frozen=True)
class ClaimViolation:
    """The first line (or point) of a file's bytes that breaks its manifest: where, its id1
    (None for a point without its line), the range that was claimed there, and how."""

    file_seq: int
    offset: int
    id1: int | None
    lo: int
    hi: int
    reason: str

    def describe(self, name: str) -> str:
        return (f"{name} (file {self.file_seq}), byte {self.offset}: {self.reason} (claimed "
                f"{self.lo}..{self.hi})")


def claim_violations(file_seq: int, size: int, manifest: Manifest | None, start: int, end: int,
                     lines: Iterable[tuple[int, int]]) -> ClaimViolation | None:
    """The first violation, in byte order, of *manifest*'s claims by bytes ``[start, end)`` of
    the file (whole lines), given ``(offset, id1)`` of each of their valid lines in order; None
    when they hold. A violation is: an id1 outside ``id1_lo..id1_hi``, or outside the claim of
    the piece holding its line; in a sorted file, an id1 below the line before it (in this
    range); a point in the range that is not a valid line's start, or whose id1 is not its
    line's. The Python reference of the check the bucketing makes (docs/LOADING.md, "The
    manifest"); a file without manifest claims everything and never breaks it."""
    if manifest is None:
        return None
    points = manifest.offsets if manifest.sorted else ()
    k = bisect.bisect_left(points, start)  # the next point not yet met
    prev: int | None = None
    last = start - 1
    for offset, id1 in lines:
        if not last < offset < end:
            raise ValueError(f"line at {offset}: not after the line before ({last}) inside "
                             f"the bytes [{start}, {end}) checked")
        last = offset
        if k < len(points) and points[k] < offset:
            return _missing_point(file_seq, size, manifest, k)
        p = piece_at(file_seq, size, manifest, offset)
        if manifest.id1_lo is None or manifest.id1_hi is None:  # both, or neither
            return ClaimViolation(file_seq, offset, id1, p.lo, p.hi,
                                  f"id1 {id1} in a file the manifest says has no valid line")
        if not manifest.id1_lo <= id1 <= manifest.id1_hi:
            return ClaimViolation(file_seq, offset, id1, manifest.id1_lo, manifest.id1_hi,
                                  f"id1 {id1} is outside the file's id1_lo..id1_hi")
        if not p.claims(id1):
            return ClaimViolation(file_seq, offset, id1, p.lo, p.hi,
                                  f"id1 {id1} is outside the claim of its piece "
                                  f"[{p.start}, {p.end})")
        if manifest.sorted and prev is not None and id1 < prev:
            return ClaimViolation(file_seq, offset, id1, p.lo, p.hi,
                                  f"id1 {id1} comes after {prev} in a file the manifest says "
                                  "is sorted")
        if k < len(points) and points[k] == offset:  # a point: the one met next (checked above)
            if manifest.id1s[k] != id1:
                return ClaimViolation(file_seq, offset, id1, p.lo, p.hi,
                                      f"point {k} says id1 {manifest.id1s[k]}, its line has {id1}")
            k += 1
        prev = id1
    if k < len(points) and points[k] < end:
        return _missing_point(file_seq, size, manifest, k)
    return None


def _missing_point(file_seq: int, size: int, manifest: Manifest, k: int) -> ClaimViolation:
    offset = manifest.offsets[k]
    p = piece_at(file_seq, size, manifest, offset)
    return ClaimViolation(file_seq, offset, None, p.lo, p.hi,
                          f"point {k} (id1 {manifest.id1s[k]}) is not the start of a valid line")
