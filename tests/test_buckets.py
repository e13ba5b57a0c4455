"""The bucket map (debl.format.bucket_map.BucketMap): every id from 0 to 2^63-1 in exactly one
bucket, no bound that overflows, JSON round trips, and the JVM's mirror (debl.jobs.BucketMap)
agreeing with it on the same ids."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.errors.exceptions.captured import IllegalArgumentException

from debl.format.bucket_map import MAX_ID, BucketMap
from debl.errors import ConfigError

SPLITS = BucketMap.from_splits([10, 1_000_000, 1 << 40, MAX_ID])
WIDTH = BucketMap.fixed(1000)
HUGE_WIDTH = BucketMap.fixed(3 << 61)  # the last bucket would end past 2^63-1 unclipped

maps = st.one_of(
    st.integers(1, MAX_ID).map(BucketMap.fixed),
    st.lists(st.integers(1, MAX_ID), max_size=40).map(BucketMap.from_splits))
ids = st.integers(0, MAX_ID) | st.sampled_from([0, 1, MAX_ID, MAX_ID - 1, 1 << 40, 10**6])


def test_split_map_edges():
    assert SPLITS.count == 5
    assert [SPLITS.bucket_of(i) for i in (0, 9, 10, 999_999, 1_000_000, (1 << 40) - 1, 1 << 40,
                                          MAX_ID - 1, MAX_ID)] == [0, 0, 1, 1, 2, 2, 3, 3, 4]
    assert SPLITS.range_of(0) == (0, 9)
    assert SPLITS.range_of(2) == (1_000_000, (1 << 40) - 1)
    assert SPLITS.range_of(4) == (MAX_ID, MAX_ID)
    assert BucketMap.from_splits([]).range_of(0) == (0, MAX_ID)


def test_fixed_width_edges_never_overflow():
    assert WIDTH.bucket_of(0) == 0 and WIDTH.bucket_of(999) == 0 and WIDTH.bucket_of(1000) == 1
    assert WIDTH.range_of(3) == (3000, 3999)
    last = WIDTH.bucket_of(MAX_ID)
    assert last == WIDTH.count - 1 and WIDTH.range_of(last) == (last * 1000, MAX_ID)
    assert HUGE_WIDTH.count == 2
    assert HUGE_WIDTH.range_of(1) == (3 << 61, MAX_ID)
    with pytest.raises(ValueError):
        WIDTH.range_of(WIDTH.count)


def test_boundaries_are_where_the_given_buckets_start_and_end():
    assert SPLITS.boundaries([0, 2]) == [10, 1_000_000, 1 << 40]
    assert SPLITS.boundaries([4]) == [MAX_ID]  # its end, 2^63, is no key
    assert WIDTH.boundaries([0, 1, 5]) == [1000, 2000, 5000, 6000]


def test_invalid_maps_are_refused():
    for bad in ('{"splits": [5, 5]}', '{"splits": [0]}', f'{{"splits": [{MAX_ID + 1}]}}',
                '{"width": 0}', '{"width": 1, "splits": []}', '[]', 'nonsense', '{"x": 1}'):
        with pytest.raises(ConfigError):
            BucketMap.from_json(bad)
    assert BucketMap.from_catalog(None) is None  # "not decided yet"


@settings(max_examples=200, deadline=None)
@given(maps, ids)
def test_every_id_is_in_the_range_of_its_bucket(bucket_map, id1):
    b = bucket_map.bucket_of(id1)
    lo, hi = bucket_map.range_of(b)
    assert 0 <= b < bucket_map.count
    assert 0 <= lo <= id1 <= hi <= MAX_ID
    if lo > 0:
        assert bucket_map.bucket_of(lo - 1) == b - 1
    if hi < MAX_ID:
        assert bucket_map.bucket_of(hi + 1) == b + 1


@settings(max_examples=100, deadline=None)
@given(maps)
def test_json_round_trip(bucket_map):
    text = bucket_map.to_json()
    assert BucketMap.from_json(text) == bucket_map
    assert BucketMap.from_dict(json.loads(text)) == bucket_map


def test_the_jvm_mirror_agrees_on_the_same_ids(spark):
    jvm_map = spark.sparkContext._jvm.debl.jobs.BucketMap
    rng = random.Random(7)
    for bucket_map in (SPLITS, WIDTH, HUGE_WIDTH, BucketMap.from_splits([]),
                       BucketMap.from_splits(rng.sample(range(1, MAX_ID), 300))):
        mirror = jvm_map.fromJson(bucket_map.to_json())
        probes = [0, 1, MAX_ID, MAX_ID - 1] + [rng.randrange(MAX_ID) for _ in range(200)]
        probes += [s + d for s in bucket_map.splits for d in (-1, 0) if s + d >= 0]
        for id1 in probes:
            b = bucket_map.bucket_of(id1)
            assert mirror.bucketOf(id1) == b, (bucket_map.describe(), id1)
            assert (mirror.kLo(b), mirror.kHi(b)) == bucket_map.range_of(b)


def test_the_jvm_mirror_refuses_what_python_refuses(spark):
    jvm_map = spark.sparkContext._jvm.debl.jobs.BucketMap
    for bad in ('{"splits": [5, 5]}', '{"width": 0}', '{"x": 1}', '{"splits": [0]}'):
        with pytest.raises(IllegalArgumentException):  # pyspark's name for the Java one
            jvm_map.fromJson(bad)
