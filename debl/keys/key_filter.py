"""The hot keys of a load: a Bloom filter of every ``(id1, link_type)`` the hot path put into
MySQL, so that the coordinator asks MySQL only for keys that may be there (docs/COORDINATOR.md,
"Hot keys").

In a change log (``days``) the hot files span the whole id range, so the hot range alone sends
every query to MySQL, though nine requests in ten find nothing there: the filter spares those
reads (a MySQL round trip each, and a client's CPU: measured in docs/COORDINATOR.md, "Hot
keys"). A filter has no false negatives, so an answer never loses a hot row; a false positive
costs only the read it would have cost anyway.

The hash and the bit test are the bucket files' (``debl.format.bucket_file.bloom_positions``,
``bloom_holds``); the hash is computed here for many keys at once with numpy.
``KeyFilterBuilder`` sizes the filter at ``BLOOM_BITS_PER_KEY`` bits per line it is given (so at
least that many per distinct key: 0.8% false positives or fewer), at most ``MAX_FILTER_BYTES``.

Pitfall: past its size cap (``MAX_FILTER_BYTES``, about 6.7 million hot keys; less under a small
``max_allowed_packet``) the false positives grow with the keys: answers stay exact, the filter only
spares fewer reads.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from debl.format.bucket_file import BLOOM_BITS_PER_KEY, BLOOM_HASHES, bloom_holds

# One catalog row; the hot path caps it further at half the server's max_allowed_packet (16 MiB
# by default in MariaDB, 4 MiB in MySQL 5.7), or storing it would fail the load.
MAX_FILTER_BYTES = 8 << 20
_MASK32 = np.uint64(0xFFFFFFFF)


def _mix(x: np.ndarray) -> np.ndarray:
    """``debl.format.bucket_file._mix`` on uint64 arrays (numpy's uint64 arithmetic wraps like
    it)."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def key_hashes(id1s: Sequence[int] | np.ndarray,
               link_types: Sequence[int] | np.ndarray) -> np.ndarray:
    """The 64-bit hash of each key, as ``bloom_positions`` derives its positions from."""
    with np.errstate(over="ignore"):
        return _mix(np.asarray(id1s, dtype=np.uint64)
                    + _mix(np.asarray(link_types, dtype=np.uint64)))


def _positions(hashes: np.ndarray, bits: int) -> np.ndarray:
    h1, h2 = hashes & _MASK32, (hashes >> np.uint64(32)) | np.uint64(1)
    return np.concatenate([(h1 + np.uint64(i) * h2) % np.uint64(bits)
                           for i in range(BLOOM_HASHES)])


class KeyFilter:
    """A Bloom filter of keys: bit i is bit ``i % 8`` of byte ``i // 8`` of *bits*, as in a
    bucket file's footer. ``may_hold`` is False only for a key never added."""

    def __init__(self, bits: bytes) -> None:
        if not bits:
            raise ValueError("a key filter has at least one byte")
        self.bits = bytes(bits)

    def may_hold(self, id1: int, link_type: int) -> bool:
        return bloom_holds(self.bits, id1, link_type)


class KeyFilterBuilder:
    """Collects keys in batches (``add``) and builds their ``KeyFilter`` (``build``), sized at
    ``BLOOM_BITS_PER_KEY`` bits per key added (duplicates included: at least that many per
    distinct key), at most *max_bytes*. Memory: the keys' hashes, 8 bytes each, until the
    filter reaches its largest size; from then on, the filter's bits alone."""

    def __init__(self, max_bytes: int = MAX_FILTER_BYTES) -> None:
        self.max_bytes = max(8, max_bytes)
        self._parts: list[np.ndarray] = []
        self._kept = 0
        self._on: np.ndarray | None = None  # one bool per bit, once the size is known

    def add(self, id1s: Sequence[int] | np.ndarray, link_types: Sequence[int] | np.ndarray) -> None:
        if not len(id1s):
            return
        hashes = key_hashes(id1s, link_types)
        if self._on is not None:
            self._set(hashes)
            return
        self._parts.append(hashes)
        self._kept += len(hashes)
        if self._kept * BLOOM_BITS_PER_KEY >= self.max_bytes * 8:
            self._size_for(self._kept)

    def _size_for(self, keys: int) -> np.ndarray:
        size = min(self.max_bytes, max(8, -(-keys * BLOOM_BITS_PER_KEY // 8)))
        on = self._on = np.zeros(size * 8, dtype=bool)
        for hashes in self._parts:
            self._set(hashes)
        self._parts = []
        return on

    def _set(self, hashes: np.ndarray) -> None:
        assert self._on is not None  # sized before any key is set
        self._on[_positions(hashes, len(self._on))] = True

    def build(self) -> KeyFilter:
        on = self._size_for(self._kept) if self._on is None else self._on
        return KeyFilter(np.packbits(on, bitorder="little").tobytes())
