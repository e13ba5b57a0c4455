"""Where generated node ids sit in the 64-bit id space: ``debl generate --ids dense|clusters``.

The generator numbers nodes densely, ``[start_id, max_id)``. Real social-graph ids are sparse
64-bit numbers; ``clusters`` moves the dense numbers into three clusters, as a service that
changed its id scheme twice would have them (docs/WORKLOAD.md):

- a third of the nodes, at most 50,000, from ``start_id`` up (1..50,000 from 150,000 nodes on),
- half of the others from 10^6 up,
- the rest (and every id past ``max_id``, which an id2 may be) from 2^40 up.

The mapping is increasing, so files stay in id1 order and every property of the dense set
(degrees, updates, the merge rule) holds unchanged; only the id values move. A cluster that
would reach the next one's base starts the next one right after it instead.
"""

from __future__ import annotations

import dataclasses

import numpy as np

ID_SPACES = ("dense", "clusters")
CLUSTER_BASES = (None, 10**6, 1 << 40)  # None: the first cluster starts at start_id
FIRST_CLUSTER_MAX = 50_000  # nodes: the first cluster stays below the second's base


def cluster_starts(start_id: int, max_id: int) -> tuple[np.ndarray, np.ndarray]:
    """(first dense id of each cluster, first sparse id of each cluster)."""
    n = max_id - start_id
    first = min(n // 3, FIRST_CLUSTER_MAX)
    second = (n - first) // 2
    dense = np.array([start_id, start_id + first, start_id + first + second], dtype=np.int64)
    sparse = [start_id]
    for k in (1, 2):
        after_previous = sparse[-1] + int(dense[k] - dense[k - 1])
        sparse.append(max(CLUSTER_BASES[k] or 0, after_previous))  # k > 0: a base
    return dense, np.array(sparse, dtype=np.int64)


def sparse_ids(dense_ids: np.ndarray, start_id: int, max_id: int) -> np.ndarray:
    """The ``clusters`` id of each dense id (any id >= start_id)."""
    dense, sparse = cluster_starts(start_id, max_id)
    k = np.searchsorted(dense, dense_ids, side="right") - 1
    return sparse[k] + (dense_ids - dense[k])


def place(records, spec):
    """*records* (``debl.workload.synth.Records``) with id1 and id2 moved into ``spec.ids``."""
    if spec.ids == "dense":
        return records
    return dataclasses.replace(
        records, id1=sparse_ids(records.id1, spec.start_id, spec.max_id),
        id2=sparse_ids(records.id2, spec.start_id, spec.max_id))
