"""Dropping the stores of loads nobody serves any more, and rolling back to the previous day
(docs/LOADING.md, "Days").

Which loads' stores are dropped (MySQL link table and its staging table, HBase table, HDFS
directory, fileCopy's copies, and the load's dataset rows in the catalog):

- never the current load (the one every coordinator serves);
- never the newest load while it runs or waits to be resumed (a new day being loaded);
- the previous load (the one the current replaced) once ``loading.keep_previous_load`` seconds have
  passed since the switch, for ``debl rollback``, and no live coordinator still serves it;
- any other load (a failed load that a newer one superseded, an older day) once no live
  coordinator serves it.

"No live coordinator serves it": every coordinator whose heartbeat is fresh says it serves
another load with no query of this one in flight. A coordinator that says nothing for three of
its poll intervals is dead and does not count. With *wait*, cleanup waits for the coordinators
(at most ``loading.coordinator_ack_timeout`` s) instead of leaving the load to a later cleanup.

Who cleans: ``debl load`` once its load is up and MySQL has its hot keys, the ``debl gen-hf``
service between runs, and ``debl cleanup``.

Cleanup and rollback exclude each other (docs/RELIABILITY.md, "Day operations"): each holds the
dataset's days lock (``debl_days.<database>``, a MySQL named lock) while it acts, cleanup from the
moment it checks once more that a load may go (in one transaction with the current and previous
loads) until the load is marked dropped, rollback around its transaction. A rollback that comes
while a day it would restore is being dropped waits for the drop, then refuses it naming the cause;
a day a rollback made current again is never dropped. Without the lock, a rollback during the slow
drop (HBase's disable and delete, HDFS's delete) made current a day whose tables were going away,
and marking it dropped then failed.

The lock dies with a killed cleanup's session, so the load is marked ``dropping`` under it
before its first store goes: a kill between the drops and the forget once freed
the lock with the load not marked at all, and rollback made current a day whose stores were
gone. A load marked dropping is never current or previous again; the next cleanup finishes
its drop, whatever the rules above would say of it now.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable

from debl.catalog import Catalog, LoadRecord, LoadState, NamedLock, ServingCatalog, named_lock
from debl.config import Config
from debl.errors import LoadStateError
from debl.faultpoints import reached
from debl.hdfs import HdfsClient
from debl.store.mysql import MySQLStore


def droppable(loads: list[LoadRecord], current: LoadRecord | None, previous: str | None,
              keep_previous: float, now: float) -> list[LoadRecord]:
    """The loads whose stores may go now, by the rules above (coordinators aside)."""
    newest = loads[0] if loads else None
    found = []
    for load in loads:
        if load.dropped is not None or (current is not None and load.load_id == current.load_id):
            continue
        if load.dropping is not None:  # a drop a killed cleanup began: finished
            found.append(load)
            continue
        if load is newest and load.state != LoadState.UP and (
                current is None or load.started > current.started):
            continue  # a new day being loaded, or waiting for --resume
        if load.load_id == previous and current is not None and (
                now - (current.switched or now) < keep_previous):
            continue
        found.append(load)
    return found


DAYS_LOCK = "debl_days"


def days_lock(config: Config, wait: float) -> NamedLock | None:
    """The dataset's days lock (see the module), waiting up to *wait* s for whoever holds it;
    None if it is still held then. Named locks are server-wide: the database's name is in it."""
    return named_lock(config, f"{DAYS_LOCK}.{config.mysql.database}", wait=wait)


def _droppable_now(catalog: Catalog, config: Config) -> tuple[list[LoadRecord],
                                                               LoadRecord | None]:
    """The loads whose stores may go now (``droppable``, coordinators aside), and the current
    load they were decided on."""
    loads, current, previous = catalog.loads.days()
    return (droppable(loads, current, previous, config.loading.keep_previous_load, time.time()),
            current)


def cleanup(config: Config, wait: bool = False,
            report: Callable[[str], None] = lambda text: None) -> list[str]:
    """Drop the stores of every load that may go (see the module); returns their ids. With
    *wait*, waits for running coordinators to leave a load (at most
    ``loading.coordinator_ack_timeout`` s); without, a load some coordinator serves is left for
    later. Each load is dropped under the days lock, once it is checked again there (a rollback
    may have made it current or previous since it was picked) and marked dropping."""
    with Catalog(config) as catalog:
        candidates, _ = _droppable_now(catalog, config)
        if not candidates:
            return []
        deadline = time.monotonic() + (config.loading.coordinator_ack_timeout if wait else 0.0)
        dropped = []
        for load in candidates:
            while _served(catalog.serving, load.load_id) and time.monotonic() < deadline:
                time.sleep(0.1)
            if _served(catalog.serving, load.load_id):
                report(f"load {load.load_id}: a running coordinator still serves it; its stores "
                       "are kept until it moves on (a later cleanup drops them)")
                continue
            lock = days_lock(config, wait=config.service_timeout)
            if lock is None:
                report(f"load {load.load_id}: another cleanup or a rollback held the days lock "
                       f"for {config.service_timeout:g} s; a later cleanup drops its stores")
                continue
            try:
                if not _mark_dropping(catalog, config, load.load_id):
                    continue  # dropped by another cleanup meanwhile, or served again (rollback)
                reached(config, "cleanup-marked")
                drop_stores(config, load)
                reached(config, "cleanup-dropped")
                catalog.loads.forget_dataset(load.load_id)
            finally:
                lock.release()
            report(f"load {load.load_id}: stores dropped")
            dropped.append(load.load_id)
    return dropped


def _mark_dropping(catalog: Catalog, config: Config, load_id: str) -> bool:
    """Under the days lock: whether *load_id* may still go, marking it dropping if so."""
    found, current = _droppable_now(catalog, config)
    return (load_id in {d.load_id for d in found}
            and catalog.loads.mark_dropping(load_id, current))


def _served(serving: ServingCatalog, load_id: str) -> bool:
    """Whether a live coordinator may still read *load_id*: it says it serves it, or it is
    between two loads (a query of an older one in flight)."""
    return any(seen in (load_id, None) for seen in serving.coordinators_serving().values())


def drop_stores(config: Config, load: LoadRecord) -> None:
    """Drop what *load* wrote: its MySQL tables, HBase table, HDFS directory, fileCopy copies.
    Each drop is idempotent (a store never made, or dropped before a kill, is fine)."""
    # lazy import: the HBase client (happybase, thriftpy2) would cost every `debl` command's
    # start-up (docs/ARCHITECTURE.md, "Lazy imports")
    from debl.store.hbase import HBaseStore

    ns = load.namespace
    for table in (ns.link_table, f"{ns.link_table}_staging"):
        with MySQLStore(config, table) as mysql:
            mysql.drop_table()
    with HBaseStore(config, ns.hbase_table) as hbase:
        hbase.drop_table()
    HdfsClient(config).delete(ns.hdfs_dir, recursive=True)
    shutil.rmtree(config.state_dir / "filecopy" / config.mysql.database / load.load_id,
                  ignore_errors=True)


def drop_every_load(config: Config) -> None:
    """Drop the stores of every load, the current one included, and leave no load current:
    an experiment's clean slate (``debl bench`` before each approach). Never while coordinators
    serve the dataset. LoadStateError if a cleanup or a rollback holds the days lock for
    ``service_timeout``."""
    lock = days_lock(config, wait=config.service_timeout)
    if lock is None:
        raise LoadStateError(_lock_held(config, "the stores could not be dropped"))
    try:
        with Catalog(config) as catalog:
            catalog.loads.clear_current()
            for load in catalog.loads.loads():
                if catalog.loads.mark_dropping(load.load_id, None):
                    drop_stores(config, load)
                    catalog.loads.forget_dataset(load.load_id)
    finally:
        lock.release()


def rollback(config: Config) -> tuple[str, str]:
    """Make the previous load current again (coordinators move at their next poll); returns
    (the load that was current, the one that is now). LoadStateError when its stores are gone,
    or being dropped: then it waits for the drop (the days lock, at most ``service_timeout``)
    and refuses; a drop a killed cleanup began is refused at once (the lock died with it)."""
    lock = days_lock(config, wait=config.service_timeout)
    if lock is None:
        raise LoadStateError(_lock_held(config, "nothing was rolled back"))
    try:
        with Catalog(config) as catalog:
            return catalog.loads.rollback()
    finally:
        lock.release()


def _lock_held(config: Config, what: str) -> str:
    return (f"a cleanup has been dropping the stores of older loads for over "
            f"{config.service_timeout:g} s (MySQL lock {DAYS_LOCK}.{config.mysql.database}); "
            f"{what}: run the command again once it ends (`debl status`)")
