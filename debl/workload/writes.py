"""What the query client writes to the source database, as LinkBench's request generator makes
its link writes (docs/WORKLOAD.md, "Writes"): the operation by the mix's write shares, the id1
by LinkBench's write distribution, the id2 by the probability that the link exists, and a valid
LinkBench row.

- id1: Zipf(0.741) over the id range (LinkBench's ``write_shape``), 95% of the ranks through
  the uncorrelated shuffle (``write_uncorr_blend``: the same one the reads use, as LinkBench's
  shufflers share their seeds) and 5% through the out-degree order; with a recency share, that
  share by recency as the reads (``debl.workload.requests``: hotness follows recency for writes
  too); ``link_type`` uniform;
- id2 (``debl.workload.link_ids``): a loaded link with probability 0.05 for add_link, 0.9 for
  update_link and delete_link;
- the row: visibility 1, version 0 (LinkBench's request loop writes version 0 on add and update
  alike: it never counts versions), time the writer's clock in milliseconds when the write is
  sent, data of the generator's size distribution (LogNormal, median 8 bytes), each byte
  uniform in 32..100 (``debl.workload.synth``);
- delete_link hides (LinkBench's requests never expunge).

Determinism: writer ``w`` of seed ``s`` draws the same writes every run (only their times are
the clock's); its streams are apart from every reader's.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from debl.format.link import Link
from debl.workload.link_ids import P_ADD_EXIST, P_DELETE_EXIST, P_UPDATE_EXIST, LinkIds
from debl.workload.mix import ADD_LINK, DELETE_LINK, UPDATE_LINK, WRITE_OPS, Mix
from debl.workload.requests import RequestSpec, RequestStream
from debl.workload.synth import DATA_BYTE_HI, DATA_BYTE_LO, data_sizes

WRITE_SHAPE = 0.741  # LinkBench's write_shape (and write_uncorr_shape): docs/WORKLOAD.md
WRITE_UNCORRELATED_SHARE = 0.95  # LinkBench's write_uncorr_blend
# Writer w's request stream and send schedule are stream WRITER_STREAMS + w of the seed: apart
# from the readers' streams 0 .. threads - 1 (the same seed would give them the same draws).
WRITER_STREAMS = 1 << 20
_WRITE_TAG = 0x3717  # keeps a writer's other draws apart from its request stream
_EXIST = {ADD_LINK: P_ADD_EXIST, UPDATE_LINK: P_UPDATE_EXIST, DELETE_LINK: P_DELETE_EXIST}


@dataclass(frozen=True)
class Write:
    """One write to send: *op* on the key; ``link`` the row of add_link and update_link (None
    for delete_link)."""

    op: str
    id1: int
    link_type: int
    id2: int
    link: Link | None


def write_requests(requests: RequestSpec) -> RequestSpec:
    """The read requests' spec (id range, types, seed, recency share) with LinkBench's write
    distribution."""
    return dataclasses.replace(requests, shape=WRITE_SHAPE,
                               uncorrelated_share=WRITE_UNCORRELATED_SHARE)


class WriteStream:
    """The writes of writer *writer* under *mix*: ``next_write()``. Not thread-safe: one per
    writer. *clock_ms*: the rows' time (default: the wall clock in milliseconds)."""

    def __init__(self, mix: Mix, requests: RequestSpec, writer: int,
                 clock_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
                 batch: int = 1024) -> None:
        self._ids = RequestStream(write_requests(requests), stream=WRITER_STREAMS + writer)
        self._rng = np.random.default_rng([requests.seed, writer, _WRITE_TAG])
        self._shares = mix.write_shares()
        self._links = LinkIds(requests)
        self._clock_ms = clock_ms
        self._batch = batch
        self._pending: list[tuple[int, int, int, int, int]] = []

    def _next_key(self) -> tuple[int, int, int, int, int]:
        """(operation index, id1, link_type, first, loaded): drawn a batch at a time, the
        lists' loaded links with one permutation for the batch (one at a time it cost a write
        100 µs)."""
        if not self._pending:
            id1, types = self._ids.draw(self._batch)
            first, loaded = self._links.links_of_type(id1, types)
            ops = self._rng.choice(len(WRITE_OPS), self._batch, p=self._shares)
            self._pending = list(zip(ops.tolist(), id1.tolist(), types.tolist(),
                                     first.tolist(), loaded.tolist()))
            self._pending.reverse()
        return self._pending.pop()

    def next_write(self) -> Write:
        op_index, id1, link_type, first, loaded = self._next_key()
        rng, op = self._rng, WRITE_OPS[op_index]
        id2 = self._links.pick(rng, id1, first, loaded, _EXIST[op])
        if op == DELETE_LINK:
            return Write(op, id1, link_type, id2, None)
        size = int(data_sizes(rng, 1)[0])
        data = rng.integers(DATA_BYTE_LO, DATA_BYTE_HI + 1, size, dtype=np.uint8).tobytes()
        return Write(op, id1, link_type, id2, Link(id1, link_type, id2, 1, data,
                                                   self._clock_ms(), 0))
