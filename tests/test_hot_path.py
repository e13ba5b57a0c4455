"""The hot path (loaders.mysql_bulk.load_hot) on the real MySQL, against the in-memory reference:
the table it is given holds exactly each key's winner by the merge rule, hidden rows included,
whether the hot set is merged in one run or in many (a later run's rows win ties against the rows
already loaded, an older row of a later run does not replace a newer one); the table's layout
(one run: clustered in get_link_list's order; more: LinkBench's, with its secondary index) and
the store's lists on either; counts, key range and phases (docs/LOADING.md, "The hot path's
cost")."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from debl.errors import ServiceError
from debl.format.line_block import HEAD_ROOM
from debl.format.link import MAX_TIME, Link
from debl.mysql import connect
from debl.store.mysql import INDEX_NAME, MySQLStore, link_table_ddl
from loaders.hot_merge import HotRows, Winners
from loaders.mysql_bulk import _load_winners, load_hot
from loaders.rejects import RejectWriter, read_rejects
from loaders.source import LocalSource
from tests.dataset import all_rows, make_dataset, reference_store

pytestmark = pytest.mark.stack

TABLE = "hot_path_t"
U63 = (1 << 63) - 1


@pytest.fixture(scope="module")
def config(stack_config):
    # max_line_bytes just over the longest line the fast path takes: runs can be 402 bytes
    return replace(stack_config, mysql_database="debl_hotpathtest", loading_max_line_bytes=400)


def table_rows(config, table: str = TABLE) -> set[Link]:
    conn = connect(config)
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT id1, link_type, id2, visibility, data, time, version "
                        f"FROM `{table}`")
            return {Link(*row) for row in cur.fetchall()}
    finally:
        conn.close()


def tables_and_keys(config) -> tuple[set[str], dict[str, list[str]]]:
    conn = connect(config)
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW TABLES")
            tables = {row[0] for row in cur.fetchall()}
            cur.execute(f"SHOW INDEX FROM `{TABLE}`")
            keys: dict[str, list[str]] = {}
            for row in sorted(cur.fetchall(), key=lambda row: (row[2], row[3])):
                keys.setdefault(row[2], []).append(row[4])  # name -> columns, in order
            return tables, keys
    finally:
        conn.close()


def load(config, directory: Path, tmp: Path, **options):
    source = LocalSource(directory)
    rejects = RejectWriter(tmp)
    with rejects.open_part("hot") as part:
        result = load_hot(config, source, list(enumerate(source.list())), part, table=TABLE,
                          **options)
        part.commit()
    return result


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    directory = tmp_path_factory.mktemp("hot")
    make_dataset(directory, files=4)
    expected = all_rows(reference_store(directory, {p.name for p in directory.iterdir()}))
    return directory, expected


@pytest.mark.parametrize("run_bytes", [1 << 30, 100_000])
def test_the_named_table_holds_the_reference_winners(config, dataset, tmp_path, run_bytes):
    directory, expected = dataset
    result = load(config, directory, tmp_path, run_bytes=run_bytes)
    assert table_rows(config) == expected
    assert result.runs == 1 if run_bytes > 1 << 20 else result.runs > 2
    assert result.rows == len(expected)
    assert (result.k_lo, result.k_hi) == (min(l.id1 for l in expected),
                                           max(l.id1 for l in expected))
    bad = read_rejects(tmp_path)
    assert result.rejects == len(bad) > 0
    assert result.lines == sum(good for good, _ in result.per_file.values())
    tables, keys = tables_and_keys(config)
    assert f"{TABLE}_staging" not in tables and config.mysql.link_table not in tables
    if result.runs == 1:  # the listing layout: clustered in get_link_list's order, no index
        assert [name for name, _, _ in result.phases] == ["mysql_load", "mysql_merge"]
        assert keys == {"PRIMARY": ["id1", "link_type", "time", "id2"]}
    else:  # LinkBench's layout, its index built once the runs are merged
        assert [name for name, _, _ in result.phases] == ["mysql_load", "mysql_merge",
                                                          "mysql_index"]
        assert keys["PRIMARY"] == ["link_type", "id1", "id2"] and set(keys) == {"PRIMARY",
                                                                              INDEX_NAME}
    assert all(result.hot_keys.may_hold(l.id1, l.link_type) for l in expected)


@pytest.mark.parametrize("run_bytes", [1 << 30, 100_000])
def test_the_store_lists_the_loaded_table_as_the_reference_does(config, dataset, tmp_path,
                                                                run_bytes):
    """The store reads either layout the hot path leaves: every key's list, whole, windowed
    and paged, equal to the reference's."""
    directory, _ = dataset
    load(config, directory, tmp_path, run_bytes=run_bytes)
    ref = reference_store(directory, {p.name for p in directory.iterdir()})
    with MySQLStore(config, TABLE) as store:
        for id1, link_type in sorted(ref.keys()):
            times = sorted({l.time for l in ref.scan_newest_first(id1, link_type)})
            middle = times[len(times) // 2]
            for window in ((0, MAX_TIME, 0, 10_000), (middle, MAX_TIME, 1, 3),
                           (0, middle, 0, 2)):
                assert (store.get_link_list(id1, link_type, *window)
                        == ref.get_link_list(id1, link_type, *window)), (id1, link_type, window)


def line(id1: int, id2: int, visibility: int, data: bytes, time: int, version: int) -> bytes:
    return b"%d\t123456789\t%d\t%d\t%s\t%d\t%d\n" % (id1, id2, visibility, data, time, version)


# Each file's rows: few keys, ties in time and version across files and runs, hidden rows.
rows_strategy = st.lists(
    st.tuples(st.sampled_from([1, 2, U63]), st.sampled_from([0, 5]), st.sampled_from([0, 1]),
              st.sampled_from([b"a", b"b\\", b'"c"', b""]), st.sampled_from([7, 8, U63]),
              st.sampled_from([0, 1])),
    max_size=40)


def load_files(config, tmp_path: Path, files: list[bytes], run_bytes: int):
    """Load *files* (their bytes, oldest first); returns (result, the reference's rows)."""
    directory = tmp_path / f"src-{len(list(tmp_path.iterdir()))}"
    directory.mkdir()
    for seq, data in enumerate(files):
        path = directory / f"f{seq}.tsv"
        path.write_bytes(data)
        os.utime(path, (1_000 + seq, 1_000 + seq))  # oldest first, as listed
    expected = all_rows(reference_store(directory, {f"f{seq}.tsv" for seq in range(len(files))}))
    return load(config, directory, directory.with_suffix(".rejects"), run_bytes=run_bytes), expected


def test_a_later_run_wins_ties_and_loses_to_newer_rows(config, tmp_path):
    filler = b"".join(line(100 + i, 0, 1, b"f", 1, 0) for i in range(20))  # about 400 bytes
    first = (line(1, 0, 1, b"old", 7, 3) + line(2, 0, 1, b"newer", 9, 0)
             + line(3, 0, 1, b"shown", 7, 0) + filler)
    second = (filler.replace(b"\tf\t", b"\tg\t") + line(1, 0, 1, b"tie, later", 7, 3)
              + line(2, 0, 1, b"older", 8, 5) + line(3, 0, 0, b"hidden", 7, 1))
    result, expected = load_files(config, tmp_path, [first, second], run_bytes=402)
    assert result.runs >= 3
    rows = table_rows(config)
    assert rows == expected
    assert {(l.id1, l.data, l.visibility) for l in rows if l.id1 < 100} == {
        (1, b"tie, later", 1), (2, b"newer", 1), (3, b"hidden", 0)}


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(rows_strategy, min_size=1, max_size=3), st.sampled_from([402, 700, 1 << 30]))
def test_runs_apply_the_merge_rule_across_their_boundaries(config, tmp_path, files, run_bytes):
    result, expected = load_files(
        config, tmp_path, [b"".join(line(*row) for row in rows) for rows in files], run_bytes)
    assert table_rows(config) == expected and result.rows == len(expected)


def test_rows_the_table_did_not_take_fail_the_load(config):
    """A key twice among the winners (a merge defect) is caught: LOAD DATA LOCAL skips the
    second with a warning only."""
    rows = HotRows(1024)
    rows.add_checked(line(1, 0, 1, b"a", 7, 0) + line(1, 0, 1, b"b", 8, 0))
    ends = rows.column("ends")
    twice = Winners(rows.buf, np.array([HEAD_ROOM, ends[0] + 1]), ends + 1, 1, 1)
    conn = connect(config, local_infile=True, bulk=True)
    try:
        with conn.cursor() as cur:
            cur.execute(f"DROP TABLE IF EXISTS `{TABLE}`")
            cur.execute(link_table_ddl(TABLE, config.mysql.engine, with_secondary_index=False))
            with pytest.raises(ServiceError, match="took 1 of the 2 rows"):
                _load_winners(config, cur, TABLE, twice)
    finally:
        conn.close()


@pytest.mark.parametrize("without_newline", [1, 3])
def test_hot_files_without_a_final_newline_still_load_in_one_run(config, tmp_path,
                                                                 without_newline):
    """Defect: a run's capacity was the listed size, and the LF added to a file's last
    line is a byte more: one such file sent a hot set that fits in memory into LinkBench's
    layout, a staging table and an index build. Every good byte of the input, with the LFs
    added, fits the run: one run, the listing layout, no index."""
    files = [b"".join(line(10 * seq + i, 0, 1, b"x" * 40, 7, 0) for i in range(50))
             for seq in range(3)]
    files = [data[:-1] if seq < without_newline else data for seq, data in enumerate(files)]
    result, expected = load_files(config, tmp_path, files, run_bytes=1 << 30)
    assert table_rows(config) == expected and result.rejects == 0
    assert result.runs == 1
    assert [name for name, _, _ in result.phases] == ["mysql_load", "mysql_merge"]
    assert tables_and_keys(config)[1] == {"PRIMARY": ["id1", "link_type", "time", "id2"]}
