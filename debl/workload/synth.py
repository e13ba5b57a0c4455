"""One chunk of ids turned into link records: LinkBench's load, plus DeBL's daily updates.

For each id1 of the chunk (ids ``[lo, hi)``):

- out-degree: the id's rank under the degree shuffle, through the ``nlinks`` CDF's rank rule;
- link ``j`` (``0 <= j < degree``): ``id2 = id1 + j``,
  ``link_type = types[(id1 + j) % link_types]``: a degree is split evenly over the types (they
  differ by at most one), and the id1 term stops the first type from taking every odd
  remainder (a third of all links belong to ids of degree 1); ``visibility`` 1, ``version`` 0;
- ``time`` uniform over the whole span (ms), which decides the file (period) it lands in;
- ``data``: LogNormal(median 8, sigma 1) bytes, rounded and clamped to [0, 254], each byte
  uniform in 32..100 (so ``"``, ``,`` and ``\\`` occur; tab and newline never do).

Updates (see ``debl.workload.spec``): for each later period ``k`` every link of an earlier period
is updated in ``k`` with probability ``min(1, r/k)``, ``r = share / (1 - share)``. With equal
periods file ``k`` holds ``k * n/F`` earlier links, so it gets ``r * n/F`` updates in expectation:
``share`` of its lines. Deciding updates per chunk keeps the generator streaming (no memory of
earlier chunks) and every update's key is a link that really exists in an earlier file.

Determinism: each chunk draws from its own numpy Generator seeded by ``(seed, chunk index)``;
chunks are ``CHUNK_IDS`` ids wide. The same spec therefore gives the same records whatever the
order or parallelism of chunk processing. Changing ``CHUNK_IDS`` changes the bytes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from debl.workload.distribution import EmpiricalCDF, load_cdf
from debl.workload.shuffle import Shuffler, degree_shuffler
from debl.workload.spec import GenerateSpec

CHUNK_IDS = 1 << 16  # ~270k links per chunk on average; the chunk of the top id ~1.2M
DATA_MEDIAN = 8
DATA_SIGMA = 1.0
DATA_MAX = 254
DATA_BYTE_LO, DATA_BYTE_HI = 32, 100  # inclusive, LinkBench's link_add_datagen bytes


@dataclass(frozen=True, eq=False)
class SynthContext:
    """What every chunk of one spec shares: built once, cheap to pass around."""

    spec: GenerateSpec
    cdf: EmpiricalCDF
    shuffler: Shuffler
    types: np.ndarray
    bounds: np.ndarray

    @classmethod
    def of(cls, spec: GenerateSpec) -> "SynthContext":
        return cls(spec, load_cdf("nlinks"), degree_shuffler(spec.n_ids), spec.type_values(),
                   spec.bounds())

    @property
    def chunks(self) -> int:
        return math.ceil(self.spec.n_ids / CHUNK_IDS)

    def chunk_ids(self, chunk: int) -> tuple[int, int]:
        lo = self.spec.start_id + chunk * CHUNK_IDS
        return lo, min(lo + CHUNK_IDS, self.spec.max_id)

    def degrees(self, lo: int, hi: int) -> np.ndarray:
        """Out-degree (links over all types) of ids ``[lo, hi)``."""
        ranks = self.shuffler.permute(np.arange(lo - self.spec.start_id, hi - self.spec.start_id))
        degrees = self.cdf.value_for_rank(ranks, self.spec.n_ids)
        if self.spec.max_degree is not None:
            np.minimum(degrees, self.spec.max_degree, out=degrees)
        return degrees


@dataclass(frozen=True, eq=False)
class Records:
    """The lines of one chunk, sorted by file then by (id1, j): parallel int64 arrays plus the
    concatenated data bytes. ``file_counts[k]`` lines go to file k, in order."""

    id1: np.ndarray
    link_type: np.ndarray
    id2: np.ndarray
    visibility: np.ndarray
    sizes: np.ndarray
    data: np.ndarray  # uint8, all data concatenated in line order
    time: np.ndarray
    version: np.ndarray
    file_counts: np.ndarray
    updates: np.ndarray  # per file: update lines
    hidden: np.ndarray  # per file: update lines with visibility 0

    @property
    def links(self) -> int:
        return len(self.id1) - int(self.updates.sum())


def _data_sizes(rng: np.random.Generator, n: int) -> np.ndarray:
    sizes = np.rint(rng.lognormal(math.log(DATA_MEDIAN), DATA_SIGMA, n))
    return np.clip(sizes, 0, DATA_MAX).astype(np.int64)


def _choose_updates(rng: np.random.Generator, period: np.ndarray, spec: GenerateSpec
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(link index, file, version) of every update of this chunk's links."""
    empty = np.empty(0, dtype=np.int64)
    share = spec.update_share
    if share == 0.0 or spec.files == 1 or len(period) == 0:
        return empty, empty, empty
    ratio = share / (1.0 - share)
    order = np.argsort(period, kind="stable")
    earlier = np.searchsorted(period[order], np.arange(1, spec.files), side="left")
    seen = np.zeros(len(period), dtype=np.int64)  # updates so far, per link: the next version
    picks, files, versions = [], [], []
    for k in range(1, spec.files):
        m = int(earlier[k - 1])
        if m == 0:
            continue
        count = int(rng.binomial(m, min(1.0, ratio / k)))
        if count == 0:
            continue
        # Without replacement: one link is updated at most once per file.
        pick = order[rng.choice(m, size=count, replace=False, shuffle=False)]
        seen[pick] += 1
        picks.append(pick)
        files.append(np.full(count, k, dtype=np.int64))
        versions.append(seen[pick].copy())
    if not picks:
        return empty, empty, empty
    return np.concatenate(picks), np.concatenate(files), np.concatenate(versions)


def synthesize(ctx: SynthContext, chunk: int) -> Records:
    """The records of chunk ``chunk`` (ids ``ctx.chunk_ids(chunk)``)."""
    spec = ctx.spec
    rng = np.random.default_rng([spec.seed, chunk])
    lo, hi = ctx.chunk_ids(chunk)
    degree = ctx.degrees(lo, hi)
    m = int(degree.sum())
    id1 = np.repeat(np.arange(lo, hi, dtype=np.int64), degree)
    j = np.arange(m, dtype=np.int64) - np.repeat(np.cumsum(degree) - degree, degree)
    time = rng.integers(ctx.bounds[0], ctx.bounds[-1], m, dtype=np.int64)
    period = np.searchsorted(ctx.bounds, time, side="right") - 1
    sizes = _data_sizes(rng, m)

    upd, upd_file, upd_version = _choose_updates(rng, period, spec)
    u = len(upd)
    upd_time = rng.integers(ctx.bounds[upd_file], ctx.bounds[upd_file + 1], dtype=np.int64) \
        if u else upd
    upd_visible = (rng.random(u) >= spec.hidden_share).astype(np.int64)
    upd_sizes = _data_sizes(rng, u)

    link = np.concatenate((np.arange(m, dtype=np.int64), upd))
    file = np.concatenate((period, upd_file))
    order = np.lexsort((link, file))  # by file, then by (id1, j) within a file
    link, file = link[order], file[order]
    sizes_all = np.concatenate((sizes, upd_sizes))[order]
    data = rng.integers(DATA_BYTE_LO, DATA_BYTE_HI + 1, int(sizes_all.sum()), dtype=np.uint8)
    visibility = np.concatenate((np.ones(m, dtype=np.int64), upd_visible))[order]
    return Records(
        id1=id1[link],
        link_type=ctx.types[(id1[link] + j[link]) % len(ctx.types)],
        id2=id1[link] + j[link],
        visibility=visibility,
        sizes=sizes_all,
        data=data,
        time=np.concatenate((time, upd_time))[order],
        version=np.concatenate((np.zeros(m, dtype=np.int64), upd_version))[order],
        file_counts=np.bincount(file, minlength=spec.files),
        updates=np.bincount(upd_file, minlength=spec.files),
        hidden=np.bincount(upd_file[upd_visible == 0], minlength=spec.files),
    )
