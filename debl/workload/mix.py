"""The operation mixes of ``debl query --mix`` (docs/WORKLOAD.md, "Mixes") and each reader's
choice of its next read among them (``ReadDraws``).

- ``reads``: get_link_list alone: the paper's benches, the default, the same requests as ever;
- ``linkbench``: FBWorkload's link operations, normalized over them: get_link_list 66.6%,
  add_link 11.8%, update_link 10.5%, count_link 6.4%, delete_link 3.9%, multiget_link 0.7%
  (26.3% writes);
- ``update-heavy``: half reads, half writes (as YCSB's workload A), each half in LinkBench's
  own proportions.

Reads and writes are sent by different threads (the readers and the writer pool:
``debl.workload.writers``), so a mix's read shares pick among a reader's requests and its write
shares among the writer pool's; the write rate sets how many writes there are beside the reads.

Determinism: reader ``t`` draws its operations and multiget_link's id2s from a generator of its
own, seeded by ``(seed, t)`` apart from its request stream's: its ``(id1, link_type)`` sequence is
the one the ``reads`` mix sends, whatever the mix.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from debl.errors import ConfigError
from debl.workload.link_ids import P_GET_EXIST, LinkIds
from debl.workload.requests import RequestSpec

GET_LINK_LIST, COUNT_LINK, MULTIGET_LINK = "get_link_list", "count_link", "multiget_link"
ADD_LINK, UPDATE_LINK, DELETE_LINK = "add_link", "update_link", "delete_link"
READ_OPS = (GET_LINK_LIST, COUNT_LINK, MULTIGET_LINK)  # a reader's op index is its place here
WRITE_OPS = (ADD_LINK, UPDATE_LINK, DELETE_LINK)
# LinkBench's names for them in its reports
REPORTED = {GET_LINK_LIST: "GET_LINKS_LIST", COUNT_LINK: "COUNT_LINK",
            MULTIGET_LINK: "MULTIGET_LINK", ADD_LINK: "ADD_LINK", UPDATE_LINK: "UPDATE_LINK",
            DELETE_LINK: "DELETE_LINK"}

# LinkBench's published request mix (docs/WORKLOAD.md, "Mixes"): getlinklist, countlink,
# getlink, addlink, updatelink, deletelink in % of every operation, node operations included:
# the link operations' shares are these normalized
_FB_WORKLOAD = {GET_LINK_LIST: 50.7119145, COUNT_LINK: 4.8863567, MULTIGET_LINK: 0.5261142,
                ADD_LINK: 8.9886601, UPDATE_LINK: 8.0122125, DELETE_LINK: 2.9907664}
UPDATE_HEAVY_WRITES = 0.5  # YCSB's workload A: half reads, half updates

# multiget_link's count of id2s: LinkBench's GeometricDistribution (link_multiget_dist_*):
# min + ceil(log(1 - r) / log(1 - p)), at most max - 1
MULTIGET_P, MULTIGET_MIN, MULTIGET_MAX = 0.382, 1, 128
_READ_TAG = 0x4D1F  # keeps a reader's operation draws apart from its request stream


@dataclass(frozen=True)
class Mix:
    """The share of each link operation (``READ_OPS`` and ``WRITE_OPS``), summing to 1."""

    name: str
    shares: tuple[float, ...]  # in READ_OPS + WRITE_OPS order

    def share(self, op: str) -> float:
        return self.shares[(READ_OPS + WRITE_OPS).index(op)]

    @property
    def write_share(self) -> float:
        return sum(self.shares[len(READ_OPS):])

    @property
    def only_get_link_list(self) -> bool:
        return self.shares[0] == 1.0

    def read_shares(self) -> np.ndarray:
        """Each read's share among the reads (``READ_OPS`` order)."""
        reads = np.array(self.shares[:len(READ_OPS)])
        return reads / reads.sum()

    def write_shares(self) -> np.ndarray:
        """Each write's share among the writes (``WRITE_OPS`` order); zeros without writes."""
        writes = np.array(self.shares[len(READ_OPS):])
        return writes / writes.sum() if writes.sum() else writes


def _mix(name: str, weights: dict[str, float]) -> Mix:
    total = sum(weights.values())
    return Mix(name, tuple(weights.get(op, 0.0) / total for op in READ_OPS + WRITE_OPS))


def _update_heavy() -> Mix:
    linkbench = _mix("linkbench", _FB_WORKLOAD)
    reads, writes = linkbench.read_shares(), linkbench.write_shares()
    return Mix("update-heavy", tuple(np.concatenate([reads * (1 - UPDATE_HEAVY_WRITES),
                                                     writes * UPDATE_HEAVY_WRITES]).tolist()))


MIXES = {"reads": _mix("reads", {GET_LINK_LIST: 1.0}),
         "linkbench": _mix("linkbench", _FB_WORKLOAD),
         "update-heavy": _update_heavy()}


def mix_named(name: str) -> Mix:
    """The mix called *name*; ConfigError naming the choices otherwise."""
    try:
        return MIXES[name]
    except KeyError:
        raise ConfigError(f"unknown --mix {name!r}: choose one of {', '.join(MIXES)}") from None


def multiget_count(rng: np.random.Generator) -> int:
    """How many id2s one multiget_link asks for (LinkBench's multiget distribution)."""
    return min(MULTIGET_MIN + int(rng.geometric(MULTIGET_P)), MULTIGET_MAX - 1)


class ReadDraws:
    """One reader's choice of its next read under *mix*: ``draw(id1, link_type)`` gives the
    operation's index in ``READ_OPS`` and its further arguments (multiget_link's id2s).
    Deterministic per ``(seed, stream)``; not thread-safe: one per reader."""

    def __init__(self, mix: Mix, requests: RequestSpec, stream: int, batch: int = 4096) -> None:
        self._rng = np.random.default_rng([requests.seed, stream, _READ_TAG])
        self._shares = mix.read_shares()
        self._links = LinkIds(requests)
        self._batch = batch
        self._ops: list[int] = []

    def draw(self, id1: int, link_type: int) -> tuple[int, tuple]:
        if not self._ops:
            self._ops = self._rng.choice(len(READ_OPS), self._batch, p=self._shares).tolist()
            self._ops.reverse()
        op = self._ops.pop()
        if READ_OPS[op] != MULTIGET_LINK:
            return op, ()
        count = multiget_count(self._rng)
        return op, (self._links.choose_many(self._rng, id1, link_type, count, P_GET_EXIST),)
