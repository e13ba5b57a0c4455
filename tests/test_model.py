"""debl.format.link's parser on the input format's edge cases (docs/DESIGN.md section 3): line ends,
carriage returns, numbers at and past the 64-bit edge, leading zeros. Pure unit tests."""

from __future__ import annotations

import pytest

from debl.format.link import Link, ParseError, line_body, parse_line

U63 = (1 << 63) - 1
GOOD = Link(12, 123456789, 13, 1, b"some \x00 data \xff\xfe", 1700000000000, 7)


def test_a_crlf_line_parses_as_its_lf_twin():
    lf = GOOD.to_line()
    crlf = lf[:-1] + b"\r\n"
    assert parse_line(crlf) == parse_line(lf) == GOOD
    # A last line without its newline: its CR is still the line end, as the cold copy adds
    # the newline that makes it CRLF.
    assert parse_line(crlf[:-1]) == GOOD
    assert line_body(crlf) == line_body(lf) == line_body(crlf[:-1]) == lf[:-1]


@pytest.mark.parametrize("line, reason", [
    (b"1\t2\t3\t1\tx\ry\t5\t6\n", "data holds a carriage return"),
    (b"1\t2\t3\t1\tx\r\t5\t6\r\n", "data holds a carriage return"),
    (b"1\t2\t3\t1\tx\t5\t6\r\r\n", "version is not an integer: b'6\\r'"),
    (b"\r\n", "expected 7 tab-separated fields, found 1"),
])
def test_a_carriage_return_that_is_not_the_line_end_is_bad(line, reason):
    with pytest.raises(ParseError) as err:
        parse_line(line)
    assert str(err.value) == reason


@pytest.mark.parametrize("field, reason", [
    (b"%d" % (U63 + 1), "id1 is out of the 64-bit range: b'9223372036854775808'"),
    (b"-1", "id1 is negative: b'-1'"),
    (b"+5", "id1 is not an integer: b'+5'"),
    (b" 5", "id1 is not an integer: b' 5'"),
    (b"", "id1 is not an integer: b''"),
    (b"1" + b"0" * 5000,
     "id1 is out of the 64-bit range: b'1000000000000000000000000000000000000000'"),
])
def test_bad_id1_reasons(field, reason):
    with pytest.raises(ParseError) as err:
        parse_line(field + b"\t1\t2\t1\tx\t3\t4\n")
    assert str(err.value) == reason


def test_the_largest_id_and_long_leading_zeros_are_valid():
    # Python's int() refuses more than 4300 digits: the parser must not hand it the zeros.
    line = b"0" * 5000 + b"%d\t1\t2\t1\tx\t3\t4\n" % U63
    assert parse_line(line).id1 == U63
    assert parse_line(b"0" * 5000 + b"7\t1\t2\t1\tx\t3\t4").id1 == 7
