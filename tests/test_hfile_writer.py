"""The HBase row layout, the merge rule, and real HFiles written from bucket files by gen_HF's
JVM task (debl.jobs.BucketHFiles), checked against the Python reference (merge_bucket,
row_key, cell_value, row_checksum).

Needs Spark and the JVM jars (.debl/lib/spark from scripts/setup.sh; debl-jobs.jar is built
here), not the stack: bucket files and HFiles are on the local filesystem, and HFiles are read
back with HBase's own HFile reader through py4j.
"""

from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from debl.format import bucket_file
from debl.errors import ServiceError
from debl.format.link import (CHECKSUM_MOD, MAX_DATA, MAX_TIME, Link, Origin, merge_rank,
                              row_checksum)
from debl.store.hbase_layout import (CELL_TS, FAMILY, QUALIFIER, cell_value, decode, id1_boundary,
                                     prefix, row_key, scan_bounds)
from loaders.hfile import (BucketHFiles, cold_origin, merge_bucket, merge_links, merge_rows,
                           ranked, write_bucket_hfiles)

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


def read_hfiles(spark,
                out_dir: str) -> dict[str, list[tuple[bytes, bytes, bytes, int, int, bytes]]]:
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
    out: dict = {}
    while len(out) < n:
        # Every byte value but tab, newline and carriage return (the text format's), to prove
        # byte-exactness.
        data = bytes(rnd.choice([b for b in range(256) if b not in (9, 10, 13)])
                     for _ in range(rnd.randrange(0, 40)))
        link = Link(rnd.randrange(max_id1), rnd.choice([1, 2]), rnd.randrange(1 << 63),
                    rnd.randrange(2), data, rnd.choice([0, rnd.randrange(1 << 63), MAX_TIME]),
                    rnd.randrange(1 << 63))
        out[link.key] = link
    return list(out.values())


def write_bucket_files(directory: Path, rows: list[tuple[Link, Origin]], files: int) -> str:
    """dist_ch's output for one bucket and chunk: *rows* spread over ``chunk-00000.<n>`` in
    *directory*, each line the input line, then its file_seq and line_no. Returns the prefix."""
    directory.mkdir(parents=True, exist_ok=True)
    for n in range(files):
        part = rows[n::files]
        (directory / f"chunk-00000.{n}").write_bytes(bucket_file.encode(
            b"%s\t%d\t%d\n" % (link.to_line()[:-1], o.file_seq, o.position) for link, o in part))
    return (directory / "chunk-00000").as_uri()


def _versions(links: list[Link], seed: int) -> list[tuple[Link, Origin]]:
    """Each link three times, from three files, with ties on time and version for the file and
    line tie-breakers to decide; shuffled."""
    rnd = random.Random(seed)
    rows = []
    for file_seq in range(3):
        for line_no, link in enumerate(links, start=1):
            rows.append((link._replace(time=link.time % 3, version=rnd.randrange(2),
                                       visibility=rnd.randrange(2),
                                       data=b"%d:%d" % (file_seq, line_no)),
                         cold_origin(file_seq, line_no)))
    rnd.shuffle(rows)
    return rows


def test_bucket_hfiles_equal_the_reference_merge(spark, tmp_path):
    # Two buckets (id1 < 50 and id1 >= 50), each over two chunk files; a file of another chunk
    # in the same directory, and a temporary file of a killed dist_ch, must not be read.
    links = _random_links(600, seed=1, max_id1=100)
    rows = _versions(links, seed=2) + [(l, cold_origin(5, i)) for i, l in enumerate(links[:50])]
    low = [r for r in rows if r[0].id1 < 50]
    high = [r for r in rows if r[0].id1 >= 50]
    prefixes = [[write_bucket_files(tmp_path / "b0", low, 2)],
                [write_bucket_files(tmp_path / "b1", high, 3)]]
    (tmp_path / "b0" / "chunk-00001.0").write_bytes(
        bucket_file.encode([b"1\t1\t1\t1\tx\t1\t1\t0\t1\n"]))
    (tmp_path / "b1" / "chunk-00000.1._COPYING_").write_bytes(b"half a line")
    out = (tmp_path / "hfiles").as_uri()

    result = write_bucket_hfiles(spark, prefixes, out, "linktable")

    files = read_hfiles(spark, out)
    assert all(name.startswith("l/") for name in files)
    assert len(files) == 2  # one task, one file per bucket
    by_bucket = sorted(files.values(), key=lambda cells: cells[0][0])
    for bucket_rows, cells, written in zip((low, high), by_bucket, result):
        reference = merge_bucket(bucket_rows)
        assert [decode(c[0], c[5]) for c in cells] == reference
        # 4: a Put
        assert {(c[1], c[2], c[3], c[4]) for c in cells} == {(FAMILY, QUALIFIER, CELL_TS, 4)}
        assert written == BucketHFiles(
            rows=len(bucket_rows), winners=len(reference),
            checksum=sum(row_checksum(l) for l in reference) % CHECKSUM_MOD)

    # A redo replaces the output with the same files' content.
    assert write_bucket_hfiles(spark, prefixes, out, "linktable") == result
    assert sorted(read_hfiles(spark, out).values()) == sorted(files.values())


def test_a_line_that_is_not_a_bucket_line_fails_naming_file_and_line(spark, tmp_path):
    bucket = tmp_path / "b"
    bucket.mkdir()
    (bucket / "chunk-00000.0").write_bytes(bucket_file.encode(
        [b"1\t2\t3\t1\tdata\t4\t5\t0\t1\n", b"1\t2\tx\t1\tdata\t4\t5\t0\t2\n"]))
    with pytest.raises(ServiceError, match=r"chunk-00000\.0 line 2 is not a bucket line"):
        write_bucket_hfiles(spark, [[(bucket / "chunk-00000").as_uri()]],
                            (tmp_path / "out").as_uri(), "linktable")


@pytest.mark.parametrize("damage", ["no index", "index cut", "index changed"])
def test_a_bucket_file_without_its_valid_index_fails_naming_the_file(spark, tmp_path, damage):
    """gen_HF reads only a bucket file's data part, and only behind a valid index: a file
    without one (an older dist_ch's, or damaged) fails the task, never reads as rows."""
    lines = [Link(1, 2, i, 1, b"d", 4, 5).to_line()[:-1] + b"\t0\t%d\n" % i for i in range(9)]
    good = bucket_file.encode(lines)
    data_length = len(b"".join(lines))
    bad = {"no index": good[:data_length], "index cut": good[:-1],
           "index changed": good[:data_length] + bytes([good[data_length] ^ 1])
           + good[data_length + 1:]}[damage]
    bucket = tmp_path / "b"
    bucket.mkdir()
    (bucket / "chunk-00000.0").write_bytes(bad)
    with pytest.raises(ServiceError, match=r"chunk-00000\.0(: its bucket index does not match"
                                           r"| has no bucket index)"):
        write_bucket_hfiles(spark, [[(bucket / "chunk-00000").as_uri()]],
                            (tmp_path / "out").as_uri(), "linktable")


def test_merge_links_in_spark_equals_the_reference(spark):
    rows = _versions(_random_links(400, seed=3, max_id1=50), seed=4)
    merged = merge_links(spark.sparkContext.parallelize(rows, 4))
    assert isinstance(merged.first(), Link)
    assert sorted(merged.collect(), key=row_key) == merge_bucket(rows)


def test_value_layout_is_fixed():
    """The HBase store's server-side filter relies on the value starting with visibility."""
    link = Link(1, 2, 3, 1, b"data", 4, 5)
    assert cell_value(link) == b"\x01" + struct.pack(">Q", 5) + b"data"
    assert row_key(link) == struct.pack(">QQQQ", 1, 2, MAX_TIME - 4, (1 << 64) - 1 - 3)


# ---------------------------------------------------------------- bulk load (the real stack)

def bulk_load_round_trip(spark, config, table: str, hfile_dir: str, bucket_dir: Path) -> None:
    """Pre-split table, bucket files (local), HFiles on HDFS, bulk load, then the same load
    again: the table holds exactly the links, every cell at CELL_TS. Drops the table at the
    end."""
    import happybase

    from loaders import hbase_bulk

    def drop():
        conn = happybase.Connection(config.hbase.thrift_host, config.hbase.thrift_port)
        try:
            if table.encode() in conn.tables():
                conn.delete_table(table, disable=True)
        finally:
            conn.close()

    links = _random_links(2000, seed=6, max_id1=300)
    # One bucket per region: [, 100) [100, 200) [200, ), each one chunk file.
    prefixes = [[write_bucket_files(bucket_dir / str(b), [
        (l, cold_origin(0, i)) for i, l in enumerate(links) if b * 100 <= l.id1 < (b + 1) * 100],
        1)] for b in range(3)]
    drop()  # left over from an interrupted run
    try:
        assert hbase_bulk.create_table(spark, config, [id1_boundary(100), id1_boundary(200)], table)
        splits = hbase_bulk.split_keys(spark, config, table)
        assert splits == [id1_boundary(100), id1_boundary(200)]
        for _ in range(2):  # a redo of the same buckets converges to the same table
            written = write_bucket_hfiles(spark, prefixes, hfile_dir, table)
            assert sum(w.winners for w in written) == len(links)
            assert hbase_bulk.bulk_load(spark, config, hfile_dir, table) == 3
        conn = happybase.Connection(config.hbase.thrift_host, config.hbase.thrift_port)
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
def test_bulk_load_into_a_pre_split_table(spark, stack_config, tmp_path):
    hfile_dir = f"{stack_config.hdfs.uri}{stack_config.hdfs.root}/test-hfiles"
    bulk_load_round_trip(spark, stack_config, "debl_test_bulkload", hfile_dir, tmp_path)
