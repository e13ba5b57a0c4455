"""debl.format.line_block against debl.format.link.parse_line: a block is accepted only if every one
of its lines parses, and then parsed column-wise into the parser's numbers; a block of ordinary
lines is accepted. Pure unit tests (docs/LOADING.md, "The hot path's cost")."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from debl.format.line_block import HEAD_ROOM, LONGEST_LINE, block_columns, well_formed
from debl.format.link import Link, ParseError, parse_line
from tests.hostile_lines import every_line

U63 = (1 << 63) - 1

# Fields as the input could hold them: mostly plain numbers, sometimes one of the forms the
# parser treats with care (19 digits, signs, spaces, leading zeros, CRs, tabs, empty).
number = st.one_of(st.integers(0, 10**18 - 1).map(lambda n: b"%d" % n),
                   st.integers(10**18, U63 + 5).map(lambda n: b"%d" % n),
                   st.sampled_from([b"", b"-1", b"+5", b" 5", b"007", b"1\r", b"0" * 20 + b"9"]))
data = st.one_of(st.binary(max_size=300).filter(lambda d: b"\n" not in d),
                 st.sampled_from([b"", b"x" * 255, b"x" * 256, b"a\rb", b"a\tb"]))
line = st.builds(lambda a, b, c, v, d, t, r, end: b"\t".join([a, b, c, v, d, t, r]) + end,
                 number, number, number, st.sampled_from([b"0", b"1", b"2", b""]), data,
                 number, number, st.sampled_from([b"\n", b"\r\n"]))


def parsed_numbers(block: bytes) -> list[tuple[int, ...]] | None:
    """Each line's (id1, link_type, id2, time, version) by parse_line, or None if one line is
    bad."""
    numbers: list[tuple[int, ...]] = []
    for one in block.split(b"\n")[:-1]:
        try:
            link = parse_line(one)
        except ParseError:
            return None
        numbers.append((link.id1, link.link_type, link.id2, link.time, link.version))
    return numbers


def columns_of(block: bytes) -> list[tuple[int, ...]] | None:
    """Each line's numbers by block_columns, as the hot path takes them (CRs before LFs
    dropped, the block after HEAD_ROOM bytes of anything); None if well_formed refuses it.
    Also checks the line ends it gives."""
    if not well_formed(block):
        return None
    body = block.replace(b"\r\n", b"\n")
    buf = np.frombuffer(b"9\t" * HEAD_ROOM + body, dtype=np.uint8)
    columns = block_columns(buf, 2 * HEAD_ROOM, len(buf))
    assert (columns.ends - 2 * HEAD_ROOM).tolist() == [
        i for i, byte in enumerate(body) if byte == ord("\n")]
    return list(zip(*(c.tolist() for c in columns[:5])))


@settings(max_examples=400, deadline=None)
@given(st.lists(line, min_size=1, max_size=20))
def test_a_block_is_accepted_only_if_every_line_parses_and_with_the_parsers_numbers(lines):
    block = b"".join(lines)
    numbers = columns_of(block)
    if numbers is not None:
        assert numbers == parsed_numbers(block)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.builds(Link, st.integers(0, 10**18 - 1), st.integers(0, 10**18 - 1),
                          st.integers(0, 10**18 - 1), st.sampled_from([0, 1]),
                          st.binary(max_size=255).filter(
                              lambda d: not {9, 10, 13} & set(d)),
                          st.integers(0, 10**18 - 1), st.integers(0, 10**18 - 1)),
                min_size=1, max_size=50), st.booleans())
def test_a_block_of_well_formed_lines_is_accepted_with_every_key(links, crlf):
    block = b"".join(link.to_line()[:-1] + (b"\r\n" if crlf else b"\n") for link in links)
    assert columns_of(block) == [(k.id1, k.link_type, k.id2, k.time, k.version) for k in links]
    assert max(len(link.to_line()) - 1 for link in links) <= LONGEST_LINE


def test_one_hostile_line_refuses_its_whole_block():
    good = Link(5, 123456789, 6, 1, b"ok", 100, 1).to_line()
    for hostile in every_line():
        block = good + hostile + b"\n" + good
        if parsed_numbers(block) is None:
            assert not well_formed(block), hostile[:60]
    assert not well_formed(b"")
    assert not well_formed(good[:-1])  # a block ends with a whole line


def test_numbers_of_every_length_with_and_without_leading_zeros():
    lines = []
    for digits in range(1, 19):
        for number in (b"9" * digits, b"0" * (digits - 1) + b"7", b"1" + b"0" * (digits - 1)):
            lines.append(b"\t".join([number, number, number, b"0", b"d\\\"", number, number]))
    block = b"\n".join(lines) + b"\n"
    assert columns_of(block) == parsed_numbers(block)
    assert columns_of(block)[-3] == (10**18 - 1,) * 5
