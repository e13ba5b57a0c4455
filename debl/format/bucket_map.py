"""The bucket map: which bucket an id1 falls in, and which id1s a bucket holds.

One object, used by every part of DeBL that needs buckets (dist_ch, the catalog's bucket index,
gen_HF's pre-split table, the coordinator's routing, the tests), and mirrored once on the JVM
(``debl.jobs.BucketMap``, used by dist_ch's tasks; a test checks that both agree). Two kinds:

- **split points** (the default, chosen by ``loaders.sampling`` from a sample of the cold input
  so that buckets hold about equal bytes): sorted ids ``s_1 < ... < s_n``; bucket 0 is
  ``[0, s_1 - 1]``, bucket ``b`` is ``[s_b, s_(b+1) - 1]``, the last ``[s_n, 2^63 - 1]``. An id1's
  bucket is found by binary search.
- **fixed width** ``w`` (``--bucket-width`` / ``loading.bucket_width``): bucket ``id1 // w``, range
  ``[b*w, min((b+1)*w - 1, 2^63 - 1)]``.

Either way every valid id1, 0 to 2^63-1, has exactly one bucket, and no bound overflows a signed
64-bit column (the last bucket's upper bound is clipped, not computed as ``(b+1)*w - 1``).

The hot files' buckets (read by the raw route until MySQL takes the hot keys over, never
converted) use ``HOT_MAP``, one bucket for every id: a hot chunk then writes one bucket file
per slice, where a change log's hot chunk, every id1 in each of its files, wrote one per cold
bucket and slice (docs/LOADING.md, "One hot bucket").

"Not decided yet" is spelled one way: no map (``None``; NULL in the catalog). A load decides its
map before the copy starts (docs/LOADING.md, "Bucket boundaries").

Serialised as JSON (``{"splits": [...]}`` or ``{"width": w}``), for the catalog
(``debl_loads.bucket_map``) and for the JVM call. Pitfall: ids up to 2^63-1 do not survive a
JSON reader that turns numbers into doubles (JavaScript); Python's and Jackson's keep them exact.
"""

from __future__ import annotations

import json
from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass

from debl.errors import ConfigError

MAX_ID = (1 << 63) - 1  # the largest valid id1 (debl.format.link: non-negative, signed 64-bit)


@dataclass(frozen=True)
class BucketMap:
    """id1 -> bucket and bucket -> ``[k_lo, k_hi]`` (inclusive). Build it with ``from_splits``,
    ``fixed`` or ``from_json``; exactly one of ``splits`` and ``width`` describes it."""

    splits: tuple[int, ...] = ()
    width: int = 0  # > 0: the fixed-width kind (splits empty)

    def __post_init__(self) -> None:
        if self.width:
            if self.splits or not 0 < self.width <= MAX_ID:
                raise ConfigError(f"a bucket width must be in 1..2^63-1 and alone, not "
                                  f"{self.width} with {len(self.splits)} split points")
            return
        previous = 0
        for s in self.splits:
            if not previous < s <= MAX_ID:
                raise ConfigError(f"split points must rise strictly within 1..2^63-1; "
                                  f"{s} follows {previous}")
            previous = s

    @staticmethod
    def from_splits(splits: Iterable[int]) -> "BucketMap":
        """The map cut at *splits* (each the first id1 of a bucket; 0 and repeats are dropped)."""
        return BucketMap(splits=tuple(sorted({int(s) for s in splits} - {0})))

    @staticmethod
    def fixed(width: int) -> "BucketMap":
        if int(width) <= 0:
            raise ConfigError(f"a bucket width must be positive, not {width}")
        return BucketMap(width=int(width))

    @property
    def count(self) -> int:
        """How many buckets the map defines (most are empty with a fixed width)."""
        return MAX_ID // self.width + 1 if self.width else len(self.splits) + 1

    def bucket_of(self, id1: int) -> int:
        """The bucket of *id1* (which must be in 0..2^63-1)."""
        if self.width:
            return id1 // self.width
        return bisect_right(self.splits, id1)

    def range_of(self, b: int) -> tuple[int, int]:
        """``(k_lo, k_hi)`` of bucket *b*, both inclusive."""
        if not 0 <= b < self.count:
            raise ValueError(f"no bucket {b}: the map has {self.count}")
        if self.width:
            lo = b * self.width
            return lo, min(lo + self.width - 1, MAX_ID)
        lo = self.splits[b - 1] if b else 0
        hi = self.splits[b] - 1 if b < len(self.splits) else MAX_ID
        return lo, hi

    def boundaries(self, buckets: Iterable[int]) -> list[int]:
        """The ids where the given buckets start and end (``k_lo``, ``k_hi + 1``), sorted,
        without 0 and 2^63: where to pre-split a table so that each bucket has its regions."""
        edges: set[int] = set()
        for b in buckets:
            lo, hi = self.range_of(b)
            edges.update((lo, hi + 1))
        return sorted(e for e in edges if 0 < e <= MAX_ID)

    def describe(self) -> str:
        if self.width:
            return f"fixed width {self.width}"
        return f"{self.count} buckets at sampled split points"

    def to_dict(self) -> dict:
        return {"width": self.width} if self.width else {"splits": list(self.splits)}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"))

    @staticmethod
    def from_dict(doc: dict) -> "BucketMap":
        """The map of ``to_dict``'s form."""
        try:
            if set(doc) == {"width"}:
                return BucketMap.fixed(int(doc["width"]))
            if set(doc) == {"splits"}:
                return BucketMap(splits=tuple(int(s) for s in doc["splits"]))
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"not a bucket map: {str(doc)[:200]} ({exc})") from exc
        raise ConfigError(f"not a bucket map: {str(doc)[:200]} (want splits or width)")

    @staticmethod
    def from_json(text: str) -> "BucketMap":
        try:
            doc = json.loads(text)
        except ValueError as exc:
            raise ConfigError(f"not a bucket map: {text[:200]!r} ({exc})") from exc
        if not isinstance(doc, dict):
            raise ConfigError(f"not a bucket map: {text[:200]!r} (want an object)")
        return BucketMap.from_dict(doc)

    @staticmethod
    def from_catalog(text: str | None) -> "BucketMap | None":
        """The map stored with a load, None while it is not decided (NULL)."""
        return None if text is None else BucketMap.from_json(text)


# The hot files' bucket map: one bucket, every id1 (module docstring).
HOT_MAP = BucketMap()
