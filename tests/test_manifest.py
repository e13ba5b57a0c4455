"""The manifest's format (docs/LOADING.md, "The manifest"): its JSON round trip, the message of
every malformed field (naming the file and the field), a file's pieces, and the reference
check of a file's lines against its manifest's claims."""

from __future__ import annotations

import json

import pytest
from sqlalchemy.dialects import mysql

from debl.catalog.schema import manifests_table
from debl.errors import DeblError, ManifestError
from debl.keys.manifest import (ID1_MAX, MANIFEST_VERSION, MAX_POINTS, STEP, ClaimViolation,
                                Manifest, Piece, claim_violations, json_int, manifest_of_entry,
                                piece_at, pieces)

SORTED = Manifest(10, 90, True, (0, 100, 250), (10, 40, 40), lines=30, step=100)


def obj(**changes) -> dict:
    doc = SORTED.to_json()
    doc.update(changes)
    return doc


def test_the_json_form_is_versioned_delta_encoded_and_round_trips():
    doc = SORTED.to_json()
    assert doc == {"version": MANIFEST_VERSION, "id1_lo": 10, "id1_hi": 90, "sorted": True,
                   "step": 100, "offsets": [0, 100, 150], "id1s": [10, 30, 0], "lines": 30}
    assert Manifest.from_json(json.loads(json.dumps(doc)), "f.tsv", 300) == SORTED
    for m in (Manifest(None, None, True, lines=3), Manifest(5, 5, False, step=STEP),
              Manifest(0, ID1_MAX, True, (0, 1), (0, ID1_MAX), step=1)):
        assert Manifest.from_json(json.loads(json.dumps(m.to_json())), "f", 10) == m


def test_unknown_fields_are_ignored_and_lines_is_optional():
    doc = obj(comment="made by hand")
    del doc["lines"]
    assert Manifest.from_json(doc, "f.tsv", 300) == Manifest(10, 90, True, (0, 100, 250),
                                                             (10, 40, 40), None, 100)


BAD = [
    # (the object or its changes, the field named, words of the message)
    ([1, 2], None, "is a list, not a JSON object"),
    (obj(version=2), "version", "2 is not a version this DeBL reads (it reads 1)"),
    (obj(version="1"), "version", "a string, not an integer"),
    (obj(version=1.0), "version", "the number 1.0, not an integer"),
    (obj(version=True), "version", "a boolean, not an integer"),
    (obj(id1_lo=-1), "id1_lo", "-1 is out of its range, 0 to 9223372036854775807"),
    (obj(id1_hi=ID1_MAX + 1), "id1_hi", "is out of its range"),
    (obj(id1_hi=10 ** 40), "id1_hi", "a number of 41 digits is out of its range"),
    (obj(id1_lo=float("nan")), "id1_lo", "the number nan, not an integer"),
    (obj(id1_lo=None), "id1_lo", "null while the other bound is not"),
    (obj(id1_lo=91), "id1_lo", "91 is over id1_hi 90"),
    (obj(sorted=1), "sorted", "the integer 1, not true or false"),
    (obj(sorted="true"), "sorted", "a string, not true or false"),
    (obj(step=0), "step", "0 is out of its range, 1"),
    (obj(lines=301), "lines", "301 is out of its range, 0 to 300"),
    (obj(offsets={"0": 0}), "offsets", "an object, not a list"),
    (obj(offsets=[0, 100.0, 150]), "offsets", "value 1 is the number 100.0, not an integer"),
    (obj(offsets=[0, 100, True]), "offsets", "value 2 is a boolean, not an integer"),
    (obj(id1s=[10, 30]), "id1s", "2 values for 3 offsets"),
    (obj(offsets=[-1, 100, 150]), "offsets", "point 0 is at -1, before the file"),
    (obj(offsets=[0, 100, 0]), "offsets", "not strictly increasing at point 2"),
    (obj(offsets=[0, 100, -50]), "offsets", "not strictly increasing at point 2"),
    (obj(offsets=[0, 100, 200]), "offsets", "point 2 is at 300, not before the file's end"),
    (obj(id1s=[10, 30, 60]), "id1s", "point 2 is 100, outside id1_lo..id1_hi (10..90)"),
    (obj(id1s=[10, 30, -1]), "id1s", "not nondecreasing at point 2 though 'sorted' is true"),
    (obj(id1s=[11, 29, 0]), "id1s", "point 0 is 11, not id1_lo (10)"),
    (obj(id1_lo=None, id1_hi=None), "id1s", "points in a file whose id1_lo and id1_hi are null"),
    # Points denser than the step says (1 byte apart, whatever the step) passed.
    (obj(step=200), "offsets", "3 points in 300 bytes at step 200: a map has at most a point a "
                               "step (2)"),
    (obj(offsets=[0, 1, 1], step=STEP), "offsets", "3 points in 300 bytes at step 65536"),
]


@pytest.mark.parametrize("doc, field, words", BAD)
def test_a_malformed_manifest_names_the_file_and_the_field(doc, field, words):
    with pytest.raises(ManifestError) as caught:
        Manifest.from_json(doc, "links-003.tsv", 300)
    message = str(caught.value)
    assert message.startswith("links-003.tsv: ")
    if field is not None:
        assert f"manifest field {field!r}: " in message
    assert words in message
    assert "claims every id1" in message
    assert isinstance(caught.value, DeblError)


@pytest.mark.parametrize("field", ["version", "id1_lo", "id1_hi", "sorted", "step", "offsets",
                                   "id1s"])
def test_a_missing_field_is_named(field):
    doc = obj()
    del doc[field]
    with pytest.raises(ManifestError, match=f"f.tsv: manifest field '{field}': missing"):
        Manifest.from_json(doc, "f.tsv", 300)


def test_an_unsorted_file_may_carry_points_in_any_order_and_an_empty_file_none():
    m = Manifest.from_json(obj(sorted=False, id1s=[40, -30, 50]), "f", 300)
    assert m.id1s == (40, 10, 60) and not m.sorted
    with pytest.raises(ManifestError, match="'offsets': point 2 is at 250, not before the file's "
                                            "end \\(0 bytes\\)"):
        Manifest.from_json(obj(lines=None), "f", 0)


def test_a_manifest_of_more_points_than_its_bound_is_refused_before_they_are_read():
    """Defect: a manifest's points had no bound (a million for a 1 MB file cost 3.8 s and
    403 MiB; past about 3 million it overflowed its catalog column)."""
    size = MAX_POINTS * 4
    ok = Manifest(0, 0, True, tuple(range(0, size, 4)), (0,) * MAX_POINTS, step=4)
    assert Manifest.from_json(ok.to_json(), "f", size) == ok
    for field in ("offsets", "id1s"):
        doc = ok.to_json()
        doc[field] = doc[field] + [1]
        with pytest.raises(ManifestError, match=f"'{field}': 262,145 values, more than the "
                                                "262,144 points a manifest may have"):
            Manifest.from_json(doc, "f", size + 10)


def test_a_manifest_at_its_bound_fits_its_catalog_column_at_worst():
    """What MAX_POINTS is for: the largest manifest validation lets through, with the widest
    deltas (offsets spread over the largest file, an unsorted file's id1s jumping from one end
    of the range to the other), still fits ``debl_manifests.manifest`` as the catalog writes
    it."""
    size = 2 ** 63 - 1
    offsets = tuple(i * (size // MAX_POINTS) for i in range(MAX_POINTS))
    id1s = tuple(ID1_MAX * (i % 2) for i in range(MAX_POINTS))
    widest = Manifest.from_json(Manifest(0, ID1_MAX, False, offsets, id1s, step=1).to_json(),
                                "f", size)
    column = manifests_table.c.manifest.type
    assert isinstance(column.impl, mysql.MEDIUMTEXT)  # at most 2**24 - 1 bytes
    assert len(column.process_bind_param(widest.to_json(), None).encode()) < 2 ** 24


def test_a_hostile_number_in_a_listing_is_a_fields_error_not_an_unreadable_listing():
    text = '[{"name": "f", "manifest": {"version": 1, "id1_lo": %s}}]' % ("9" * 5000)
    entry = json.loads(text, parse_int=json_int)[0]
    manifest, error = manifest_of_entry(entry, "f", 300)
    assert manifest is None and "'id1_hi': missing" in error
    doc = json.loads(json.dumps(obj()).replace('"id1_hi": 90', '"id1_hi": ' + "9" * 5000),
                     parse_int=json_int)
    with pytest.raises(ManifestError, match="'id1_hi': a number of 41 digits is out of its"):
        Manifest.from_json(doc, "f", 300)


def test_manifest_of_entry_says_none_or_the_message():
    assert manifest_of_entry({"name": "f"}, "f", 300) == (None, None)
    assert manifest_of_entry({"manifest": obj()}, "f", 300) == (SORTED, None)
    manifest, error = manifest_of_entry({"manifest": obj(version=9)}, "f", 300)
    assert manifest is None and error.startswith("f: manifest field 'version'")


# -- pieces


def test_pieces_of_each_kind_of_file():
    assert pieces(3, 0, None) == []
    assert pieces(3, 0, Manifest(None, None, True)) == []
    assert pieces(3, 50, None) == [Piece(3, 0, 50, 0, ID1_MAX)]
    assert pieces(3, 50, Manifest(None, None, True)) == [Piece(3, 0, 50, 0, -1)]
    assert pieces(3, 50, Manifest(7, 9, False, (0, 10), (9, 7))) == [Piece(3, 0, 50, 7, 9)]
    assert pieces(3, 50, Manifest(7, 9, True)) == [Piece(3, 0, 50, 7, 9)]
    assert pieces(3, 300, SORTED) == [Piece(3, 0, 100, 10, 40), Piece(3, 100, 250, 40, 40),
                                      Piece(3, 250, 300, 40, 90)]
    # A file that begins with bad lines: its first piece still begins at byte 0.
    assert pieces(1, 300, Manifest(10, 90, True, (20, 100), (10, 50))) == [
        Piece(1, 0, 100, 10, 50), Piece(1, 100, 300, 50, 90)]


@pytest.mark.parametrize("size, manifest", [
    (50, None), (50, Manifest(None, None, True)), (50, Manifest(7, 9, False, (0, 10), (9, 7))),
    (50, Manifest(7, 9, True)), (300, SORTED), (300, Manifest(10, 90, True, (20, 100), (10, 50))),
    (300, Manifest(10, 90, True, (0,), (10,)))])
def test_the_piece_at_a_byte_is_the_piece_that_covers_it(size, manifest):
    ps = pieces(2, size, manifest)
    for offset in range(size):
        assert piece_at(2, size, manifest, offset) == \
            next(p for p in ps if p.start <= offset < p.end), offset


def test_a_piece_that_claims_nothing_holds_no_id():
    p = pieces(0, 5, Manifest(None, None, True))[0]
    assert p.size == 5 and not any(p.claims(i) for i in (0, 1, ID1_MAX))


# -- claims


def check(lines, manifest=SORTED, start=0, end=300) -> ClaimViolation | None:
    return claim_violations(4, 300, manifest, start, end, lines)


GOOD = [(0, 10), (40, 20), (100, 40), (180, 40), (250, 40), (290, 90)]


def test_lines_that_keep_the_claims_pass_whole_or_in_ranges():
    assert check(GOOD) is None
    assert check(GOOD[:3], end=150) is None
    assert check(GOOD[3:], start=150) is None
    assert check([], start=101, end=249) is None  # no point inside
    assert check([(0, 5), (1, 0)], manifest=None) is None  # a file without manifest


@pytest.mark.parametrize("lines, start, end, offset, id1, claimed, words", [
    ([(0, 10), (40, 9)], 0, 100, 40, 9, (10, 90), "outside the file's id1_lo..id1_hi"),
    ([(0, 10), (40, 41)], 0, 100, 40, 41, (10, 40), "outside the claim of its piece [0, 100)"),
    ([(0, 10), (40, 30), (60, 20)], 0, 100, 60, 20, (10, 40), "comes after 30 in a file"),
    ([(0, 10), (110, 40)], 0, 150, 100, None, (40, 40), "point 1 (id1 40) is not the start"),
    ([(0, 10), (100, 39)], 0, 150, 100, 39, (40, 40), "outside the claim of its piece"),
    ([(0, 10), (100, 40)], 0, 260, 250, None, (40, 90), "point 2 (id1 40) is not the start"),
    ([(0, 11)], 0, 50, 0, 11, (10, 40), "point 0 says id1 10, its line has 11"),
])
def test_the_first_broken_claim_is_named(lines, start, end, offset, id1, claimed, words):
    got = check(lines, start=start, end=end)
    assert (got.file_seq, got.offset, got.id1, (got.lo, got.hi)) == (4, offset, id1, claimed)
    assert words in got.reason
    assert got.describe("links-004.tsv").startswith(f"links-004.tsv (file 4), byte {offset}: ")


def test_a_valid_line_in_a_file_said_to_have_none_breaks_it():
    got = claim_violations(0, 10, Manifest(None, None, True), 0, 10, [(0, 3)])
    assert got is not None and "has no valid line" in got.reason


def test_an_unsorted_file_is_checked_against_its_range_only():
    m = Manifest(10, 90, False)
    assert claim_violations(0, 300, m, 0, 300, [(0, 90), (5, 10), (9, 50)]) is None
    assert claim_violations(0, 300, m, 0, 300, [(0, 90), (5, 91)]).offset == 5


def test_lines_outside_the_range_or_out_of_order_are_the_callers_error():
    with pytest.raises(ValueError):
        check([(0, 10)], start=10)
    with pytest.raises(ValueError):
        check([(40, 20), (30, 10)], start=1, end=99)
