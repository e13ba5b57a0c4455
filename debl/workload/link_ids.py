"""Which id2s an operation on ``(id1, link_type)`` names, as LinkBench's ``ID2Chooser`` chooses
them: by the probability that the link exists in the loaded data set (docs/WORKLOAD.md, "Writes").

LinkBench knows every id's out-degree without reading the data (the degree shuffle and the
``nlinks`` CDF, as the generator gives them) and draws an id2 from a range ``ceil(n / p)`` wide
over the ``n`` links the list was loaded with, so that it names an existing link with
probability about ``p``: 0.05 for ``add_link`` (mostly new links), 0.9 for ``update_link`` and
``delete_link`` (mostly loaded ones), 0.5 for each id2 of ``multiget_link``.

LinkBench's loader gives each type its own links ``id2 = id1 + j``, ``j`` from 0 to the type's
count, and its requests draw ``id1 + k``. DeBL's generator splits one degree over the types
instead (link ``j`` has the id2 ``id1 + j`` and the type of ``(id1 + j) % types``), so the
loaded links of one type are every ``types``-th ``j`` from the first of that type: the range
counts ``k`` over those, ``id2 = id1 + first + k * types``, a loaded link iff ``k`` is below the
type's count. The same probabilities as LinkBench's on its own data.

Pitfall: the degrees are those of a dense data set with no ``--max-degree`` cap, the generator's
default and the benches'; for a capped or clustered data set (``--ids clusters``) fewer of the
drawn links exist.
"""

from __future__ import annotations

import math

import numpy as np

from debl.workload.distribution import load_cdf
from debl.workload.requests import RequestSpec
from debl.workload.shuffle import degree_shuffler
from debl.workload.spec import FIRST_LINK_TYPE

# LinkBench's ID2Chooser: the probability that the link an operation names exists.
P_ADD_EXIST = 0.05  # "avoid colliding with pre-loaded too much"
P_UPDATE_EXIST = 0.9
P_DELETE_EXIST = 0.9
P_GET_EXIST = 0.5  # each id2 of a multiget_link


class LinkIds:
    """id2s for operations on the data set of *requests*' id range and link types. Build once
    (a shuffler and the CDF); ``choose`` costs a permutation of one id."""

    def __init__(self, requests: RequestSpec) -> None:
        self.start_id = requests.start_id
        self.n = requests.max_id - requests.start_id
        self.types = requests.link_types
        self._cdf = load_cdf("nlinks")
        self._degree_rank = degree_shuffler(self.n)

    def links_of_type(self, id1, link_type):
        """(the ``j`` of id1's first link of *link_type*, how many of its links have that type)
        as the generator made them; ints, or arrays for arrays (one permutation for them all:
        a writer's batch)."""
        degree = self._cdf.value_for_rank(self._degree_rank.permute(id1 - self.start_id), self.n)
        first = (link_type - FIRST_LINK_TYPE - id1) % self.types
        count = np.where(first >= degree, 0, (degree - 1 - first) // self.types + 1)
        return (first, int(count)) if np.isscalar(id1) else (first, count)

    def pick(self, rng: np.random.Generator, id1: int, first: int, loaded: int,
             p_exist: float) -> int:
        """One id2 of the list whose loaded links start at *first* and number *loaded*
        (``links_of_type``), a loaded link with probability about *p_exist*."""
        k = int(rng.integers(0, max(1, math.ceil(loaded / p_exist))))
        return int(id1 + first + k * self.types)

    def choose(self, rng: np.random.Generator, id1: int, link_type: int, p_exist: float) -> int:
        """One id2 that names a loaded link with probability about *p_exist*."""
        first, loaded = self.links_of_type(id1, link_type)
        return self.pick(rng, id1, first, loaded, p_exist)

    def choose_many(self, rng: np.random.Generator, id1: int, link_type: int, count: int,
                    p_exist: float) -> tuple[int, ...]:
        """*count* distinct id2s, each a loaded link with probability about *p_exist*; as
        LinkBench, the first *count* of the range when it is no wider than that."""
        first, loaded = self.links_of_type(id1, link_type)
        span = max(1, math.ceil(loaded / p_exist))
        ks = range(count) if span <= count else rng.choice(span, count, replace=False).tolist()
        return tuple(id1 + first + int(k) * self.types for k in ks)
