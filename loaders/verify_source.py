"""``debl verify --against-source``: the current load's link data with the change log applied,
compared with the source's table row by row (docs/FRESHNESS.md, "The checker"). After the
writes stop and the follower has caught up, DeBL's answers can only be right if this is: the
dump's rows in the load's stores, with every change since the dump applied by the overlay rule
(``debl.format.overlay``), are exactly the source's rows.

Range by range of id1 (each cold bucket's range, and the ranges between them): the load's rows
of the range from wherever they are now, as a query reads them (the hot side from MySQL, or
the hot files' bucket before MySQL took them over; the cold side from HBase for a bucket gen_HF
loaded, else from the bucket's files in HDFS), the merge rule among them; then the range's
changes from the change log; then the source's rows of the range (its ``id1_type`` index).
Counted: **missing** (a row of the source DeBL lacks), **extra** (a row of DeBL the source
lacks), **different** (both hold the key, with other values), with examples.

Before it compares, it waits (at most *wait_s*) until the follower's position reaches the
source's head read at its start, and names what it waits for when it gives up; a head that
moved by the end is a note (writes went on: rows written meanwhile may differ). Without a
follower of the load's source (nothing captured), or with ``--no-changes``, it compares the
load's rows alone, what DeBL answers when nothing is kept fresh: every row written since the
dump is then missing (a new key) or different (updated, hidden), and a note says why.

Memory: one range's rows at a time: a cold bucket's (what one gen_HF task holds), or the hot
rows between two cold buckets' ranges.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from debl.catalog import Bucket, Catalog, JobState, LoadRecord, LoadState
from debl.config import Config
from debl.errors import LoadStateError
from debl.format.bucket_file import parse_row
from debl.format.link import MAX_ID, Link, Origin, merge_rank
from debl.format.overlay import Key, overlay
from debl.hdfs import HdfsClient
from debl.position import DumpPosition, parse_gtid
from debl.store import source_db
from debl.store.mysql import MySQLStore
from loaders.verify import bucket_files, bucket_lines

WAIT_POLL_S = 0.2
MAX_EXAMPLES = 5
_HOT, _COLD = Origin(1, 0, 0), Origin(0, 0, 0)  # a store's winners: only the side counts


@dataclass
class SourceComparison:
    """The load *load_id* (dumped at *dump*) with the change log applied up to *follower*,
    against the source's table at *head*: rows of each side, changes applied, and the rows
    missing from DeBL, extra in it and different, with examples."""

    load_id: str
    dump: str
    head: str
    follower: int | None  # None: no change log applied
    ranges: int = 0
    source_rows: int = 0
    debl_rows: int = 0
    changes: int = 0
    missing: int = 0
    extra: int = 0
    different: int = 0
    examples: dict[str, list[str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.missing == self.extra == self.different == 0

    def to_dict(self) -> dict:
        return {**asdict(self), "ok": self.ok}

    def _example(self, kind: str, text: str) -> None:
        shown = self.examples.setdefault(kind, [])
        if len(shown) < MAX_EXAMPLES:
            shown.append(text)


def compare_with_source(config: Config, load_id: str | None = None, *, changes: bool = True,
                        wait_s: float = 60.0,
                        progress: Callable[[str], None] = lambda what: None
                        ) -> SourceComparison:
    """Compare the current load (or *load_id*) with the source (see the module); with
    *changes* False, or when no follower has captured the source's changes, the load's rows
    alone (what DeBL answers without capture: every row written since the dump differs; a note
    says which). LoadStateError for a load without a dump's position, not up, or dropped, and
    when the follower has not reached the source's head within *wait_s* seconds."""
    started = time.monotonic()
    with Catalog(config) as catalog:
        load = _load(catalog, load_id)
        position = load.position
        assert position is not None  # _load refuses a load without one
        cold = sorted(catalog.index.buckets(load.load_id), key=lambda b: b.k_lo)
        hot = [] if load.hot_in_mysql else catalog.index.buckets(load.load_id, hot=True)
        paths = {(b.hot, b.b_index): catalog.index.bucket_paths(b.b_index, load.load_id, b.hot)
                 for b in [*cold, *hot]}
        follower = catalog.changes.follower(position.source) if changes else None
        if follower is None:
            head, reached = read_head(config), None
        else:
            head, reached = caught_up(config, catalog, position, wait_s)
        found = SourceComparison(load.load_id, position.gtid, head, reached)
        if follower is None and parse_gtid(head)[2] > position.seq:
            found.notes.append(
                ("the changes since the dump are not applied (--no-changes)" if not changes else
                 f"no follower has captured the changes of source {position.source}: DeBL "
                 "answers from the dump's rows alone") +
                f": every row written since the dump ({position.gtid}; the source's head is "
                f"{head}) shows as missing or different" +
                ("" if not changes else "; `debl follow` captures them"))
        sides = _Sides(config, load, paths)
        conn = source_db.connect(config)
        try:
            for k_lo, k_hi, bucket in _ranges(cold):
                progress(f"id1 {k_lo}..{k_hi}")
                applied = [] if follower is None else catalog.changes.in_range(
                    position.source, k_lo, k_hi, position.seq)[0]
                mine = overlay(sides.rows(k_lo, k_hi, hot, bucket), applied)
                with conn.cursor() as cur, source_db.errors(config, "the comparison"):
                    theirs = {link.key: link for link in source_db.rows_in_range(
                        cur, config.source_db.table, k_lo, k_hi)}
                _compare(found, mine, theirs)
                found.ranges += 1
                found.changes += len(applied)
            with conn.cursor() as cur, source_db.errors(config, "reading the head"):
                if source_db.head(cur) != head:
                    found.notes.append("the source took writes during the comparison: rows "
                                       "written meanwhile may show as different; stop the "
                                       "writes and verify again")
        finally:
            conn.close()
            sides.close()
    found.seconds = time.monotonic() - started
    return found


def _load(catalog: Catalog, load_id: str | None) -> LoadRecord:
    loads = catalog.loads
    load = loads.load(load_id) if load_id else loads.current()
    if load is None:
        raise LoadStateError(f"no load {load_id!r}" if load_id else
                             "no load is up: load a dump of the source first")
    if load.dropped is not None or load.dropping is not None:
        raise LoadStateError(f"load {load.load_id}'s stores were dropped, or are being "
                             "dropped: only a load whose stores exist can be compared")
    if load.position is None:
        raise LoadStateError(f"load {load.load_id} carries no dump position (its listing had "
                             "none): it is no dump of the source, nothing to compare; load "
                             "the output of `debl source dump`")
    if load.state != LoadState.UP:
        raise LoadStateError(f"load {load.load_id} is {load.state}, not up: it has not taken "
                             "every row of the dump yet; verify once it is up")
    return load


def read_head(config: Config) -> str:
    """The source's head now (its GTID)."""
    conn = source_db.connect(config)
    try:
        with conn.cursor() as cur, source_db.errors(config, "reading the head"):
            return source_db.head(cur)
    finally:
        conn.close()


def caught_up(config: Config, catalog: Catalog, position: DumpPosition,
              wait_s: float) -> tuple[str, int]:
    """The source's head now, and the follower's position once it has reached it (at most
    *wait_s* seconds later); LoadStateError naming both when it has not."""
    head = read_head(config)
    head_seq = parse_gtid(head)[2]
    state = catalog.changes.follower(position.source)
    if state is not None and not state.keeps(position.seq):
        raise LoadStateError(
            f"the change log of source {position.source} holds the changes past position "
            f"{state.kept_from} only, the load was dumped at {position.gtid}: the changes "
            "between are forgotten and the load cannot be compared with the source; load a "
            "newer dump (`debl source dump DIR`, `debl load DIR`)")
    deadline = time.monotonic() + wait_s
    while True:
        state = catalog.changes.follower(position.source)
        if head_seq <= position.seq:  # nothing since the dump: nothing to wait for
            return head, position.seq if state is None else state.seq
        if state is not None and state.seq >= head_seq:
            return head, state.seq
        if time.monotonic() >= deadline:
            break
        time.sleep(WAIT_POLL_S)
    if state is None:
        raise LoadStateError(f"no follower has captured the changes of source "
                             f"{position.source} (the source's head is {head}, the dump's "
                             f"{position.gtid}): start `debl follow`, then verify again")
    error = f"; it says: {state.error}" if state.error else ""
    raise LoadStateError(
        f"the change log of source {position.source} reached position {state.seq} in "
        f"{wait_s:g} s, the source's head is {head} ({head_seq - state.seq} transactions "
        f"ahead); the follower is {state.state}{error}. Stop the writes, check `debl follow` "
        "(`debl status`), and verify again (--wait for longer)")


def _ranges(cold: list[Bucket]) -> Iterator[tuple[int, int, Bucket | None]]:
    """The id range in pieces: each cold bucket's range, and the ranges between them."""
    at = 0
    for b in cold:
        if b.k_lo > at:
            yield at, b.k_lo - 1, None
        yield b.k_lo, b.k_hi, b
        at = b.k_hi + 1
    if at <= MAX_ID:
        yield at, MAX_ID, None


class _Sides:
    """The load's stores, opened on first use, and its rows of a range by the merge rule."""

    def __init__(self, config: Config, load: LoadRecord,
                 paths: dict[tuple[bool, int], list[str]]):
        self.config, self.load, self.paths = config, load, paths
        self._mysql: MySQLStore | None = None
        self._hbase: Any = None
        self._fs: HdfsClient | None = None

    def rows(self, k_lo: int, k_hi: int, hot: list[Bucket],
             cold: Bucket | None) -> dict[Key, Link]:
        """The winners of the load's rows with id1 in [k_lo, k_hi], hidden ones included."""
        best: dict[Key, tuple[tuple, Link]] = {}

        def add(link: Link, origin: Origin) -> None:
            rank = merge_rank(link, origin)
            old = best.get(link.key)
            if old is None or rank > old[0]:
                best[link.key] = (rank, link)

        if self.load.hot_in_mysql:
            for link in self.mysql.scan_id1_range(k_lo, k_hi):
                add(link, _HOT)
        for b in hot:  # before MySQL took the hot rows over: the hot files' bucket
            for link, origin in self._files(True, b, (k_lo, k_hi)):
                if k_lo <= link.id1 <= k_hi:
                    add(link, origin)
        if cold is not None and cold.state == JobState.LOADED:
            for link in self.hbase.scan_id1_range(k_lo, k_hi):
                add(link, _COLD)
        elif cold is not None:
            for link, origin in self._files(False, cold, None):
                add(link, origin)
        return {key: link for key, (_, link) in best.items()}

    def _files(self, hot: bool, b: Bucket,
               id1s: tuple[int, int] | None) -> Iterator[tuple[Link, Origin]]:
        if self._fs is None:
            self._fs = HdfsClient(self.config)
        for path, length in bucket_files(self._fs, self.paths[(hot, b.b_index)]):
            for line in bucket_lines(self._fs, path, length, id1s):
                yield parse_row(line, int(hot))

    @property
    def mysql(self) -> MySQLStore:
        if self._mysql is None:
            self._mysql = MySQLStore(self.config, self.load.namespace.link_table)
        return self._mysql

    @property
    def hbase(self) -> Any:
        if self._hbase is None:
            # lazy import: the HBase client (happybase, thriftpy2) would cost every `debl`
            # command's start-up (docs/ARCHITECTURE.md, "Lazy imports")
            from debl.store.hbase import HBaseStore

            self._hbase = HBaseStore(self.config, self.load.namespace.hbase_table)
        return self._hbase

    def close(self) -> None:
        for store in (self._mysql, self._hbase, self._fs):
            if store is not None:
                store.close()


def _compare(found: SourceComparison, mine: dict[Key, Link], theirs: dict[Key, Link]) -> None:
    found.source_rows += len(theirs)
    found.debl_rows += len(mine)
    for key, link in theirs.items():
        have = mine.get(key)
        if have is None:
            found.missing += 1
            found._example("missing", f"{key}: the source holds {link}, DeBL none")
        elif have != link:
            found.different += 1
            found._example("different", f"{key}: the source holds {link}, DeBL {have}")
    for key in mine.keys() - theirs.keys():
        found.extra += 1
        found._example("extra", f"{key}: DeBL holds {mine[key]}, the source none")
