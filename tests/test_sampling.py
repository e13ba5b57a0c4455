"""Split points by sampling (loaders.sampling): buckets of about equal bytes for dense, clustered
and skewed ids, in both layouts (a range dump: each file one id range; a change log: each file
all ids), measured against the true bucket bytes of the files; and the ranged reads themselves."""

from __future__ import annotations

import os
import random
from collections import defaultdict
from pathlib import Path

import pytest

from debl.format.bucket_map import MAX_ID, BucketMap
from debl.config import Config
from loaders.sampling import Read, plan_reads, sample_bucket_map, split_points, weighted_ids
from loaders.source import LocalSource

TARGET = 64 * 1024
CONFIG = Config(loading_bucket_target_bytes=TARGET, loading_sample_reads_per_bucket=32,
                loading_sample_bytes=512)


def line(id1: int, rng: random.Random, data: int | None = None) -> bytes:
    size = rng.randint(0, 60) if data is None else data
    return b"%d\t123456789\t%d\t1\t%s\t1700000000000\t0\n" % (id1, id1 + 1, b"x" * size)


def write_files(directory: Path, files: list[list[int]], seed: int = 1) -> None:
    """One file per id list, each in id1 order, oldest first (mtimes 1000, 2000, ...)."""
    rng = random.Random(seed)
    for k, id1s in enumerate(files):
        path = directory / f"links-{k:03d}.tsv"
        path.write_bytes(b"".join(line(i, rng) for i in sorted(id1s)))
        os.utime(path, (1000 * (k + 1), 1000 * (k + 1)))


def true_bucket_bytes(directory: Path, bucket_map: BucketMap) -> dict[int, int]:
    sizes: dict[int, int] = defaultdict(int)
    for path in directory.glob("links-*.tsv"):
        with open(path, "rb") as f:
            for raw in f:
                sizes[bucket_map.bucket_of(int(raw.split(b"\t", 1)[0]))] += len(raw)
    return sizes


def degrees(ids: list[int], rng: random.Random) -> list[int]:
    """Every id repeated 1..8 times (uneven out-degrees)."""
    return [i for i in ids for _ in range(rng.randint(1, 8))]


def skew_of(directory: Path, config: Config = CONFIG) -> tuple[float, BucketMap, dict]:
    source = LocalSource(directory)
    bucket_map = sample_bucket_map(config, source, source.list())
    sizes = true_bucket_bytes(directory, bucket_map)
    mean = sum(sizes.values()) / len(sizes)
    return max(sizes.values()) / mean, bucket_map, sizes


def change_log(ids: list[int], files: int, rng: random.Random) -> list[list[int]]:
    """Each file spans all ids: every link lands in a random file."""
    out: list[list[int]] = [[] for _ in range(files)]
    for i in degrees(ids, rng):
        out[rng.randrange(files)].append(i)
    return out


def range_dump(ids: list[int], files: int, rng: random.Random) -> list[list[int]]:
    """Each file one contiguous id range."""
    links = sorted(degrees(ids, rng))
    per = -(-len(links) // files)
    return [links[k * per:(k + 1) * per] for k in range(files)]


CLUSTERS = list(range(1, 5_001)) + list(range(10**6, 10**6 + 5_000)) + \
    list(range(1 << 40, (1 << 40) + 5_000))


@pytest.mark.parametrize("layout", [change_log, range_dump])
@pytest.mark.parametrize("ids", [list(range(1, 15_001)), CLUSTERS], ids=["dense", "clusters"])
def test_buckets_hold_about_equal_bytes(tmp_path, layout, ids):
    rng = random.Random(3)
    write_files(tmp_path, layout(ids, 8, rng))
    total = sum(p.stat().st_size for p in tmp_path.iterdir())
    skew, bucket_map, sizes = skew_of(tmp_path)
    assert abs(len(sizes) - total / TARGET) <= 1  # about bucket_target_bytes each
    assert skew <= 1.3, sorted(sizes.values())


@pytest.mark.parametrize("step", [256, 4096])
def test_sorted_files_with_manifests_are_weighed_without_a_read(tmp_path, monkeypatch, step):
    """A range dump whose files carry sorted manifests at least as fine as the sample: the
    buckets come from the manifests alone, no byte read, about as even as a sample's; coarser
    manifests (4096-byte steps for 32 strata of a 64 KiB bucket) are sampled."""
    from dataclasses import replace

    from debl.keys.manifest_build import build_manifest

    rng = random.Random(5)
    write_files(tmp_path, range_dump(CLUSTERS, 8, rng))
    total = sum(p.stat().st_size for p in tmp_path.iterdir())
    source = LocalSource(tmp_path)
    files = [replace(f, manifest=build_manifest([(tmp_path / f.name).read_bytes()], step))
             for f in source.list()]
    reads, read_ranges = [], source.read_ranges
    monkeypatch.setattr(source, "read_ranges", lambda *a: reads.append(a) or read_ranges(*a))
    bucket_map = sample_bucket_map(CONFIG, source, files)
    assert (reads == []) == (step == 256)
    sizes = true_bucket_bytes(tmp_path, bucket_map)
    assert abs(len(sizes) - total / TARGET) <= 1
    assert max(sizes.values()) / (sum(sizes.values()) / len(sizes)) <= 1.3, sorted(sizes.values())


def test_clustered_ids_are_cut_inside_every_cluster(tmp_path):
    rng = random.Random(4)
    write_files(tmp_path, change_log(CLUSTERS, 6, rng))
    _, bucket_map, sizes = skew_of(tmp_path)
    starts = [bucket_map.range_of(b)[0] for b in sizes]
    assert sum(1 <= s <= 5_000 for s in starts) >= 3
    assert sum(10**6 <= s < 10**6 + 5_000 for s in starts) >= 3
    assert sum(1 << 40 <= s < (1 << 40) + 5_000 for s in starts) >= 3


def test_a_heavy_id_gets_a_bucket_of_its_own_and_raises_the_target(tmp_path):
    rng = random.Random(5)
    ids = degrees(list(range(1, 30_001)), rng)
    ids += [20_000] * 2500  # ~1.6 x TARGET in one id: no bucket can be smaller than it
    write_files(tmp_path, [ids[k::4] for k in range(4)])
    skew, bucket_map, sizes = skew_of(tmp_path)
    heavy = bucket_map.bucket_of(20_000)
    assert bucket_map.range_of(heavy) == (20_000, 20_000) or \
        sizes[heavy] < 1.2 * max(s for b, s in sizes.items() if b != heavy)
    assert skew <= 1.5, sorted(sizes.values())


def test_every_id_even_2_63_minus_1_has_a_bucket(tmp_path):
    write_files(tmp_path, [list(range(1, 20_000)) + [MAX_ID] * 3])
    _, bucket_map, sizes = skew_of(tmp_path)
    last = bucket_map.bucket_of(MAX_ID)
    assert bucket_map.range_of(last)[1] == MAX_ID and sizes[last] > 0


def test_input_without_a_valid_line_is_one_bucket(tmp_path):
    (tmp_path / "bad.tsv").write_bytes(b"not a link\n" * 1000)
    source = LocalSource(tmp_path)
    assert sample_bucket_map(CONFIG, source, source.list()) == BucketMap.from_splits([])


def test_split_points_cut_at_the_weights():
    assert split_points([], 10) == []
    assert split_points([(5, 100.0)], 10) == []  # one id: one bucket
    # Four ids of 10 bytes, target 20: two buckets of two ids.
    assert split_points([(1, 10.0), (2, 10.0), (3, 10.0), (4, 10.0)], 20) == [3]
    # A repeated id adds up.
    assert split_points([(1, 5.0), (1, 5.0), (2, 10.0)], 10) == [2]


def bucket_weights(weights, splits) -> tuple[BucketMap, dict[int, float]]:
    bucket_map = BucketMap.from_splits(splits)
    sizes: dict[int, float] = defaultdict(float)
    for id1, w in weights:
        sizes[bucket_map.bucket_of(id1)] += w
    return bucket_map, sizes


def test_a_giant_id_sets_the_size_or_stands_alone():
    weights = [(i, 1.0) for i in range(1, 1001)] + [(500, 199.0)]  # 1,199 bytes; 500 weighs 200
    # Covered (the default): 1,199 / 200 -> 6 buckets, about even.
    _, sizes = bucket_weights(weights, split_points(weights, 100))
    assert len(sizes) == 6
    assert max(sizes.values()) <= 1.2 * 1199 / 6
    # Not covered: 1,199 / 100 -> at most 12 buckets, the giant alone, the others even.
    bucket_map, sizes = bucket_weights(weights,
                                       split_points(weights, 100, covers_heaviest=False))
    assert 11 <= len(sizes) <= 12
    giant = bucket_map.bucket_of(500)
    assert bucket_map.range_of(giant) == (500, 500)
    others = [w for b, w in sizes.items() if b != giant]
    assert max(others) <= 1.2 * 999 / 11


def test_reads_cover_every_stratum_with_a_phase_per_file():
    from loaders.source import SourceFile

    files = [SourceFile("a", 100_000, 1.0), SourceFile("b", 100_000, 2.0),
             SourceFile("small", 300, 3.0), SourceFile("empty", 0, 4.0)]
    reads = plan_reads(files, target_bytes=25_000, reads_per_bucket=4, sample_bytes=1000)
    by_file = defaultdict(list)
    for r in reads:
        by_file[r.name].append(r)
    assert [(r.offset, r.length, r.at_eof) for r in by_file["small"]] == [(0, 300, True)]
    assert "empty" not in by_file
    for name in ("a", "b"):
        assert len(by_file[name]) == 16
        assert [r.offset // 6250 for r in by_file[name]] == list(range(16))  # one per stratum
        assert sum(r.stands_for for r in by_file[name]) == pytest.approx(100_000)
    assert by_file["a"][0].offset != by_file["b"][0].offset


def test_a_read_counts_only_its_complete_lines():
    rng = random.Random(8)
    lines = [line(i, rng, data=10) for i in range(100, 110)]
    body = b"".join(lines)
    # Starting exactly at line 3 (the byte before is its predecessor's newline): lines 3.. count.
    at = sum(map(len, lines[:3]))
    read = Read("f", at, 2 * len(lines[0]) + 5, 1000.0, False)
    block = body[at - 1:at + read.length]
    assert [i for i, _ in weighted_ids(block, read)] == [103, 104]
    # Starting one byte into line 3: it is partial, so only line 4 counts.
    read = Read("f", at + 1, 2 * len(lines[0]) + 5, 1000.0, False)
    block = body[at:at + 1 + read.length]
    assert weighted_ids(block, read) == [(104, 1000.0)]
    # At the end of the file, a last line without a newline counts.
    read = Read("f", 0, len(body) - 1, 1000.0, True)
    assert [i for i, _ in weighted_ids(body[:-1], read)] == list(range(100, 110))
    # Bad lines do not count.
    assert weighted_ids(b"junk\n" + lines[0], Read("f", 0, 0, 10.0, True)) == [(100, 10.0)]
