"""The hot path's merge on the client (loaders.hot_merge) against the in-memory reference store:
each key's winner by the merge rule (time, then version, then the later file, then the later
line), hidden rows kept, in primary-key order, each line's bytes as written. Lines come in blocks
as the hot path reads them: a block of well-formed lines parsed column-wise, any other block
line by line (19-digit numbers, many leading zeros, bad lines); in either table layout's
order. Pure unit tests
(docs/LOADING.md, "The hot path's cost")."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from debl.format.line_block import well_formed
from debl.format.link import Link, Origin, ParseError, line_body, parse_line
from debl.store.memory import MemoryStore
from loaders.hot_merge import HotRows
from tests.dataset import all_rows

U63 = (1 << 63) - 1

# Few values, so that keys repeat and (time, version) tie across lines and files.
ids = st.sampled_from([0, 1, 7, 10**17, U63])
link_types = st.sampled_from([0, 123456789, U63])
moments = st.sampled_from([0, 1, 2, U63])
datas = st.sampled_from([b"", b"x", b"\\", b'"q"', b"a b", b"\x00\xff\xfe", b"N" * 255])


@st.composite
def lines(draw) -> bytes:
    """One input line (its line end included): a link written with leading zeros here and
    there, LF or CRLF; now and then a bad line."""
    if draw(st.integers(0, 19)) == 0:
        return draw(st.sampled_from([b"1\t2\t3\n", b"-1\t0\t0\t1\tx\t1\t1\n",
                                     b"1\t0\t0\t1\ta\rb\t1\t1\n", b"\n"]))
    link = Link(draw(ids), draw(link_types), draw(ids), draw(st.sampled_from([0, 1])),
                draw(datas), draw(moments), draw(moments))
    fields = [link.data if i == 4 else str(value).encode() for i, value in enumerate(link)]
    for i in (0, 1, 2, 5, 6):
        fields[i] = b"0" * draw(st.sampled_from([0, 0, 0, 1, 2, 20])) + fields[i]
    return b"\t".join(fields) + draw(st.sampled_from([b"\n", b"\r\n"]))


def hold(files: list[list[bytes]], block_lines: int, capacity: int = 1 << 20) -> HotRows:
    """The files' good lines in a HotRows, in blocks of *block_lines* lines, as the hot path
    takes them."""
    rows = HotRows(capacity)
    for file in files:
        for at in range(0, len(file), block_lines):
            block = b"".join(file[at:at + block_lines])
            if well_formed(block):
                rows.add_checked(block)
                continue
            bodies, links = [], []
            for line in block.split(b"\n")[:-1]:
                try:
                    links.append(parse_line(line))
                except ParseError:
                    continue
                bodies.append(line_body(line))
            rows.add_parsed(bodies, links)
    return rows


PRIMARY_KEY_ORDER = {  # merge(listing=...): the order of the table each layout loads
    False: lambda link: (link.link_type, link.id1, link.id2),  # LinkBench's
    True: lambda link: (link.id1, link.link_type, link.time, link.id2),  # the listing layout
}


def reference(files: list[list[bytes]], listing: bool = False) -> list[Link]:
    """The merge rule's winners by MemoryStore, in the layout's primary-key order."""
    store = MemoryStore()
    rows = []
    for seq, file in enumerate(files):
        for line_no, line in enumerate(file, 1):
            try:
                rows.append((parse_line(line), Origin(1, seq, line_no)))
            except ParseError:
                continue
    store.write_links(rows)
    return sorted(all_rows(store), key=PRIMARY_KEY_ORDER[listing])


def winners_of(rows: HotRows, lines_per_block: int = 2,
               listing: bool = False) -> tuple[list[Link], list[bytes], tuple]:
    """The winners as LOAD DATA gets them: (their links, their lines, (k_lo, k_hi))."""
    winners = rows.merge(listing)
    loaded = b"".join(bytes(block) for block in winners.blocks(lines=lines_per_block))
    text = loaded.split(b"\n")[:-1]
    assert loaded == b"".join(line + b"\n" for line in text)  # each line ends in one LF
    return [parse_line(line) for line in text], text, (winners.k_lo, winners.k_hi)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(lines(), max_size=25), min_size=1, max_size=3), st.integers(1, 6),
       st.integers(1, 50), st.booleans())
def test_the_winners_are_the_reference_stores_rows_in_primary_key_order(files, block_lines,
                                                                         lines_per_block,
                                                                         listing):
    """In either layout's order; times of 0-2 make the listing order's one-sort key, a time
    of 2^63-1 its two-pass fallback."""
    expected = reference(files, listing)
    got, text, (k_lo, k_hi) = winners_of(hold(files, block_lines), lines_per_block, listing)
    assert got == expected
    assert (k_lo, k_hi) == ((min(l.id1 for l in expected), max(l.id1 for l in expected))
                            if expected else (None, None))
    assert not any(b"\r" in line for line in text)  # a CRLF line loads as its LF twin


@settings(max_examples=100, deadline=None)
@given(st.lists(lines(), min_size=1, max_size=30), st.integers(1, 6))
def test_a_full_tie_goes_to_the_later_line_byte_for_byte(file, block_lines):
    """Rows equal in key, time and version: the later line is loaded as it was written (its
    data, its visibility), in the same file and across files."""
    tagged = [b"5\t0\t6\t%d\t%d\t9\t9\n" % (i % 2, i) for i in range(len(file))]
    got, text, _ = winners_of(hold([file + tagged[:1], tagged[1:]], block_lines))
    ours = [line for line, link in zip(text, got) if link.key == (5, 0, 6)]
    assert ours == [tagged[-1][:-1]]


def test_the_bytes_of_a_winning_line_round_trip():
    line = b"0007\t0123456789\t%d\t0\t\x00\\\"\xff tab-free\t%d\t00\r\n" % (U63, U63)
    got, text, _ = winners_of(hold([[line]], 1))
    assert text == [line[:-2]] and got == [parse_line(line)]


def test_a_run_refuses_lines_past_its_capacity():
    rows = HotRows(64)
    rows.add_checked(b"1\t2\t3\t1\tx\t4\t5\n" * 4)
    with pytest.raises(ValueError, match="do not fit"):
        rows.add_checked(b"1\t2\t3\t1\tx\t4\t5\n" * 2)
    rows.reset()
    rows.add_checked(b"1\t2\t3\t1\tx\t4\t5\n" * 4)
    assert rows.lines == 4 and len(rows.merge()) == 1


@pytest.mark.parametrize("listing", [False, True])
def test_an_empty_run_has_no_winners(listing):
    winners = HotRows(1024).merge(listing)
    assert len(winners) == 0 and list(winners.blocks()) == []
    assert list(HotRows(1024).merge().blocks(0, 0)) == []
    assert (winners.k_lo, winners.k_hi) == (None, None)
