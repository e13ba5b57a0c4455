"""The hot path: bulk-load files into the MySQL link table with the server's bulk path.

Steps: each file is streamed from the source and checked (bad lines go to the reject file, never
to MySQL; a block whose lines are all well formed is checked at C speed, ``debl.line_block``);
good lines flow through a named pipe into ``LOAD DATA LOCAL INFILE`` of an unindexed staging
table, which numbers them (file, line) as they arrive; one ``INSERT ... SELECT ... ORDER BY ...
ON DUPLICATE KEY UPDATE`` applies the merge rule into the link table, created without its
secondary index: rows come in key order, each key's winner last, so the last write of a key is
its winner; the index is then built in one pass (``ALTER TABLE ADD KEY``). docs/LOADING.md,
"The hot path's cost", has what each step costs and why it is done this way.

Pitfalls:

- ``ESCAPED BY ''`` and ``CHARACTER SET binary``: LinkBench data holds ``\\`` and ``"``; with
  the default escape a trailing backslash swallows the tab (RUNTIME_NOTES).
- The named pipe lets pymysql stream a remote file into the server without a local copy; the
  writer thread must close it (EOF) even on error, or LOAD DATA waits forever.
- The merge's ``ON DUPLICATE KEY UPDATE`` relies on ``INSERT ... SELECT`` writing rows in the
  ``ORDER BY``'s order (MySQL and MariaDB do; it is what makes such a statement deterministic).
- Raw pymysql, not the catalog's SQLAlchemy Core: ``LOAD DATA LOCAL INFILE`` has no Core form and
  needs the driver's local-infile support (docs/STORES.md section 3).
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from debl.config import Config
from debl.errors import BadInputError
from debl.key_filter import MAX_FILTER_BYTES, KeyFilter, KeyFilterBuilder
from debl.line_block import LONGEST_LINE, block_keys
from debl.model import REJECT_PREFIX, ParseError, line_body, parse_line, too_long
from debl.mysql import connect, mysql_errors
from debl.store.mysql import add_index_ddl, link_table_ddl
from loaders.rejects import RejectPart
from loaders.source import Source, SourceFile

BLOCK = 1 << 20

STAGING_DDL = """CREATE TABLE `{table}` (
  id1 BIGINT UNSIGNED NOT NULL, link_type BIGINT UNSIGNED NOT NULL, id2 BIGINT UNSIGNED NOT NULL,
  visibility TINYINT NOT NULL, data VARBINARY(255) NOT NULL, time BIGINT UNSIGNED NOT NULL,
  version BIGINT UNSIGNED NOT NULL, file_seq INT NOT NULL, line_no BIGINT NOT NULL
) ENGINE={engine} DEFAULT CHARSET=binary"""

LOAD_SQL = ("LOAD DATA LOCAL INFILE %s INTO TABLE `{staging}` CHARACTER SET binary "
            "FIELDS TERMINATED BY '\\t' ESCAPED BY '' LINES TERMINATED BY '\\n' "
            "(id1, link_type, id2, visibility, data, time, version) "
            "SET file_seq = %s, line_no = (@debl_line := @debl_line + 1)")

# Each key's rows in merge-rule order, the winner last: the last write of a key is its winner.
MERGE_SQL = """INSERT INTO `{table}` (id1, link_type, id2, visibility, data, time, version)
SELECT id1, link_type, id2, visibility, data, time, version FROM `{staging}`
ORDER BY link_type, id1, id2, time, version, file_seq, line_no
ON DUPLICATE KEY UPDATE visibility = VALUES(visibility), data = VALUES(data),
  time = VALUES(time), version = VALUES(version)"""


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


def load_hot(config: Config, source: Source, files: list[tuple[int, SourceFile]],
             rejects: RejectPart, max_bad: int = -1,
             progress: Callable[[int], None] = lambda n: None, *,
             table: str | None = None) -> HotResult:
    """Load *files* (``(file_seq, file)``) into *table* (default ``config.link_table``),
    replacing its content.

    Returns counts and phase timings (``load``, ``merge``, ``index``). Raises BadInputError once
    more than *max_bad* lines were rejected (-1: no limit), after closing everything.
    """
    table = table or config.link_table
    staging = f"{table}_staging"
    result = HotResult()
    conn = connect(config, local_infile=True, bulk=True)
    try:
        with conn.cursor() as cur, mysql_errors(config, f"the hot path into `{table}`"):
            cur.execute(f"DROP TABLE IF EXISTS `{table}`")
            cur.execute(link_table_ddl(table, config.mysql_engine, with_secondary_index=False))
            cur.execute(f"DROP TABLE IF EXISTS `{staging}`")
            # The staging table is written once and read once: MyISAM-like cost is what we want,
            # but Aria/MyISAM are not crash-safe for the link table; staging may be.
            cur.execute(STAGING_DDL.format(table=staging, engine="Aria"))

            # The filter is stored in one catalog row: it must fit the server's packet, with
            # room for the statement around it.
            cur.execute("SELECT @@max_allowed_packet")
            result.keys = KeyFilterBuilder(min(MAX_FILTER_BYTES, cur.fetchone()[0] // 2))
            t0 = time.time()
            for seq, file in files:
                good, bad = _load_file(cur, staging, source, seq, file, rejects, max_bad,
                                       config.max_line_bytes, result, progress)
                result.per_file[seq] = (good, bad)
            result.phases.append(("mysql_load", t0, time.time()))

            # The key filter is built while MySQL merges: numpy and the server, not one core.
            with ThreadPoolExecutor(max_workers=1, thread_name_prefix="hot-keys") as building:
                built = building.submit(result.keys.build)
                t0 = time.time()
                cur.execute(MERGE_SQL.format(table=table, staging=staging))
                cur.execute(f"DROP TABLE `{staging}`")
                cur.execute(f"SELECT COUNT(*), MIN(id1), MAX(id1) FROM `{table}`")
                result.rows, result.k_lo, result.k_hi = cur.fetchone()
                result.phases.append(("mysql_merge", t0, time.time()))

                t0 = time.time()
                cur.execute(add_index_ddl(table))
                result.phases.append(("mysql_index", t0, time.time()))
                result.hot_keys = built.result()
    finally:
        conn.close()
    return result


def _load_file(cur, staging: str, source: Source, seq: int, file: SourceFile,
               rejects: RejectPart, max_bad: int, max_line: int, result: HotResult,
               progress: Callable[[int], None]) -> tuple[int, int]:
    with tempfile.TemporaryDirectory(prefix="debl-hot-") as tmp:
        fifo = Path(tmp) / "lines"
        os.mkfifo(fifo, 0o600)
        # Leaving the pool waits for the feeding thread; it always closes the pipe.
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"hot-feed-{seq}") as pool:
            feeding = pool.submit(_feed, fifo, source, file, rejects, max_bad, max_line,
                                  result, progress)
            cur.connection.allow(str(fifo))  # the only file this statement may send
            try:
                cur.execute("SET @debl_line := 0")  # LOAD_SQL numbers the file's lines
                cur.execute(LOAD_SQL.format(staging=staging), (str(fifo), seq))
            except BaseException:
                _unblock(fifo, feeding)
                raise
        return feeding.result()  # raises what the feeding raised


def _feed(fifo: Path, source: Source, file: SourceFile, rejects: RejectPart, max_bad: int,
          max_line: int, result: HotResult, progress: Callable[[int], None]) -> tuple[int, int]:
    """Stream one file's good lines into the pipe, in the file's order; returns (good,
    rejected) lines. Always closes the pipe.

    A block of whole lines that are all well formed goes to the pipe as it is (its CRs before
    LFs dropped), checked and keyed at C speed (``debl.line_block``); any other block is parsed
    line by line. Memory stays bounded: an unfinished line is kept only up to *max_line* bytes
    (and the reject prefix); past that it is read on to its newline and rejected as too long.
    The line that goes to MySQL is its body and a LF: LOAD DATA sees a CRLF line's LF twin."""
    counts = [0, 0]
    out = open(fifo, "wb", buffering=BLOCK)
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

    def send(lines: bytes) -> None:
        """*lines*: whole lines, each ending in LF."""
        nonlocal line_no
        keys = block_keys(lines) if checked_whole else None
        if keys is not None:
            line_no += len(keys[0])
            out.write(lines.replace(b"\r\n", b"\n") if b"\r" in lines else lines)
            counts[0] += len(keys[0])
            result.lines += len(keys[0])
            result.keys.add(*keys)
            return
        batch, id1s, types = [], [], []
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
            id1s.append(link.id1)
            types.append(link.link_type)
            batch.append(body + b"\n")
        out.write(b"".join(batch))
        counts[0] += len(batch)
        result.lines += len(batch)
        result.keys.add(id1s, types)

    try:
        with source.open(file.name, listed=file) as stream:
            tail = b""
            while block := stream.read(BLOCK):
                progress(len(block))
                result.bytes += len(block)
                block = tail + block
                cut = block.rfind(b"\n") + 1
                send(block[:cut])
                tail = block[cut:]
                if len(tail) > hold:
                    (length, prefix), tail, nbytes = _pass_long_line(stream, tail)
                    progress(nbytes)
                    result.bytes += nbytes
                    line_no += 1
                    reject(line_no, too_long(length, max_line), prefix)
            if tail:  # the last line without its LF (and whole lines read past a long one)
                send(tail if tail.endswith(b"\n") else tail + b"\n")
    finally:
        try:
            out.close()
        except BrokenPipeError:
            pass
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


def _unblock(fifo: Path, feeding: Future) -> None:
    """LOAD DATA failed before reading the pipe: open and drain it so the feeding can finish."""
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        while not feeding.done():
            try:
                if not os.read(fd, BLOCK):
                    time.sleep(0.01)
            except BlockingIOError:
                time.sleep(0.01)
    finally:
        os.close(fd)
