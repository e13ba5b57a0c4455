"""The HBase row layout, the merge reduce, and real HFiles written from PySpark.

Needs Spark and the JVM jars (.debl/lib/spark from scripts/setup.sh; debl-jobs.jar is built
here), not the stack: HFiles go to the local filesystem and are read back with HBase's own HFile
reader through py4j.
"""

from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from debl.model import MAX_DATA, MAX_TIME, Link, Origin, merge_rank
from debl.store.hbase_layout import (CELL_TS, FAMILY, QUALIFIER, cell_value, decode, id1_boundary,
                                     prefix, row_key, scan_bounds)
from loaders.hfile import (RegionPartitioner, cold_origin, merge_bucket, merge_links, merge_rows,
                           ranked, write_hfiles)

ROOT = Path(__file__).resolve().parents[1]
U63 = (1 << 63) - 1

ids = st.integers(0, U63)
links = st.builds(Link, ids, ids, ids, st.integers(0, 1), st.binary(max_size=MAX_DATA),
                  st.integers(0, MAX_TIME), ids)
# Few distinct values, so that orders and ranges have ties to get wrong.
small = st.integers(0, 3) | st.sampled_from([0, 255, 256, U63])
close_links = st.builds(Link, small, small, small, st.integers(0, 1), st.binary(max_size=4),
                        small | st.just(MAX_TIME), small)


# ---------------------------------------------------------------- layout

@given(links)
def test_row_and_value_round_trip(link):
    row = row_key(link)
    assert len(row) == 32 and row[:16] == prefix(link.id1, link.link_type)
    assert decode(row, cell_value(link)) == link


@given(st.lists(close_links, max_size=30))
def test_row_key_order_is_id1_type_then_newest_then_id2_descending(rows):
    by_key = sorted(rows, key=row_key)
    expected = sorted(rows, key=lambda l: (l.id1, l.link_type, -l.time, -l.id2))
    assert [(l.id1, l.link_type, l.time, l.id2) for l in by_key] == \
           [(l.id1, l.link_type, l.time, l.id2) for l in expected]


@given(close_links, small, small, small | st.just(MAX_TIME), small | st.just(MAX_TIME))
def test_scan_bounds_select_exactly_the_time_range(link, id1, link_type, min_time, max_time):
    bounds = scan_bounds(id1, link_type, min_time, max_time)
    wanted = (link.id1, link.link_type) == (id1, link_type) and min_time <= link.time <= max_time
    if bounds is None:
        assert min_time > max_time
    else:
        start, stop = bounds
        assert start < stop  # never start == stop: HBase would read that as a get
        assert (start <= row_key(link) < stop) == wanted


def test_decode_refuses_foreign_cells():
    with pytest.raises(ValueError):
        decode(b"short", b"\x01" + bytes(8))
    with pytest.raises(ValueError):
        decode(bytes(32), b"\x01")


def test_id1_boundary_splits_between_id1s():
    link = Link(5, 2, 9, 1, b"", 7, 0)
    assert row_key(link._replace(id1=4)) < id1_boundary(5) <= row_key(link) < id1_boundary(6)
    assert RegionPartitioner([id1_boundary(5), id1_boundary(10)])(row_key(link)) == 1


# ---------------------------------------------------------------- merge rule

def _row(time, version, file_seq, line_no, visibility=1, data=b"x"):
    return Link(1, 2, 3, visibility, data, time, version), cold_origin(file_seq, line_no)


@pytest.mark.parametrize("winner, loser", [
    (_row(10, 0, 0, 1, data=b"newer"), _row(9, 5, 9, 9)),         # greatest time first
    (_row(10, 2, 0, 1, data=b"version"), _row(10, 1, 9, 9)),      # then greatest version
    (_row(10, 1, 2, 1, data=b"later file"), _row(10, 1, 1, 99)),  # then the later file
    (_row(10, 1, 2, 8, data=b"later line"), _row(10, 1, 2, 7)),   # then the later line
    (_row(10, 0, 0, 1, visibility=0), _row(9, 0, 0, 2)),          # a newer hidden row wins
])
def test_merge_rows_follows_the_rule(winner, loser):
    assert merge_rows(ranked(*winner), ranked(*loser)) == ranked(*winner)
    assert merge_rows(ranked(*loser), ranked(*winner)) == ranked(*winner)
    assert merge_bucket([loser, winner, loser]) == [winner[0]]


@given(st.lists(st.tuples(close_links, st.integers(0, 3), st.integers(1, 3)), max_size=40))
def test_merge_bucket_keeps_the_greatest_rank_per_key(rows):
    rows = [(link, cold_origin(f, n)) for link, f, n in rows]
    merged = merge_bucket(rows)
    assert merged == sorted(merged, key=row_key)
    assert len({l.key for l in merged}) == len(merged) == len({l.key for l, _ in rows})
    for link in merged:
        best = max(merge_rank(l, o) for l, o in rows if l.key == link.key)
        assert any(l == link and merge_rank(l, o) == best for l, o in rows)


# ---------------------------------------------------------------- Spark and HFiles

# The `spark` fixture is conftest's: one session per test run, DeBL's factory. Every path here
# is an explicit file:// URI, so these tests write no HDFS.


def read_hfiles(spark, out_dir: str) -> dict[str, list[tuple[bytes, bytes, bytes, int, int, bytes]]]:
    """Every HFile under out_dir/<family>/, read with HBase's HFile reader:
    {family/file: [(row, family, qualifier, timestamp, type, value), ...]} in file order."""
    sc = spark.sparkContext
    jvm, conf = sc._jvm, sc._jsc.hadoopConfiguration()
    hfile = jvm.org.apache.hadoop.hbase.io.hfile
    cells = jvm.org.apache.hadoop.hbase.CellUtil
    root = jvm.org.apache.hadoop.fs.Path(out_dir)
    fs = root.getFileSystem(conf)
    found = {}
    for family in fs.listStatus(root):
        if not family.isDirectory():
            continue  # _SUCCESS
        for status in fs.listStatus(family.getPath()):
            path = status.getPath()
            if path.getName().startswith("."):
                continue  # the local filesystem's .crc files
            reader = hfile.HFile.createReader(fs, path, hfile.CacheConfig.DISABLED, True, conf)
            try:
                rows = []
                scanner = reader.getScanner(conf, False, False)
                if scanner.seekTo():
                    while True:
                        c = scanner.getCell()
                        rows.append((bytes(cells.cloneRow(c)), bytes(cells.cloneFamily(c)),
                                     bytes(cells.cloneQualifier(c)), c.getTimestamp(),
                                     c.getTypeByte(), bytes(cells.cloneValue(c))))
                        if not scanner.next():
                            break
                assert reader.getEntries() == len(rows)
                found[f"{family.getPath().getName()}/{path.getName()}"] = rows
            finally:
                reader.close()
    return found


def _random_links(n: int, seed: int, max_id1: int = 1000) -> list[Link]:
    rnd = random.Random(seed)
    out = {}
    while len(out) < n:
        # Every byte value but tab and newline (the text format's), to prove byte-exactness.
        data = bytes(rnd.choice([b for b in range(256) if b not in (9, 10)])
                     for _ in range(rnd.randrange(0, 40)))
        link = Link(rnd.randrange(max_id1), rnd.choice([1, 2]), rnd.randrange(1 << 63),
                    rnd.randrange(2), data, rnd.choice([0, rnd.randrange(1 << 63), MAX_TIME]),
                    rnd.randrange(1 << 63))
        out[link.key] = link
    return list(out.values())


def test_hfiles_written_and_read_back_per_region(spark, tmp_path):
    links = _random_links(3000, seed=1)
    # Four regions: [, 250) [250, 500) [500, 2000) [2000, ): the last one gets no row.
    splits = [id1_boundary(500), id1_boundary(250), id1_boundary(2000)]
    out = (tmp_path / "hfiles").as_uri()
    rdd = spark.sparkContext.parallelize(links, 5)

    assert write_hfiles(spark, rdd, out, "linktable", splits) == len(links)

    files = read_hfiles(spark, out)
    assert all(name.startswith("l/") for name in files)
    assert len(files) == 3  # one per non-empty region, none for the empty one
    bounds = [b""] + sorted(splits) + [b"\xff" * 33]
    for cells in files.values():
        rows = [c[0] for c in cells]
        assert rows == sorted(set(rows))
        region = RegionPartitioner(splits)(rows[0])
        assert bounds[region] <= rows[0] and rows[-1] < bounds[region + 1]
        assert {(c[1], c[2], c[3], c[4]) for c in cells} == {(FAMILY, QUALIFIER, CELL_TS, 4)}  # 4: Put
    in_order = sorted((c for cells in files.values() for c in cells), key=lambda c: c[0])
    assert [decode(c[0], c[5]) for c in in_order] == sorted(links, key=row_key)


def test_merged_bucket_through_spark_equals_the_reference(spark, tmp_path):
    rnd = random.Random(2)
    base = _random_links(400, seed=3, max_id1=50)
    rows = []
    for file_seq in range(3):  # the same keys in three files: ties decided by file and line
        for line_no, link in enumerate(base, start=1):
            link = link._replace(time=link.time % 3, version=rnd.randrange(2),
                                 visibility=rnd.randrange(2), data=b"%d:%d" % (file_seq, line_no))
            rows.append((link, Origin(0, file_seq, line_no)))
    rnd.shuffle(rows)
    merged = merge_links(spark.sparkContext.parallelize(rows, 4))
    assert isinstance(merged.first(), Link)
    out = (tmp_path / "merged").as_uri()

    assert write_hfiles(spark, merged, out, "linktable", [id1_boundary(25)]) == len(base)

    cells = sorted((c for cs in read_hfiles(spark, out).values() for c in cs), key=lambda c: c[0])
    assert [decode(c[0], c[5]) for c in cells] == merge_bucket(rows)


def test_unmerged_input_is_refused(spark, tmp_path):
    link = Link(1, 2, 3, 1, b"a", 4, 5)
    rdd = spark.sparkContext.parallelize([link, link._replace(data=b"b")], 1)
    with pytest.raises(Exception, match="needs merged input"):
        write_hfiles(spark, rdd, (tmp_path / "dup").as_uri(), "linktable", [])


def test_existing_output_is_refused_unless_replaced(spark, tmp_path):
    out = tmp_path / "again"
    rdd = spark.sparkContext.parallelize(_random_links(10, seed=4), 1)
    write_hfiles(spark, rdd, out.as_uri(), "linktable", [])
    with pytest.raises(FileExistsError):
        write_hfiles(spark, rdd, out.as_uri(), "linktable", [])
    assert write_hfiles(spark, rdd, out.as_uri(), "linktable", [], replace=True) == 10
    assert len(read_hfiles(spark, out.as_uri())) == 1


def test_value_layout_is_fixed():
    """The HBase store's server-side filter relies on the value starting with visibility."""
    link = Link(1, 2, 3, 1, b"data", 4, 5)
    assert cell_value(link) == b"\x01" + struct.pack(">Q", 5) + b"data"
    assert row_key(link) == struct.pack(">QQQQ", 1, 2, MAX_TIME - 4, (1 << 64) - 1 - 3)


# ---------------------------------------------------------------- bulk load (the real stack)

def bulk_load_round_trip(spark, config, table: str, hfile_dir: str) -> None:
    """Pre-split table, HFiles on HDFS, bulk load, then the same load again: the table holds
    exactly the links, every cell at CELL_TS. Drops the table at the end."""
    import happybase

    from loaders import hbase_bulk

    def drop():
        conn = happybase.Connection(config.hbase_thrift_host, config.hbase_thrift_port)
        try:
            if table.encode() in conn.tables():
                conn.delete_table(table, disable=True)
        finally:
            conn.close()

    links = _random_links(2000, seed=6, max_id1=300)
    drop()  # left over from an interrupted run
    try:
        assert hbase_bulk.create_table(spark, config, [id1_boundary(100), id1_boundary(200)], table)
        splits = hbase_bulk.split_keys(spark, config, table)
        assert splits == [id1_boundary(100), id1_boundary(200)]
        for _ in range(2):  # a redo of the same bucket converges to the same table
            rdd = spark.sparkContext.parallelize(links, 3)
            assert write_hfiles(spark, rdd, hfile_dir, table, splits, replace=True) == len(links)
            assert hbase_bulk.bulk_load(spark, config, hfile_dir, table) == 3
        conn = happybase.Connection(config.hbase_thrift_host, config.hbase_thrift_port)
        try:
            cells = [(row, *data.popitem()[1]) for row, data in
                     conn.table(table).scan(include_timestamp=True)]
        finally:
            conn.close()
        assert {ts for _, _, ts in cells} == {CELL_TS}
        assert [decode(row, value) for row, value, _ in cells] == sorted(links, key=row_key)
    finally:
        drop()


@pytest.mark.stack
def test_bulk_load_into_a_pre_split_table(spark, stack_config):
    hfile_dir = f"{stack_config.hdfs_uri}{stack_config.hdfs_root}/test-hfiles"
    bulk_load_round_trip(spark, stack_config, "debl_test_bulkload", hfile_dir)
