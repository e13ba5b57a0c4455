"""A source's listing checked entry by entry before anything is read (issues 38.2 and 38.9,
docs/RELIABILITY.md, "Security" and "Sources that misbehave"): an HTTP source's ``index.json``
names only plain file names with whole sizes and finite mtimes, or the listing is refused with
a SourceError naming the entry; a path built from a name stays inside its directory. The
listing within its bounds (docs/LOADING.md, "The listing's bounds"): one over 32
MiB or nested past the parser is refused naming it; manifests of too many points together are
not used, and the files are listed. Names shown on a terminal: tests/test_security.py. No
stack: the HTTP source is tests/hostile_http.py."""

from __future__ import annotations

import math

import pytest

from debl.errors import SourceError
from debl.keys.manifest import MAX_POINTS, STEP, Manifest
from loaders.listing import MAX_INDEX_BYTES, MAX_LISTING_POINTS
from loaders.source import HttpSource, LocalSource, SourceFile, check_listing_entry, path_in
from tests.hostile_http import HostileSource

GOOD = {"name": "links-01.tsv", "size": 12, "mtime": 1700000000.5}

# Names that are not plain file names: each would build a path outside the copy's directory,
# or drive the terminal that shows it, or cannot be asked for over HTTP.
BAD_NAMES = ["../../../../home/u/.ssh/authorized_keys", "/etc/cron.d/debl", "a/b.tsv", "sub/",
             "./a.tsv", "..", ".", "", "a\x00b.tsv", "x\x1b]0;owned\x07.tsv", "a\x1b[2J.tsv",
             "a\nb.tsv", "a\tb.tsv", "a\rb.tsv", "a\x7f.tsv", "a\x85.tsv", "\udcff.tsv"]

# Entries whose fields are not what the protocol says (docs/LOADING.md, row "HTTP sources").
BAD_FIELDS = [
    ({**GOOD, "name": 5}, "name"), ({**GOOD, "name": None}, "name"),
    ({**GOOD, "name": ["a.tsv"]}, "name"), ({"size": 1, "mtime": 1.0}, "name"),
    ({**GOOD, "size": -1}, "size"), ({**GOOD, "size": 1.5}, "size"),
    ({**GOOD, "size": "12"}, "size"), ({**GOOD, "size": True}, "size"),
    ({**GOOD, "size": 1 << 63}, "size"), ({"name": "a.tsv", "mtime": 1.0}, "size"),
    ({**GOOD, "mtime": math.nan}, "mtime"), ({**GOOD, "mtime": math.inf}, "mtime"),
    ({**GOOD, "mtime": -math.inf}, "mtime"), ({**GOOD, "mtime": "yesterday"}, "mtime"),
    ({**GOOD, "mtime": False}, "mtime"), ({"name": "a.tsv", "size": 1}, "mtime"),
    ("a.tsv", "not an object"), (["a.tsv", 1, 2.0], "not an object"), (None, "not an object"),
]


def _listed(tmp_path, entries: list) -> list[SourceFile]:
    (tmp_path / "payload.tsv").write_bytes(b"1\t1\t1\t1\tx\t1\t1\n")
    with HostileSource(tmp_path) as server:
        server.serve_listing(entries)
        return HttpSource(server.url, retries=0).list()


def _printable(text: str) -> bool:
    return all(c.isprintable() or c == "\n" for c in text)


@pytest.mark.parametrize("name", BAD_NAMES)
def test_an_http_listing_naming_a_file_that_is_not_plain_is_refused(tmp_path, name):
    """Defect: ``index.json`` names went into paths unchecked (with fileCopy, a name that
    climbs out of the copy's directory wrote the source's bytes there)."""
    with pytest.raises(SourceError) as err:
        _listed(tmp_path, [GOOD, {"name": name, "size": 12, "mtime": 1700000001.0}])
    message = str(err.value)
    assert "index.json entry 2" in message and repr(name) in message, message
    assert _printable(message)  # the name shown escaped, never as it came


@pytest.mark.parametrize("entry, field", BAD_FIELDS)
def test_an_http_listing_whose_fields_are_not_the_protocols_is_refused(tmp_path, entry, field):
    """Defect: a name that was not a string was a TypeError traceback later, a NaN mtime
    a MySQL error; each is a SourceError naming the entry and the field."""
    with pytest.raises(SourceError) as err:
        _listed(tmp_path, [GOOD, entry])
    message = str(err.value)
    assert "index.json entry 2" in message and field in message, message
    assert _printable(message)


def test_a_listing_that_is_not_a_list_is_refused(tmp_path):
    with pytest.raises(SourceError, match="not a file listing"):
        _listed(tmp_path, {"files": [GOOD]})  # type: ignore[arg-type]


def _manifest(points: int) -> dict:
    """An honest manifest of *points* points a step apart (DeBL's step)."""
    return Manifest(0, points - 1, True, tuple(range(0, points * STEP, STEP)),
                    tuple(range(points)), step=STEP).to_json()


def test_an_http_listing_over_its_bound_is_refused_naming_it(tmp_path):
    """Defect: ``index.json`` was read whole, however large."""
    padded = [{**GOOD, "padding": "x" * MAX_INDEX_BYTES}]  # a field no reader knows
    with pytest.raises(SourceError, match=r"/index.json is not a file listing: it is over 32 MiB"):
        _listed(tmp_path, padded)
    assert _listed(tmp_path, [{**GOOD, "padding": "x" * (MAX_INDEX_BYTES - 100)}]) == [
        SourceFile("links-01.tsv", 12, 1700000000.5)]


def test_an_http_listing_nested_past_the_parser_is_a_message_not_a_recursion_error(tmp_path):
    """Defect: a deeply nested ``index.json`` raised RecursionError through the
    listing's handler."""
    for body in (b"[" * 100_000, b'[{"name": "a.tsv", "size": 1, "mtime": 1, "manifest": '
                 + b"[" * 100_000 + b"]" * 100_000 + b"}]"):
        with pytest.raises(SourceError, match="index.json is not a file listing: it nests "
                                              "deeper than JSON's parser goes"):
            _listed(tmp_path, body)  # type: ignore[arg-type]


def test_manifests_over_the_listings_bound_are_not_used_and_the_listing_goes_on(tmp_path):
    """Defect: a listing's manifests together had no bound. Past MAX_LISTING_POINTS none
    is used, each file says why, and the files are listed: the load goes on."""
    per_file = MAX_POINTS - 1
    files = MAX_LISTING_POINTS // per_file + 1
    entries = [{"name": f"f{k}.tsv", "size": per_file * STEP, "mtime": k,
                "manifest": _manifest(per_file)} for k in range(files)]
    listed = _listed(tmp_path, entries + [GOOD])
    assert [f.name for f in listed] == [f"f{k}.tsv" for k in range(files)] + ["links-01.tsv"]
    for f in listed[:-1]:
        assert f.manifest is None and f.manifest_error.startswith(
            f"{f.name}: source http://127.0.0.1:")
        assert (f"index.json holds manifests of {files * per_file:,} points in all, more than "
                "the 1,048,576 a listing may") in f.manifest_error
    assert listed[-1].manifest_error is None  # it had none to lose
    fewer = _listed(tmp_path, entries[:files - 1])
    assert all(f.manifest is not None and f.manifest_error is None for f in fewer)


def test_a_good_listing_is_read_as_it_was_and_oldest_first(tmp_path):
    entries = [{"name": "b.tsv", "size": 7.0, "mtime": 20}, GOOD,
               {"name": "caf\u00e9 #1 (copy).tsv", "size": 0, "mtime": -5.25}]
    assert _listed(tmp_path, entries) == [
        SourceFile("caf\u00e9 #1 (copy).tsv", 0, -5.25),
        SourceFile("b.tsv", 7, 20.0), SourceFile("links-01.tsv", 12, 1700000000.5)]


def test_check_listing_entry_returns_the_file_and_names_a_bad_entry():
    assert check_listing_entry(GOOD, "index.json entry 1") == SourceFile("links-01.tsv", 12,
                                                                       1700000000.5)
    with pytest.raises(SourceError, match=r"^source x: index.json entry 3 "):
        check_listing_entry({**GOOD, "name": ".."}, "source x: index.json entry 3")


def test_a_local_directory_keeps_its_own_names_tab_and_bytes_not_utf8_included(tmp_path):
    """A local directory's names are the file system's: a tab, a newline, bytes that are not
    UTF-8 load (tests/test_hostile_input.py); they are escaped wherever they are shown."""
    import os
    for raw in (b"a\tb.tsv", b"c\nd.tsv", b"e\xff.tsv"):
        with open(os.path.join(bytes(tmp_path), raw), "wb") as f:
            f.write(b"x")
    names = {f.name for f in LocalSource(tmp_path).list()}
    assert names == {"a\tb.tsv", "c\nd.tsv", "e\udcff.tsv"}


@pytest.mark.parametrize("name", BAD_NAMES[:9])
def test_a_path_built_from_a_name_stays_inside_its_directory(tmp_path, name):
    with pytest.raises(SourceError, match="not a plain file name"):
        path_in(tmp_path, name)
    assert path_in(tmp_path, "a..b.tsv") == tmp_path / "a..b.tsv"


def test_a_local_source_opens_nothing_outside_its_directory(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "secret").write_bytes(b"not yours")
    source = LocalSource(tmp_path / "src")
    for name in ("../secret", str(tmp_path / "secret")):
        with pytest.raises(SourceError, match="not a plain file name"):
            source.open(name)
        with pytest.raises(SourceError, match="not a plain file name"):
            source.stat(name)
