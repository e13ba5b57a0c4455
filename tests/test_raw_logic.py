"""The raw reader's pure parts: the LRU cache under its byte budget, the files whose filters may
hold a key, the run of one key's lines in sorted blocks, and the newest-first merge of per-file
streams, against the in-memory reference store. The reader on real HDFS files:
tests/test_raw.py."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from coordinator.raw_cache import BlockCache
from coordinator.merge import NewestFirstMerge
from coordinator.raw_scan import FileFilters, key_lines
from debl.format.bucket_file import (bloom_filter, bloom_holds, data_lines, encode, parse_row,
                                     parse_tail)
from debl.format.link import Link, Origin
from debl.store.memory import MemoryStore


def test_cache_keeps_the_most_recently_used_within_its_budget():
    cache = BlockCache(100)
    for key in "abcd":
        cache.put(key, key * 30, 30)  # d pushes a out: 4 x 30 > 100
    assert cache.size == 90 and len(cache) == 3
    assert cache.get("a") is None
    assert cache.get("b") == "b" * 30  # b is now the most recent
    cache.put("e", "e", 30)  # evicts c, the least recently used
    assert cache.get("c") is None and cache.get("b") is not None and cache.get("e") == "e"
    assert (cache.hits, cache.misses) == (3, 2)


def test_cache_replaces_a_key_and_never_keeps_an_entry_over_its_budget():
    cache = BlockCache(100)
    cache.put("a", 1, 60)
    cache.put("a", 2, 70)
    assert cache.size == 70 and cache.get("a") == 2
    cache.put("huge", 3, 101)
    assert cache.get("huge") is None and cache.get("a") == 2 and cache.size == 70
    cache.put("b", 4, 40)  # over the budget together: a goes
    assert cache.size == 40 and cache.get("a") is None


def test_a_smaller_budget_evicts_at_once_and_clear_empties():
    cache = BlockCache(100)
    for key in "abc":
        cache.put(key, key, 30)
    cache.set_budget(50)
    assert cache.size == 30 and cache.get("c") == "c" and cache.get("b") is None
    cache.set_budget(-5)  # opened buckets over the whole budget: no block kept
    assert cache.size == 0 and len(cache) == 0
    cache.set_budget(100)
    cache.put("d", "d", 10)
    cache.clear()
    assert cache.size == 0 and cache.get("d") is None


@given(st.lists(st.lists(st.tuples(st.integers(0, 2**63 - 1), st.integers(0, 3)), max_size=30),
                min_size=1, max_size=8),
       st.lists(st.tuples(st.integers(0, 2**63 - 1), st.integers(0, 3)), max_size=20))
def test_file_filters_say_what_each_files_filter_says(files, probes):
    """All files' filters tested at once give exactly the files whose own filter may hold the
    key: every file that holds it among them."""
    blooms = [bloom_filter(keys) for keys in files]
    filters = FileFilters(blooms)
    for key in probes + [k for keys in files for k in keys]:
        held = filters.holding(*key)
        assert held == [i for i, bloom in enumerate(blooms) if bloom_holds(bloom, *key)]
        assert {i for i, keys in enumerate(files) if key in keys} <= set(held)


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(1, 2), st.integers(0, 9)), max_size=40),
       st.integers(0, 3), st.integers(1, 2))
def test_key_lines_are_exactly_the_keys_run(keys, id1, link_type):
    lines = [Link(a, b, j, 1, b"%d" % c, c, 0).to_line()[:-1] + b"\t0\t%d\n" % j
             for j, (a, b, c) in enumerate(keys)]
    content = encode(lines, block=1)
    index = parse_tail("/f.0", len(content), content)
    data = content[:index.data_length]
    expected = [l for l in data_lines(data) if parse_row(l)[0][:2] == (id1, link_type)]
    assert key_lines(data, id1, link_type) == expected
    for i in index.blocks(id1, link_type):  # any whole blocks of the run give their part of it
        block = data[index.offset(i):index.offset(i + 1)]
        assert key_lines(block, id1, link_type) == \
            [l for l in data_lines(block) if parse_row(l)[0][:2] == (id1, link_type)]


U63 = (1 << 63) - 1


def _padded(value: int, zeros: int) -> bytes:
    return b"0" * zeros + b"%d" % value


def _bucket_line(id1: bytes, link_type: bytes, id2: int, time: bytes, line_no: int) -> bytes:
    """A bucket line (input line, file_seq, line_no) whose numbers are written as given."""
    return b"%s\t%s\t%d\t1\tl%d\t%s\t0\t0\t%d\n" % (id1, link_type, id2, line_no, time,
                                                       line_no)


def test_key_lines_match_numbers_by_value_not_by_text():
    """Defect: the run was found by the text ``b"5\\t1\\t"``, so a line ``05\\t1``
    of key 5, sorted among its lines by value, ended the run there (one of three lines found:
    the oldest version won), and a run starting with ``05`` was not found at all."""
    written = [(b"5", b"1", b"1"), (b"05", b"1", b"2"), (b"5", b"001", b"3"), (b"6", b"1", b"1"),
               (b"%d" % U63, b"1", b"1"), (b"0%d" % U63, b"01", b"2"),
               (b"000%d" % U63, b"1", b"3"), (b"%d" % U63, b"2", b"1")]
    content = encode(_bucket_line(a, b, j, t, j) for j, (a, b, t) in enumerate(written))
    data = content[:parse_tail("/f.0", len(content), content).data_length]
    for id1, link_type, expected in ((5, 1, 3), (6, 1, 1), (U63, 1, 3), (U63, 2, 1), (1, 5, 0),
                                     (5, 5, 0), (0, 1, 0)):
        found = key_lines(data, id1, link_type)
        assert [parse_row(l)[0][:2] for l in found] == [(id1, link_type)] * expected, \
            (id1, link_type)
    only_padded = encode([_bucket_line(b"05", b"1", 1, b"1", 1), _bucket_line(b"005", b"1", 2,
                                                                             b"2", 2)])
    data = only_padded[:parse_tail("/f.0", len(only_padded), only_padded).data_length]
    assert len(key_lines(data, 5, 1)) == 2


numbers = st.sampled_from([0, 1, 5, 10, 50, 2**62, U63 - 1, U63])


@given(st.lists(st.tuples(numbers, st.integers(0, 3), st.integers(0, 2), st.integers(0, 2),
                          st.integers(0, 9), st.integers(0, 2)), max_size=40),
       numbers, st.integers(0, 2))
def test_key_lines_are_the_keys_run_whatever_the_leading_zeros(spec, id1, link_type):
    """Every number form parse_line accepts (leading zeros, 19 digits) is matched by value, in
    the whole data and in any whole blocks of the key's run."""
    lines = [_bucket_line(_padded(a, za), _padded(b, zb), j, _padded(t, zt), j)
             for j, (a, za, b, zb, t, zt) in enumerate(spec)]
    content = encode(lines, block=1)
    index = parse_tail("/f.0", len(content), content)
    data = content[:index.data_length]
    assert key_lines(data, id1, link_type) == \
        [l for l in data_lines(data) if parse_row(l)[0][:2] == (id1, link_type)]
    for i in index.blocks(id1, link_type):
        block = data[index.offset(i):index.offset(i + 1)]
        assert key_lines(block, id1, link_type) == \
            [l for l in data_lines(block) if parse_row(l)[0][:2] == (id1, link_type)]


# Rows of one (id1, link_type) in a few files, with ties on time and version for the merge
# rule's file and line tie-breakers.
rows = st.lists(st.tuples(st.integers(0, 5), st.integers(0, 1), st.integers(0, 4),
                          st.integers(0, 2), st.integers(0, 2)), max_size=50)


@given(rows, st.lists(st.integers(1, 4), min_size=1, max_size=8), st.booleans())
def test_files_merged_in_batches_equal_the_reference_store_newest_first(spec, sizes, at_once):
    """Each file read newest first in batches of the given sizes (or whole, as the eager path
    does), the files the merge waits for read next, as RawReader reads them: the winners come
    out as the in-memory reference gives them, each key once."""
    per_file: dict[int, list[tuple[Link, Origin]]] = {}
    everything = []
    for line_no, (id2, vis, time, version, file_seq) in enumerate(spec, 1):
        row = (Link(7, 1, id2, vis, b"f%d l%d" % (file_seq, line_no), time, version),
               Origin(0, file_seq, line_no))
        per_file.setdefault(file_seq, []).append(row)
        everything.append(row)
    # Each file's rows as the reader finds them: the sorted file's lines read backwards.
    files = [sorted(rows, key=lambda r: r[0].time)[::-1] for rows in per_file.values()]
    merge = NewestFirstMerge(len(files))
    taken = [0] * len(files)
    got: list[Link] = []
    rounds = 0
    while wanted := merge.wanted():
        for i in wanted:
            size = len(files[i]) if at_once else sizes[rounds % len(sizes)]
            batch = files[i][taken[i]:taken[i] + size]
            taken[i] += len(batch)
            merge.add(i, batch, taken[i] == len(files[i]))
        got += merge.winners()
        rounds += 1
    reference = MemoryStore()
    reference.write_links(everything)
    assert got == list(reference.scan_newest_first(7, 1))
    if at_once:
        assert rounds <= 1
