"""The reject files (loaders/rejects.py): one file per part, committed before the part counts as
done, a running count, and file names escaped so that no name can corrupt a record. Pure unit
tests, on the local file system."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

from hypothesis import given, settings
from hypothesis import strategies as st

from loaders.rejects import RejectWriter, escape_name, read_rejects, unescape_name

# Names as a POSIX directory listing gives them: any bytes but NUL and "/", decoded with
# surrogateescape where they are not UTF-8.
names = st.binary(min_size=1, max_size=30).filter(lambda b: b"\0" not in b and b"/" not in b) \
    .map(os.fsdecode) | st.sampled_from(["a\tb\nc\rd", "back\\slash\\x41", "\udcff\udcfe", "é"])


@settings(max_examples=300, deadline=None)
@given(names)
def test_escaped_names_round_trip_and_hold_no_separator(name):
    text = escape_name(name)
    assert unescape_name(text) == name
    assert not {"\t", "\n", "\r"} & set(text)
    text.encode("utf-8")  # storable in the catalog's utf8mb4 and in the reject file


def test_a_plain_name_is_unchanged():
    assert escape_name("links-2024-01-01.tsv") == "links-2024-01-01.tsv"


def test_records_of_hostile_names_read_back_exactly(tmp_path):
    rejects = RejectWriter(tmp_path / "rejects")
    records = [("a\tb\nc.tsv", 3, "data holds a carriage return", b"1\t2\tx\ry"),
               (os.fsdecode(b"\xff\xfe.tsv"), 7, "id1 is negative: b'-1'", b"-1\t\x00\xff"),
               ("plain.tsv", 9, "expected 7 tab-separated fields, found 1", b"")]
    rejects.write_part("chunk-00000", records)
    assert read_rejects(tmp_path / "rejects") == records
    assert rejects.count == 3


def test_a_redone_part_replaces_its_records_and_counts_once(tmp_path):
    rejects = RejectWriter(tmp_path / "r")
    rejects.write_part("hot", [("f", 1, "why", b"x"), ("f", 2, "why", b"y")])
    rejects.write_part("chunk-00000", [("g", 1, "why", b"z")])
    with rejects.open_part("hot") as part:
        part.write("f", 2, "why", b"y")
        assert rejects.count == 2  # the redo's record, not the old two
        part.commit()
    assert sorted(r[:2] for r in read_rejects(tmp_path / "r")) == [("f", 2), ("g", 1)]
    # A part left without commit leaves its old file and no temporary one.
    with rejects.open_part("chunk-00000") as part:
        part.write("g", 5, "why", b"w")
    assert sorted(r[:2] for r in read_rejects(tmp_path / "r")) == [("f", 2), ("g", 1)]
    assert sorted(p.name for p in (tmp_path / "r").iterdir()) == ["chunk-00000.tsv", "hot.tsv"]


def test_a_resumed_load_keeps_the_parts_it_counts_as_done(tmp_path):
    first = RejectWriter(tmp_path / "r")
    for n in range(4):
        first.write_part(f"chunk-{n:05d}", [("f", n + 1, "why", b"x")])
    first.write_part("hot", [("h", 1, "why", b"x")])
    resumed = RejectWriter(tmp_path / "r")  # counts what is on disk, once
    assert resumed.count == 5
    resumed.keep(["chunk-00000", "chunk-00001"])  # the hot path and chunks 2, 3 are redone
    assert resumed.count == 2
    assert [r[1] for r in read_rejects(tmp_path / "r")] == [1, 2]


def test_a_kill_keeps_committed_parts_and_drops_uncommitted_ones(tmp_path):
    """Kill -9 after one part is committed and while another is being written: the committed
    records are there, the other part leaves nothing that a later run reads or counts."""
    script = textwrap.dedent(f"""
        import os, sys
        from pathlib import Path
        from loaders.rejects import RejectWriter
        rejects = RejectWriter(Path({str(tmp_path / "r")!r}))
        rejects.write_part("chunk-00000", [("f", n, "why", b"x") for n in range(1, 1001)])
        part = rejects.open_part("chunk-00001")
        for n in range(1, 1001):
            part.write("f", 1000 + n, "why", b"y")
        part._file.flush()  # on disk, but never committed
        print("ready", flush=True)
        sys.stdin.read()
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, cwd=os.getcwd())
    assert proc.stdout.readline() == b"ready\n"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert any(p.name.endswith(".tmp") for p in (tmp_path / "r").iterdir())
    after = RejectWriter(tmp_path / "r")
    assert after.count == 1000
    assert [r[1] for r in read_rejects(tmp_path / "r")] == list(range(1, 1001))
    assert [p.name for p in (tmp_path / "r").iterdir()] == ["chunk-00000.tsv"]


def test_records_of_files_named_like_comments_are_read_back(tmp_path):
    """Only the header line is a comment: a record whose file name starts with ``#`` (or is
    the header's own text) is a record; it was once skipped, and verify raised a false alarm."""
    records = [("#notes.tsv", 1, "expected 7 tab-separated fields, found 1", b"x"),
               ("# file", 2, "id1 is negative: b'-1'", b"-1\t1\t1\t1\tx\t1\t1"),
               ("plain.tsv", 3, "expected 7 tab-separated fields, found 2", b"#\tcomment?")]
    RejectWriter(tmp_path / "r").write_part("hot", records)
    assert read_rejects(tmp_path / "r") == records
    assert RejectWriter(tmp_path / "r").count == 3  # the count a resumed load starts from
