"""The catalog's schema: its tables as SQLAlchemy Core ``Table`` objects on one ``MetaData``
(``METADATA``), and the version the code checks (``SCHEMA_VERSION``, kept in ``debl_schema``).
What each table holds is drawn in ``debl.catalog``'s docstring; docs/LOADING.md says why.
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql
from sqlalchemy.engine import Connection

# 2: the bucket map replaces the bucket width; buckets keep their cold span.
# 3: bucket files sorted, with an index and filter footer (docs/ONLINE.md), and debl_answers;
# an older catalog's bucket files cannot be read by the raw route: a new load replaces them.
# 4: debl_coordinators (a new load waits until running coordinators have seen it).
# 5: debl_hot_keys, the hot path's key filter (docs/COORDINATOR.md, "Hot keys").
# 6: each load in its own namespace (its store names in debl_loads; every dataset table keyed by
# load), one current load (debl_current), the hot files' bucket files beside the cold ones
# (``hot`` in debl_chunks, debl_bucket_chunks, debl_buckets) and MySQL's take-over of the hot
# keys (``hot_state``), the queries asked per bucket (debl_asks): docs/LOADING.md, "Days".
# 7: bucket files' origin is the line's byte offset in its file; the load's per-file manifests,
# its answerable keys before uptime, the keys queries wait for, and claims found false
# (docs/LOADING.md, "Answers before the copy ends").
# 8: the ids a load's manifests claim (debl_early.id_lo, id_hi).
# 9: the early answers given per id1 (debl_early_answers), recorded as they are given, replace
# each coordinator's count per false claim (debl_claim_answers), published only by coordinators
# that lived to see the claim.
# 10: debl_loads.dropping, marked before cleanup drops a load's first store (docs/LOADING.md,
# "Days"): a cleanup killed mid-drop left a day that rollback could serve.
# 11: debl_loads.dump_gtid and dump_source, the dump's position of a load whose listing carries
# one (docs/FRESHNESS.md, "Positions"): where the source's changes since the dump begin.
# 12: the source's changes since the dump (debl_changes) and the follower that captures them
# (debl_follower): docs/FRESHNESS.md, "The change log".
# 13: debl_follower.head_gtid, head_seq, head_ts, changes and kept_from: the source's head as the
# follower last read it, the changes it has captured, and the position past which the log holds
# every change (docs/FRESHNESS.md, "Capture: `debl follow`").
# 14: debl_changes.source: the source each change is of (a dataset whose loads move to another
# source keeps the older source's changes apart from the newer's).
SCHEMA_VERSION = 14


# The values of the state columns (docs/LOADING.md, "The catalog"). A StrEnum is its value: the
# catalog stores and returns the plain strings, and a string read back equals its member.
class LoadState(StrEnum):
    """A load's ``debl_loads.state``."""

    RUNNING = "running"  # copying (or killed while it copied: resume takes it up)
    UP = "up"  # every input byte in HDFS and bucketed (docs/DESIGN.md section 2: uptime)
    FAILED = "failed"  # stopped on an error, recorded in ``error``


class HotState(StrEnum):
    """A load's ``debl_loads.hot_state``: how far MySQL has taken its hot files in."""

    NONE = "none"  # no hot file
    LOADING = "loading"  # MySQL is taking them in
    MYSQL = "mysql"  # MySQL took the hot keys over (the take-over)
    FAILED = "failed"  # MySQL's hot path failed: the hot buckets answer until a resume


class ChunkState(StrEnum):
    """A chunk's ``debl_chunks.state``."""

    COPIED = "copied"  # in HDFS, not bucketed yet
    BUCKETED = "bucketed"  # dist_ch wrote its bucket files


class JobState(StrEnum):
    """A cold bucket's ``debl_jobs.state``, moved by gen_HF (docs/DESIGN.md section 2)."""

    PENDING = "pending"
    QUEUED = "queued"
    RUNNING = "running"
    LOADED = "loaded"  # in HBase
    FAILED = "failed"  # its last run failed, or gen_HF gave up on it


class EarlyAnswering(StrEnum):
    """A load's ``debl_early.state``: whether it answers before its uptime."""

    ON = "on"
    STOPPED = "stopped"  # a claim of its manifests was found false


METADATA = sa.MetaData()
_UTF8: dict[str, Any] = {"mysql_charset": "utf8mb4"}
_CHECKSUM = mysql.BIGINT(unsigned=True)


class _JSONText(sa.types.TypeDecorator):
    """A JSON value in a MEDIUMTEXT column, written and read by Python's json. Not MariaDB's JSON
    type: its CHECK (JSON_VALID) refuses the escaped lone surrogates (``\\udcff``) that Python
    writes for a file name that is not UTF-8 (tests/test_hostile_input.py loads one)."""

    impl = mysql.MEDIUMTEXT
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Any) -> str | None:
        return None if value is None else json.dumps(value)

    def process_result_value(self, value: str | None, dialect: Any) -> Any:
        return None if value is None else json.loads(value)


def _key(name: str, type_: Any = sa.BigInteger) -> sa.Column:
    """A primary key column that is not AUTO_INCREMENT (SQLAlchemy's default for one integer)."""
    return sa.Column(name, type_, primary_key=True, autoincrement=False)


def _rows(nullable: bool = False) -> sa.Column:
    # ROWS is a reserved word in MariaDB: always quoted.
    return sa.Column("rows", sa.BigInteger, nullable=nullable, quote=True)


schema_table = sa.Table("debl_schema", METADATA, _key("version", sa.Integer), **_UTF8)

loads_table = sa.Table(
    "debl_loads", METADATA,
    sa.Column("load_id", sa.String(40), primary_key=True),
    sa.Column("approach", sa.String(32), nullable=False),
    sa.Column("source", sa.String(1024), nullable=False),
    sa.Column("state", sa.String(16), nullable=False),  # LoadState
    sa.Column("bucket_map", sa.JSON),  # BucketMap.to_dict(); NULL: not decided yet
    sa.Column("chunk_size", sa.BigInteger, nullable=False),
    sa.Column("params", _JSONText, nullable=False),
    sa.Column("started", sa.Double, nullable=False),
    sa.Column("uptime", sa.Double),
    sa.Column("ended", sa.Double),
    sa.Column("hot_k_lo", sa.BigInteger),
    sa.Column("hot_k_hi", sa.BigInteger),
    sa.Column("hot_rows", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("summary", _JSONText),
    sa.Column("error", sa.Text),
    # The load's namespace (debl.namespace): the stores it writes, and only it.
    sa.Column("link_table", sa.String(64), nullable=False),
    sa.Column("hbase_table", sa.String(128), nullable=False),
    sa.Column("hdfs_dir", sa.String(512), nullable=False),
    sa.Column("hot_state", sa.String(16), nullable=False,  # HotState
              server_default=HotState.NONE.value),
    sa.Column("taken_over", sa.Double),  # when MySQL took the hot keys over
    sa.Column("switched", sa.Double),  # when it became the current load (last time)
    sa.Column("dropping", sa.Double),  # when cleanup began dropping its stores (never served)
    sa.Column("dropped", sa.Double),  # when cleanup dropped its stores
    # The dump's position (debl.position.DumpPosition); NULL: its listing carries none.
    sa.Column("dump_gtid", sa.String(64)),
    sa.Column("dump_source", sa.String(64)), **_UTF8)

# The load every coordinator serves (one row); ``previous``: the one it replaced, while its
# stores exist (``debl rollback``).
current_table = sa.Table(
    "debl_current", METADATA,
    _key("slot", sa.Integer),
    sa.Column("load_id", sa.String(40), nullable=False),
    sa.Column("previous", sa.String(40)),
    sa.Column("switched", sa.Double, nullable=False), **_UTF8)

files_table = sa.Table(
    "debl_load_files", METADATA,
    sa.Column("load_id", sa.String(40), primary_key=True),
    _key("file_seq", sa.Integer),
    sa.Column("name", sa.String(1024), nullable=False),
    sa.Column("size", sa.BigInteger, nullable=False),
    sa.Column("mtime", sa.Double, nullable=False),
    sa.Column("hot", sa.Boolean, nullable=False), **_UTF8)

file_counts_table = sa.Table(
    "debl_file_counts", METADATA,
    sa.Column("load_id", sa.String(40), primary_key=True),
    _key("file_seq", sa.Integer),
    sa.Column("part", sa.String(32), primary_key=True),
    _rows(),
    sa.Column("rejects", sa.BigInteger, nullable=False), **_UTF8)

chunks_table = sa.Table(
    "debl_chunks", METADATA,
    sa.Column("load_id", sa.String(40), primary_key=True),
    _key("chunk_no", sa.Integer),
    sa.Column("path", sa.String(512), nullable=False),
    sa.Column("bytes", sa.BigInteger, nullable=False),
    sa.Column("layout", _JSONText, nullable=False),
    sa.Column("state", sa.String(16), nullable=False),  # ChunkState
    sa.Column("hot", sa.Boolean, nullable=False, server_default=sa.false()), **_UTF8)

phases_table = sa.Table(
    "debl_phases", METADATA,
    sa.Column("load_id", sa.String(40), primary_key=True),
    sa.Column("phase", sa.String(32), primary_key=True),
    sa.Column("item", sa.String(64), primary_key=True),
    sa.Column("started", sa.Double, nullable=False),
    sa.Column("ended", sa.Double),
    sa.Column("bytes", sa.BigInteger),
    _rows(nullable=True), **_UTF8)

bucket_chunks_table = sa.Table(
    "debl_bucket_chunks", METADATA,
    sa.Column("load_id", sa.String(40), primary_key=True),
    sa.Column("hot", sa.Boolean, primary_key=True),
    _key("b_index"),
    _key("chunk_no", sa.Integer),
    _rows(),
    sa.Column("bytes", sa.BigInteger, nullable=False),
    sa.Column("checksum", _CHECKSUM, nullable=False),
    sa.Column("path", sa.String(512), nullable=False),
    sa.Column("c_lo", sa.BigInteger, nullable=False),  # the id1 span of these rows
    sa.Column("c_hi", sa.BigInteger, nullable=False),
    sa.Index("debl_bucket_chunks_by_chunk", "load_id", "chunk_no"), **_UTF8)

# One row per (load, bucket) of its cold files (hot false: the bucket index) and per bucket of
# its hot files (hot true: what the raw route reads until MySQL takes the hot keys over).
buckets_table = sa.Table(
    "debl_buckets", METADATA,
    sa.Column("load_id", sa.String(40), primary_key=True),
    sa.Column("hot", sa.Boolean, primary_key=True),
    _key("b_index"),
    sa.Column("k_lo", sa.BigInteger, nullable=False),
    sa.Column("k_hi", sa.BigInteger, nullable=False),
    _rows(),
    sa.Column("bytes", sa.BigInteger, nullable=False),
    sa.Column("checksum", _CHECKSUM, nullable=False),
    sa.Column("location", sa.String(512), nullable=False),
    sa.Column("c_lo", sa.BigInteger, nullable=False),  # the id1 span of the bucket's rows
    sa.Column("c_hi", sa.BigInteger, nullable=False), **_UTF8)

jobs_table = sa.Table(
    "debl_jobs", METADATA,
    sa.Column("load_id", sa.String(40), primary_key=True),
    _key("b_index"),
    sa.Column("state", sa.String(16), nullable=False),  # JobState
    sa.Column("run_id", sa.String(40)),
    sa.Column("queued", sa.Double),
    sa.Column("started", sa.Double),
    sa.Column("ended", sa.Double),
    sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
    sa.Column("error", sa.Text),
    sa.Column("rows_loaded", sa.BigInteger),
    sa.Column("superseded", sa.BigInteger),
    sa.Column("checksum_loaded", _CHECKSUM), **_UTF8)

demand_table = sa.Table(
    "debl_demand", METADATA,
    sa.Column("load_id", sa.String(40), primary_key=True),
    sa.Column("coordinator", sa.String(64), primary_key=True),
    _key("b_index"),
    sa.Column("waiting", sa.Integer, nullable=False),
    sa.Column("updated", sa.Double, nullable=False), **_UTF8)

answers_table = sa.Table(
    "debl_answers", METADATA,
    sa.Column("load_id", sa.String(40), primary_key=True),
    sa.Column("coordinator", sa.String(64), primary_key=True),
    sa.Column("route", sa.String(16), primary_key=True),
    sa.Column("answered", sa.BigInteger, nullable=False),
    sa.Column("updated", sa.Double, nullable=False), **_UTF8)

# The queries each coordinator was asked per bucket of a load, loaded or not (cumulative): the
# next day's gen_HF starts with the key ranges asked most (docs/ONLINE.md, "Demand carried over").
asks_table = sa.Table(
    "debl_asks", METADATA,
    sa.Column("load_id", sa.String(40), primary_key=True),
    sa.Column("coordinator", sa.String(64), primary_key=True),
    _key("b_index"),
    sa.Column("asked", sa.BigInteger, nullable=False),
    sa.Column("updated", sa.Double, nullable=False), **_UTF8)

coordinators_table = sa.Table(
    "debl_coordinators", METADATA,
    sa.Column("coordinator", sa.String(64), primary_key=True),
    # The load it serves, once no query of another load is in flight (NULL: none yet); and
    # whether it reads that load's hot keys from MySQL only, no query reading its hot files.
    sa.Column("load_id", sa.String(40)),
    sa.Column("hot_mysql", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("interval_s", sa.Double, nullable=False),  # its poll interval: the heartbeat's
    sa.Column("updated", sa.Double, nullable=False), **_UTF8)

# The hot path's key filter (debl.keys.key_filter): one row per load whose MySQL table holds its hot
# rows; dropped with the load's stores.
hot_keys_table = sa.Table(
    "debl_hot_keys", METADATA,
    sa.Column("load_id", sa.String(40), primary_key=True),
    sa.Column("bits", mysql.LONGBLOB, nullable=False), **_UTF8)

# The manifest of each file of a load, as its source listed it (docs/LOADING.md, "The
# manifest"): a resumed load takes its pieces from here.
manifests_table = sa.Table(
    "debl_manifests", METADATA,
    sa.Column("load_id", sa.String(40), primary_key=True),
    _key("file_seq", sa.Integer),
    sa.Column("manifest", _JSONText, nullable=False), **_UTF8)

# A load that answers before its uptime (one row per such load): its state (``on``, or
# ``stopped`` once a claim of its manifests was found false), the keys answerable so far (a
# KeySet's JSON, with a generation that grows with every change), their share of the key space
# and the bytes of the pieces they stand on.
early_table = sa.Table(
    "debl_early", METADATA,
    sa.Column("load_id", sa.String(40), primary_key=True),
    sa.Column("state", sa.String(16), nullable=False),  # EarlyAnswering
    sa.Column("gen", sa.Integer, nullable=False, server_default="0"),
    sa.Column("answerable", _JSONText),
    sa.Column("key_share", sa.Double, nullable=False, server_default="0"),
    sa.Column("answerable_bytes", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("total_bytes", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("id_lo", sa.BigInteger),  # the ids the manifests claim (None: any id1)
    sa.Column("id_hi", sa.BigInteger),
    sa.Column("updated", sa.Double, nullable=False), **_UTF8)

# The keys (id1) each coordinator's queries wait for before the load's uptime: what the copy
# fetches first (docs/LOADING.md, "The copy follows demand").
key_demand_table = sa.Table(
    "debl_key_demand", METADATA,
    sa.Column("load_id", sa.String(40), primary_key=True),
    sa.Column("coordinator", sa.String(64), primary_key=True),
    _key("id1"),
    sa.Column("waiting", sa.Integer, nullable=False),
    sa.Column("updated", sa.Double, nullable=False), **_UTF8)

# A claim of a load's manifest found false while its bytes were bucketed: which file, where,
# what was claimed and found, and the id1s whose early answers it may have made wrong.
false_claims_table = sa.Table(
    "debl_false_claims", METADATA,
    sa.Column("load_id", sa.String(40), primary_key=True),
    _key("claim_no", sa.Integer),
    sa.Column("file_seq", sa.Integer, nullable=False),
    sa.Column("kind", sa.String(32), nullable=False),
    sa.Column("offset", sa.BigInteger, nullable=False, quote=True),
    sa.Column("detail", sa.Text, nullable=False),
    sa.Column("affected_lo", sa.BigInteger, nullable=False),
    sa.Column("affected_hi", sa.BigInteger, nullable=False),
    sa.Column("found", sa.Double, nullable=False), **_UTF8)

# The early answers given per id1 of a load, summed over every process that gave them, each
# added as it is given (a one-shot command's before it shows its answer): a claim found false
# later counts those in the id1s it affects (docs/LOADING.md, "Answers before the copy ends").
early_answers_table = sa.Table(
    "debl_early_answers", METADATA,
    sa.Column("load_id", sa.String(40), primary_key=True),
    _key("id1"),
    sa.Column("answered", sa.BigInteger, nullable=False),
    sa.Column("updated", sa.Double, nullable=False), **_UTF8)

# The sources' change log (docs/FRESHNESS.md, "The change log"): every committed row change of
# a source's link table past the oldest kept dump's position, by source and position (the
# transaction's GTID sequence, then the row's order in it: two sources' positions are
# unrelated). A deletion keeps the key and no row. Indexed by id1 for a key range's changes
# since a position. Not a load's: the days share it.
changes_table = sa.Table(
    "debl_changes", METADATA,
    _key("source", sa.String(64)),
    _key("seq", mysql.BIGINT(unsigned=True)),
    _key("row_no", sa.Integer),
    sa.Column("id1", mysql.BIGINT(unsigned=True), nullable=False),
    sa.Column("link_type", mysql.BIGINT(unsigned=True), nullable=False),
    sa.Column("id2", mysql.BIGINT(unsigned=True), nullable=False),
    sa.Column("deleted", sa.Boolean, nullable=False),
    sa.Column("visibility", sa.SmallInteger),
    sa.Column("data", mysql.VARBINARY(255)),
    sa.Column("time", mysql.BIGINT(unsigned=True)),
    sa.Column("version", mysql.BIGINT(unsigned=True)),
    sa.Column("commit_ts", sa.Double, nullable=False),  # the source's commit, epoch seconds
    sa.Column("captured_ts", sa.Double, nullable=False),  # when the follower wrote it here
    sa.Index("debl_changes_by_id1", "source", "id1", "seq"), **_UTF8)

# The follower of a source (one row per source): the position it has captured up to (every
# change at or before it is in debl_changes, written in the same transaction), the last
# captured commit's time, its state and last error, for `debl status` and the coordinators.
follower_table = sa.Table(
    "debl_follower", METADATA,
    sa.Column("source", sa.String(64), primary_key=True),
    sa.Column("gtid", sa.String(64), nullable=False),
    sa.Column("seq", mysql.BIGINT(unsigned=True), nullable=False),
    sa.Column("commit_ts", sa.Double),  # the last captured transaction's commit
    sa.Column("captured_ts", sa.Double),  # when it was captured
    sa.Column("heartbeat", sa.Double, nullable=False),  # the follower's last sign of life
    sa.Column("state", sa.String(16), nullable=False),  # following, catching-up, failed, stopped
    sa.Column("error", sa.Text),  # what stopped or slows it, with what to do
    sa.Column("host", sa.String(255)),
    sa.Column("pid", sa.Integer),
    # The source's head when the follower last read it (None: not yet), and when: how far it is
    # behind, in transactions (head_seq - seq).
    sa.Column("head_gtid", sa.String(64)),
    sa.Column("head_seq", mysql.BIGINT(unsigned=True)),
    sa.Column("head_ts", sa.Double),
    # Changes captured from the source in all (pruning forgets rows, not this count).
    sa.Column("changes", mysql.BIGINT(unsigned=True), nullable=False, server_default="0"),
    # The change log holds every change of the source past this position (up to seq): where
    # the follower first started, moved on by prune and by a start past it. A load whose
    # dump's position is older cannot be kept fresh from this log.
    sa.Column("kept_from", mysql.BIGINT(unsigned=True), nullable=False, server_default="0"),
    **_UTF8)

# The rows of one load's dataset, dropped with its stores (its loads, files, counts, chunks and
# phases rows stay: the reports read them).
DATASET_TABLES = (bucket_chunks_table, buckets_table, jobs_table, demand_table, answers_table,
                  asks_table, hot_keys_table, manifests_table, early_table, key_demand_table)
# Tables of an older schema that this one no longer has: dropped with an older catalog.
RETIRED_TABLES: tuple[str, ...] = ("debl_claim_answers",)


def schema_version(conn: Connection) -> int | None:
    """The version of the catalog in this database: None when it holds no DeBL table, or when
    some table of this version is missing (a catalog still being created, or damaged: then
    ``create_all`` completes it); 0 for DeBL tables without ``debl_schema`` (a DeBL from before
    versioning)."""
    present = set(sa.inspect(conn).get_table_names()) & set(METADATA.tables)
    if schema_table.name not in present:
        return 0 if present else None
    version = conn.execute(sa.select(sa.func.max(schema_table.c.version))).scalar()
    if version == SCHEMA_VERSION and present != set(METADATA.tables):
        return None
    return version
