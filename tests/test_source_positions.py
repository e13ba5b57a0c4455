"""The dump's position without the stack (docs/LOADING.md, "The dump's position"): GTIDs and
positions checked where they are read, a listing's position (every file the same one, or none,
or not used and why), a local directory's and an HTTP source's (``debl source serve`` passes it
through), the dump's file splits and its refusal of a row no line can hold, and the source
database's settings."""

from __future__ import annotations

import json
import os
import threading
import warnings
from pathlib import Path

import pytest

from debl.bench.source_server import make_server
from debl.config import Config, load_config
from debl.errors import ConfigError, SourceError
from debl.keys.manifest_build import manifest_of_file
from debl.position import DumpPosition, parse_gtid
from debl.store.source_snapshot import Extent
from loaders.listing import (SourceFile, check_listing_entry, listing_entry, listing_position,
                             parse_index, write_index)
from loaders.source import HttpSource, LocalSource
from loaders.source_dump import _check, _DaySplit, _RangeSplit

POSITION = DumpPosition("0-1-4711", "b91c9838-ebb0-11f1-b26a-02fc00000001")


# ------------------------------------------------------------------------------ positions

@pytest.mark.parametrize("gtid, parsed", [("0-1-4711", (0, 1, 4711)),
                                          ("4294967295-4294967295-18446744073709551615",
                                           (2**32 - 1, 2**32 - 1, 2**64 - 1))])
def test_a_gtid_is_three_numbers(gtid, parsed):
    assert parse_gtid(gtid) == parsed


@pytest.mark.parametrize("gtid", ["", "0-1", "0-1-2-3", "a-1-2", "0-1-+2", " 0-1-2", "0-1-2,1-1-3",
                                  "4294967296-1-2", "0-1-18446744073709551616", 12])
def test_a_gtid_that_is_not_one_is_refused(gtid):
    with pytest.raises(ValueError, match="is not a GTID"):
        parse_gtid(gtid)


def test_a_position_round_trips_through_json_and_is_checked():
    assert DumpPosition.from_json(POSITION.to_json()) == POSITION
    assert DumpPosition.from_json({**POSITION.to_json(), "later": 1}) == POSITION
    assert POSITION.seq == 4711
    for bad in (None, [], {"gtid": "0-1-2"}, {"gtid": "x", "source": "s"},
                {"gtid": "0-1-2", "source": ""}, {"gtid": "0-1-2", "source": "a\x1b[2J"},
                {"gtid": "0-1-2", "source": "s" * 65}, {"gtid": "0-1-2", "source": 7}):
        with pytest.raises(ValueError):
            DumpPosition.from_json(bad)


def _files(*positions) -> list[SourceFile]:
    return [SourceFile(f"links-{k}.tsv", 10, 1.0 + k, position=p)
            for k, p in enumerate(positions)]


def test_a_listing_has_the_position_every_file_carries():
    said: list[str] = []
    assert listing_position(_files(*[POSITION.to_json()] * 3), said.append) == POSITION
    assert listing_position(_files(None, None), said.append) is None  # as before: no word
    assert said == []


@pytest.mark.parametrize("positions, why", [
    ([POSITION.to_json(), None], "1 of its 2 files carry none (e.g. 'links-1.tsv'"),
    ([POSITION.to_json(), {"gtid": "0-1-4712", "source": POSITION.source}],
     "its files carry 2 positions (0-1-4711 of source"),
    ([POSITION.to_json(), {"gtid": "0-1"}], "a file's position is malformed"),
    (["0-1-4711"], "a file's position is malformed"),
])
def test_a_listing_whose_files_are_not_one_dump_has_none_and_says_why(positions, why):
    said: list[str] = []
    assert listing_position(_files(*positions), said.append) is None
    assert len(said) == 1 and why in said[0] and "not kept fresh" in said[0]


def _dump_dir(directory: Path) -> Path:
    """Three files and an index.json that gives each its manifest and the position."""
    directory.mkdir()
    for k in range(3):
        path = directory / f"links-{k:03d}.tsv"
        path.write_bytes(b"".join(b"%d\t1\t%d\t1\tx\t5\t0\n" % (k * 10 + i, i) for i in range(9)))
        os.utime(path, (1_700_000_000 + k,) * 2)
    entries = [listing_entry(p, manifest_of_file(p), POSITION)
               for p in sorted(directory.glob("links-*.tsv"))]
    write_index(directory, entries, 1_699_999_999 * 10**9)
    return directory


def test_the_position_in_index_json_leaves_it_a_listing_an_older_reader_takes(tmp_path):
    """An entry's field a reader does not know is ignored (docs/LOADING.md, "The manifest"):
    the listing stays a list of {name, size, mtime, manifest}, each entry as before."""
    directory = _dump_dir(tmp_path / "dump")
    entries = parse_index((directory / "index.json").read_bytes())
    assert [e["position"] for e in entries] == [POSITION.to_json()] * 3
    assert [check_listing_entry(e, "index.json").name for e in entries] == \
        ["links-000.tsv", "links-001.tsv", "links-002.tsv"]


def test_a_local_directory_gives_the_position_while_its_files_are_the_dump(tmp_path):
    directory = _dump_dir(tmp_path / "dump")
    said: list[str] = []
    assert listing_position(LocalSource(directory).list(), said.append) == POSITION
    with open(directory / "links-001.tsv", "ab") as f:  # changed since the dump
        f.write(b"99\t1\t1\t1\tx\t6\t0\n")
    assert listing_position(LocalSource(directory).list(), said.append) is None
    assert "1 of its 3 files carry none (e.g. 'links-001.tsv'" in said[-1]
    (directory / "links-001.tsv").unlink()
    (directory / "extra.tsv").write_bytes(b"1\t1\t1\t1\tx\t1\t0\n")  # added since
    assert listing_position(LocalSource(directory).list(), said.append) is None
    assert "(e.g. 'extra.tsv'" in said[-1]


def test_debl_source_serve_passes_the_position_through(tmp_path):
    directory = _dump_dir(tmp_path / "dump")
    server = make_server(directory, port=0, manifest_cache=tmp_path / "cache")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        source = HttpSource(f"http://127.0.0.1:{server.server_address[1]}")
        files = source.list()
        assert listing_position(files) == POSITION
        assert all(f.manifest is not None for f in files)
        source.close()
    finally:
        server.shutdown()
        server.server_close()
    plain = tmp_path / "plain"  # a directory without positions is listed without any
    plain.mkdir()
    (plain / "a.tsv").write_bytes(b"1\t1\t1\t1\tx\t1\t0\n")
    server = make_server(plain, port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        source = HttpSource(f"http://127.0.0.1:{server.server_address[1]}")
        assert [f.position for f in source.list()] == [None]
        source.close()
    finally:
        server.shutdown()
        server.server_close()


# ------------------------------------------------------------------------------ the dump

def _row(id1, t=5, data=b"x", visibility=1, version=0, id2=1, link_type=1):
    return (id1, link_type, id2, visibility, data, t, version)


def test_the_ranges_split_shares_the_rows_and_never_cuts_an_id1():
    rows = [_row(1, id2=i) for i in range(50)] + [_row(id1) for id1 in range(2, 32)]
    split = _RangeSplit(len(rows), 4)
    files: dict[int, list] = {}
    for batch in (rows[:7], rows[7:60], rows[60:]):  # fetches cut anywhere
        for k, part in split.parts(batch):
            files.setdefault(k, []).extend(part)
    assert sum(files.values(), []) == rows
    assert [r[0] for r in files[0]] == [1] * 50  # the heavy id1 alone, past its share
    assert [len(files[k]) for k in (1, 2, 3)] == [10, 10, 10]  # the rest shared
    assert split.mtimes_ms([7, None, 9, None], 100) == [7, 7, 9, 9]
    assert _RangeSplit(0, 2).mtimes_ms([None, None], 100) == [100, 100]


def test_the_days_split_cuts_the_times_in_equal_periods():
    split = _DaySplit(Extent(4, 100, 139), 4)  # 40 ms: 10 a period
    rows = [_row(1, t=100), _row(2, t=109), _row(3, t=110), _row(4, t=139)]
    assert [(k, [r[5] for r in part]) for k, part in split.parts(rows)] == \
        [(0, [100, 109]), (1, [110]), (3, [139])]
    assert split.mtimes_ms([None] * 4, 0) == [110, 120, 130, 140]  # each period's end
    assert _DaySplit(Extent(0, None, None), 2).mtimes_ms([None, None], 77) == [77, 77]


@pytest.mark.parametrize("row", [_row(1, data=b"a\tb"), _row(1, data=b"a\nb"),
                                 _row(1, data=b"a\rb"), _row(1, visibility=2),
                                 _row(2**63), _row(1, t=2**64 - 1), _row(1, data=b"x" * 256)])
def test_the_dump_refuses_a_row_no_line_can_hold(row):
    _check([_row(1, data=b"\x00\xff\\'\"")], "t")  # any other byte is data
    with pytest.raises(SourceError, match=f"key id1={row[0]} link_type=1 id2=1"):
        _check([_row(1), row], "t")


# ------------------------------------------------------------------------------ settings

def test_the_source_database_settings(tmp_path):
    config = Config(state_dir=tmp_path, source_db_port=4000, source_db_password="p@ss:/w'rd")
    assert config.source_db.url == "mysql+pymysql://debl_source@127.0.0.1:4000/linkbench"
    assert config.source_db_url(with_password=True) == \
        "mysql+pymysql://debl_source:p%40ss%3A%2Fw%27rd@127.0.0.1:4000/linkbench"
    assert "p@ss" not in repr(config)
    assert "p@ss" not in repr(Config(source_db_replication_password="p@ss"))
    with pytest.raises(ConfigError, match="DEBL_SOURCE_DB_PASSWORD or run `debl stack up`"):
        _ = Config(state_dir=tmp_path).source_db_secret
    with pytest.raises(ConfigError, match="source_db.server_id must be 1 to 4294967295"):
        Config(source_db_server_id=0)
    with pytest.raises(ConfigError, match="source_db.log_expire must be 0"):
        Config(source_db_log_expire=100 * 86400)
    with pytest.raises(ConfigError, match="source_db.replication_user"):
        Config(source_db_replication_user="a'b")
    path = tmp_path / "debl.toml"
    path.write_text("[source_db]\nport = 3417\ntable = \"links\"\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loaded = load_config(path, env={})
    assert (loaded.source_db.port, loaded.source_db.table) == (3417, "links")
    assert json.dumps(loaded.source_db.url)  # a plain string
