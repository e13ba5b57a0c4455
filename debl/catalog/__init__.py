"""The catalog: DeBL's own tables in MySQL, shared by the loader, gen_HF and every coordinator.

=====================  =============================================================
table                  one row per
=====================  =============================================================
debl_schema            (one row) the schema version of these tables
debl_loads             load: approach, source, namespace (its store names), bucket map,
                       state, uptime, hot state (MySQL took the hot keys over), summary,
                       when cleanup began dropping and dropped its stores
                       the dump's position its listing carried (dump_gtid, dump_source)
debl_current           (one row) the load every coordinator serves, and the one it replaced
debl_load_files        source file of a load: size, mtime, hot or cold
debl_file_counts       (file, part): rows and rejects a part of the load took from it
debl_chunks            chunk of hot or cold files: bytes, path, file segments, copied /
                       bucketed
debl_phases            timed phase (copy of a chunk, one dist_ch, MySQL load, index...)
debl_bucket_chunks     (load, hot, bucket, chunk): what one dist_ch wrote into one bucket
debl_buckets           (load, hot, bucket): the bucket index (k_lo, k_hi, rows, bytes,
                       location, and c_lo, c_hi: the real id1 span of its rows)
debl_jobs              (load, bucket): the job status (pending/queued/running/loaded/failed)
debl_demand            (load, coordinator, bucket): queries that need the bucket
                       (docs/COORDINATOR.md)
debl_asks              (load, coordinator, bucket): queries asked of the bucket (the next
                       day's gen_HF starts with what was asked most)
debl_answers           (load, coordinator, route): queries it answered that way
debl_hot_keys          load: the key filter of its hot rows in MySQL
debl_coordinators      running coordinator: the load it serves with no query of another in
                       flight, whether it reads that load's hot keys from MySQL only, its
                       heartbeat
debl_manifests         (load, file): the manifest its source listed (a resume takes its
                       pieces from here)
debl_early             load that answers before its uptime: on or stopped, the keys
                       answerable so far and their share (docs/LOADING.md, "Answers before
                       the copy ends")
debl_key_demand        (load, coordinator, id1): queries waiting for the key before uptime
                       (what the copy fetches first)
debl_false_claims      (load, claim): a manifest's claim found false, where, and the id1s
                       whose early answers it may have touched
debl_early_answers     (load, id1): early answers given, summed over every process
debl_changes           (source, seq, row): the sources' change log, a committed row change each
debl_follower          (source): the position its follower has captured up to, its state
=====================  =============================================================

The tables are SQLAlchemy Core ``Table`` objects on one ``MetaData`` (``METADATA``), created by
``create_all``; every statement is a Core expression with named columns. Methods return
dataclasses (or a plain mapping such as bucket -> state), never driver rows. No other module
writes SQL against these tables.

A ``Catalog`` owns one ``CatalogEngine`` (``base``: the connection, one transaction per call,
the schema check) and one object per role over it, each a small class in the module of its
tables:

=====================  =============================================================
``catalog.loads``      loads, the current load and the previous one (``loads.LoadsCatalog``)
``catalog.files``      a load's source files and per-file counts (``loads.FilesCatalog``)
``catalog.phases``     a load's timed phases (``loads.PhasesCatalog``)
``catalog.index``      chunks and the bucket index (``index.IndexCatalog``)
``catalog.jobs``       the job status of each bucket (``jobs.JobsCatalog``)
``catalog.serving``    what coordinators read and publish, their heartbeats
                       (``serving.ServingCatalog``)
``catalog.early``      manifests, answerable keys, key demand, early answers and false
                       claims (``early.EarlyCatalog``)
``catalog.changes``    the source's change log and its follower (``changes.ChangesCatalog``)
``catalog.probes``     the reliability campaigns' view of MySQL's sessions
                       (``probes.ProbesCatalog``)
=====================  =============================================================

Code that needs one role takes that object alone (the coordinator's poller ``catalog.serving``,
its raw reader ``catalog.index``). The rest of the package: ``schema`` (the tables and their
version), ``records`` (the dataclasses the methods return), ``engines`` (the process's engines
and MySQL named locks). Import every name from ``debl.catalog``.

Each load lives in its own namespace (docs/LOADING.md, "Days"), and every dataset table is keyed
by load: a new load writes beside the current one and never clears it; ``make_current`` switches
every coordinator to it in one transaction; cleanup drops a load's rows with its stores.

Connections: one SQLAlchemy ``Engine`` per process and MySQL account (``engine_for``), with a
connection pool. Each method takes a pooled connection for one transaction and gives it back, so
a ``Catalog`` and each of its roles are thread-safe and cheap to make; ``with Catalog(config)
as catalog:`` still reads well, and ``close`` has nothing to release.

Schema version: ``debl_schema`` holds ``SCHEMA_VERSION``. A database whose catalog has another
version (or DeBL tables without ``debl_schema``: a DeBL from before versioning, version 0) is
refused with ``CatalogVersionError``, which says what to do. A new load (``replace_older=True``)
drops an *older* catalog and starts afresh: one dataset lives in a database, and the old
catalog's loads could not be read anyway. A newer catalog is never touched. Whoever creates
(or replaces) the catalog holds the named lock ``debl_schema.<database>``, and the version is
read again under it: commands started together on a new database never race.

Pitfalls:

- Connections are opened with autocommit off, so that a transaction (``engine.begin``) is a real
  MySQL transaction; with it on, each statement of a "transaction" would commit on its own.
- Transactions run at READ COMMITTED. At InnoDB's default (REPEATABLE READ) a DELETE takes gap
  locks, and coordinators replacing their demand rows at the same moment deadlock each other
  (tests/test_catalog.py, eight threads, deadlocked within 20 rounds).
- After ``os.fork`` a child must not use the parent's pooled sockets (closing one would end the
  parent's session): the engines are forgotten in the child, without closing their connections.
- A named lock (``named_lock``) lives on a MySQL session: its connection leaves the pool for
  good, so that no later user of the pool inherits the lock.
"""

from __future__ import annotations

from debl.catalog.base import CatalogEngine
from debl.catalog.changes import ChangesCatalog
from debl.catalog.early import EarlyCatalog
from debl.catalog.engines import NamedLock, engine_for, named_lock
from debl.catalog.index import IndexCatalog
from debl.catalog.jobs import JobsCatalog
from debl.catalog.loads import FilesCatalog, LoadsCatalog, PhasesCatalog
from debl.catalog.probes import ProbesCatalog
from debl.catalog.records import (Bucket, BucketChunk, Change, ChunkRecord, DemandRow,
                                  EarlyProgress, EarlyState, FalseClaim, FileCount, FollowerState,
                                  Job, LoadFile, LoadRecord, Phase, ServingState)
from debl.catalog.schema import (METADATA, SCHEMA_VERSION, ChunkState, EarlyAnswering, HotState,
                                 JobState, LoadState)
from debl.catalog.serving import FRESH_COUNTS, ServingCatalog
from debl.config import Config

__all__ = ["Bucket", "BucketChunk", "Catalog", "CatalogEngine", "Change", "ChangesCatalog",
           "ChunkRecord", "ChunkState", "DemandRow", "EarlyAnswering", "EarlyCatalog",
           "EarlyProgress", "EarlyState", "FRESH_COUNTS", "FalseClaim", "FileCount",
           "FilesCatalog", "FollowerState", "HotState", "IndexCatalog", "Job", "JobState",
           "JobsCatalog", "LoadFile", "LoadRecord", "LoadState", "LoadsCatalog", "METADATA",
           "NamedLock", "Phase", "PhasesCatalog", "ProbesCatalog", "SCHEMA_VERSION",
           "ServingCatalog", "ServingState", "engine_for", "named_lock"]


class Catalog:
    """DeBL's tables in MySQL: one engine, and one object per role over it (``loads``,
    ``files``, ``phases``, ``index``, ``jobs``, ``serving``, ``early``, ``changes``, ``probes``;
    the module says what each holds). Thread-safe: every method call of a role takes a pooled
    connection for one transaction.

    Raises ServiceError when MySQL cannot be reached, CatalogVersionError when the database
    holds the catalog of another DeBL version; with *replace_older* (a new load) an older
    catalog is dropped instead."""

    loads: LoadsCatalog
    files: FilesCatalog
    phases: PhasesCatalog
    index: IndexCatalog
    jobs: JobsCatalog
    serving: ServingCatalog
    early: EarlyCatalog
    changes: ChangesCatalog
    probes: ProbesCatalog

    def __init__(self, config: Config, *, replace_older: bool = False):
        self.config = config
        self.engine = CatalogEngine(config, replace_older=replace_older)
        self.loads = LoadsCatalog(self.engine)
        self.files = FilesCatalog(self.engine)
        self.phases = PhasesCatalog(self.engine)
        self.index = IndexCatalog(self.engine)
        self.jobs = JobsCatalog(self.engine)
        self.serving = ServingCatalog(self.engine)
        self.early = EarlyCatalog(self.engine)
        self.changes = ChangesCatalog(self.engine)
        self.probes = ProbesCatalog(self.engine)

    def __enter__(self) -> "Catalog":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Nothing to release: the connections belong to the process's pool."""

    def named_lock(self, name: str) -> NamedLock | None:
        """Take the MySQL named lock *name* now, or None if another session holds it. Named
        locks are server-wide: put the database's name in *name* to keep datasets apart."""
        return named_lock(self.config, name)
