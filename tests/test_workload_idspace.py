"""``debl generate --ids clusters``: the dense data set with its ids moved into three clusters,
nothing else changed."""

from __future__ import annotations

import numpy as np
import pytest

from debl.errors import ConfigError
from debl.workload.generator import generate
from debl.workload.idspace import sparse_ids
from debl.workload.spec import GenerateSpec


def test_the_mapping_is_increasing_and_lands_in_three_clusters():
    dense = np.arange(1, 300_001, dtype=np.int64)
    ids = sparse_ids(dense, 1, 300_001)
    assert np.all(np.diff(ids) > 0)
    assert (ids[0], ids[49_999], ids[50_000]) == (1, 50_000, 10**6)
    assert ids[50_000 + 125_000] == 1 << 40 and ids[-1] == (1 << 40) + 124_999
    # An id2 past max_id continues the last cluster.
    assert sparse_ids(np.array([300_001, 300_010]), 1, 300_001).tolist() == \
        [(1 << 40) + 125_000, (1 << 40) + 125_009]
    # A first cluster that would reach 10^6 pushes the second one up.
    big = sparse_ids(np.array([1_000_000, 1_000_001]), 1_000_000, 1_000_100)
    assert big.tolist() == [1_000_000, 1_000_001] and \
        sparse_ids(np.array([1_000_033]), 1_000_000, 1_000_100)[0] == 1_000_033


def test_clusters_is_the_dense_set_with_other_ids(tmp_path):
    spec = GenerateSpec(max_id=3001, files=3, days=3, seed=4, max_degree=30, bad_lines=2)
    generate(tmp_path / "dense", spec)
    generate(tmp_path / "clusters", GenerateSpec(**{**spec.__dict__, "ids": "clusters"}))
    for name in ("links-000.tsv", "links-001.tsv", "links-002.tsv"):
        dense = (tmp_path / "dense" / name).read_bytes().splitlines()
        moved = (tmp_path / "clusters" / name).read_bytes().splitlines()
        assert len(dense) == len(moved)
        ids = []
        for a, b in zip(dense, moved):
            fa, fb = a.split(b"\t"), b.split(b"\t")
            if len(fa) != 7 or not fa[0].isdigit() or not fa[2].isdigit():
                continue  # a bad line imitates a link's id1 and time only
            assert fa[1] == fb[1] and fa[3:] == fb[3:]
            assert [int(fb[0]), int(fb[2])] == sparse_ids(np.array([int(fa[0]), int(fa[2])]),
                                                          1, 3001).tolist()
            ids.append(int(fb[0]))
        assert ids == sorted(ids)
        assert min(ids) < 10**6 <= max(ids) and max(ids) >= 1 << 40


def test_an_unknown_id_space_is_refused():
    with pytest.raises(ConfigError, match="--ids"):
        GenerateSpec(max_id=10, ids="sparse")
