"""dist_ch's line validation on the JVM (debl.jobs.DistCh.lineId1) accepts exactly the lines that
debl.model.parse_line accepts, and finds the same id1: the Python parser is the reference, and
the reject file's reasons come from it.

Needs Spark's JVM with debl-jobs.jar (the ``spark`` fixture), not the stack.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from debl.model import ParseError, parse_line

U63 = (1 << 63) - 1

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
    """A valid line, then at most one defect: a bad field, a field dropped or added, a CR."""
    fields = [draw(valid_number), draw(valid_number), draw(valid_number),
              draw(st.sampled_from([b"0", b"1"])), draw(valid_data), draw(valid_number),
              draw(valid_number)]
    defect = draw(st.sampled_from(["none", "none", "field", "drop", "add", "cr"]))
    if defect == "field":
        i = draw(st.integers(0, 6))
        fields[i] = draw(bad_field.get(i, bad_number))
    elif defect == "drop":
        fields.pop(draw(st.integers(0, 6)))
    elif defect == "add":
        fields.append(draw(valid_number))
    line = b"\t".join(fields)
    return line + b"\r" if defect == "cr" else line


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
