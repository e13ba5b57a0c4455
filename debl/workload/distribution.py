"""LinkBench's distributions: the published empirical CDFs and the Zipf request sampler.

``load_cdf("nlinks")`` reads one section of ``debl/data/Distribution.dat`` (package data, read
through importlib.resources so it works from a wheel or a zip). Each section is a list of
``<value> <cumulative percent>`` points with strictly increasing values; the last percent is 100.

LinkBench assigns out-degrees *by rank*, not by sampling: among ``n`` ids, the id of rank ``r``
(``0 <= r < n``, after the shuffle) gets the first value whose cumulative probability is
``>= 1 - r/n``. So rank 0 always gets the maximum (961,963 links for ``nlinks``) and the degree
histogram of any ``n`` ids matches the CDF to within ``1/n`` -- there is no sampling noise.

``ZipfSampler`` is the algorithm of Gray et al., "Quickly generating billion-record synthetic
databases" (SIGMOD 1994), which LinkBench's ``ZipfDistribution`` implements: rank ``k`` (0-based)
is drawn with probability about ``(k+1)^-shape / zeta(n, shape)``. It is an approximation: the
two hottest ranks are exact, the tail is a continuous fit. Pitfall: rank 0 is the most popular, so
without a shuffle the hottest ids would all be the smallest ones.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from importlib import resources

import numpy as np

from debl.errors import ConfigError

SECTIONS = ("nlinks", "link_nreads", "link_nwrites", "node_nreads", "node_nwrites")

# Above this many terms zeta(n) is computed by Euler-Maclaurin instead of summing every term;
# the error is far below double precision's relative resolution at that point.
_ZETA_EXACT_TERMS = 10_000_000


@dataclass(frozen=True, eq=False)
class EmpiricalCDF:
    """One section of Distribution.dat: ``values`` strictly increasing,
    ``cum[i] = P(X <= values[i])``."""

    name: str
    values: np.ndarray  # int64
    cum: np.ndarray  # float64 in (0, 1], last exactly 1.0

    def value_for_rank(self, rank: np.ndarray | int, n: int) -> np.ndarray | int:
        """LinkBench's rank rule: rank r of n gets the first value with cum >= 1 - r/n.

        Vectorized over ``rank``; an int in gives an int out.
        """
        scalar = np.isscalar(rank)
        r = np.asarray(rank, dtype=np.float64)
        p = 1.0 - r / float(n)
        idx = np.searchsorted(self.cum, p, side="left")
        # p <= 1.0 == cum[-1] always, but guard against a data file whose last percent rounds low.
        idx = np.minimum(idx, len(self.values) - 1)
        out = self.values[idx]
        return int(out) if scalar else out

    def cdf(self, value: np.ndarray | int) -> np.ndarray | float:
        """P(X <= value) under the empirical distribution (0 below the smallest value)."""
        scalar = np.isscalar(value)
        idx = np.searchsorted(self.values, np.asarray(value), side="right") - 1
        out = np.where(idx >= 0, self.cum[np.maximum(idx, 0)], 0.0)
        return float(out) if scalar else out

    def mean(self) -> float:
        """The mean of the distribution, each value weighted by its own probability mass."""
        pmf = np.diff(self.cum, prepend=0.0)
        return float(np.dot(self.values.astype(np.float64), pmf))

    def expected_total(self, n: int) -> int:
        """The exact sum of ``value_for_rank(r, n)`` over all ranks: the link count of n ids.

        Computed from the CDF's steps, not by enumerating ranks, so it is cheap for any n.
        """
        # Rank r gets values[i] iff cum[i-1] < 1 - r/n <= cum[i],
        # i.e. r in [n(1-cum[i]), n(1-cum[i-1])).
        # Count integer ranks r in [0, n) with 1 - r/n <= cum[i]  <=>  r >= n(1 - cum[i]).
        below = np.ceil(n * (1.0 - self.cum) - 1e-9).clip(0, n)  # first rank at or under each step
        at_most = np.concatenate(([n], below[:-1]))
        counts = (at_most - below).astype(np.int64)
        return int(np.dot(counts, self.values))


def _parse(text: str) -> dict[str, tuple[list[int], list[float]]]:
    sections: dict[str, tuple[list[int], list[float]]] = {}
    current: tuple[list[int], list[float]] | None = None
    for line_no, line in enumerate(text.splitlines(), 1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) == 1:
            current = sections.setdefault(parts[0], ([], []))
            continue
        if current is None or len(parts) != 2:
            raise ConfigError(f"Distribution.dat line {line_no}: expected '<value> <percent>'")
        current[0].append(int(parts[0]))
        current[1].append(float(parts[1]))
    return sections


@functools.lru_cache(maxsize=None)
def load_cdf(section: str = "nlinks") -> EmpiricalCDF:
    """The named section of the packaged Distribution.dat, validated and cached."""
    if section not in SECTIONS:
        raise ConfigError(f"unknown distribution {section!r}: choose one of {', '.join(SECTIONS)}")
    text = resources.files("debl").joinpath("data/Distribution.dat").read_text(encoding="ascii")
    parsed = _parse(text)
    if section not in parsed:
        raise ConfigError(f"Distribution.dat has no section {section!r}")
    values = np.array(parsed[section][0], dtype=np.int64)
    cum = np.array(parsed[section][1], dtype=np.float64) / 100.0
    if len(values) == 0 or np.any(np.diff(values) <= 0) or np.any(np.diff(cum) < 0):
        raise ConfigError(f"Distribution.dat section {section!r} is not a CDF")
    if abs(cum[-1] - 1.0) > 1e-9:
        raise ConfigError(f"Distribution.dat section {section!r} does not end at 100%")
    cum[-1] = 1.0
    values.setflags(write=False)
    cum.setflags(write=False)
    return EmpiricalCDF(section, values, cum)


@functools.lru_cache(maxsize=64)
def zeta(n: int, shape: float) -> float:
    """The generalized harmonic number sum_{i=1..n} i^-shape."""
    if n <= 0:
        return 0.0
    m = min(n, _ZETA_EXACT_TERMS)
    total = 0.0
    block = 1 << 22
    for start in range(1, m + 1, block):  # blocks keep memory bounded for large m
        i = np.arange(start, min(start + block, m + 1), dtype=np.float64)
        total += float(np.sum(i ** -shape))
    if n > m:
        # Euler-Maclaurin for sum_{i=m+1..n} f(i), f(x) = x^-s.
        s, a, b = shape, float(m), float(n)
        f = lambda x: x ** -s  # noqa: E731
        df = lambda x: -s * x ** (-s - 1)  # noqa: E731
        integral = (b ** (1 - s) - a ** (1 - s)) / (1 - s) if s != 1 else math.log(b / a)
        total += integral + (f(b) - f(a)) / 2 + (df(b) - df(a)) / 12
    return total


@dataclass(frozen=True)
class ZipfSampler:
    """Zipf(shape) over ``[lo, hi)``: ``lo`` is the hottest value, ``lo + 1`` the next, and so on.

    Gray et al.'s constant-time method, as LinkBench's ZipfDistribution. ``shape`` must be in
    (0, 1); LinkBench's get_link_list uses 0.8. Build once (zeta(n) costs O(n) up to 10^7 terms)
    and share: sampling is stateless, the caller passes its own numpy Generator.
    """

    lo: int
    hi: int
    shape: float = 0.8
    # Derived in __post_init__: zeta(n), Gray et al.'s eta and alpha, zeta(2).
    _zetan: float = field(init=False, repr=False, compare=False)
    _eta: float = field(init=False, repr=False, compare=False)
    _alpha: float = field(init=False, repr=False, compare=False)
    _threshold: float = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.hi <= self.lo:
            raise ConfigError(f"Zipf range [{self.lo}, {self.hi}) is empty")
        if not 0.0 < self.shape < 1.0:
            raise ConfigError(f"Zipf shape must be in (0, 1), not {self.shape}")
        n = self.hi - self.lo
        zetan = zeta(n, self.shape)
        zeta2 = 1.0 + 0.5 ** self.shape
        # eta is only used for n > 2 (the two hottest ranks are handled exactly).
        eta = ((1.0 - (2.0 / n) ** (1.0 - self.shape)) / (1.0 - zeta2 / zetan)) if n > 2 else 0.0
        object.__setattr__(self, "_zetan", zetan)
        object.__setattr__(self, "_eta", eta)
        object.__setattr__(self, "_alpha", 1.0 / (1.0 - self.shape))
        object.__setattr__(self, "_threshold", zeta2)

    @property
    def n(self) -> int:
        return self.hi - self.lo

    def ranks(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """``size`` 0-based ranks (int64 in [0, n)); rank 0 is the hottest."""
        u = rng.random(size)
        uz = u * self._zetan
        tail = (self.n * np.power(self._eta * u - self._eta + 1.0, self._alpha)).astype(np.int64)
        ranks = np.where(uz < 1.0, 0, np.where(uz < self._threshold, 1, tail))
        return np.clip(ranks, 0, self.n - 1)

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """``size`` values in [lo, hi) (int64), lo the most likely."""
        return self.ranks(rng, size) + self.lo

    def top_share(self, k: int) -> float:
        """The exact Zipf probability that a draw falls in the ``k`` hottest ranks."""
        return zeta(min(k, self.n), self.shape) / self._zetan
