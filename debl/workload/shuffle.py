"""An invertible, seeded permutation of ``[0, n)``: LinkBench's InvertibleShuffler idea.

LinkBench permutes ids before giving them out-degrees (so that degree is not correlated with id
order) and before mapping Zipf ranks to ids (so that hot ids are scattered). The permutation must
be invertible: the "correlated" request stream maps a Zipf rank back to the id *of that degree
rank*, which needs ``inverse``.

Construction: a 4-round balanced Feistel network over ``2h``-bit words (``4^h`` the smallest
power of four ``>= n``), with a SplitMix64-style round function keyed by the seed, made a
permutation of exactly ``[0, n)`` by cycle walking (re-encrypt while the result is ``>= n``;
since ``4^h < 4n`` that takes fewer than 4 rounds on average). Unlike LinkBench's group rotation,
neighbouring ids land far apart, so no residue of the id predicts its rank.

Everything is vectorized with numpy (its cost: docs/WORKLOAD.md, "Measured"). uint64 arithmetic
wraps modulo 2^64 silently on arrays; scalars are promoted to one-element arrays for that reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from debl.errors import ConfigError

_MASK64 = (1 << 64) - 1
_ROUNDS = 4


def _splitmix64(x: int) -> int:
    """One SplitMix64 step on a Python int: derives independent round keys from one seed."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    z = x
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)


def _mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finalizer on a uint64 array (wrapping multiply)."""
    x = (x ^ (x >> _S30)) * _M1
    x = (x ^ (x >> _S27)) * _M2
    return x ^ (x >> _S31)


@dataclass(frozen=True)
class Shuffler:
    """A permutation of ``[0, n)`` fixed by ``seed``; ``inverse(permute(x)) == x``.

    ``permute`` and ``inverse`` take an int or an integer array and return the same kind.
    Values outside ``[0, n)`` raise ValueError (they have no image).
    """

    n: int
    seed: int
    _half_bits: int = field(init=False, repr=False)
    _keys: tuple = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.n <= 0:
            raise ConfigError(f"cannot shuffle an empty range (n={self.n})")
        bits = max(2, (self.n - 1).bit_length())
        half = (bits + 1) // 2
        keys, state = [], self.seed & _MASK64
        for _ in range(_ROUNDS):
            state = _splitmix64(state)
            keys.append(np.uint64(state))
        object.__setattr__(self, "_half_bits", half)
        object.__setattr__(self, "_keys", tuple(keys))

    def _rounds(self, x: np.ndarray, forward: bool) -> np.ndarray:
        h = np.uint64(self._half_bits)
        mask = np.uint64((1 << self._half_bits) - 1)
        left, right = x >> h, x & mask
        if forward:
            for k in self._keys:
                left, right = right, left ^ (_mix(right ^ k) & mask)
        else:
            for k in reversed(self._keys):
                left, right = right ^ (_mix(left ^ k) & mask), left
        return (left << h) | right

    def _walk(self, x, forward: bool):
        scalar = np.isscalar(x)
        arr = np.asarray(x, dtype=np.int64)
        if arr.size and (arr.min() < 0 or arr.max() >= self.n):
            raise ValueError(f"value outside [0, {self.n}) cannot be shuffled")
        y = self._rounds(arr.astype(np.uint64).ravel(), forward)
        n = np.uint64(self.n)
        out = np.flatnonzero(y >= n)
        while out.size:  # cycle walking: stay inside [0, n)
            y[out] = self._rounds(y[out], forward)
            out = out[y[out] >= n]
        y = y.astype(np.int64).reshape(arr.shape)
        return int(y) if scalar else y

    def permute(self, x):
        """The image of ``x`` (int or array) under the permutation."""
        return self._walk(x, True)

    def inverse(self, y):
        """The ``x`` with ``permute(x) == y``."""
        return self._walk(y, False)


# LinkBench fixes its shufflers' seeds in code rather than taking them from the run's seed, so
# that the graph's shape (which id has which degree) and the hot set do not change between runs.
# DeBL does the same: the generator and the query client agree on them without a handshake.
DEGREE_SHUFFLE_SEED = 0x4445424C_6E6C6B73  # "DEBLnlks"
REQUEST_SHUFFLE_SEED = 0x4445424C_72656164  # "DEBLread"


def degree_shuffler(n: int) -> Shuffler:
    """The permutation id offset -> out-degree rank (rank 0 has the most links)."""
    return Shuffler(n, DEGREE_SHUFFLE_SEED)


def request_shuffler(n: int) -> Shuffler:
    """The permutation Zipf rank -> id offset for the uncorrelated request stream."""
    return Shuffler(n, REQUEST_SHUFFLE_SEED)
