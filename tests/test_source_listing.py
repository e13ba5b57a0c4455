"""A source's listing checked entry by entry before anything is read (issues 38.2 and 38.9,
docs/RELIABILITY.md, "Security" and "Sources that misbehave"): an HTTP source's ``index.json``
names only plain file names with whole sizes and finite mtimes, or the listing is refused with
a SourceError naming the entry; a path built from a name stays inside its directory. Names
shown on a terminal: tests/test_security.py. No stack: the HTTP source is
tests/hostile_http.py."""

from __future__ import annotations

import math

import pytest

from debl.errors import SourceError
from loaders.source import HttpSource, LocalSource, SourceFile, check_listing_entry, path_in
from tests.hostile_http import HostileSource

GOOD = {"name": "links-01.tsv", "size": 12, "mtime": 1700000000.5}

# Names that are not plain file names: each would build a path outside the copy's directory,
# or drive the terminal that shows it, or cannot be asked for over HTTP.
BAD_NAMES = ["../../../../home/u/.ssh/authorized_keys", "/etc/cron.d/debl", "a/b.tsv", "sub/",
             "./a.tsv", "..", ".", "", "a\x00b.tsv", "x\x1b]0;owned\x07.tsv", "a\x1b[2J.tsv",
             "a\nb.tsv", "a\tb.tsv", "a\rb.tsv", "a\x7f.tsv", "a\x85.tsv", "\udcff.tsv"]

# Entries whose fields are not what the protocol says (docs/LOADING.md, "HTTP sources").
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
    """Issue 38.2: ``index.json`` names went into paths unchecked (with fileCopy, a name that
    climbs out of the copy's directory wrote the source's bytes there)."""
    with pytest.raises(SourceError) as err:
        _listed(tmp_path, [GOOD, {"name": name, "size": 12, "mtime": 1700000001.0}])
    message = str(err.value)
    assert "index.json entry 2" in message and repr(name) in message, message
    assert _printable(message)  # the name shown escaped, never as it came


@pytest.mark.parametrize("entry, field", BAD_FIELDS)
def test_an_http_listing_whose_fields_are_not_the_protocols_is_refused(tmp_path, entry, field):
    """Issue 38.9: a name that was not a string was a TypeError traceback later, a NaN mtime
    a MySQL error; each is a SourceError naming the entry and the field."""
    with pytest.raises(SourceError) as err:
        _listed(tmp_path, [GOOD, entry])
    message = str(err.value)
    assert "index.json entry 2" in message and field in message, message
    assert _printable(message)


def test_a_listing_that_is_not_a_list_is_refused(tmp_path):
    with pytest.raises(SourceError, match="not a file listing"):
        _listed(tmp_path, {"files": [GOOD]})  # type: ignore[arg-type]


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
