"""Sets of id1s, and which keys are answerable while a load copies (docs/LOADING.md, "The
manifest": the answerable rule).

``KeySet`` is an immutable set of id1s held as sorted, disjoint, non-adjacent inclusive
intervals. A key is **answerable** once every piece (``debl.keys.manifest.Piece``) whose claim can
hold it is bucketed, hot pieces included: ``answerable(pieces, covered)`` says it of a given
state, and ``Answerability`` keeps it as bucketed byte ranges land, for the loader.

Pitfalls:

- A piece counts as bucketed only when its *whole* byte range is covered by bucketed ranges
  (a range may cover several pieces, or part of one; ranges come in any order).
- A piece that claims nothing (``hi < lo``: a file without valid lines) holds no key back.
- Ids are 0..ID1_MAX; ``ID1_MAX + 1`` (2**63) still fits the unsigned 64-bit arrays used here.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Collection, Iterable

import numpy as np

from debl.keys.manifest import ID1_MAX, Piece

_END = ID1_MAX + 1  # one past the last id1 (fits uint64)
_LOOP = 32  # a range over at most this many pieces is taken piece by piece, else in one pass


class KeySet:
    """An immutable set of id1s (0..ID1_MAX) as sorted disjoint inclusive intervals."""

    __slots__ = ("_lo", "_hi")

    def __init__(self, intervals: Iterable[tuple[int, int]] = ()):
        """From inclusive ``(lo, hi)`` intervals in any order; overlapping and adjacent ones
        merge, empty ones (``hi < lo``) are dropped. ValueError for bounds outside 0..ID1_MAX."""
        spans = sorted((lo, hi) for lo, hi in intervals if lo <= hi)
        los: list[int] = []
        his: list[int] = []
        for lo, hi in spans:
            if lo < 0 or hi > ID1_MAX:
                raise ValueError(f"interval {lo}..{hi} is outside the id1s 0..{ID1_MAX}")
            if his and lo <= his[-1] + 1:
                his[-1] = max(his[-1], hi)
            else:
                los.append(lo)
                his.append(hi)
        self._lo, self._hi = tuple(los), tuple(his)

    @classmethod
    def _of(cls, los: Iterable[int], his: Iterable[int]) -> "KeySet":
        """From bounds already sorted, disjoint and non-adjacent (not checked)."""
        ks = cls.__new__(cls)
        ks._lo, ks._hi = tuple(los), tuple(his)
        return ks

    @classmethod
    def every(cls) -> "KeySet":
        return cls._of((0,), (ID1_MAX,))

    def intervals(self) -> list[tuple[int, int]]:
        return list(zip(self._lo, self._hi))

    def __contains__(self, id1: object) -> bool:
        if not isinstance(id1, int):
            return False
        i = bisect.bisect_right(self._lo, id1) - 1
        return i >= 0 and id1 <= self._hi[i]

    def __bool__(self) -> bool:
        return bool(self._lo)

    def size(self) -> int:
        """The number of ids in the set."""
        return sum(self._hi) - sum(self._lo) + len(self._lo)

    def union(self, other: "KeySet") -> "KeySet":
        return KeySet(self.intervals() + other.intervals())

    def complement(self, lo: int = 0, hi: int = ID1_MAX) -> "KeySet":
        """The ids of ``lo..hi`` not in the set."""
        los, his = [], []
        at = lo
        for a, b in zip(self._lo, self._hi):
            if b < at:
                continue
            if a > hi:
                break
            if a > at:
                los.append(at)
                his.append(a - 1)
            at = b + 1
        if at <= hi:
            los.append(at)
            his.append(hi)
        return KeySet._of(los, his)

    def intersection(self, other: "KeySet") -> "KeySet":
        los, his = [], []
        i = j = 0
        while i < len(self._lo) and j < len(other._lo):
            lo = max(self._lo[i], other._lo[j])
            hi = min(self._hi[i], other._hi[j])
            if lo <= hi:
                los.append(lo)
                his.append(hi)
            if self._hi[i] < other._hi[j]:
                i += 1
            else:
                j += 1
        return KeySet._of(los, his)

    def to_json(self) -> list[int]:
        """The flat list ``[lo0, hi0, lo1, hi1, ...]``."""
        return [v for pair in zip(self._lo, self._hi) for v in pair]

    @classmethod
    def from_json(cls, obj: object) -> "KeySet":
        """ValueError unless *obj* is a flat list of an even number of integers."""
        if not isinstance(obj, list) or len(obj) % 2:
            raise ValueError("a key set is a flat list of an even number of integers")
        if any(type(v) is not int for v in obj):
            raise ValueError("a key set's bounds are integers")
        return cls(zip(obj[0::2], obj[1::2]))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, KeySet) and (self._lo, self._hi) == (other._lo, other._hi)

    def __hash__(self) -> int:
        return hash((self._lo, self._hi))

    def __repr__(self) -> str:
        shown = ", ".join(f"{lo}..{hi}" for lo, hi in self.intervals()[:8])
        more = f", ... ({len(self._lo)} intervals)" if len(self._lo) > 8 else ""
        return f"KeySet({shown}{more})"


def answerable(pieces: Iterable[Piece],
               covered: Callable[[Piece], bool] | Collection[tuple[int, int]]) -> KeySet:
    """The answerable keys: every id1 that no piece not yet bucketed claims. *covered* says
    which pieces are bucketed: a predicate, or a collection of their ``(file_seq, start)``."""
    done = covered if callable(covered) else (lambda p: (p.file_seq, p.start) in covered)
    return KeySet((p.lo, p.hi) for p in pieces if not done(p)).complement()


class Answerability:
    """The answerable keys of one load as its bucketed byte ranges land (``add``).

    Claims are cut into elementary id1 segments (between every claim's ``lo`` and ``hi + 1``);
    each segment counts the pieces not yet bucketed that claim it, and the answerable keys are
    the segments at zero, kept as merged intervals as segments reach it (so ``answerable()``
    costs a copy of those intervals, once per change). Per file, the bucketed bytes are kept as
    merged intervals, and a piece is bucketed once one of them holds it whole. Not thread-safe: one
    thread updates and asks (or the caller locks)."""

    def __init__(self, pieces: Iterable[Piece]):
        ps = sorted(pieces, key=lambda p: (p.file_seq, p.start))
        self._pieces = ps
        n = len(ps)
        # Each per-piece column twice: numpy for the passes over all pieces, lists for the
        # few pieces one range makes bucketed (numpy's per-call cost would dominate there).
        self._start_l = [p.start for p in ps]
        self._end_l = [p.end for p in ps]
        self._start = np.array(self._start_l, dtype=np.int64)
        self._end = np.array(self._end_l, dtype=np.int64)
        self._size = self._end - self._start
        self._files: dict[int, tuple[int, int]] = {}  # file_seq -> its pieces [first, last)
        for i, p in enumerate(ps):
            if p.end <= p.start:
                raise ValueError(f"piece {p} has no bytes")
            first, _ = self._files.get(p.file_seq, (i, i))
            if i > first and ps[i - 1].end > p.start:
                raise ValueError(f"pieces {ps[i - 1]} and {p} overlap")
            self._files[p.file_seq] = (first, i + 1)
        claims = [(p.lo, p.hi + 1) for p in ps if p.lo <= p.hi]
        lo = np.array([p.lo if p.lo <= p.hi else 0 for p in ps], dtype=np.uint64)
        hi1 = np.array([p.hi + 1 if p.lo <= p.hi else 0 for p in ps], dtype=np.uint64)
        flat = np.array([v for c in claims for v in c] + [0, _END], dtype=np.uint64)
        self._bounds = np.unique(flat)  # segment j is bounds[j] .. bounds[j+1] - 1
        self._seg_a = np.searchsorted(self._bounds, lo).astype(np.int64)
        self._seg_b = np.searchsorted(self._bounds, hi1).astype(np.int64)
        nseg = len(self._bounds) - 1
        diff = (np.bincount(self._seg_a, minlength=nseg + 1)
                - np.bincount(self._seg_b, minlength=nseg + 1))
        self._count = np.cumsum(diff)[:nseg]
        self._seg_a_l, self._seg_b_l = self._seg_a.tolist(), self._seg_b.tolist()
        self._done = np.zeros(n, dtype=bool)
        self._covered: dict[int, tuple[list[int], list[int]]] = {}
        # The answerable keys, merged intervals grown as segments reach zero (never shrink).
        self._free_lo: list[int] = []
        self._free_hi: list[int] = []
        self._freed(np.flatnonzero(self._count == 0).tolist())
        self._cached: KeySet | None = None

    def add(self, file_seq: int, start: int, end: int) -> int:
        """Bytes ``[start, end)`` of file *file_seq* are bucketed; the number of pieces that
        this makes bucketed."""
        if end <= start:
            return 0
        if file_seq not in self._files:
            raise ValueError(f"file {file_seq} has no pieces, so no bytes {start}..{end}")
        first, last = self._files[file_seq]
        if start < 0 or end > self._end_l[last - 1]:
            raise ValueError(f"bytes [{start}, {end}) are outside file {file_seq}'s "
                             f"[0, {self._end_l[last - 1]})")
        s, e = self._merge(file_seq, start, end)
        # The pieces this range overlaps: only their coverage changed.
        a = bisect.bisect_right(self._end_l, start, first, last)
        b = bisect.bisect_left(self._start_l, end, first, last)
        if b - a <= _LOOP:
            done, starts, ends = self._done, self._start_l, self._end_l
            new: list[int] | np.ndarray = [i for i in range(a, b)
                                           if starts[i] >= s and ends[i] <= e and not done[i]]
            if not new:
                return 0
            done[new] = True
            zero: list[int] = []
            for i in new:
                sa, sb = self._seg_a_l[i], self._seg_b_l[i]
                if sb > sa:
                    seg = self._count[sa:sb]
                    seg -= 1
                    # A segment at zero now is claimed by no later piece of *new*.
                    zero += [sa + j for j in np.flatnonzero(seg == 0).tolist()]
            zero.sort()
        else:
            idx = np.arange(a, b)
            found = idx[~self._done[a:b] & (self._start[a:b] >= s) & (self._end[a:b] <= e)]
            if len(found) == 0:
                return 0
            new = found
            self._done[found] = True
            nseg = len(self._count)
            diff = (np.bincount(self._seg_a[found], minlength=nseg + 1)
                    - np.bincount(self._seg_b[found], minlength=nseg + 1))
            delta = np.cumsum(diff)[:nseg]
            self._count -= delta
            touched = np.flatnonzero(delta)
            zero = touched[self._count[touched] == 0].tolist()
        if zero:
            self._freed(zero)
            self._cached = None
        return len(new)

    def _freed(self, segs: list[int]) -> None:
        """Segments *segs* (increasing) reached zero: their ids join the answerable ones. No
        id of theirs was answerable before, so they only meet an interval end to end."""
        runs: list[list[int]] = []
        for j in segs:
            if runs and runs[-1][1] + 1 == j:
                runs[-1][1] = j
            else:
                runs.append([j, j])
        los, his = self._free_lo, self._free_hi
        bounds = self._bounds
        for first, last in runs:
            lo, hi = int(bounds[first]), int(bounds[last + 1]) - 1
            i = bisect.bisect_left(los, lo)
            before = i > 0 and his[i - 1] + 1 == lo
            after = i < len(los) and los[i] == hi + 1
            if before and after:
                his[i - 1] = his[i]
                del los[i], his[i]
            elif before:
                his[i - 1] = hi
            elif after:
                los[i] = lo
            else:
                los.insert(i, lo)
                his.insert(i, hi)

    def _merge(self, file_seq: int, start: int, end: int) -> tuple[int, int]:
        """Add ``[start, end)`` to the file's bucketed intervals; the merged one holding it."""
        starts, ends = self._covered.setdefault(file_seq, ([], []))
        i = bisect.bisect_left(ends, start)  # the first that ends at or after start
        j = bisect.bisect_right(starts, end)  # past the last that starts at or before end
        if i < j:
            start, end = min(start, starts[i]), max(end, ends[j - 1])
        starts[i:j] = [start]
        ends[i:j] = [end]
        return start, end

    def answerable(self) -> KeySet:
        """The keys answerable now (cached until the next piece is bucketed)."""
        if self._cached is None:
            self._cached = KeySet._of(self._free_lo, self._free_hi)
        return self._cached

    def answerable_bytes(self) -> int:
        """The bytes of the bucketed pieces whose whole claim is answerable."""
        busy = np.concatenate(([0], np.cumsum(self._count > 0)))
        free = (busy[self._seg_b] == busy[self._seg_a]) & self._done
        return int(self._size[free].sum())

    def bucketed_bytes(self) -> int:
        """The bytes of the pieces bucketed so far."""
        return int(self._size[self._done].sum())

    def total_bytes(self) -> int:
        return int(self._size.sum())

    def missing(self, id1: int) -> list[Piece]:
        """The pieces not yet bucketed whose claim holds *id1* (what its answer waits for)."""
        if not 0 <= id1 <= ID1_MAX:
            raise ValueError(f"id1 {id1} is outside 0..{ID1_MAX}")
        j = int(np.searchsorted(self._bounds, np.uint64(id1), side="right")) - 1
        if self._count[j] == 0:
            return []
        hit = (self._seg_a <= j) & (self._seg_b > j) & ~self._done
        return [self._pieces[i] for i in np.flatnonzero(hit)]
