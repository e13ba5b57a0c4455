"""``debl verify``: the nothing-lost accounting of docs/DESIGN.md section 8, checked from the
data itself.

Per source file: its lines, counted again from the source, equal the good lines that the load
took from it (into buckets, hot files' buckets included, or into MySQL when it streamed the hot
files itself) plus its lines in the reject file.
Per bucket: the rows and checksum of its HDFS files, read back, equal the bucket index. Per loaded
bucket: the rows and checksum in HBase, scanned back, equal what gen_HF recorded, and gen_HF's
winners plus the rows the merge rule superseded equal the bucket's rows. MySQL: the link table
holds as many rows as the hot load recorded.

Every check is a (what, expected, found) triple; the report is good when they all agree.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

from debl.format.bucket_file import is_bucket_file, read_index
from debl.catalog import Catalog, JobState
from debl.config import Config
from debl.errors import LoadStateError
from debl.hdfs import HdfsClient
from debl.format.link import CHECKSUM_MOD, line_checksum, row_checksum
from debl.store.mysql import MySQLStore
from loaders.load import reject_path
from loaders.rejects import read_rejects, unescape_name
from loaders.source import open_source


@dataclass(frozen=True)
class Check:
    what: str
    expected: object
    found: object

    @property
    def ok(self) -> bool:
        return self.expected == self.found


@dataclass
class VerifyReport:
    load_id: str
    state: str  # the load's state: a load that is not "up" has not taken every line yet
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]


def verify_load(config: Config, load_id: str | None = None, *, source: bool = True,
                source_spec: str | None = None, progress=lambda what: None) -> VerifyReport:
    """Verify the current load (or *load_id*, any load whose stores exist; before any load is
    up, the newest). ``source=False`` skips re-reading the source;
    *source_spec* reads it from there instead of the recorded one (an HTTP source's
    credentials come from the config, as for the load)."""
    with Catalog(config) as catalog:
        loads = catalog.loads
        load = loads.load(load_id) if load_id else (loads.current() or loads.load())
        if load is None:
            raise LoadStateError(f"no load {load_id!r}" if load_id else "no load has run yet")
        if load.dropped is not None or load.dropping is not None:
            raise LoadStateError(f"load {load.load_id}'s stores were dropped, or are being "
                                 "dropped (a newer day replaced it): only loads whose stores "
                                 "exist can be verified")
        load_id = load.load_id
        report = VerifyReport(load_id, load.state)
        files = [replace(f, name=unescape_name(f.name)) for f in catalog.files.files(load_id)]
        counts = catalog.files.file_counts(load_id)
        buckets = catalog.index.buckets(load_id)
        jobs = {j.b_index: j for j in catalog.jobs.jobs(load_id)}
        part_paths = {b.b_index: catalog.index.bucket_paths(b.b_index, load_id) for b in buckets}

    rejects: dict[str, int] = defaultdict(int)
    for name, _, _, _ in read_rejects(reject_path(config, load_id)):
        rejects[name] += 1

    good: dict[int, int] = defaultdict(int)
    for count in counts:
        good[count.file_seq] += count.rows
    if source:
        src = open_source(source_spec or load.source, config)
        for f in files:
            progress(f"source file {f.name}")
            with src.open(f.name) as stream:
                lines = _count_lines(stream)
            report.checks.append(Check(f"file {f.name}: lines = loaded + rejected", lines,
                                       good[f.file_seq] + rejects[f.name]))

    fs = HdfsClient(config)
    for b in buckets:
        progress(f"bucket {b.b_index}")
        rows, checksum = 0, 0
        for path, length in bucket_files(fs, part_paths[b.b_index]):
            n, s = _bucket_file_sum(fs, path, length)
            rows, checksum = rows + n, (checksum + s) % CHECKSUM_MOD
        report.checks.append(Check(f"bucket {b.b_index}: HDFS rows, checksum = index",
                                   (b.rows, b.checksum), (rows, checksum)))
        job = jobs.get(b.b_index)
        if job is not None and job.state == JobState.LOADED:
            report.checks.append(Check(f"bucket {b.b_index}: HBase winners + superseded = rows",
                                       b.rows, (job.rows_loaded or 0) + (job.superseded or 0)))
            report.checks.append(Check(f"bucket {b.b_index}: HBase rows, checksum = gen_HF's",
                                       (job.rows_loaded, job.checksum_loaded),
                                       _hbase_sum(config, load.namespace.hbase_table, b.k_lo,
                                                  b.k_hi)))

    if load.hot_in_mysql:  # before that MySQL is still taking the hot rows in
        with MySQLStore(config, load.namespace.link_table) as mysql:
            mysql_rows = mysql.count()
        report.checks.append(Check("MySQL link table rows = hot rows recorded", load.hot_rows,
                                   mysql_rows))
    return report


def _count_lines(stream) -> int:
    lines, last = 0, b"\n"
    while block := stream.read(1 << 20):
        lines += block.count(b"\n")
        last = block[-1:]
    return lines + (last != b"\n")


def bucket_files(fs: HdfsClient, prefixes: list[str]) -> list[tuple[str, int]]:
    """The path and length of every file of a bucket whose chunks' path prefixes are
    *prefixes* (``Catalog.index.bucket_paths``), never a killed dist_ch's temporary."""
    found = []
    for prefix in prefixes:
        directory, stem = prefix.rsplit("/", 1)
        found += [(f.path, f.length) for f in fs.list(directory) if is_bucket_file(f.name, stem)]
    return found


def bucket_lines(fs: HdfsClient, path: str, length: int,
                 id1s: tuple[int, int] | None = None) -> Iterator[bytes]:
    """The lines (without newline) of one bucket file's data part, not its index; with
    *id1s* ``(k_lo, k_hi)`` only the blocks that can hold those id1s (they may hold others:
    the caller filters)."""
    index = read_index(path, length, lambda offset, n: fs.read_range(path, offset, n))
    start, end = 0, index.data_length
    if id1s is not None:
        span = index.id1_span(*id1s)
        if span is None:
            return
        start, end = span
    tail = b""
    for block in fs.stream(path, 4 << 20, offset=start, length=end - start):
        block = tail + block
        cut = block.rfind(b"\n") + 1
        tail = block[cut:]
        yield from block[:cut].split(b"\n")[:-1]


def _bucket_file_sum(fs: HdfsClient, path: str, length: int) -> tuple[int, int]:
    """Rows and checksum of the lines of one bucket file (its data part: not its index)."""
    rows, checksum = 0, 0
    for line in bucket_lines(fs, path, length):
        rows += 1
        checksum += line_checksum(line.rsplit(b"\t", 2)[0])
    return rows, checksum % CHECKSUM_MOD


def _hbase_sum(config: Config, table: str, k_lo: int, k_hi: int) -> tuple[int, int]:
    # lazy import: the HBase client (happybase, thriftpy2) would cost every `debl` command's
    # start-up (docs/ARCHITECTURE.md, "Lazy imports")
    from debl.store.hbase import HBaseStore

    with HBaseStore(config, table) as store:
        rows, checksum = 0, 0
        for link in store.scan_id1_range(k_lo, k_hi):
            rows += 1
            checksum += row_checksum(link)
    return rows, checksum % CHECKSUM_MOD
