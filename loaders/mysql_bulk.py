"""The hot path: bulk-load files into a MySQL link table, merged on the client.

Steps (docs/LOADING.md, "The hot path's cost", has what each costs and why it is done this way):

1. **Read**: each file is streamed from the source and checked (bad lines go to the reject file,
   never to MySQL; a block whose lines are all well formed is checked and parsed at C speed,
   ``debl.format.line_block``); the good lines are held in memory with their numbers, in input order
   (``loaders.hot_merge.HotRows``).
2. **Merge**: each key's winner is chosen on the client by the merge rule, and the winners go,
   each once and in primary-key order, through a named pipe into ``LOAD DATA LOCAL INFILE`` of
   the empty link table: InnoDB appends every row to the end of its primary key, with no
   staging table and no sort on the server. The table is in the listing layout
   (``debl.store.mysql.listing_table_ddl``): clustered in ``get_link_list``'s order, so it
   needs no secondary index, and is ready to serve once the last row is in.

Memory: the lines held are at most *run_bytes* of input at a time. A larger hot set is merged
in runs, cut between blocks in input order, in LinkBench's layout, whose unique primary key
lets a later run replace rows: the first run is loaded as above; each later one is loaded,
merged within itself, into a staging table and from there upserted into the link table, a row
replacing the stored one when its ``(time, version)`` is not less (a later run holds later
lines, so it wins ties, as the merge rule says). Then **index**: ``ALTER TABLE ADD KEY`` builds
the secondary index in one sorted pass.

Pitfalls:

- ``ESCAPED BY ''`` and ``CHARACTER SET binary``: LinkBench data holds ``\\`` and ``"``; with
  the default escape a trailing backslash swallows the tab (RUNTIME_NOTES).
- The named pipe lets pymysql stream from memory into the server without a local copy; the
  writer thread must close it (EOF) even on error, or LOAD DATA waits forever.
- The winners must be unique per key: ``LOAD DATA LOCAL`` skips a duplicate key with a warning
  (it does not fail), so a merge that let two rows of one key through would lose one silently.
- Raw pymysql, not the catalog's SQLAlchemy Core: ``LOAD DATA LOCAL INFILE`` has no Core form and
  needs the driver's local-infile support (docs/STORES.md section 3).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from debl.config import Config
from debl.config.values import MYSQL_NAME_MAX, check_identifier
from debl.errors import BadInputError, ConfigError, ServiceError
from debl.keys.key_filter import MAX_FILTER_BYTES, KeyFilter, KeyFilterBuilder
from debl.format.line_block import LONGEST_LINE, well_formed
from debl.format.link import REJECT_PREFIX, Link, ParseError, line_body, parse_line, too_long
from debl.mysql import connect, mysql_errors
from debl.store.mysql import add_index_ddl, link_table_ddl, listing_table_ddl
from loaders.hot_merge import HotRows, Winners
from loaders.rejects import RejectPart
from loaders.source import Source, SourceFile

BLOCK = 1 << 20
# Input bytes merged in memory at once: the merge's resident memory is a small multiple of them
# (docs/LOADING.md, "The hot path's cost", has the figure), so a run stays within the host's.
RUN_BYTES = 1 << 30
STREAMS = 2  # LOAD DATA statements that load the winners side by side (two cores)
PIPE_BYTES = 1 << 20

LOAD_SQL = ("LOAD DATA LOCAL INFILE %s INTO TABLE `{table}` CHARACTER SET binary "
            "FIELDS TERMINATED BY '\\t' ESCAPED BY '' LINES TERMINATED BY '\\n' "
            "(id1, link_type, id2, visibility, data, time, version)")

# A later run's winners into the link table: the stored row gives way when the new row's
# (time, version) is not less. The assignments run left to right and each sees the columns
# already assigned, so the two the condition reads go last, `time` very last (as the link
# store's upsert, debl/store/mysql.py).
_WINS = "(VALUES(time), VALUES(version)) >= (`{table}`.time, `{table}`.version)"
RUN_MERGE_SQL = (
    "INSERT INTO `{table}` (id1, link_type, id2, visibility, data, time, version) "
    "SELECT id1, link_type, id2, visibility, data, time, version FROM `{staging}` "
    "ORDER BY link_type, id1, id2 ON DUPLICATE KEY UPDATE "
    f"visibility = IF({_WINS}, VALUES(visibility), `{{table}}`.visibility), "
    f"data = IF({_WINS}, VALUES(data), `{{table}}`.data), "
    f"version = IF({_WINS}, VALUES(version), `{{table}}`.version), "
    f"time = IF({_WINS}, VALUES(time), `{{table}}`.time)")


@dataclass
class HotResult:
    rows: int = 0  # rows in the link table after the merge
    lines: int = 0  # good lines loaded (before the merge)
    rejects: int = 0
    bytes: int = 0
    k_lo: int | None = None
    k_hi: int | None = None
    per_file: dict[int, tuple[int, int]] = field(default_factory=dict)  # seq -> (good, rejects)
    phases: list[tuple[str, float, float]] = field(default_factory=list)
    keys: KeyFilterBuilder = field(default_factory=KeyFilterBuilder)  # every good line's key
    hot_keys: KeyFilter | None = None  # built from ``keys`` once every file is loaded
    runs: int = 0  # merges in memory (more than one: the input was over run_bytes)


def load_hot(config: Config, source: Source, files: list[tuple[int, SourceFile]],
             rejects: RejectPart, max_bad: int = -1,
             progress: Callable[[int], None] = lambda n: None, *, table: str | None = None,
             run_bytes: int = RUN_BYTES, source_table: bool = False) -> HotResult:
    """Load *files* (``(file_seq, file)``) into *table* (by default ``config.mysql.link_table``),
    replacing its content; its staging table, for a hot set over *run_bytes*, is
    ``<table>_staging``. With *source_table*, the table is a source database's (LinkBench's
    layout with the line format's checks, ``debl.store.mysql.link_table_ddl``), whatever the
    runs; else the listing layout when one run holds the input.

    Returns counts and phase timings: ``mysql_load`` (the files read, checked and held),
    ``mysql_merge`` (the winners chosen and written into the table), and ``mysql_index`` for a
    table in LinkBench's layout (the listing layout of one run has no index). Raises
    BadInputError once more than *max_bad* lines were rejected (-1: no limit), after closing
    everything; ConfigError for a table name that is not a plain identifier.
    """
    table = _table_name(table or config.mysql.link_table)
    result = HotResult()
    # A run holds the whole input if it can, and any one good line (with a CRLF) in any case.
    # Each file's last line may lack its LF, which the read adds: a byte per file more than
    # listed (else one such file sent a hot set that fits into the runs' layout).
    listed = sum(file.size for _, file in files) + len(files)
    rows = HotRows(max(min(run_bytes, listed), config.loading.max_line_bytes + 2, LONGEST_LINE + 2))
    conn = connect(config, local_infile=True, bulk=True)
    try:
        with conn.cursor() as cur, mysql_errors(config, f"the hot path into `{table}`"):
            # created by the first run, in the layout that the number of runs calls for
            cur.execute(f"DROP TABLE IF EXISTS `{table}`")
            cur.execute(f"DROP TABLE IF EXISTS `{table}_staging`")
            # The filter is stored in one catalog row: it must fit the server's packet, with
            # room for the statement around it.
            cur.execute("SELECT @@max_allowed_packet")
            packet = cur.fetchone()[0]  # type: ignore[index]  # a variable: one row
            result.keys = KeyFilterBuilder(min(MAX_FILTER_BYTES, packet // 2))

            def write_run(last: bool = False) -> None:
                _write_run(config, cur, table, rows, result, last, source_table)
                rows.reset()

            t0 = time.time()
            for seq, file in files:
                result.per_file[seq] = _read_file(source, file, rejects, max_bad,
                                                  config.loading.max_line_bytes, rows, result,
                                                  progress, write_run)
            result.phases.append(("mysql_load", t0, time.time()))

            # The key filter is built while the winners load: numpy and the server, not one core.
            with ThreadPoolExecutor(max_workers=1, thread_name_prefix="hot-keys") as building:
                built = building.submit(result.keys.build)
                t0 = time.time()
                write_run(last=True)
                if result.runs > 1:
                    cur.execute(f"SELECT COUNT(*), MIN(id1), MAX(id1) FROM `{table}`")
                    # (COUNT(*) gives one row)
                    result.rows, result.k_lo, result.k_hi = cur.fetchone()  # type: ignore[misc]
                result.phases.append(("mysql_merge", t0, time.time()))

                if result.runs > 1 or source_table:
                    t0 = time.time()
                    cur.execute(add_index_ddl(table))
                    result.phases.append(("mysql_index", t0, time.time()))
                result.hot_keys = built.result()
    finally:
        conn.close()
    return result


def _table_name(table: str) -> str:
    """*table* if it and its ``_staging`` twin are plain identifiers MySQL takes (64
    characters), else ConfigError. A load's table is ``<link_table>_<load id>``, longer than
    the setting: Config checks the setting, this the name derived from it."""
    check_identifier(table, "the hot path's table")
    if len(f"{table}_staging") > MYSQL_NAME_MAX:
        raise ConfigError(f"the hot path's table {table!r} leaves no room for its staging "
                          f"table within MySQL's {MYSQL_NAME_MAX} characters")
    return table


def _write_run(config: Config, cur, table: str, rows: HotRows, result: HotResult,
               last: bool, source_table: bool) -> None:
    """Merge the lines held and write the winners: for the first run, into *table* created
    for them (in the listing layout if it is also the *last*, unless it is a *source_table*);
    through the staging table for a later one."""
    if result.runs and not rows.lines:
        return  # the input ended exactly where a run did
    only = last and not result.runs and not source_table
    winners = rows.merge(listing=only)
    staging = f"{table}_staging"
    if not result.runs:
        cur.execute(listing_table_ddl(table, config.mysql.engine) if only else
                    link_table_ddl(table, config.mysql.engine, with_secondary_index=False,
                                   line_checks=source_table))
        _load_winners(config, cur, table, winners)
        result.rows, result.k_lo, result.k_hi = len(winners), winners.k_lo, winners.k_hi
    else:
        cur.execute(link_table_ddl(staging, config.mysql.engine, with_secondary_index=False))
        _load_winners(config, cur, staging, winners)
        cur.execute(RUN_MERGE_SQL.format(table=table, staging=staging))
        cur.execute(f"DROP TABLE `{staging}`")
    result.runs += 1


def _load_winners(config: Config, cur, table: str, winners: Winners) -> None:
    """LOAD DATA the winners into *table*, in STREAMS statements side by side (each a
    contiguous range of the primary key; the first on *cur*, the others on connections of
    their own). Fails if the table did not take every one of them."""
    cuts = [len(winners) * i // STREAMS for i in range(STREAMS + 1)]
    parts = [(lo, hi) for lo, hi in zip(cuts, cuts[1:]) if lo < hi]
    if not parts:
        return
    with ThreadPoolExecutor(max_workers=len(parts), thread_name_prefix="hot-load") as pool:
        others = [pool.submit(_load_on_own_connection, config, table, winners.blocks(lo, hi))
                  for lo, hi in parts[1:]]
        loaded = _load_lines(cur, table, winners.blocks(*parts[0]))
        loaded += sum(other.result() for other in others)
    if loaded != len(winners):  # LOAD DATA LOCAL skips what it cannot take, with a warning
        raise ServiceError(f"MySQL took {loaded} of the {len(winners)} rows loaded into "
                           f"`{table}` (a key twice, or a value it refused); the load stopped")


def _load_on_own_connection(config: Config, table: str,
                            blocks: Iterable[bytes | memoryview]) -> int:
    conn = connect(config, local_infile=True, bulk=True)
    try:
        with conn.cursor() as cur, mysql_errors(config, f"the hot path into `{table}`"):
            return _load_lines(cur, table, blocks)
    finally:
        conn.close()


def _load_lines(cur, table: str, blocks: Iterable[bytes | memoryview]) -> int:
    """One LOAD DATA of *blocks* (whole lines) into *table*, through a named pipe; returns
    the rows it inserted."""
    with tempfile.TemporaryDirectory(prefix="debl-hot-") as tmp:
        fifo = Path(tmp) / "lines"
        os.mkfifo(fifo, 0o600)
        # Leaving the pool waits for the writing thread; it always closes the pipe.
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="hot-pipe") as pool:
            writing = pool.submit(_write_pipe, fifo, blocks)
            cur.connection.allow(str(fifo))  # the only file this statement may send
            try:
                loaded = cur.execute(LOAD_SQL.format(table=table), (str(fifo),))
            except BaseException:
                _unblock(fifo, writing)
                raise
        writing.result()  # raises what the writing raised
    return loaded


def _write_pipe(fifo: Path, blocks: Iterable[bytes | memoryview]) -> None:
    out = open(fifo, "wb", buffering=0)
    try:
        with contextlib.suppress(OSError):  # Linux: a deeper pipe, fewer waits on either side
            fcntl.fcntl(out.fileno(), fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        for block in blocks:
            out.write(block)
    finally:
        try:
            out.close()
        except BrokenPipeError:
            pass


def _read_file(source: Source, file: SourceFile, rejects: RejectPart, max_bad: int,
               max_line: int, rows: HotRows, result: HotResult, progress: Callable[[int], None],
               write_run: Callable[[], None]) -> tuple[int, int]:
    """Read one file's good lines into *rows*, in the file's order; returns (good, rejected)
    lines. *write_run* empties *rows* when the next line would not fit.

    A block of whole lines that are all well formed is held as it is (its CRs before LFs
    dropped), checked and parsed at C speed (``debl.format.line_block``); any other block is parsed
    line by line. Memory stays bounded: an unfinished line is kept only up to *max_line* bytes
    (and the reject prefix); past that it is read on to its newline and rejected as too long.
    A line is held as its body and a LF: MySQL sees a CRLF line's LF twin."""
    counts = [0, 0]
    hold = max(max_line, REJECT_PREFIX) + 1  # as DistCh.Lines: the same lines are too long
    checked_whole = max_line >= LONGEST_LINE  # else a block's lines need the length check
    line_no = 0

    def reject(line_no: int, exc: ParseError, line: bytes) -> None:
        counts[1] += 1
        result.rejects += 1
        rejects.write(file.name, line_no, str(exc), line)
        if 0 <= max_bad < result.rejects:
            raise BadInputError(
                f"more than {max_bad} bad lines (the last: {file.name} line "
                f"{line_no}: {exc}); see {rejects.path}")

    def keep(good: int) -> None:
        counts[0] += good
        result.lines += good

    def hold_checked(lines: bytes) -> None:
        nonlocal line_no
        columns = rows.add_checked(lines)
        result.keys.add(columns.id1, columns.link_type)
        line_no += len(columns.ends)
        keep(len(columns.ends))

    def hold_parsed(bodies: list[bytes], links: list[Link]) -> None:
        rows.add_parsed(bodies, links)
        result.keys.add([link.id1 for link in links], [link.link_type for link in links])
        keep(len(bodies))

    def take(lines: bytes) -> None:
        """*lines*: whole lines, each ending in LF. Where the run is full, it is written and
        the lines go on into the next; a run holds any good line (load_hot sizes it so)."""
        nonlocal line_no
        if checked_whole and well_formed(lines):
            while len(lines) > rows.room:
                cut = lines.rfind(b"\n", 0, rows.room) + 1
                if cut:
                    hold_checked(lines[:cut])
                    lines = lines[cut:]
                write_run()
            hold_checked(lines)
            return
        bodies: list[bytes] = []
        links: list[Link] = []
        size = 0
        for line in lines.split(b"\n")[:-1]:
            line_no += 1
            body = line_body(line)
            if len(body) > max_line:
                reject(line_no, too_long(len(body), max_line), body[:REJECT_PREFIX])
                continue
            try:
                link = parse_line(body)
            except ParseError as exc:
                reject(line_no, exc, line)
                continue
            if size + len(body) + 1 > rows.room:
                hold_parsed(bodies, links)
                bodies, links, size = [], [], 0
                write_run()
            bodies.append(body)
            links.append(link)
            size += len(body) + 1
        hold_parsed(bodies, links)

    with source.open(file.name, listed=file) as stream:
        tail = b""
        while block := stream.read(BLOCK):
            progress(len(block))
            result.bytes += len(block)
            block = tail + block
            cut = block.rfind(b"\n") + 1
            if cut:
                take(block[:cut])
            tail = block[cut:]
            if len(tail) > hold:
                (length, prefix), tail, nbytes = _pass_long_line(stream, tail)
                progress(nbytes)
                result.bytes += nbytes
                line_no += 1
                reject(line_no, too_long(length, max_line), prefix)
        if tail:  # the last line without its LF (and whole lines read past a long one)
            take(tail if tail.endswith(b"\n") else tail + b"\n")
    return counts[0], counts[1]


def _pass_long_line(stream, head: bytes) -> tuple[tuple[int, bytes], bytes, int]:
    """Read *stream* on to the end of the line that *head* (no newline in it) begins, keeping
    only its first bytes: ((its length without its line end, its first REJECT_PREFIX bytes),
    the bytes after its newline, the bytes read)."""
    length, last, nbytes, rest = len(head), head[-1:], 0, b""
    while more := stream.read(BLOCK):
        nbytes += len(more)
        end = more.find(b"\n")
        if end >= 0:
            length += end
            last = more[end - 1:end] if end else last
            rest = more[end + 1:]
            break
        length += len(more)
        last = more[-1:]
    return (length - (last == b"\r"), head[:REJECT_PREFIX]), rest, nbytes


def _unblock(fifo: Path, writing: Future) -> None:
    """LOAD DATA failed before reading the pipe: open and drain it so the writing can finish."""
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        while not writing.done():
            try:
                if not os.read(fd, BLOCK):
                    time.sleep(0.01)
            except BlockingIOError:
                time.sleep(0.01)
    finally:
        os.close(fd)
