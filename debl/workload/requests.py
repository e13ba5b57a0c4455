"""LinkBench's choice of ``(id1, link_type)`` for ``get_link_list`` requests.

As in LinkBench's FBWorkload (``read_function`` / ``read_uncorr_blend = 99.5``):

- with probability 0.995, a Zipf(0.8) rank over the id range mapped to an id through the
  *uncorrelated* shuffle: hot ids are scattered and unrelated to their out-degree;
- with probability 0.005, a Zipf(0.8) rank mapped through the *inverse of the out-degree
  shuffle*: rank k is the id with the k-th largest out-degree, so the hottest of these are the
  ids with the most links;
- ``link_type`` uniform over the spec's link types.

Not LinkBench: with ``recency_share`` S > 0, a share S of the requests draw id1 by the same
Zipf(0.8) over *recency* rank instead: rank 0 is the newest id (``max_id - 1``), rank 1 the one
before it, and so on, so the newest ids are the most requested (docs/DESIGN.md section 3: hotness
follows recency; docs/WORKLOAD.md, "Recency share"). The other 1 - S are LinkBench's blend
above. A request's rank is drawn once and then mapped through the stream it was assigned, so the
streams share the Zipf draws. With S = 0 no extra draw is made: the requests are exactly
LinkBench's, and the same as those of earlier DeBL versions for one seed.

Both shuffles have fixed seeds (``debl.workload.shuffle``), so the hot set depends only on the id
range: it is the same for every run and every approach. Only the draws depend on the seed:
stream ``s`` of seed ``x`` (a client thread) is the same sequence every time, and different
streams are independent.

Pitfall: the id range must be the generator's ``[start_id, max_id)``, not the range of ids that
happen to have links (many have none: docs/WORKLOAD.md, "Out-degree vs LinkBench"), or the
correlated stream misses the hot ids.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from debl.errors import ConfigError
from debl.workload.distribution import ZipfSampler
from debl.workload.shuffle import degree_shuffler, request_shuffler
from debl.workload.spec import FIRST_LINK_TYPE

UNCORRELATED_SHARE = 0.995  # FBWorkload's read_uncorr_blend
READ_SHAPE = 0.8  # FBWorkload's read_shape and read_uncorr_shape


@dataclass(frozen=True)
class RequestSpec:
    """Which requests to make: ids ``[start_id, max_id)``, ``link_types`` types from 123456789."""

    max_id: int
    start_id: int = 1
    link_types: int = 2
    seed: int = 1
    shape: float = READ_SHAPE
    uncorrelated_share: float = UNCORRELATED_SHARE
    recency_share: float = 0.0  # share of requests by Zipf over recency (newest id hottest)

    def __post_init__(self) -> None:
        if self.max_id <= self.start_id or self.start_id < 0:
            raise ConfigError(f"request id range [{self.start_id}, {self.max_id}) is empty")
        if self.link_types < 1:
            raise ConfigError(f"link_types must be at least 1, not {self.link_types}")
        if not 0.0 <= self.uncorrelated_share <= 1.0:
            raise ConfigError("uncorrelated_share must be in [0, 1]")
        if not 0.0 <= self.recency_share <= 1.0:
            raise ConfigError(f"--recency-share must be in [0, 1], not {self.recency_share}")


class RequestStream:
    """An endless, deterministic stream of ``(id1, link_type)`` for one client thread.

    Draws in vectorized batches (numpy per request would cost more than a memory-store lookup);
    not thread-safe: one stream per thread. Building one costs a zeta(n) sum (tens of ms for
    millions of ids, cached per n), so build streams before timing starts.
    """

    def __init__(self, spec: RequestSpec, stream: int = 0, batch: int = 4096) -> None:
        self.spec = spec
        n = spec.max_id - spec.start_id
        self._zipf = ZipfSampler(0, n, spec.shape)
        self._uncorrelated = request_shuffler(n)
        self._by_degree = degree_shuffler(n)
        self._rng = np.random.default_rng([spec.seed, stream, 0x5EED])
        self._batch = batch
        self._pending: Iterator[tuple[int, int]] = iter(())

    def draw(self, size: int) -> tuple[np.ndarray, np.ndarray]:
        """The next ``size`` requests as arrays ``(id1, link_type)``."""
        rng = self._rng
        ranks = self._zipf.ranks(rng, size)
        correlated = rng.random(size) >= self.spec.uncorrelated_share
        offsets = np.empty(size, dtype=np.int64)
        offsets[~correlated] = self._uncorrelated.permute(ranks[~correlated])
        offsets[correlated] = self._by_degree.inverse(ranks[correlated])
        types = FIRST_LINK_TYPE + rng.integers(0, self.spec.link_types, size, dtype=np.int64)
        if self.spec.recency_share > 0.0:  # drawn last: S = 0 keeps LinkBench's exact sequence
            recent = rng.random(size) < self.spec.recency_share
            offsets[recent] = self._zipf.n - 1 - ranks[recent]
        return offsets + self.spec.start_id, types

    def __iter__(self) -> "RequestStream":
        return self

    def __next__(self) -> tuple[int, int]:
        try:
            return next(self._pending)
        except StopIteration:
            id1, types = self.draw(self._batch)
            self._pending = zip(id1.tolist(), types.tolist())
            return next(self._pending)
