"""A source that misbehaves: an HTTP transfer dropped mid-file is resumed with
``Range`` and loses nothing; one dropped again and again ends in a clear error naming the file
and the offset; a listing that lies about a size and a file that changes while it is read are
errors, never a silent mix. (Credentials: tests/test_source_credentials.py.)

The stream-level tests here need no stack; tests/test_load_faults.py runs the same faults through
``debl load`` on the real stack."""

from __future__ import annotations

import os

import pytest

from debl.errors import SourceError
from loaders.source import HttpSource, LocalSource, SourceFile
from loaders.source_url import redact_url
from tests.hostile_http import HostileSource, rewrite_later

BODY = b"".join(b"%d\t1\t%d\t1\tdata-%d\t%d\t99999\n" % (i, i, i, 1000 + i) for i in range(2000))


@pytest.fixture()
def directory(tmp_path):
    (tmp_path / "f.tsv").write_bytes(BODY)
    return tmp_path


def read_all(stream) -> bytes:
    parts = []
    with stream:
        while block := stream.read(4096):
            parts.append(block)
    return b"".join(parts)


def listed(source, name: str = "f.tsv") -> SourceFile:
    return next(f for f in source.list() if f.name == name)


def test_a_transfer_dropped_four_bytes_early_is_resumed_from_the_last_byte(directory):
    with HostileSource(directory) as server:
        server.drop("f.tsv", len(BODY) - 4)  # the server: all headers, 4 bytes short
        source = HttpSource(server.url)
        assert read_all(source.open("f.tsv", listed=listed(source))) == BODY
        assert f"bytes={len(BODY) - 4}-{len(BODY) - 1}" in server.ranges["f.tsv"]


def test_a_transfer_dropped_mid_file_loses_nothing_and_resumes_from_an_offset(directory):
    with HostileSource(directory) as server:
        server.drop("f.tsv", 12345)
        source = HttpSource(server.url)
        # A resumed copy (after a kill) starts at an offset; its own drop resumes again.
        assert read_all(source.open("f.tsv", 1000, listed=listed(source))) == BODY[1000:]
        assert server.ranges["f.tsv"][-3:-1] == ["bytes=1000-", f"bytes=12345-{len(BODY) - 1}"]


def test_ranged_reads_are_resumed_too(directory):
    with HostileSource(directory) as server:
        server.drop("f.tsv", 5000, times=2)
        source = HttpSource(server.url)
        assert source.read_range("f.tsv", 4000, 3000) == BODY[4000:7000]


def test_a_server_that_always_drops_at_the_same_byte_is_a_clear_error(directory):
    with HostileSource(directory) as server:
        server.drop("f.tsv", 7777, times=None)
        source = HttpSource(server.url, retries=3)
        with pytest.raises(SourceError, match=r"'f\.tsv' failed at byte 7777 of "
                                              rf"{len(BODY)}.*3 resumes in a row brought nothing"):
            read_all(source.open("f.tsv", listed=listed(source)))


@pytest.mark.parametrize("lie", [+10, -10])
def test_a_listing_that_lies_about_a_size_is_refused(directory, lie):
    with HostileSource(directory) as server:
        server.lie("f.tsv", len(BODY) + lie)
        source = HttpSource(server.url)
        with pytest.raises(SourceError, match=rf"listed {len(BODY) + lie} bytes.*now "
                                              rf"{len(BODY)} bytes.*changed after it was listed"):
            read_all(source.open("f.tsv", listed=listed(source)))


def test_an_http_file_that_changes_while_it_is_read_is_refused(directory):
    with HostileSource(directory) as server:
        server.mutate("f.tsv", 30000, rewrite_later)
        source = HttpSource(server.url)
        with pytest.raises(SourceError, match="'f.tsv': it changed while it was read"):
            read_all(source.open("f.tsv", listed=listed(source)))


def test_an_http_file_whose_size_changes_before_a_resume_is_refused(directory):
    with HostileSource(directory) as server:
        server.drop("f.tsv", 30000)
        server.mutate("f.tsv", 20000, lambda p: p.write_bytes(BODY + b"1\t1\t1\t1\tx\t1\t1\n"))
        source = HttpSource(server.url)
        with pytest.raises(SourceError, match=rf"changed while it was read \({len(BODY)} bytes "
                                              rf"when its transfer began, {len(BODY) + 14} when "
                                              "it resumed at byte 30000"):
            read_all(source.open("f.tsv", listed=listed(source)))


def test_a_local_file_that_grows_while_it_is_read_is_refused(directory):
    source = LocalSource(directory)
    stream = source.open("f.tsv", listed=listed(source))
    assert stream.read(1000) == BODY[:1000]
    with open(directory / "f.tsv", "ab") as f:
        f.write(b"1\t1\t1\t1\tx\t1\t1\n")
    with pytest.raises(SourceError, match="holds more than the .* bytes its listing gave"):
        read_all(stream)


def test_a_local_file_rewritten_in_place_while_it_is_read_is_refused(directory):
    source = LocalSource(directory)
    stream = source.open("f.tsv", listed=listed(source))
    assert stream.read(1000) == BODY[:1000]
    rewrite_later(directory / "f.tsv")
    with pytest.raises(SourceError, match="it changed while it was read"):
        read_all(stream)


def test_a_local_file_that_changed_since_the_listing_is_refused_when_opened(directory):
    source = LocalSource(directory)
    before = listed(source)
    (directory / "f.tsv").write_bytes(BODY[:-10])
    with pytest.raises(SourceError, match=rf"listed {len(BODY)} bytes.*now {len(BODY) - 10} "
                                          "bytes.*changed after it was listed"):
        source.open("f.tsv", listed=before)


def test_an_unchanged_file_reads_whole_from_either_source(directory):
    source = LocalSource(directory)
    assert read_all(source.open("f.tsv", listed=listed(source))) == BODY
    assert read_all(source.open("f.tsv", 77, listed=listed(source))) == BODY[77:]
    with HostileSource(directory) as server:
        http_source = HttpSource(server.url)
        assert read_all(http_source.open("f.tsv", listed=listed(http_source))) == BODY


def test_redact_url_drops_only_the_password():
    assert redact_url("http://u:p@h:1/x?y=1") == "http://u@h:1/x?y=1"
    assert redact_url("https://h/x") == "https://h/x"
    assert redact_url("/data/dir") == "/data/dir"
    assert redact_url("http://u@h/x") == "http://u@h/x"


def test_an_empty_file_is_read_and_checked(tmp_path):
    (tmp_path / "empty.tsv").write_bytes(b"")
    os.utime(tmp_path / "empty.tsv", (1, 1_700_000_000))
    with HostileSource(tmp_path) as server:
        source = HttpSource(server.url)
        assert read_all(source.open("empty.tsv", listed=listed(source, "empty.tsv"))) == b""
