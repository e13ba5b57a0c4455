"""Test data sets and the independent expectations computed from their raw files."""

from __future__ import annotations

import itertools
from collections import defaultdict
from pathlib import Path

from coordinator import CountLink, MultigetLink
from debl.format.bucket_map import BucketMap
from debl.format.link import (CHECKSUM_MOD, Link, Origin, ParseError, line_body, line_checksum,
                        parse_line)
from debl.store.memory import MemoryStore
from debl.workload.generator import GenerateSummary, generate
from debl.workload.spec import GenerateSpec
from loaders.source import LocalSource


def make_dataset(directory: Path, max_id: int = 20001, files: int = 6, bad_lines: int = 7,
                 seed: int = 5) -> GenerateSummary:
    """A small LinkBench-like data set with updates, hidden rows and bad lines."""
    spec = GenerateSpec(max_id=max_id, files=files, days=files, seed=seed, bad_lines=bad_lines,
                        max_degree=40, update_share=0.2, hidden_share=0.3)
    return generate(directory, spec, overwrite=True)


def raw_rows(directory: Path, max_line_bytes: int | None = None):
    """Every parseable line as (file_seq, name, line_no, Link, the line without its line end),
    files oldest first; a line longer than *max_line_bytes* (its line end not counted) is bad
    whatever it holds."""
    for seq, f in enumerate(LocalSource(directory).list()):
        with open(directory / f.name, "rb") as stream:
            for line_no, line in enumerate(stream, 1):
                if max_line_bytes is not None and len(line_body(line)) > max_line_bytes:
                    continue
                try:
                    yield seq, f.name, line_no, parse_line(line), line_body(line)
                except ParseError:
                    continue


def reference_store(directory: Path, hot_names: set[str], only: str = "all",
                    max_line_bytes: int | None = None) -> MemoryStore:
    """The merge rule applied by the in-memory reference store to the raw files
    (only="hot"/"cold"/"all")."""
    store = MemoryStore()
    rows = []
    for seq, name, line_no, link, _ in raw_rows(directory, max_line_bytes):
        hot = name in hot_names
        if only == "all" or (only == "hot") == hot:
            rows.append((link, Origin(int(hot), seq, line_no)))
    store.write_links(rows)
    return store


def expected_buckets(directory: Path, cold_names: set[str], bucket_map: BucketMap,
                     max_line_bytes: int | None = None) -> dict[int, tuple]:
    """b_index -> (k_lo, k_hi, rows, checksum, c_lo, c_hi) computed from the cold files alone:
    the checksum of each line as written (leading zeros and all; without its line end), and
    ``[c_lo, c_hi]`` the id1 span of the bucket's rows."""
    rows: dict[int, int] = defaultdict(int)
    sums: dict[int, int] = defaultdict(int)
    ids: dict[int, list[int]] = defaultdict(list)
    for _, name, _, link, body in raw_rows(directory, max_line_bytes):
        if name in cold_names:
            b = bucket_map.bucket_of(link.id1)
            rows[b] += 1
            sums[b] += line_checksum(body)
            ids[b].append(link.id1)
    return {b: (*bucket_map.range_of(b), rows[b], sums[b] % CHECKSUM_MOD, min(ids[b]),
                max(ids[b])) for b in rows}


def all_rows(store) -> set[Link]:
    """Every row of a MemoryStore (hidden included)."""
    return {link for key in store.keys() for link in store.scan_newest_first(*key)}


def multiget_id2s(reference: MemoryStore, key: tuple[int, int]) -> tuple[int, ...]:
    """id2s to ask multiget_link of *key* for: up to two hidden ones, up to three visible ones
    spread over its list, and one it does not have."""
    rows = list(reference.scan_newest_first(*key))
    hidden = [l.id2 for l in rows if not l.visibility][:2]
    shown = [l.id2 for l in rows if l.visibility]
    present = {l.id2 for l in rows}
    absent = next(i for i in itertools.count(1) if i not in present)
    return (*hidden, *shown[::max(1, len(shown) // 3)][:3], absent)


def check_count_and_multiget(coordinator, reference: MemoryStore, key: tuple[int, int],
                             **options) -> set[str]:
    """count_link and multiget_link of *key* asked through *coordinator* (``options``: the
    keywords of ``ask``) are complete and equal the reference's; the routes that answered."""
    count = coordinator.ask(CountLink(*key), **options)
    assert count.complete and count.count == reference.count_link(*key), (key, count.route)
    id2s = multiget_id2s(reference, key)
    got = coordinator.ask(MultigetLink(*key, id2s), **options)
    assert got.complete and got.links == reference.multiget_link(*key, id2s), (key, got.route)
    return {count.route.value, got.route.value}


def check_writes_landed(session, records) -> int:
    """The source holds what the client's writes (``WriteRecord``s) say they did: each key's
    last write that changed a row, in commit order (the GTIDs' where the source logs them, else
    the acknowledgements': one writer, or writers on different keys), decides whether its row is
    shown (add_link, update_link) or hidden (delete_link). Returns the keys checked."""
    changed = [r for r in records if r.ok and r.changed]
    logged = all(r.gtid for r in changed)
    last: dict[tuple, str] = {}
    for record in sorted(changed, key=lambda r: int(r.gtid.split("-")[2]) if logged
                         else r.acked_ns):
        last[(record.id1, record.link_type, record.id2)] = record.op
    for (id1, link_type, id2), op in last.items():
        row = session.get_link(id1, link_type, id2)
        assert row is not None and row.visibility == (op != "delete_link"), (id1, link_type,
                                                                             id2, op, row)
    return len(last)
