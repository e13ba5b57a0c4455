"""debl.line_block against debl.model.parse_line: a block is accepted only if every one of its
lines parses, and then with the same keys; a block of ordinary lines is accepted. Pure unit
tests (docs/LOADING.md, "The hot path's cost")."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from debl.line_block import LONGEST_LINE, block_keys
from debl.model import Link, ParseError, parse_line
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


def parsed_keys(block: bytes) -> list[tuple[int, int]] | None:
    """Each line's (id1, link_type) by parse_line, or None if one line is bad."""
    keys = []
    for one in block.split(b"\n")[:-1]:
        try:
            link = parse_line(one)
        except ParseError:
            return None
        keys.append((link.id1, link.link_type))
    return keys


@settings(max_examples=400, deadline=None)
@given(st.lists(line, min_size=1, max_size=20))
def test_a_block_is_accepted_only_if_every_line_parses_and_with_the_parsers_keys(lines):
    block = b"".join(lines)
    keys = block_keys(block)
    if keys is not None:
        assert list(zip(keys[0].tolist(), keys[1].tolist())) == parsed_keys(block)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.builds(Link, st.integers(0, 10**18 - 1), st.integers(0, 10**18 - 1),
                          st.integers(0, 10**18 - 1), st.sampled_from([0, 1]),
                          st.binary(max_size=255).filter(
                              lambda d: not {9, 10, 13} & set(d)),
                          st.integers(0, 10**18 - 1), st.integers(0, 10**18 - 1)),
                min_size=1, max_size=50), st.booleans())
def test_a_block_of_well_formed_lines_is_accepted_with_every_key(links, crlf):
    block = b"".join(link.to_line()[:-1] + (b"\r\n" if crlf else b"\n") for link in links)
    keys = block_keys(block)
    assert keys is not None
    assert list(zip(keys[0].tolist(), keys[1].tolist())) == [(k.id1, k.link_type) for k in links]
    assert max(len(link.to_line()) - 1 for link in links) <= LONGEST_LINE


def test_one_hostile_line_refuses_its_whole_block():
    good = Link(5, 123456789, 6, 1, b"ok", 100, 1).to_line()
    for hostile in every_line():
        block = good + hostile + b"\n" + good
        if parsed_keys(block) is None:
            assert block_keys(block) is None, hostile[:60]
    assert block_keys(b"") is None
    assert block_keys(good[:-1]) is None  # a block ends with a whole line
