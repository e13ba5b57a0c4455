"""Hostile input on the real stack (docs/DESIGN.md sections 3 and 8): every kind of bad line is
rejected with its exact reason and counted, every odd but valid byte round-trips through MySQL, HDFS
and HBase, a CRLF file loads as its LF twin, an over-long line is rejected without being held in
memory, and the answers equal the in-memory reference built from the LF twins.

The data set holds, oldest first, four cold and four hot files: a CRLF file, a file of hostile
lines (LF and CRLF lines mixed) whose name holds a tab and a newline, a file whose name is not
UTF-8 and whose last line has no newline (the hot one ends in a bare CR), an empty file. Each
hostile line is in a cold and in a hot file. docs/RELIABILITY.md shows the table these tests
assert; ``pytest tests/test_hostile_input.py -v`` reproduces it.
"""

from __future__ import annotations

import os
import random
import shutil
import tracemalloc
from dataclasses import replace
from pathlib import Path

import pytest

from coordinator import Coordinator
from debl.bench.baselines import run_approach
from debl.format.bucket_map import HOT_MAP, BucketMap
from debl.catalog import Catalog
from debl.errors import BadInputError
from debl.format.link import REJECT_PREFIX, Link
from debl.mysql import connect
from loaders.load import LoadOptions, reject_path, run_load
from loaders.rejects import read_rejects
from loaders.source import LocalSource
from loaders.verify import verify_load
from tests.dataset import all_rows, expected_buckets, reference_store
from tests.hostile_lines import HOSTILE, LIMIT, LONG, LT, MAX_ID_LINE, ODD_BUT_VALID, U63

pytestmark = pytest.mark.stack

WIDTH = 1000
T0 = 1_700_000_000
HOT_SINCE = T0 + 4 * 3600

def _valid_lines(rng: random.Random, n: int) -> list[bytes]:
    """Links over a small id space, with updates, hidden rows and data of every byte but tab,
    newline and carriage return."""
    alphabet = [b for b in range(256) if b not in (9, 10, 13)]
    out = []
    for _ in range(n):
        data = bytes(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        out.append(Link(rng.randrange(4000), LT + rng.randrange(2), rng.randrange(30),
                        int(rng.random() > 0.3), data, rng.randrange(1000, 1100),
                        rng.randrange(3)).to_line()[:-1])
    return out


def _files(rng: random.Random) -> list[tuple[bytes, list[tuple[bytes, bytes]], bool]]:
    """(file name as bytes, [(line, line end)], hot) oldest first. A line end is the CRLF twin's:
    b"\\r\\n", b"\\n", or b"" (no line end), or b"\\r" (a last line ending in a bare CR)."""
    def crlf(lines: list[bytes]) -> list[tuple[bytes, bytes]]:
        return [(line, b"\r\n") for line in lines]

    def mixed(lines: list[bytes]) -> list[tuple[bytes, bytes]]:
        return [(line, b"\r\n" if i % 2 else b"\n") for i, line in enumerate(lines)]

    def hostile(extra: list[bytes]) -> list[bytes]:
        lines = _valid_lines(rng, 150) + extra
        for _, line, _ in HOSTILE:
            lines.insert(rng.randrange(len(lines) + 1), line)
        return lines

    def no_newline(lines: list[bytes], end: bytes) -> list[tuple[bytes, bytes]]:
        return crlf(lines[:-1]) + [(lines[-1], end)]

    return [
        (b"c1-crlf.tsv", crlf(_valid_lines(rng, 300)), False),
        (b"c2-hostile\twith tab\nand newline.tsv", mixed(hostile(ODD_BUT_VALID)), False),
        (b"c3-\xff\xfe-not-utf-8.tsv", no_newline(_valid_lines(rng, 200), b""), False),
        (b"c4-empty.tsv", [], False),
        (b"h1-crlf.tsv", crlf(_valid_lines(rng, 300)), True),
        (b"h2-hostile\twith tab\nand newline.tsv",
         mixed(hostile(ODD_BUT_VALID + [MAX_ID_LINE])), True),
        (b"h3-\xff-not-utf-8.tsv", no_newline(_valid_lines(rng, 200), b"\r"), True),
        (b"h4-empty.tsv", [], True),
    ]


def _write(directory: Path, files, twin: bool) -> None:
    """The files as given, or (*twin*) their LF twins: every CRLF line end written as LF."""
    directory.mkdir()
    for i, (name, lines, _) in enumerate(files):
        path = os.path.join(bytes(directory), name)
        with open(path, "wb") as f:
            for line, end in lines:
                f.write(line + ({b"\r\n": b"\n", b"\r": b""}.get(end, end) if twin else end))
        os.utime(path, (T0 + i * 3600, T0 + i * 3600))


@pytest.fixture(scope="module")
def hostile(stack_config, spark, tmp_path_factory):
    """The hostile data set and its LF twin, loaded (hot and cold) in a namespace of its own."""
    config = replace(stack_config, mysql_database="debl_hostiletest",
                     mysql_link_table="hostile_links",
                     hbase_table="hostile_links", hdfs_root="/debl-hostiletest",
                     loading_max_line_bytes=LIMIT, coordinator_poll_interval=0.2)
    files = _files(random.Random(15))
    root = tmp_path_factory.mktemp("hostile")
    _write(root / "crlf", files, twin=False)
    _write(root / "twin", files, twin=True)
    names = {os.fsdecode(name): hot for name, _, hot in files}
    listed = [f.name for f in LocalSource(root / "crlf").list()]
    assert listed == [os.fsdecode(name) for name, _, _ in files]
    summary = run_load(config, str(root / "crlf"),
                       LoadOptions(hot_since=HOT_SINCE, chunk_size=64 * 1024, bucket_width=WIDTH))
    return config, root, summary, {n for n, hot in names.items() if hot}, \
        {n for n, hot in names.items() if not hot}


def _current(config):
    with Catalog(config) as catalog:
        return catalog.loads.current()


def _mysql_rows(config) -> set[Link]:
    """The rows of the current load's MySQL table."""
    conn = connect(config)
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT id1, link_type, id2, visibility, data, time, version "
                        f"FROM `{_current(config).namespace.link_table}`")
            return {Link._make(bytes(v) if isinstance(v, (bytes, bytearray)) else int(v)
                               for v in row) for row in cur.fetchall()}
    finally:
        conn.close()


def test_each_hostile_line_is_rejected_with_its_exact_reason(hostile):
    config, root, summary, hot, cold = hostile
    expected = []
    for name in sorted(hot | cold):
        with open(os.path.join(bytes(root / "crlf"), os.fsencode(name)), "rb") as f:
            for line_no, line in enumerate(f, 1):
                body = line.rstrip(b"\n").removesuffix(b"\r")
                for _, bad, reason in HOSTILE:
                    if body == bad:
                        expected.append((name, line_no, reason))
    assert len(expected) == 2 * len(HOSTILE)  # each kind once in a hot and once in a cold file
    got = [(name, line_no, reason)
           for name, line_no, reason, _ in read_rejects(reject_path(config, summary.load_id))]
    assert sorted(got) == sorted(expected)
    assert summary.rejects == len(expected)


def test_an_over_long_line_leaves_only_a_bounded_prefix_in_the_reject_file(hostile):
    config, _, summary, _, _ = hostile
    long = [line for _, _, reason, line in read_rejects(reject_path(config, summary.load_id))
            if reason.startswith("line is")]
    assert long == [LONG[:REJECT_PREFIX]] * 2
    size = sum(p.stat().st_size for p in reject_path(config, summary.load_id).iterdir())
    assert size < 16 * 1024


def test_crlf_files_load_exactly_as_their_lf_twins(hostile):
    config, root, summary, hot, cold = hostile
    twin = root / "twin"
    assert _mysql_rows(config) == all_rows(reference_store(twin, hot, "hot", LIMIT))
    with Catalog(config) as catalog:
        buckets = {b.b_index: (b.k_lo, b.k_hi, b.rows, b.checksum, b.c_lo, b.c_hi)
                   for b in catalog.index.buckets(summary.load_id)}
        hot_buckets = {b.b_index: (b.k_lo, b.k_hi, b.rows, b.checksum, b.c_lo, b.c_hi)
                       for b in catalog.index.buckets(summary.load_id, hot=True)}
    assert buckets == expected_buckets(twin, cold, BucketMap.fixed(WIDTH), LIMIT)
    # The hot files were bucketed too (read raw until MySQL took them over), as their twins,
    # into the one hot bucket.
    assert hot_buckets == expected_buckets(twin, hot, HOT_MAP, LIMIT)
    assert summary.hot_rows == len(all_rows(reference_store(twin, hot, "hot", LIMIT)))


def test_odd_bytes_round_trip_and_answers_equal_the_reference_after_gen_hf(hostile):
    from debl.store.hbase import HBaseStore
    from loaders.gen_hf import GenHF

    config, root, _, hot, cold = hostile
    twin = root / "twin"
    with GenHF(config) as gen_hf:
        gen_hf.serve(until_complete=True)
    with HBaseStore(config, _current(config).namespace.hbase_table) as hbase:
        in_hbase = set(hbase.scan_id1_range(0, U63))
    assert in_hbase == all_rows(reference_store(twin, hot, "cold", LIMIT))
    in_mysql = _mysql_rows(config)
    for line in ODD_BUT_VALID:  # each in a hot and in a cold file
        data = line.split(b"\t")[4]
        assert [link.data for link in in_mysql if link.data == data] == [data]
        assert [link.data for link in in_hbase if link.data == data] == [data]
    assert any(link.id1 == U63 for link in in_mysql)

    reference = reference_store(twin, hot, "all", LIMIT)
    with Coordinator(config) as coordinator:
        for key in sorted(reference.keys()):
            assert coordinator.get_link_list(*key) == reference.get_link_list(*key), key


def test_verify_accounts_for_every_line_of_every_file(hostile):
    config = hostile[0]
    report = verify_load(config)
    assert report.ok, report.failures
    assert len([c for c in report.checks if c.what.startswith("file ")]) == 8


def test_a_load_without_hot_files_never_answers_the_previous_ones_hot_rows(hostile):
    """Defect: after a load with hot files, a --no-hot load left the old rows in MySQL, and
    verify reported `MySQL link table rows = hot rows recorded: expected 0, found N`. Each load
    has its own tables now: the --no-hot load has none in MySQL, and no answer of it holds a
    row of the previous load's."""
    config, root, _, _, _ = hostile
    assert _mysql_rows(config)  # the hot rows of the first load
    # The LF twins without the largest id, which a cold load cannot take yet (below).
    shutil.copytree(root / "twin", root / "nohot", ignore=lambda d, names: [
        n for n in names if n.startswith("h2-")])
    summary = run_approach(config, str(root / "nohot"),  # what `debl load --no-hot` runs
                           LoadOptions(chunk_size=256 * 1024, bucket_width=WIDTH,
                                       approach="debl-cold"))
    assert summary.hot_files == 0 and summary.hot_rows == 0
    current = _current(config)
    assert current.load_id == summary.load_id and current.hot_state == "none"
    report = verify_load(config)
    assert report.ok, report.failures
    reference = reference_store(root / "nohot", set(), "all", LIMIT)
    with Coordinator(config) as coordinator:
        assert coordinator.get_link_list(U63, LT) == []  # a hot row of the previous load only
        for key in sorted(reference.keys())[::5]:
            assert coordinator.get_link_list(*key) == reference.get_link_list(*key), key


def test_max_bad_exceeded_is_a_clear_error_and_leaves_nothing_visible(hostile):
    from loaders.gen_hf import GenHF

    config, root, _, _, _ = hostile
    # Each path alone stays within 17: the loader's running count over both stops the load.
    with pytest.raises(BadInputError, match=r"(18 bad lines, more than --max-bad 17|more than "
                                            r"17 bad lines \(18 so far\)); see \S*/rejects"):
        run_load(config, str(root / "crlf"),
                 LoadOptions(hot_since=HOT_SINCE, chunk_size=64 * 1024, bucket_width=WIDTH,
                             max_bad=2 * len(HOSTILE) - 1))
    with Catalog(config) as catalog:
        load = catalog.loads.load()
        assert load.state == "failed" and "bad lines" in load.error
        current = catalog.loads.current()
    assert current.load_id != load.load_id  # the day before serves on
    with Coordinator(config) as coordinator:
        assert coordinator.query(7, LT, timeout=30).load_id == current.load_id
    with GenHF(config) as gen_hf:
        gen_hf.run_once()
    with Catalog(config) as catalog:  # nothing of a failed load is converted
        assert {j.state for j in catalog.jobs.jobs(load.load_id)} <= {"pending"}


def test_the_largest_id_loads_cold_too(hostile, tmp_path):
    config, _, _, _, _ = hostile
    directory = tmp_path / "maxid"
    directory.mkdir()
    (directory / "cold.tsv").write_bytes(MAX_ID_LINE + b"\n" + b"5\t%d\t6\t1\tx\t1\t1\n" % LT)
    summary = run_approach(config, str(directory),
                           LoadOptions(bucket_width=WIDTH, approach="debl-cold"))
    assert summary.cold_rows == 2 and summary.rejects == 0
    report = verify_load(config)
    assert report.ok, report.failures


# -- memory: an over-long line is never held whole

def test_the_hot_path_passes_over_a_long_line_in_bounded_memory(stack_config, tmp_path):
    from loaders.mysql_bulk import load_hot
    from loaders.rejects import RejectWriter

    config = replace(stack_config, mysql_database="debl_hostiletest",
                     mysql_link_table="hostile_mem",
                     loading_max_line_bytes=LIMIT)
    good = b"1\t%d\t2\t1\tx\t5\t6" % LT
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "long.tsv").write_bytes(
        good + b"\r\n" + b"x" * (40 << 20) + b"\r\n" + good.replace(b"\t2\t", b"\t3\t"))
    source = LocalSource(tmp_path / "src")
    rejects = RejectWriter(tmp_path / "rejects")
    tracemalloc.start()
    try:
        with rejects.open_part("hot") as part:
            result = load_hot(config, source, [(0, source.list()[0])], part)
            part.commit()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, f"peak {peak} bytes for a 40 MiB line"
    assert (result.rows, result.lines, result.rejects) == (2, 2, 1)
    assert read_rejects(tmp_path / "rejects") == [
        ("long.tsv", 2, f"line is {40 << 20} bytes, more than loading.max_line_bytes={LIMIT}; the "
                        f"reject file keeps its first {REJECT_PREFIX}", b"x" * REJECT_PREFIX)]


def test_the_cold_copy_streams_a_long_line_in_bounded_memory(stack_config, tmp_path):
    from debl.hdfs import HdfsClient
    from loaders.chunker import ChunkCopier
    from loaders.coverage import Coverage

    config = replace(stack_config, hdfs_root="/debl-hostiletest")
    lines = b"1\t2\t3\t1\tx\t5\t6\n" * 1000
    body = lines + b"y" * (40 << 20) + b"\r\n" + lines + b"last line, no newline"
    (tmp_path / "long.tsv").write_bytes(body)
    source = LocalSource(tmp_path)
    hdfs = HdfsClient(config)
    listed = source.list()[0]
    numbers = iter(range(1 << 20))
    copier = ChunkCopier(source, [(0, listed)], hdfs, "/debl-hostiletest/memtest",
                         Coverage({0: listed.size}), lambda: next(numbers))
    tracemalloc.start()
    try:
        chunks = []
        while (chunk := copier.copy_next(64 * 1024, slices=2)) is not None:
            chunks.append(chunk)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        copier.close()
    assert peak < 8 << 20, f"peak {peak} bytes for a 40 MiB line"
    copied = b"".join(b"".join(hdfs.stream(c.path, 1 << 20)) for c in chunks)
    assert copied == body + b"\n"
    assert sum(c.lines for c in chunks) == body.count(b"\n") + 1
    for chunk in chunks:  # every slice starts at a line start, every chunk ends at a line end
        data = b"".join(hdfs.stream(chunk.path, 1 << 20))
        assert data.endswith(b"\n")
        assert all(offset == 0 or data[offset - 1:offset] == b"\n"
                   for offset, _ in chunk.slices)
        hdfs.delete(chunk.path)


# -- a truncated upload

def test_a_truncated_uploads_last_line_is_one_reject_and_the_load_goes_on(stack_config, spark,
                                                                          tmp_path):
    """Defect: ten good lines, then a run of one byte without tab or newline to
    the file's end (a truncated upload). The run ended on the end of one of the copy's blocks,
    the copy sent it without the newline it gives a last line, its segment did not count it,
    and dist_ch failed (ArrayIndexOutOfBoundsException in DistCh.bucketSlice). Each file's run
    is one reject, named by its file and line, and every other line loads."""
    from debl.format.link import too_long
    from loaders.chunker import BLOCK
    from loaders.local_dist_ch import LOCAL_MAX

    config = replace(stack_config, mysql_database="debl_truncatedtest",
                     mysql_link_table="truncated_links", hbase_table="truncated_links",
                     hdfs_root="/debl-truncatedtest", loading_max_line_bytes=LIMIT)
    tail = b"y" * (9 * BLOCK)  # ends on a block's end; over LOCAL_MAX: bucketed by the JVM
    assert len(tail) > LOCAL_MAX
    (tmp_path / "src").mkdir()
    for name, first in (("a.tsv", 1), ("b.tsv", 101)):
        (tmp_path / "src" / name).write_bytes(b"".join(
            b"%d\t%d\t%d\t1\tx\t5\t6\n" % (first + i, LT, i) for i in range(10)) + tail)
    summary = run_approach(config, str(tmp_path / "src"),
                           LoadOptions(chunk_size=16 << 20, bucket_width=WIDTH,
                                       approach="debl-cold"))
    reason = str(too_long(len(tail), LIMIT))
    assert read_rejects(reject_path(config, summary.load_id)) == [
        ("a.tsv", 11, reason, tail[:REJECT_PREFIX]), ("b.tsv", 11, reason, tail[:REJECT_PREFIX])]
    assert (summary.cold_rows, summary.rejects) == (20, 2)
    report = verify_load(config)
    assert report.ok, report.failures
