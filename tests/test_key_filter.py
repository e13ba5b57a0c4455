"""The hot key filter (debl.keys.key_filter): the bucket files' hash computed in bulk, no false
negatives, few false positives, a bounded size."""

from __future__ import annotations

import random

import pytest

import debl.keys.key_filter as key_filter
from debl.format.bucket_file import bloom_filter, bloom_positions
from debl.format.bucket_map import MAX_ID
from debl.keys.key_filter import KeyFilter, KeyFilterBuilder, key_hashes

LT = 123456789


def _keys(n: int, seed: int = 3) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    return [(rng.choice([rng.randrange(1, MAX_ID), rng.randrange(1, 10**7), MAX_ID, 0]),
             rng.choice([LT, LT + 1, MAX_ID])) for _ in range(n)]


def _built(keys, batch: int = 97, **options) -> KeyFilter:
    builder = KeyFilterBuilder(**options)
    for i in range(0, len(keys), batch):
        part = keys[i:i + batch]
        builder.add([k[0] for k in part], [k[1] for k in part])
    return builder.build()


@pytest.mark.parametrize("bits", [64, 1000, 2**27 + 3])
def test_the_bulk_hash_gives_the_bucket_files_positions(bits):
    keys = _keys(500)
    hashes = key_hashes([k[0] for k in keys], [k[1] for k in keys])
    positions = key_filter._positions(hashes, bits).reshape(-1, len(keys)).T
    assert [list(map(int, p)) for p in positions] == \
        [bloom_positions(id1, lt, bits) for id1, lt in keys]


def test_distinct_keys_give_the_bytes_of_a_bucket_files_filter():
    keys = sorted(set(_keys(2000)))
    assert _built(keys).bits == bloom_filter(keys)


def test_every_key_added_is_held_and_few_others_are():
    keys = _keys(20_000)
    kept = _built(keys + keys[:5000])  # duplicates, as a change log's updates give
    assert all(kept.may_hold(id1, lt) for id1, lt in keys)
    rng = random.Random(9)
    absent = [(rng.randrange(10**7, 10**9), LT) for _ in range(20_000)]
    assert sum(kept.may_hold(*k) for k in absent) < 0.01 * len(absent)


def test_the_filter_stops_growing_at_its_largest_size_and_still_holds_every_key():
    keys = _keys(5000)
    kept = _built(keys, max_bytes=1024)  # 819 keys at 10 bits
    assert len(kept.bits) == 1024
    assert all(kept.may_hold(id1, lt) for id1, lt in keys)
    assert KeyFilterBuilder().max_bytes == key_filter.MAX_FILTER_BYTES


def test_no_key_gives_a_filter_that_holds_nothing():
    empty = KeyFilterBuilder().build()
    assert len(empty.bits) == 8 and not empty.may_hold(1, LT)
