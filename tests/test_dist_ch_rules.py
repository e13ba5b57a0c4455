"""dist_ch's line validation on the JVM (debl.jobs.DistCh.lineId1) accepts exactly the lines that
debl.format.link.parse_line accepts, and finds the same id1: the Python parser is the reference, and
the reject file's reasons come from it. dist_ch's task (DistCh.bucketSlice) puts every valid line in
the bucket ``debl.format.bucket_map.BucketMap`` gives its id1, rejects what parse_line rejects and
passes over what is longer than max_line_bytes: checked on generated lines and on the one set of
hostile lines the loads are tested with (tests/hostile_lines.py).

Needs Spark's JVM with debl-jobs.jar (the ``spark`` fixture; loaders/jvm, built by
scripts/build_jobs_jar.sh).
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

import pytest

from debl.format.bucket_file import parse_tail
from debl.format.bucket_map import BucketMap
from debl.config import Config
from debl.format.link import CHECKSUM_MOD, ParseError, line_checksum, parse_line
from loaders import dist_ch, jobs
from loaders.pipeline import _ChunkSize
from tests.hostile_lines import LIMIT, U63, every_line

valid_number = st.integers(0, U63).map(lambda n: b"%d" % n) | st.sampled_from([b"0" * 25 + b"7",
                                                                            b"%d" % U63])
bad_number = st.sampled_from([b"", b"-1", b"+1", b" 1", b"1_0", b"0x1", b"1.0", b"\xd9\xa1",
                              b"\xef\xbc\x91", b"%d" % (U63 + 1), b"9" * 20, b"1\r"])
valid_data = st.binary(max_size=40).filter(lambda d: not set(d) & {9, 10, 13}) | \
    st.sampled_from([b"a" * 255, b""])
bad_field = {3: st.sampled_from([b"2", b"", b"01", b"1 ", b"-0"]),
             4: st.sampled_from([b"a" * 256, b"x\ry", b"\r"])}


@st.composite
def lines(draw) -> bytes:
    """A valid line, then at most one defect: a bad field, a field dropped or added, a CR. The
    line comes without its newline: a CR at its end is the CR of a CRLF line end (valid), a
    second one is not."""
    fields = [draw(valid_number), draw(valid_number), draw(valid_number),
              draw(st.sampled_from([b"0", b"1"])), draw(valid_data), draw(valid_number),
              draw(valid_number)]
    defect = draw(st.sampled_from(["none", "none", "field", "drop", "add", "crlf", "cr2"]))
    if defect == "field":
        i = draw(st.integers(0, 6))
        fields[i] = draw(bad_field.get(i, bad_number))
    elif defect == "drop":
        fields.pop(draw(st.integers(0, 6)))
    elif defect == "add":
        fields.append(draw(valid_number))
    line = b"\t".join(fields)
    return line + {"crlf": b"\r", "cr2": b"\r\r"}.get(defect, b"")


def _python_id1(line: bytes) -> int:
    try:
        return parse_line(line).id1
    except ParseError:
        return -1


@settings(max_examples=400, deadline=None)
@given(lines())
def test_jvm_validation_equals_parse_line(spark, line):
    jvm_id1 = spark.sparkContext._jvm.debl.jobs.DistCh.lineId1(bytearray(line))
    assert jvm_id1 == _python_id1(line)


def test_a_known_line_and_its_defect(spark):
    good = b"\t".join([b"12", b"123456789", b"13", b"1", b"some data", b"1700000000000", b"0"])
    assert spark.sparkContext._jvm.debl.jobs.DistCh.lineId1(bytearray(good)) == 12
    assert spark.sparkContext._jvm.debl.jobs.DistCh.lineId1(bytearray(good + b"\tx")) == -1
    assert spark.sparkContext._jvm.debl.jobs.DistCh.lineId1(bytearray(good + b"\r")) == 12
    assert spark.sparkContext._jvm.debl.jobs.DistCh.lineId1(bytearray(good + b"\r\r")) == -1


def _data_part(content: bytes) -> bytes:
    """A bucket file's lines, without its index footer."""
    return content[:parse_tail("bucket file", len(content), content).data_length]


def _bucket_locally(spark, tmp_path, name: str, chunk: bytes, max_line: int,
                    bucket_map: BucketMap = BucketMap.fixed(1000)
                    ) -> tuple[jobs.DistChReport, dict[str, bytes]]:
    """dist_ch (through the JVM door, ``loaders.jobs``) over *chunk* as one file of one segment,
    on the local file system: the report and the bucket files' lines, by path
    ``<bucket>/chunk-00000.<slice>``."""
    (tmp_path / name).write_bytes(chunk)
    lines = chunk.count(b"\n") + (not chunk.endswith(b"\n"))
    out = tmp_path / f"{name}.buckets"
    report = jobs.dist_ch(spark, jobs.DistChRequest(
        f"file://{tmp_path / name}", ((0, 0),), ((0, 1, lines, 0, 0, 0),), bucket_map,
        f"file://{out}",
        0, max_line))
    files = {str(p.relative_to(out)): _data_part(p.read_bytes()) for p in out.rglob("chunk-*")
             if not p.name.endswith("_COPYING_") and not p.name.startswith(".")}
    return report, files


def test_jvm_line_reader_reads_crlf_as_lf_and_passes_over_long_lines(spark, tmp_path):
    good = [b"\t".join([b"%d" % (i * 397), b"123456789", b"%d" % i, b"1", b"d\x00\xff%d" % i,
                        b"17000", b"%d" % i]) for i in range(1, 400)]
    # Valid but for their length: leading zeros. One fits the reader's 4 MiB buffer, one does
    # not; the last line has no newline.
    fits, passes = b"0" * 5000 + good[0], b"0" * (5 << 20) + good[1]
    lf = b"\n".join(good[:100] + [fits] + good[100:200] + [passes] + good[200:] + [passes])
    crlf = lf.replace(b"\n", b"\r\n")
    # The LF twin with the over-long lines short enough: what every other line must give.
    twin_report, twin_files = _bucket_locally(spark, tmp_path, "twin", lf, 10 << 20)
    assert twin_report.too_long == [] and twin_report.per_file == [jobs.FileCount(0, 0, 402, 0)]
    for name, chunk in (("lf", lf), ("crlf", crlf)):
        report, files = _bucket_locally(spark, tmp_path, name, chunk, 4096)
        assert files.keys() == twin_files.keys()
        starts = {0} | {i + 1 for i, byte in enumerate(chunk) if byte == 10}
        for path, data in files.items():
            expected = [l.rsplit(b"\t", 1)[0] for l in twin_files[path].split(b"\n")[:-1]
                        if not l.startswith(b"00000")]
            rows = [row.rsplit(b"\t", 1) for row in data.split(b"\n")[:-1]]
            assert [body for body, _ in rows] == expected, path
            # The origin's position: the line's byte offset in its own file (CRs counted).
            for body, position in rows:
                at = int(position)
                assert at in starts and chunk[at:].startswith(body.rsplit(b"\t", 1)[0]), path
        assert report.too_long == [jobs.LongLine(0, 0, 101, len(fits), fits[:1024]),
                                   jobs.LongLine(0, 0, 202, len(passes), passes[:1024]),
                                   jobs.LongLine(0, 0, 402, len(passes), passes[:1024])]
        assert report.per_file == [jobs.FileCount(0, 0, 399, 3)]


# Valid lines around the bucket maps' boundaries, beside the hostile set.
_EDGES = [b"%d\t123456789\t1\t1\tedge\t5\t0" % id1
          for id1 in (0, 5, 6, 7, 8, 999, 1000, 1004, 1005, (1 << 40) - 1, 1 << 40, U63 - 1)]


def test_jvm_validation_equals_parse_line_on_the_hostile_lines(spark):
    jvm = spark.sparkContext._jvm.debl.jobs.DistCh
    disagree = [(line[:80], end, jvm.lineId1(bytearray(line + end)), _python_id1(line + end))
                for line in every_line() + _EDGES for end in (b"", b"\r")
                if jvm.lineId1(bytearray(line + end)) != _python_id1(line + end)]
    assert disagree == []


@pytest.mark.parametrize("bucket_map", [BucketMap.fixed(1000),
                                        BucketMap.from_splits([6, 8, 1005, 1 << 40, U63])],
                         ids=["width", "splits"])
def test_dist_ch_buckets_the_hostile_lines_where_the_bucket_map_says(spark, tmp_path,
                                                                     bucket_map):
    """Every line of the hostile set and the edges, LF and CRLF in turn, through the real task:
    each line ends where the Python side says: in bucket ``bucket_of(id1)`` (its bytes
    unchanged, the CR of a CRLF line end dropped), rejected, or passed over as too long."""
    lines = every_line() + _EDGES
    chunk = b"".join(line + (b"\r\n" if i % 2 else b"\n") for i, line in enumerate(lines))
    expected = {}
    # A bucket file names each line by its byte offset in its file (here the chunk itself).
    line_at, offset = {}, 0
    for i, line in enumerate(lines):
        line_at[offset] = i + 1
        offset += len(line) + (2 if i % 2 else 1)
    for line_no, line in enumerate(lines, 1):
        if len(line) > LIMIT:
            expected[line_no] = "too long"
            continue
        try:
            expected[line_no] = ("bucket", bucket_map.bucket_of(parse_line(line).id1), line)
        except ParseError:
            expected[line_no] = "rejected"
    report, files = _bucket_locally(spark, tmp_path, "hostile", chunk, LIMIT,
                                    bucket_map=bucket_map)
    got = {r.line_no: "rejected" for r in report.rejects}
    got.update({t.line_no: "too long" for t in report.too_long})
    for path, data in files.items():
        bucket = int(path.split("/")[0])
        for row in data.split(b"\n")[:-1]:
            body, file_seq, position = row.rsplit(b"\t", 2)
            assert file_seq == b"0"
            got[line_at[int(position)]] = ("bucket", bucket, body)
    assert got == expected
    assert {e for e in expected.values() if isinstance(e, str)} == {"rejected", "too long"}


@pytest.mark.parametrize("config, chunk_mib, slices", [
    # local[2], a 2 GiB driver: 2 tasks share it, a slice may take 128 MiB.
    (Config(spark_driver_memory="2g"), 256, 2),
    (Config(spark_driver_memory="2g"), 512, 4),
    (Config(spark_driver_memory="2g"), 1024, 8),  # a chunk grown 4x by an uncapped load
    (Config(spark_driver_memory="2g"), 1025, 9),
    (Config(spark_driver_memory="2g", loading_dist_ch_tasks=8), 256, 8),
    # On a cluster: one task per 1 GiB executor.
    (Config(spark_workers=2, spark_executor_memory="1g", spark_worker_memory="1g"), 1024, 8),
])
def test_a_chunk_is_cut_into_as_many_slices_as_the_task_heap_needs(config, chunk_mib, slices):
    """Each slice's output is held in its task's heap: a grown chunk gets more slices, never
    larger ones (a 1 GiB chunk in two slices, and then in four, ran a 2 GiB driver out of
    heap)."""
    assert dist_ch.slices_for(config, chunk_mib << 20) == slices


@pytest.mark.parametrize("first_mib, grown_mib", [
    (65, [130, 256, 256]),  # 4x 65 MiB (260) would be three 128 MiB-bound slices on two cores
    (100, [200, 400, 400]),  # 400 MiB: four slices, two whole waves
    (256, [512, 1024, 1024]),  # the default chunk size grows 4x as before
    (4, [8, 16, 16]),  # under one wave: two slices each
])
def test_a_grown_chunk_fills_whole_waves_of_dist_chs_tasks(first_mib, grown_mib):
    """A chunk doubles (up to 4x) while dist_ch lags the copy; its slices fill whole waves of
    ``loading.dist_ch_tasks`` tasks, so that no core waits while one slice runs alone."""
    config = Config(spark_driver_memory="2g")  # local[2]: two tasks, 128 MiB slices
    size = _ChunkSize(first_mib << 20, fit=lambda n: dist_ch.whole_waves(config, n))
    seen = []
    for _ in grown_mib:
        size.grow()
        seen.append(size.next >> 20)
    assert seen == grown_mib
    for mib in seen:
        assert dist_ch.slices_for(config, mib << 20) % config.loading.dist_ch_tasks == 0
    assert dist_ch.whole_waves(config, 260 << 20) == 256 << 20
    assert dist_ch.whole_waves(config, 3 << 20) == 3 << 20  # two slices: one wave


def test_a_report_names_each_line_by_its_slice_file_and_line(spark, tmp_path):
    """Two files in one chunk, cut into two slices across the second file: every refused line
    and every count comes back under its own slice, file and line number, the bucket files under
    the chunk's name (``chunk_name``) and the slice."""
    def line(i: int) -> bytes:
        return b"%d\t123456789\t%d\t1\td\t17000\t0" % (i * 100, i)

    first = [line(1), b"bad", line(2)]  # file 3, lines 1-3
    second = [line(3), b"x\ty", line(4), b"0" * 60, line(5)]  # file 5, lines 1-5
    chunk = b"".join(l + b"\n" for l in first + second)
    cut = len(b"".join(l + b"\n" for l in first + second[:2]))  # slice 1: file 5 from line 3
    (tmp_path / "chunk").write_bytes(chunk)
    out = tmp_path / "buckets"
    report = jobs.dist_ch(spark, jobs.DistChRequest(
        f"file://{tmp_path}/chunk", ((0, 0), (cut, 5)),
        ((3, 1, 3, 0, 0, 0), (5, 1, 5, 3, 0, len(b"".join(l + b"\n" for l in first)))),
        BucketMap.fixed(250), f"file://{out}", 12, 50))
    assert report.rejects == [jobs.RefusedLine(0, 3, 2, b"bad"),
                              jobs.RefusedLine(0, 5, 2, b"x\ty")]
    assert report.too_long == [jobs.LongLine(1, 5, 4, 60, b"0" * 60)]
    assert report.per_file == [jobs.FileCount(0, 3, 2, 1), jobs.FileCount(0, 5, 1, 1),
                               jobs.FileCount(1, 3, 0, 0), jobs.FileCount(1, 5, 2, 1)]
    assert [(p.slice, p.bucket, p.rows, p.lo, p.hi) for p in report.parts] == [
        (0, 0, 2, 100, 200), (0, 1, 1, 300, 300), (1, 1, 1, 400, 400), (1, 2, 1, 500, 500)]
    assert sorted(str(p.relative_to(out)) for p in out.rglob("chunk-*")
                  if not p.name.startswith(".")) == [
        "0/chunk-00012.0", "1/chunk-00012.0", "1/chunk-00012.1", "2/chunk-00012.1"]
    # Each row's origin: its file and the byte offset of its line in that file.
    offsets = {}
    for seq, lines in ((3, first), (5, second)):
        at = 0
        for l in lines:
            offsets[l] = (seq, at)
            at += len(l) + 1
    for path in out.rglob("chunk-*"):
        if not path.name.startswith("."):
            for row in _data_part(path.read_bytes()).split(b"\n")[:-1]:
                body, seq, position = row.rsplit(b"\t", 2)
                assert offsets[body] == (int(seq), int(position))
    assert [p.checksum for p in report.parts] == [
        sum(line_checksum(line(i)) for i in range(1, 6) if p.lo <= i * 100 <= p.hi)
        % CHECKSUM_MOD for p in report.parts]
