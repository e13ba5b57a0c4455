"""One chunk of ids turned into link records: LinkBench's load, plus DeBL's updates, laid out
as daily change-log files (``days``) or as a table dump by key range (``ranges``).

For each id1 of the chunk (ids ``[lo, hi)``):

- out-degree: the id's rank under the degree shuffle, through the ``nlinks`` CDF's rank rule;
- link ``j`` (``0 <= j < degree``): ``id2 = id1 + j``,
  ``link_type = types[(id1 + j) % link_types]``: a degree is split evenly over the types (they
  differ by at most one), and the id1 term stops the first type from taking every odd
  remainder (a third of all links belong to ids of degree 1); ``visibility`` 1, ``version`` 0;
- ``time`` (ms): in ``days`` uniform over the whole span, which decides the file (period) it
  lands in; in ``ranges`` the file is the id's (``GenerateSpec.id_bounds``), the node is created
  at its place in its file's period (ids in creation order), and the link's time is uniform from
  the node's creation to the end of that period;
- ``data``: LogNormal(median 8, sigma 1) bytes, rounded and clamped to [0, 254], each byte
  uniform in 32..100 (so ``"``, ``,`` and ``\\`` occur; tab and newline never do).

Updates in ``days`` (see ``debl.workload.spec``): for each later period ``k`` every link of an
earlier period is updated in ``k`` with probability ``min(1, r/k)``, ``r = share / (1 - share)``.
With equal periods file ``k`` holds ``k * n/F`` earlier links, so it gets ``r * n/F`` updates in
expectation: ``share`` of its lines. Deciding updates per chunk keeps the generator streaming (no
memory of earlier chunks) and every update's key is a link that really exists in an earlier file.

Updates in ``ranges``: each link gets Poisson(``r``) updates, so ``share`` of every file's lines
are updates in expectation; their times are uniform between the link's time and the end of its
file's period, ordered, with versions 1, 2, ... in time order. Every version of a key sits in
the key's own file, right after the one it replaces, so each file is in (id1, id2, version)
order and its newest line is inside its period.

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

# Ids per chunk: a chunk's links are what the generator holds at once, so the chunk of the
# heaviest id sets its peak memory (docs/WORKLOAD.md, "Measured"). Part of the output's bytes.
CHUNK_IDS = 1 << 16
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
    id_bounds: np.ndarray  # the ranges layout's files: ids [id_bounds[k], id_bounds[k+1])

    @classmethod
    def of(cls, spec: GenerateSpec) -> "SynthContext":
        return cls(spec, load_cdf("nlinks"), degree_shuffler(spec.n_ids), spec.type_values(),
                   spec.bounds(), spec.id_bounds())

    @property
    def chunks(self) -> int:
        return math.ceil(self.spec.n_ids / CHUNK_IDS)

    def chunk_ids(self, chunk: int) -> tuple[int, int]:
        lo = self.spec.start_id + chunk * CHUNK_IDS
        return lo, min(lo + CHUNK_IDS, self.spec.max_id)

    def degrees(self, lo: int, hi: int) -> np.ndarray:
        """Out-degree (links over all types) of ids ``[lo, hi)``."""
        ranks = self.shuffler.permute(np.arange(lo - self.spec.start_id, hi - self.spec.start_id))
        degrees = np.asarray(self.cdf.value_for_rank(ranks, self.spec.n_ids))
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


def data_sizes(rng: np.random.Generator, n: int) -> np.ndarray:
    """*n* data sizes, LinkBench's ``link_datasize``: LogNormal(median 8, sigma 1), rounded,
    clamped to [0, 254] (also the size of the data that ``debl query``'s writes send)."""
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
    """The records of chunk ``chunk`` (ids ``ctx.chunk_ids(chunk)``) in the spec's layout."""
    if ctx.spec.layout == "ranges":
        return _synthesize_ranges(ctx, chunk)
    return _synthesize_days(ctx, chunk)


def _chunk_links(ctx: SynthContext, chunk: int):
    """The chunk's random stream and its first versions: (rng, m links, id1 and j, the link's
    index among its id1's links, per link). Both layouts draw from the stream after this, so
    one spec's output stays the same byte for byte."""
    rng = np.random.default_rng([ctx.spec.seed, chunk])
    lo, hi = ctx.chunk_ids(chunk)
    degree = ctx.degrees(lo, hi)
    m = int(degree.sum())
    id1 = np.repeat(np.arange(lo, hi, dtype=np.int64), degree)
    j = np.arange(m, dtype=np.int64) - np.repeat(np.cumsum(degree) - degree, degree)
    return rng, m, id1, j


def _synthesize_days(ctx: SynthContext, chunk: int) -> Records:
    spec = ctx.spec
    rng, m, id1, j = _chunk_links(ctx, chunk)
    time = rng.integers(ctx.bounds[0], ctx.bounds[-1], m, dtype=np.int64)
    period = np.searchsorted(ctx.bounds, time, side="right") - 1
    sizes = data_sizes(rng, m)

    upd, upd_file, upd_version = _choose_updates(rng, period, spec)
    u = len(upd)
    upd_time = rng.integers(ctx.bounds[upd_file], ctx.bounds[upd_file + 1], dtype=np.int64) \
        if u else upd
    upd_visible = (rng.random(u) >= spec.hidden_share).astype(np.int64)
    upd_sizes = data_sizes(rng, u)

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


def _synthesize_ranges(ctx: SynthContext, chunk: int) -> Records:
    spec = ctx.spec
    rng, m, id1, j = _chunk_links(ctx, chunk)
    ids = ctx.id_bounds
    file_of_link = np.searchsorted(ids, id1, side="right") - 1
    # The node's creation: its place among its file's ids, mapped onto its file's period (float
    # arithmetic: (id offset) * (period ms) may pass 2^63 for huge id ranges).
    first_id, ids_in_file = ids[file_of_link], ids[file_of_link + 1] - ids[file_of_link]
    start, end = ctx.bounds[file_of_link], ctx.bounds[file_of_link + 1]
    created = start + np.floor((id1 - first_id) / ids_in_file * (end - start)).astype(np.int64)
    created = np.clip(created, start, end - 1)
    time = rng.integers(created, end, dtype=np.int64) if m else created
    sizes = data_sizes(rng, m)

    share = spec.update_share
    per_link = rng.poisson(share / (1.0 - share), m) if share > 0 and m else \
        np.zeros(m, dtype=np.int64)
    u = int(per_link.sum())
    upd = np.repeat(np.arange(m, dtype=np.int64), per_link)
    # After the version it replaces, before its period ends (equal to it only if the link was
    # made in its period's last millisecond: the version then decides, as the merge rule says).
    room = np.maximum(end[upd] - time[upd] - 1, 0)
    upd_time = np.minimum(time[upd] + 1 + np.floor(rng.random(u) * room).astype(np.int64),
                          end[upd] - 1)
    by_time = np.lexsort((upd_time, upd))
    upd, upd_time = upd[by_time], upd_time[by_time]
    upd_version = np.arange(u, dtype=np.int64) - (np.cumsum(per_link) - per_link)[upd] + 1
    upd_visible = (rng.random(u) >= spec.hidden_share).astype(np.int64)
    upd_sizes = data_sizes(rng, u)

    link = np.concatenate((np.arange(m, dtype=np.int64), upd))
    version = np.concatenate((np.zeros(m, dtype=np.int64), upd_version))
    order = np.lexsort((version, link))  # by (id1, j), then version: the key's file is id1's
    link, version = link[order], version[order]
    sizes_all = np.concatenate((sizes, upd_sizes))[order]
    data = rng.integers(DATA_BYTE_LO, DATA_BYTE_HI + 1, int(sizes_all.sum()), dtype=np.uint8)
    upd_file = file_of_link[upd]
    return Records(
        id1=id1[link],
        link_type=ctx.types[(id1[link] + j[link]) % len(ctx.types)],
        id2=id1[link] + j[link],
        visibility=np.concatenate((np.ones(m, dtype=np.int64), upd_visible))[order],
        sizes=sizes_all,
        data=data,
        time=np.concatenate((time, upd_time))[order],
        version=version,
        file_counts=np.bincount(file_of_link[link], minlength=spec.files),
        updates=np.bincount(upd_file, minlength=spec.files),
        hidden=np.bincount(upd_file[upd_visible == 0], minlength=spec.files),
    )
