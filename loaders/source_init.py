"""``debl source db init``: fill the source's link table from input files, and record the log
position at which the table equals them (docs/RUNTIME.md, "The source database").

The files are any data set ``debl generate`` writes (either layout) or any other source DeBL
loads (a directory or an HTTP URL). They go through the hot path's bulk load
(``loaders.mysql_bulk.load_hot``): each line checked (a bad line is skipped, counted and kept
in the reject file ``<state_dir>/source_db/rejects/init.tsv``, as a load's), each key's winner
chosen by the merge rule (docs/DESIGN.md section 3: the greatest time, then version, then the
later file, then the later line), and the winners loaded with ``LOAD DATA`` into the table,
made anew in LinkBench's layout with the line format's checks, its index built after.

The position is the head of the source's binary log right after the fill committed (``head``),
recorded in the source's ``debl_source_state`` (``debl.store.source_db``). It is the table's
position only if nothing else wrote to the source meanwhile: the init refuses a table that
holds rows (``replace`` empties it first), one init at a time holds a named lock, and while it
runs no client may write (docs/RUNTIME.md, "The source database").
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from debl.config import Config
from debl.errors import ServiceError, SourceError
from debl.store import source_db
from loaders.mysql_bulk import load_hot
from loaders.rejects import RejectWriter
from loaders.source import open_source

REJECT_PART = "init"


@dataclass(frozen=True)
class InitSummary:
    source: str  # the input files' source, as shown
    files: int
    bytes: int
    lines: int  # good lines read
    rows: int  # rows in the table: one per key
    rejects: int
    reject_file: str
    gtid: str  # where the table equals the files
    source_id: str
    seconds: float

    def as_dict(self) -> dict:
        return asdict(self)


def reject_dir(config: Config) -> Path:
    """Where the init's reject file is (``loaders.rejects``: one part, ``init.tsv``)."""
    return config.state_dir / "source_db" / "rejects"


def init_source(config: Config, source_spec: str, replace: bool = False,
                max_bad: int | None = None,
                progress: Callable[[int, int], None] = lambda done, total: None
                ) -> InitSummary:
    """Fill ``source_db.table`` from the files of *source_spec*; returns what was loaded and the
    position recorded. ``progress(bytes read, bytes in all)`` as the files are read.

    SourceError when the table holds rows and not *replace*, when another init runs, or when
    the source holds no files; BadInputError past *max_bad* bad lines (default
    ``loading.max_bad``; the table is then left as the failed fill left it, and no position
    is recorded)."""
    started = time.monotonic()
    table = config.source_db.table
    source = open_source(source_spec, config)
    files = source.list()
    if not files:
        raise SourceError(f"source {source.describe()} holds no files")
    total, read = sum(f.size for f in files), [0]

    def add(nbytes: int) -> None:
        read[0] += nbytes
        progress(read[0], total)

    conn = source_db.connect(config)
    try:
        with conn.cursor() as cur, source_db.errors(config, f"the init of `{table}`"):
            if not source_db.init_lock(cur, table):
                raise SourceError(f"another `debl source db init` is filling `{table}` in "
                                  f"{source_db.where(config)}: wait for it to end")
            if not replace and not source_db.is_empty(cur, table):
                raise SourceError(
                    f"`{table}` in {source_db.where(config)} holds rows: an init fills an empty "
                    "table only (its position would not be the files'); give --replace to "
                    "drop them first")
            writer = RejectWriter(reject_dir(config))
            max_bad = config.loading.max_bad if max_bad is None else max_bad
            with writer.open_part(REJECT_PART) as rejects:
                try:
                    result = load_hot(source_db.as_mysql(config), source, list(enumerate(files)),
                                      rejects, max_bad, add, table=table, source_table=True)
                except ServiceError as exc:
                    exc.add_note(f"(while filling the source database's `{table}`: "
                                 "[source_db] in the config)")
                    raise
                finally:
                    rejects.commit()
            gtid = source_db.head(cur)
            source_db.record_init(cur, table, gtid, len(files), result.rows, result.rejects)
            source_id = source_db.source_id(cur, table)
    finally:
        conn.close()
        source.close()
    return InitSummary(source.describe(), len(files), result.bytes, result.lines, result.rows,
                       result.rejects, str(rejects.path), gtid, source_id,
                       time.monotonic() - started)
