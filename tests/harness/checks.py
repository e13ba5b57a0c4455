"""What a fault trial checks once the command is resumed or restarted: the stores against the
in-memory reference built from the raw files, and what a later run would read.

The reference (``Reference.of``) is the merge rule of ``debl.store.memory.MemoryStore`` over
every parseable line of the input, apart for the hot files (MySQL), the cold ones (HBase) and
all of them (the answers), plus every cold line by its origin ``(file_seq, line_no)``: the rows
dist_ch must have written exactly once.

Rows lost and rows doubled, from the stores themselves, never from DeBL's own accounting:

- **MySQL**: every row of the link table (hidden ones too) against the hot files' winners: a
  winner missing or different is lost; a row no hot file holds (an earlier dataset's) doubled.
- **HDFS**: every row of every bucket file a reader would read (the catalog's path prefixes,
  ``debl.format.bucket_file.is_bucket_file``, as gen_HF, verify and the raw route list them), by its
  origin, against the cold lines: one missing is lost, one read twice (a stale file of an
  earlier attempt beside the new one) doubled, as is one in the wrong bucket.
- **HBase** (once every bucket is loaded): every cell against the cold files' winners; a key
  under two row keys is doubled.
- **Answers**: ``get_link_list`` through the coordinator, as a client asks it, for a sample of
  the keys (all of them when few), against the reference.

Files left behind that a later run reads are the doubled HDFS rows; files left behind that no
run reads (a ``._COPYING_`` temporary, a killed run's HFile directory) are listed apart.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from coordinator import Coordinator
from debl.format.bucket_file import data_lines, is_bucket_file, parse_tail
from debl.format.bucket_map import MAX_ID
from debl.catalog import Catalog, JobState, LoadRecord
from debl.config import Config
from debl.errors import DeblError
from debl.hdfs import HdfsClient
from debl.format.link import Link, Origin, ParseError, line_body, parse_line
from debl.store.hbase import HBaseStore
from debl.store.memory import MemoryStore
from debl.store.mysql import MySQLStore
from loaders.source import LocalSource
from loaders.split import split_files


@dataclass
class Reference:
    """The expected content of a load of *directory* with the hot files *hot*."""

    directory: Path
    hot: frozenset[str]
    hot_store: MemoryStore
    cold_store: MemoryStore
    all_store: MemoryStore
    # (file_seq, the line's byte offset in its file) -> the line, no line end: a bucket file's
    # origin (docs/ONLINE.md, "Bucket files")
    cold_lines: dict[tuple[int, int], bytes]

    @staticmethod
    def of(directory: Path, hot_bytes: int | None) -> "Reference":
        """The reference of *directory* loaded with ``--hot-bytes hot_bytes`` (None: no hot
        file), files in the source's own order (oldest first: the ``file_seq`` of the merge
        rule)."""
        listed = LocalSource(directory).list()
        hot = frozenset(f.name for f in split_files(listed, hot_bytes=hot_bytes).hot)
        hot_rows: list[tuple[Link, Origin]] = []
        cold_rows: list[tuple[Link, Origin]] = []
        cold_lines: dict[tuple[int, int], bytes] = {}
        for seq, f in enumerate(listed):
            is_hot = f.name in hot
            with open(directory / f.name, "rb") as stream:
                offset = 0
                for line_no, line in enumerate(stream, 1):
                    at, offset = offset, offset + len(line)
                    try:
                        link = parse_line(line)
                    except ParseError:
                        continue
                    row = (link, Origin(int(is_hot), seq, line_no))
                    (hot_rows if is_hot else cold_rows).append(row)
                    if not is_hot:
                        cold_lines[(seq, at)] = line_body(line)
        stores = [MemoryStore() for _ in range(3)]
        stores[0].write_links(hot_rows)
        stores[1].write_links(cold_rows)
        stores[2].write_links(hot_rows + cold_rows)  # the merge rule across hot and cold
        return Reference(Path(directory), hot, stores[0], stores[1], stores[2], cold_lines)


def _rows(store: MemoryStore) -> dict[tuple[int, int, int], Link]:
    """Every winner of a MemoryStore (hidden ones too), by key."""
    return {link.key: link for key in store.keys() for link in store.scan_newest_first(*key)}


@dataclass
class StoreCheck:
    """One store against the reference: rows lost (missing or different) and doubled (read
    twice, or not expected at all), with a few examples of each."""

    store: str
    checked: int = 0
    lost: int = 0
    doubled: int = 0
    examples: list[str] = field(default_factory=list)

    def note(self, text: str) -> None:
        if len(self.examples) < 5:
            self.examples.append(text)


def compare_rows(name: str, found: list[Link],
                 want: dict[tuple[int, int, int], Link]) -> StoreCheck:
    """*found* (a whole store's rows) against *want* (the reference's winners by key)."""
    check = StoreCheck(name, len(found))
    seen: Counter = Counter(link.key for link in found)
    by_key = {link.key: link for link in found}
    for key, link in want.items():
        if by_key.get(key) != link:
            check.lost += 1
            check.note(f"{name}: {key} is {by_key.get(key)}, expected {link}")
    for key, n in seen.items():
        if key not in want:
            check.doubled += n
            check.note(f"{name}: {key} is not in the input's {name} rows")
        elif n > 1:
            check.doubled += n - 1
            check.note(f"{name}: {key} stored {n} times")
    return check


def _current(config: Config):
    with Catalog(config) as catalog:
        return catalog.loads.current()


def check_mysql(config: Config, ref: Reference,
                load: LoadRecord | None = None) -> StoreCheck:
    """The MySQL rows of *load* (default: the current load) against the hot lines. A load
    without hot files has no MySQL table (docs/LOADING.md, "Days"): no row, which is right
    only if no line was hot."""
    with MySQLStore(config, (load or _current(config)).namespace.link_table) as mysql:
        stored = list(mysql.scan_id1_range(0, MAX_ID)) if mysql.table_exists() else []
        return compare_rows("MySQL", stored, _rows(ref.hot_store))


def check_hbase(config: Config, ref: Reference, load: LoadRecord | None = None) -> StoreCheck:
    """The HBase rows of *load* (default: the current load) against the cold lines."""
    with HBaseStore(config, (load or _current(config)).namespace.hbase_table) as hbase:
        return compare_rows("HBase", list(hbase.scan_id1_range(0, MAX_ID)), _rows(ref.cold_store))


@dataclass
class HdfsCheck(StoreCheck):
    files: int = 0  # bucket files read
    unread_leftovers: list[str] = field(default_factory=list)  # never read by a later run


def check_hdfs(config: Config, ref: Reference, load: LoadRecord | None = None) -> HdfsCheck:
    """Every bucket file a reader of *load* (default: the current load) would read, by origin,
    against the cold lines."""
    check = HdfsCheck("HDFS")
    fs = HdfsClient(config)
    with Catalog(config) as catalog:
        load = load or catalog.loads.current()
        bucket_map = load.bucket_map if load else None
        prefixes = {b.b_index: catalog.index.bucket_paths(b.b_index, load.load_id)
                    for b in catalog.index.buckets(load.load_id)} if load else {}
    seen: Counter = Counter()
    for b, paths in prefixes.items():
        for prefix in paths:
            directory, stem = prefix.rsplit("/", 1)
            for status in fs.list(directory):
                if not is_bucket_file(status.name, stem):
                    continue
                check.files += 1
                content = fs.read(status.path)
                index = parse_tail(status.path, len(content), content)
                # Compared as bytes (each row is the input line, TAB file_seq, TAB its offset):
                # parsing every row again costs more than the rest of a trial's checks.
                for row in data_lines(content[:index.data_length]):
                    body, seq, position = row.rsplit(b"\t", 2)
                    at = (int(seq), int(position))
                    seen[at] += 1
                    check.checked += 1
                    id1 = int(body[:body.index(b"\t")])
                    if ref.cold_lines.get(at) != body:
                        check.doubled += 1
                        check.note(f"HDFS: {status.path} holds {body[:80]!r} as line {at}, "
                                   "which the input does not")
                    elif bucket_map is not None and bucket_map.bucket_of(id1) != b:
                        check.doubled += 1
                        check.note(f"HDFS: {status.path} holds id1 {id1} of bucket "
                                   f"{bucket_map.bucket_of(id1)}")
    for at, n in seen.items():
        if n > 1:
            check.doubled += n - 1
            check.note(f"HDFS: cold line {at} read {n} times")
    for at in ref.cold_lines:
        if at not in seen:
            check.lost += 1
            check.note(f"HDFS: cold line {at} is in no bucket file")
    check.unread_leftovers = unread_leftovers(config, fs)
    return check


def unread_leftovers(config: Config, fs: HdfsClient) -> list[str]:
    """Files under the dataset's HDFS root that no later run reads: temporaries of a killed
    copy or dist_ch (``._COPYING_``) and HFile directories of a killed gen_HF run."""
    root = config.hdfs.root.rstrip("/")
    found = []
    for sub in ("buckets", "hfiles"):
        stack = [f"{root}/{sub}"]
        while stack:
            path = stack.pop()
            try:
                entries = fs.list(path)
            except DeblError:  # absent
                continue
            for e in entries:
                if e.is_dir:
                    if sub == "hfiles":
                        found.append(e.path)
                    else:
                        stack.append(e.path)
                elif e.path.endswith("._COPYING_"):
                    found.append(e.path)
    return found


@dataclass
class AnswerCheck:
    asked: int = 0
    wrong: int = 0
    errors: int = 0
    examples: list[str] = field(default_factory=list)


def check_answers(config: Config, ref: Reference, sample: int, seed: int,
                  timeout: float = 60.0) -> AnswerCheck:
    """``get_link_list`` through a coordinator (raw route at once for buckets not loaded, so
    nothing waits on gen_HF) for *sample* keys of the input (all when fewer), against the
    reference."""
    keys = sorted(ref.all_store.keys())
    if len(keys) > sample:
        keys = random.Random(seed).sample(keys, sample)
    check = AnswerCheck()
    with Coordinator(config.replace(coordinator_raw_after=0.0)) as coordinator:
        if not coordinator.wait_until_up(timeout):
            check.errors += 1
            check.examples.append("the system did not come up")
            return check
        for key in keys:
            check.asked += 1
            try:
                got = coordinator.get_link_list(*key, timeout=timeout)
            except DeblError as exc:
                check.errors += 1
                if len(check.examples) < 5:
                    check.examples.append(f"{key}: {exc}")
                continue
            want = ref.all_store.get_link_list(*key)
            if got != want:
                check.wrong += 1
                if len(check.examples) < 5:
                    check.examples.append(f"{key}: {len(got)} links, expected {len(want)}")
    return check


def all_loaded(config: Config) -> bool:
    """Whether every bucket of the current load is in HBase."""
    with Catalog(config) as catalog:
        load = catalog.loads.current()
        return load is not None and all(b.state == JobState.LOADED
                                        for b in catalog.index.buckets(load.load_id))
