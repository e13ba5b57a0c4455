"""``build_manifest`` against a brute-force reference that parses every line with
``debl.format.link.parse_line``: on random files cut into random blocks, on the hostile lines every
reader of the input is held to (tests/hostile_lines.py), CRLF, a last line without newline,
empty files, huge ids and leading zeros; and ``ManifestBuilder`` fed directly."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from debl.keys.manifest import ID1_MAX, Manifest, claim_violations, pieces
from debl.keys.manifest_build import ManifestBuilder, build_manifest, manifest_of_file
from debl.format.link import ParseError, parse_line
from tests.hostile_lines import LONG, MAX_ID_LINE, every_line


def lines_of(data: bytes) -> list[bytes]:
    parts = data.split(b"\n")
    last = parts.pop()
    return [p + b"\n" for p in parts] + ([last] if last else [])


def valid_lines(data: bytes) -> list[tuple[int, int]]:
    """(offset, id1) of every line parse_line takes."""
    found, at = [], 0
    for line in lines_of(data):
        try:
            found.append((at, parse_line(line).id1))
        except ParseError:
            pass
        at += len(line)
    return found


def reference(data: bytes, step: int) -> Manifest:
    """The manifest by its definition (docs/LOADING.md, "The manifest"), line by line."""
    valid = valid_lines(data)
    lines = len(lines_of(data))
    if not valid:
        return Manifest(None, None, True, (), (), lines, step)
    ids = [i for _, i in valid]
    if any(b < a for a, b in zip(ids, ids[1:])):
        return Manifest(min(ids), max(ids), False, (), (), lines, step)
    points: list[tuple[int, int]] = []
    for mark in range(0, len(data), step):
        after = [(o, i) for o, i in valid if o >= mark]
        if after and (not points or points[-1] != after[0]):
            points.append(after[0])
    return Manifest(min(ids), max(ids), True, tuple(o for o, _ in points),
                    tuple(i for _, i in points), lines, step)


def cut(data: bytes, sizes: list[int]) -> list[bytes]:
    blocks, at = [], 0
    for n in sizes:
        blocks.append(data[at:at + n])
        at += n
    return blocks + [data[at:]]


def good(id1: int, id2: int = 1) -> bytes:
    return b"%d\t123456789\t%d\t1\tdata\t1700000000000\t0\n" % (id1, id2)


ODD = [line for line in every_line() if line is not LONG]  # LONG has its own test

line_kinds = st.one_of(
    st.integers(0, 60).map(lambda i: ("good", i)),
    st.sampled_from(ODD).map(lambda line: ("odd", line)),
    st.integers(0, 60).map(lambda i: ("zeros", i)),
)


@st.composite
def files(draw):
    """A file of good lines (sorted or not), hostile ones in between, LF or CRLF, with or
    without its last newline; and a cut of it into blocks."""
    kinds = draw(st.lists(line_kinds, max_size=40))
    if draw(st.booleans()):
        order = sorted(i for k, i in kinds if k != "odd")
        it = iter(order)
        kinds = [(k, next(it)) if k != "odd" else (k, v) for k, v in kinds]
    crlf = draw(st.booleans())
    body = []
    for kind, value in kinds:
        line = (good(value) if kind == "good" else
                b"0" * 30 + good(value) if kind == "zeros" else value + b"\n")
        body.append(line[:-1] + b"\r\n" if crlf and line.endswith(b"\n") else line)
    data = b"".join(body)
    if data and draw(st.booleans()):
        data = data[:-1]  # no final newline (a final CR then ends the last line's body)
    sizes = draw(st.lists(st.integers(0, 300), max_size=12))
    return data, sizes


@settings(max_examples=400, deadline=None)
@given(files(), st.sampled_from([1, 7, 64, 200, 4096]))
def test_build_manifest_is_the_reference_on_any_cut_of_any_file(case, step):
    data, sizes = case
    got = build_manifest(cut(data, sizes), step=step)
    assert got == reference(data, step)
    # And the manifest holds: every claim is kept by the file's own lines.
    assert claim_violations(0, len(data), got, 0, len(data), valid_lines(data)) is None


def test_a_sorted_file_of_many_blocks_gets_a_point_every_step():
    data = b"".join(good(i // 3, i) for i in range(30000))
    for sizes in ([1 << 20] * 2, [4097] * 300, [1] * 50 + [65536] * 40):
        got = build_manifest(cut(data, sizes), step=4096)
        assert got == reference(data, 4096)
    assert len(got.offsets) == -(-len(data) // 4096)
    assert got.sorted and (got.id1_lo, got.id1_hi) == (0, 9999)


def test_bad_lines_are_never_points_and_do_not_count():
    bad = b"".join(line + b"\n" for line in ODD if not valid_lines(line + b"\n"))
    data = bad + good(5) + bad + good(7) + bad + good(3) + bad
    got = build_manifest([data], step=10)
    assert (got.id1_lo, got.id1_hi, got.sorted, got.offsets) == (3, 7, False, ())
    data = bad + good(5) + bad + good(7) + bad
    got = build_manifest([data], step=10)
    assert got.sorted and got.id1s == (5, 7)
    assert got.offsets == (len(bad), 2 * len(bad) + len(good(5)))
    assert got == reference(data, 10)


def test_empty_and_lineless_files():
    assert build_manifest([]) == Manifest(None, None, True, (), (), 0)
    assert build_manifest([b""]) == Manifest(None, None, True, (), (), 0)
    assert build_manifest([b"\n\r\n", b"x"]) == Manifest(None, None, True, (), (), 3)
    assert pieces(0, 4, build_manifest([b"\n\r\nx"])) == [pieces(0, 4, None)[0].__class__(
        0, 0, 4, 0, -1)]


def test_huge_ids_leading_zeros_and_a_last_line_without_newline():
    data = (good(0) + b"0" * 5000 + good(7)[:-1] + b"\r\n" + MAX_ID_LINE + b"\r")
    got = build_manifest(cut(data, [10, 5000, 3]), step=50)
    assert got == reference(data, 50)
    assert (got.id1_lo, got.id1_hi, got.sorted, got.lines) == (0, ID1_MAX, True, 3)
    assert got.id1s == (0, ID1_MAX)  # the line of id1 7 starts before byte 50, the 2nd mark


def test_a_line_over_max_line_makes_the_file_claim_every_id1():
    data = good(1) + LONG + b"\n" + good(2)
    got = build_manifest(cut(data, [1 << 20] * 4), max_line=1 << 20)
    assert got == Manifest(0, ID1_MAX, False, (), (), 3)
    # Under the limit the same line is read as parse_line reads it: valid, id1 7.
    assert build_manifest(cut(data, [1 << 20] * 4), step=1 << 20) == reference(data, 1 << 20)


def test_manifest_of_file_reads_the_file(tmp_path):
    data = b"".join(good(i) for i in range(5000))
    (tmp_path / "f.tsv").write_bytes(data)
    assert manifest_of_file(tmp_path / "f.tsv", step=1000) == reference(data, 1000)


def test_the_builder_fed_directly_is_build_manifest_of_the_bytes():
    lines = [good(i // 2, i) for i in range(1000)]
    data = b"".join(lines)
    starts = np.cumsum([0] + [len(line) for line in lines[:-1]])
    builder = ManifestBuilder(step=300)
    for k in range(0, 1000, 97):  # in slices, as a writer writes
        builder.add(starts[k:k + 97], np.arange(k, min(k + 97, 1000)) // 2)
    assert builder.finish(len(data), 1000) == build_manifest([data], step=300)
    with pytest.raises(ValueError):
        ManifestBuilder(step=0)
